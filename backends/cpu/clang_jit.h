// The CPU device's compiler, in process: C source through clang's frontend (libclang-cpp 15) to a
// host object file in memory, and object files linked into the running process by LLVM's ORC
// LLJIT. No subprocess, no temporary files; the caller decides what to cache.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace mg {

// Object code (ELF, relocatable) for C `src` compiled with the driver flags `flags`
// (e.g. "-O2", "-march=native"). Throws std::runtime_error carrying clang's diagnostics.
std::string compile_c(const std::string& src, const std::vector<std::string>& flags);

// Object code for the LLVM IR text `ir`: parsed, verified, optimized at O2 for the host CPU
// (its vector width included). Throws std::runtime_error naming the line of a parse error.
std::string compile_ir(const std::string& ir);
// The same IR after the O2 pipeline, as text: where LLVM's vectorizers made vector types.
std::string optimize_ir(const std::string& ir);

// The host CPU's name and feature set, for cache keys: code built with -march=native on one
// machine must not be loaded on another.
std::string host_cpu_id();

// Links object files into this process. Each object gets its own symbol namespace, so two
// kernels may use the same function name. Objects stay loaded until unloaded or until the linker
// is destroyed.
class ObjectLinker {
public:
  ObjectLinker();
  ~ObjectLinker();
  ObjectLinker(const ObjectLinker&) = delete;
  ObjectLinker& operator=(const ObjectLinker&) = delete;
  // Adds `object` and returns the address of its function `symbol` and the library it lives
  // in. Throws when the object is not a valid object file or lacks the symbol.
  struct Loaded {
    void* address;
    int library;
  };
  Loaded load(const std::string& object, const std::string& symbol);
  // Removes a library and frees its code: nothing may run it afterwards.
  void unload(int library);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace mg
