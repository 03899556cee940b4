#include "backends/cpu/limits_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "backends/cpu/c_renderer.h"
#include "engine/machine.h"
#include "engine/roofline.h"

namespace mg {
namespace {

// n floats set to `value`, on `device`'s memory, freed with it.
struct DeviceArray {
  Device& device;
  size_t bytes;
  float* data;
  DeviceArray(Device& d, int64_t n, float value)
      : device(d), bytes(static_cast<size_t>(n) * 4), data(static_cast<float*>(d.alloc(bytes))) {
    std::fill(data, data + n, value);
  }
  ~DeviceArray() { device.free(data, bytes); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

} // namespace

std::string peak_probe_source(int lanes, int chains) {
  // at the width the kernels' tiles are compiled for (c_renderer.cpp, preferred_vector_bits): clang's
  // 256-bit choice for an Intel core halved this probe's peak, and a matmul then beat it
  std::string s = c_profile_flags();
  if (lanes >= 16) s += std::string(kCompileFlagTag) + "-mprefer-vector-width=512\n";
  s += "typedef float vf __attribute__((vector_size(" + std::to_string(lanes * 4) + ")));\n";
  s += "void mg_peak_probe(void** bufs, int core, int ncores) {\n";
  s += "  const float* in = (const float*)bufs[0];\n  float* out = (float*)bufs[1];\n";
  s += "  long n = *(const long*)bufs[2];\n";
  // x < 1 and y > 0: every chain settles near y / (1 - x), never overflows or goes denormal
  s += "  vf x = (vf){} + in[0], y = (vf){} + in[1];\n";
  for (int c = 0; c < chains; c++)
    s += "  vf a" + std::to_string(c) + " = y * (float)(core + " + std::to_string(c + 1) + ");\n";
  s += "  for (long i = 0; i < n; i++) {\n";
  for (int c = 0; c < chains; c++) // one statement each: clang contracts a * x + y into one FMA
    s += "    a" + std::to_string(c) + " = a" + std::to_string(c) + " * x + y;\n";
  s += "  }\n  vf sum = a0";
  for (int c = 1; c < chains; c++)
    s += " + a" + std::to_string(c);
  s += ";\n  float t = 0;\n  for (int l = 0; l < " + std::to_string(lanes) + "; l++) t += sum[l];\n";
  s += "  out[core * 16] = t;\n}\n"; // a cache line apart: no core waits on another's store
  return s;
}

std::string triad_probe_source() {
  return c_profile_flags() + "void mg_triad_probe(void** bufs, int core, int ncores) {\n"
                             "  float* restrict a = (float*)bufs[0];\n"
                             "  const float* restrict b = (const float*)bufs[1];\n"
                             "  const float* restrict c = (const float*)bufs[2];\n"
                             "  long n = *(const long*)bufs[3];\n"
                             "  long per = (n + ncores - 1) / ncores / 64 * 64 + 64;\n"
                             "  long lo = core * per, hi = lo + per < n ? lo + per : n;\n"
                             "  for (long i = lo; i < hi; i++) a[i] = b[i] + 3.0f * c[i];\n"
                             "}\n";
}

DeviceLimits measure_host_limits(int threads) {
  Device& cpu = get_device("CPU");
  const SimdProfile& simd = machine().simd;
  Launch launch;
  launch.cores = threads;
  DeviceLimits limits;

  // Peak: the chains cover an FMA's latency times the units that can start one each cycle
  // (4-5 cycles x 2 units on current x86), leaving registers for x, y and the loop.
  int lanes = std::max(1, simd.float_lanes), chains = simd.vector_registers >= 32 ? 16 : 12;
  auto peak = cpu.compile("mg_peak_probe", peak_probe_source(lanes, chains));
  std::vector<float> in{0.9999f, 0.0001f}, out(16 * static_cast<size_t>(threads));
  int64_t iters = 1000;
  void* pbufs[] = {in.data(), out.data(), &iters};
  auto run_peak = [&] { peak->run(pbufs, 3, launch); };
  // Calibrate to ~20 ms a run, so the clock and the pool's start-up are noise.
  for (double s = best_of(1, run_peak); s < 0.02; s = best_of(1, run_peak))
    iters = static_cast<int64_t>(static_cast<double>(iters) * std::min(100.0, 0.025 / std::max(s, 1e-6)));
  double flops = 2.0 * lanes * chains * static_cast<double>(iters) * threads;
  limits.flops = flops / best_of(5, run_peak);

  // Triad over 3 arrays of at least twice the last-level cache each (and 32 MiB): most of
  // every pass comes from memory.
  auto triad = cpu.compile("mg_triad_probe", triad_probe_source());
  int64_t llc = std::max(machine().l3.bytes, machine().l2.bytes);
  int64_t n = std::max<int64_t>(2 * llc, 32 << 20) / 4;
  // The arrays come from the device's allocator, as kernels' buffers do: on 2 MiB pages where the
  // OS allows. On 4 KiB pages the same loop ran at 22 GB/s where a kernel's add ran at 31.
  DeviceArray a(cpu, n, 0.0f), b(cpu, n, 1.0f), c(cpu, n, 2.0f);
  void* tbufs[] = {a.data, b.data, c.data, &n};
  auto run_triad = [&] { triad->run(tbufs, 4, launch); };
  run_triad(); // the first pass faults the output's pages in
  limits.bytes = 3.0 * 4.0 * static_cast<double>(n) / best_of(10, run_triad); // memory varies more than FMAs
  return limits;
}

} // namespace mg
