#include "engine/roofline.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "engine/codegen/pipeline.h"
#include "engine/digest.h"
#include "engine/machine.h"
#include "engine/settings.h"

namespace mg {
namespace {

std::mutex mu;
std::optional<DeviceLimits> fixed;                        // ScopedLimits
std::map<std::string, std::optional<DeviceLimits>> known; // key -> limits (nullopt: no probe)

// What the limits depend on: the device's compiler and CPU, the vector profile, the threads, and
// the probes' own version (2: the peak at 512 bits on AVX-512).
std::string limits_key(Device& d, int threads) {
  return digest(d.fingerprint() + " lanes=" + std::to_string(machine().simd.float_lanes) +
                " threads=" + std::to_string(threads) + " probes=2");
}

std::optional<DeviceLimits> read_cached(const std::string& key) {
  std::ifstream f(roofline_cache_path());
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string k;
    DeviceLimits l;
    if (is >> k >> l.flops >> l.bytes && k == key && l.flops > 0 && l.bytes > 0) return l;
  }
  return std::nullopt;
}

// Adds a line to the cache file: written beside it and renamed, so a reader never sees half a
// file. A cache that cannot be written costs a measurement next time, nothing more.
void write_cached(const std::string& key, const DeviceLimits& l, const std::string& what) {
  std::string path = roofline_cache_path(), old, line;
  {
    std::ifstream f(path);
    while (std::getline(f, line))
      if (line.compare(0, key.size(), key) != 0) old += line + "\n";
  }
  make_dirs(cache_root());
  std::string tmp = path + "." + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s %.6g %.6g  %s\n", key.c_str(), l.flops, l.bytes, what.c_str());
    f << old << buf;
    if (!f.flush()) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

} // namespace

std::string roofline_cache_path() { return cache_root() + "/roofline.txt"; }

std::optional<DeviceLimits> device_limits(const std::string& device, int threads) {
  std::lock_guard<std::mutex> lk(mu);
  if (fixed) return fixed;
  Device& d = get_device(device);
  bool gpu = d.target().gpu; // its limits are its own: not the CPU's vectors or threads
  if (gpu) threads = 1;
  std::string key = gpu ? digest(d.fingerprint() + " probes=1") : limits_key(d, threads);
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::optional<DeviceLimits> l = read_cached(key);
  if (!l) {
    auto t0 = std::chrono::steady_clock::now();
    try {
      l = d.measure_limits(threads);
    } catch (const std::exception& e) { // a GPU without 1.5 GiB free for the triad, say: no share shown
      if (settings().debug >= 1)
        std::printf("*** roofline of %s not measured: %s\n", device.c_str(), e.what());
      l = std::nullopt;
    }
    if (l) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char what[200];
      if (gpu)
        std::snprintf(what, sizeof what, "%s: %.1f GFLOPS peak, %.1f GB/s triad", d.fingerprint().c_str(),
                      l->flops * 1e-9, l->bytes * 1e-9);
      else
        std::snprintf(what, sizeof what, "%s, %s, %d thread%s: %.1f GFLOPS peak, %.1f GB/s triad",
                      device.c_str(), machine().simd.isa.c_str(), threads, threads == 1 ? "" : "s",
                      l->flops * 1e-9, l->bytes * 1e-9);
      write_cached(key, *l, what);
      if (settings().debug >= 1)
        std::printf("*** roofline of %s (measured in %.2f s, kept in %s)\n", what, s,
                    roofline_cache_path().c_str());
    }
  }
  known[key] = l;
  return l;
}

RooflinePoint roofline_point(const DeviceLimits& limits, int64_t flops, int64_t bytes, double seconds) {
  RooflinePoint p;
  if (seconds <= 0) return p;
  p.flops = static_cast<double>(flops) / seconds;
  p.bytes = static_cast<double>(bytes) / seconds;
  p.intensity = bytes > 0 ? static_cast<double>(flops) / static_cast<double>(bytes) : 0;
  double memory_roof = p.intensity * limits.bytes; // FLOP/s that memory allows
  p.memory_bound = flops == 0 || (bytes > 0 && memory_roof < limits.flops);
  // A kernel without FLOPs (a copy) is measured against the bandwidth alone.
  p.share = p.memory_bound ? p.bytes / limits.bytes : p.flops / limits.flops;
  return p;
}

std::string share_text(const RooflinePoint& p) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f%% of %s", p.share * 100, p.memory_bound ? "memory" : "compute");
  return buf;
}

int kernel_cores(const KernelInfo& info, int threads) { return info.parallel ? threads : 1; }

std::optional<RooflinePoint> roofline_of(const KernelInfo& info, double seconds, int threads) {
  if (info.host) return std::nullopt;
  auto l = device_limits(info.device, kernel_cores(info, threads));
  if (!l) return std::nullopt;
  return roofline_point(*l, info.flops, info.bytes, seconds);
}

ScopedLimits::ScopedLimits(DeviceLimits limits) {
  std::lock_guard<std::mutex> lk(mu);
  previous_ = fixed;
  fixed = limits;
}
ScopedLimits::~ScopedLimits() {
  std::lock_guard<std::mutex> lk(mu);
  fixed = previous_;
}

} // namespace mg
