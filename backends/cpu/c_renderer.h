// Linear UOps -> C source: one function `void NAME(void** bufs, int core, int ncores)` per kernel;
// core/ncores pick this call's share of the outermost loop when it can run in parallel.
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {
// A source line starting with this passes the rest of the line to the compiler as one flag.
inline constexpr const char* kCompileFlagTag = "//!flag ";

// The flag lines that hold the compiler to the vector profile (machine().simd) the opts were sized
// for: every C kernel starts with them, and so does the roofline's probe.
std::string c_profile_flags();
// The vector width, in bits, the compiler should prefer for a kernel (0: its own choice); the
// LLVM renderer asks it too.
int preferred_vector_bits(const std::vector<UOpRef>& linear);
std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel);
// The blocks render_c puts before a kernel's function, each as it appears in the source.
std::vector<std::string> c_preamble();
} // namespace mg
