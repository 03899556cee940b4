// The roofline (engine/roofline.h): which limit binds a kernel, its share of it, and the measured
// limits as a real ceiling that no kernel of the engine goes through.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/codegen/pipeline.h"
#include "engine/device.h"
#include "engine/machine.h"
#include "engine/realize.h"
#include "engine/roofline.h"
#include "engine/settings.h"
#include "engine/tensor.h"

using namespace mg;

TEST_CASE("the limit that binds: memory below the ridge, compute above it, bandwidth alone for a copy") {
  DeviceLimits l{100e9, 10e9}; // the ridge at 10 FLOPs per byte
  // 1 FLOP per byte: memory allows 10 GFLOPS; 1e9 FLOPs in 0.2 s is 5 GFLOPS, half of it
  RooflinePoint p = roofline_point(l, 1'000'000'000, 1'000'000'000, 0.2);
  CHECK(p.memory_bound);
  CHECK(p.intensity == Approx(1.0));
  CHECK(p.flops == Approx(5e9));
  CHECK(p.bytes == Approx(5e9));
  CHECK(p.share == Approx(0.5));
  CHECK(share_text(p) == "50% of memory");
  // 100 FLOPs per byte: compute binds at 100 GFLOPS; 1e10 FLOPs in 0.4 s is 25 GFLOPS
  p = roofline_point(l, 10'000'000'000, 100'000'000, 0.4);
  CHECK_FALSE(p.memory_bound);
  CHECK(p.share == Approx(0.25));
  CHECK(share_text(p) == "25% of compute");
  // at the ridge (10 FLOPs per byte) both limits are 100 GFLOPS: 1e10 FLOPs in 0.1 s meet them
  p = roofline_point(l, 10'000'000'000, 1'000'000'000, 0.1);
  CHECK(p.share == Approx(1.0));
  // a copy: 8e8 bytes in 0.1 s is 8 GB/s of 10
  p = roofline_point(l, 0, 800'000'000, 0.1);
  CHECK(p.memory_bound);
  CHECK(p.share == Approx(0.8));
  // a kernel whose data stays in cache can beat memory: the share says so, it is not clipped
  CHECK(roofline_point(l, 0, 3'000'000'000, 0.1).share == Approx(3.0));
}

TEST_CASE("a kernel on one core is held to the one-core limits") {
  ScopedLimits fixed({50e9, 20e9});
  KernelInfo info;
  info.device = "CPU";
  info.flops = 50'000'000;
  info.bytes = 1'000'000;
  info.parallel = false;
  CHECK(kernel_cores(info, 8) == 1);
  info.parallel = true;
  CHECK(kernel_cores(info, 8) == 8);
  auto p = roofline_of(info, 0.002, 8); // 25 GFLOPS of 50
  REQUIRE(p);
  CHECK(p->share == Approx(0.5));
  CHECK_FALSE(p->memory_bound);
}

namespace {
// The best rate (FLOP/s or bytes/s) of the costliest kernel realizing make(), over `runs` runs.
template <class F> double best_rate(F make, int runs, bool flops) {
  double best = 0;
  for (int i = 0; i < runs; i++) {
    KernelLog log;
    make().realize();
    for (auto& [info, s] : log.runs)
      if (s > 0) best = std::max(best, static_cast<double>(flops ? info.flops : info.bytes) / s);
  }
  return best;
}
} // namespace

// CTest runs this alone (RUN_SERIAL): another test on the same cores would lower the limits.
TEST_CASE("measured limits: no matmul beats the peak, no large add beats the triad, both kept in the cache") {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mg-roofline-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  settings().device = "CPU";
  settings().threads = 1;
  auto l = device_limits("CPU", 1);
  REQUIRE(l);
  INFO("peak " << l->flops * 1e-9 << " GFLOPS, triad " << l->bytes * 1e-9 << " GB/s");
  // The probe's FMAs are vectors: at 1 GHz one FMA unit of the profile's width already does this.
  CHECK(l->flops >= 2.0 * machine().simd.float_lanes * 1e9);
  CHECK(l->bytes >= 1e9);

  // The kernels against limits measured in turns with them (the best of three rounds each): the
  // machine is shared, and a moment of load lowers a figure taken once (CI measured a triad of
  // 17 GB/s beside an add at 31 while other work ran).
  Tensor a = Tensor::rand({512, 512}), b = Tensor::rand({512, 512});
  const int64_t n = std::max<int64_t>(2 * machine().l3.bytes, 32 << 20) / 4;
  Tensor x = Tensor::rand({n}), y = Tensor::rand({n});
  Tensor::realize_all({&a, &b, &x, &y});
  double mm = 0, add = 0, peak = l->flops, triad = l->bytes;
  for (int round = 0; round < 3; round++) {
    mm = std::max(mm, best_rate([&] { return a.matmul(b); }, 5, true));
    add = std::max(add, best_rate([&] { return x.add(y); }, 4, false));
    auto again = get_device("CPU").measure_limits(1);
    REQUIRE(again);
    peak = std::max(peak, again->flops), triad = std::max(triad, again->bytes);
  }
  INFO("best of the rounds: peak " << peak * 1e-9 << " GFLOPS, triad " << triad * 1e-9 << " GB/s; matmul 512 "
                                   << mm * 1e-9 << " GFLOPS, add of " << n << " floats " << add * 1e-9 << " GB/s");
  CHECK(mm > 0);
  CHECK(mm <= 1.05 * peak);
  CHECK(add <= 1.3 * triad);

  // the file holds one line: the key, the two limits as device_limits returned them, and a note
  std::ifstream f(dir / "moongrad" / "roofline.txt");
  std::string line, key;
  REQUIRE(std::getline(f, line));
  std::istringstream is(line);
  double flops = 0, bytes = 0;
  is >> key >> flops >> bytes;
  CHECK(flops == Approx(l->flops).epsilon(1e-5));
  CHECK(bytes == Approx(l->bytes).epsilon(1e-5));
  CHECK(line.find("1 thread: ") != std::string::npos);
  CHECK_FALSE(std::getline(f, line));
  std::filesystem::remove_all(dir);
}
