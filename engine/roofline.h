// How far a kernel is from what the machine can do: the roofline model. A kernel that does
// `flops` FLOPs on `bytes` bytes can run no faster than
//     min(peak FLOP/s, memory bytes/s x flops / bytes)
// so compute binds a kernel with many FLOPs per byte (a matmul) and memory one with few (an
// elementwise op). The two ceilings are the device's own, measured by Device::measure_limits once
// per CPU, vector profile and thread count, and kept in the cache directory: the first use costs a
// fraction of a second, later ones nothing. DEBUG=2, :kernels, VIZ=1 and :roofline show the share.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/device.h"

namespace mg {

struct KernelInfo;

// `device`'s limits at `threads` threads: from the cache, else measured now and saved (DEBUG>=1
// prints a line when it measures). nullopt where the device has no probe (CL, VULKAN). A GPU's are
// its own whatever the threads.
std::optional<DeviceLimits> device_limits(const std::string& device, int threads);
// The file the limits are kept in (one line per CPU, profile and thread count).
std::string roofline_cache_path();

// Where one run stands.
struct RooflinePoint {
  double intensity = 0; // FLOPs per byte (0 for a copy)
  double flops = 0;     // achieved FLOP/s
  double bytes = 0;     // achieved bytes/s
  double share = 0;     // achieved / what the roofline allows at this intensity
  bool memory_bound = true;
};
RooflinePoint roofline_point(const DeviceLimits& limits, int64_t flops, int64_t bytes, double seconds);
// "63% of compute", "12% of memory"
std::string share_text(const RooflinePoint& p);

// The cores a kernel ran on: `threads` if it splits its outermost loop, else 1.
int kernel_cores(const KernelInfo& info, int threads);
// A kernel run against its device's limits at the cores it ran on; nullopt without limits.
std::optional<RooflinePoint> roofline_of(const KernelInfo& info, double seconds, int threads);

// Best (shortest) wall time of `runs` calls of f: how the devices' probes time themselves.
template <class F> double best_of(int runs, F&& f) {
  double best = 1e30;
  for (int i = 0; i < runs; i++) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// For tests: device_limits returns `limits` for every device and thread count while this lives.
class ScopedLimits {
public:
  explicit ScopedLimits(DeviceLimits limits);
  ~ScopedLimits();
  ScopedLimits(const ScopedLimits&) = delete;
  ScopedLimits& operator=(const ScopedLimits&) = delete;

private:
  std::optional<DeviceLimits> previous_;
};

} // namespace mg
