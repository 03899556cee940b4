// The CPU this process runs on, read once at start-up: cache sizes from Linux sysfs, the float32
// SIMD width and vector register count from cpuid. The hand-coded opts (engine/codegen/heuristic.cpp)
// size their register tiles and cache blocks from it instead of from numbers written in.
//
// Environment overrides, so a test or a curious user can see another machine's choices:
//   MG_VECTOR_WIDTH=4|8|16   the SSE, AVX2 or AVX-512 profile (lanes and registers)
//   MG_L1D_KB, MG_L2_KB, MG_L3_KB   a cache size in KiB (per core for L1d and L2, whole for L3)
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace mg {

struct CacheLevel {
  int64_t bytes = 0; // one instance (0: none found)
  int shared_by = 1; // logical CPUs that share that instance
};

// The caches of one CPU as sysfs lists them; `found` is false when the directory held none.
struct CacheSizes {
  CacheLevel l1d, l2, l3;
  bool found = false;
};

// The vector unit as the kernels' compiler may use it.
struct SimdProfile {
  std::string isa;          // "AVX-512", "AVX2", "SSE", "NEON", "scalar"
  int float_lanes = 1;      // float32 values in one vector register
  int vector_registers = 1; // architectural vector registers
};

struct Machine {
  CacheLevel l1d, l2, l3;
  bool caches_from_sysfs = false; // false: the defaults below stand in
  SimdProfile simd;
  int cores = 1;         // logical CPUs this process may run on
  std::string overrides; // the MG_* variables that changed what was detected, for describe()

  // One line, e.g. "AVX-512: 16 float lanes, 32 registers; L1d 32 KiB, L2 1 MiB, L3 32 MiB
  // shared by 2 cores; 2 cores".
  std::string describe() const;
};

// The machine, detected on the first call (with the MG_* overrides) and the same after.
const Machine& machine();

// The pieces machine() is made of, each usable on its own (the tests give them a fake sysfs).

// Reads `dir`/index*/{level,type,size,shared_cpu_list} (Linux:
// /sys/devices/system/cpu/cpu0/cache). Instruction caches are skipped.
CacheSizes read_cache_sizes(const std::string& dir);
// The widest vector unit that both the CPU (cpuid) and the OS (XCR0 through xgetbv) support.
SimdProfile detect_simd();
// The profile MG_VECTOR_WIDTH names: 4 (SSE), 8 (AVX2) or 16 (AVX-512); throws otherwise.
SimdProfile simd_profile_of_width(int lanes);
// What the heuristic assumes where sysfs has no caches: the machine it was tuned on
// (L1d 32 KiB, L2 1 MiB per core, L3 32 MiB shared by 2).
CacheSizes default_cache_sizes();

// machine()'s recipe: caches from `cache_dir` (defaults where it has none), the SIMD profile from
// cpuid, then the overrides that `env` returns (nullptr: unset). Throws std::invalid_argument for a
// malformed override, naming it.
using EnvLookup = std::function<const char*(const char*)>;
Machine probe_machine(const std::string& cache_dir, const EnvLookup& env);

// For tests: machine() returns `m` while this lives (not thread-safe; nest in scope order).
class ScopedMachine {
public:
  explicit ScopedMachine(const Machine& m);
  ~ScopedMachine();
  ScopedMachine(const ScopedMachine&) = delete;
  ScopedMachine& operator=(const ScopedMachine&) = delete;

private:
  const Machine* previous_;
  Machine machine_;
};

} // namespace mg
