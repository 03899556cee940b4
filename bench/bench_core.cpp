// Core-engine benchmark: prints one "name value unit" line per workload for bench/run.sh.
// W1: ((a+1)*2).relu() - b*0.5 over 4,194,304 float32 (GB/s: two reads and one write)
// W6: a 100-op elementwise chain on 16 elements, built and realized (ms per realize, no JIT)
// G1: 10,000-op chain build + schedule (ms)
// M1: 512x512 float32 matmul (GFLOPS)
// B0: the machine's triad bandwidth, a[i] = b[i] + s*c[i] in a plain C++ loop over the same
//     4,194,304 float32 on MG_THREADS threads (GB/s): the ceiling W1 and U1 are measured against
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "engine/settings.h"
#include "engine/tensor.h"

using namespace mg;
using clk = std::chrono::steady_clock;

static double secs(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }
static Tensor S(const Tensor& t, double v) { return Tensor::from_scalar({v, DType::Float32}, t); }

template <class F> static double best_of(int n, F f) {
  std::vector<double> t;
  for (int i = 0; i < n; i++)
    t.push_back(f());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2]; // median
}

static double triad(int64_t n, int threads) {
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto part = [&](int t) {
    int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    for (int64_t i = lo; i < hi; i++)
      a[i] = b[i] + 0.5f * c[i];
  };
  return best_of(20, [&] {
    auto t0 = clk::now();
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; t++)
      ts.emplace_back(part, t);
    part(0);
    for (auto& t : ts)
      t.join();
    return secs(t0);
  });
}

int main() {
  Tensor::manual_seed(0);
  const int64_t N = 4194304;
  std::printf("B0 %.2f GB/s\n", 3.0 * 4 * N / triad(N, settings().threads) * 1e-9);
  Tensor a = Tensor::rand({N}), b = Tensor::rand({N});
  Tensor::realize_all({&a, &b});
  double w1 = best_of(20, [&] {
    Tensor r = a.add(S(a, 1)).mul(S(a, 2)).relu().sub(b.mul(S(b, 0.5)));
    auto t0 = clk::now();
    r.realize();
    return secs(t0);
  });
  std::printf("W1 %.2f GB/s\n", 3.0 * 4 * N / w1 * 1e-9);

  Tensor x = Tensor::rand({16});
  x.realize();
  double w6 = best_of(50, [&] {
    auto t0 = clk::now();
    Tensor r = x;
    for (int i = 0; i < 100; i++)
      r = (i % 2) ? r.mul(S(r, 1.001)) : r.add(S(r, 0.5));
    r.realize();
    return secs(t0);
  });
  std::printf("W6 %.4f ms\n", w6 * 1e3);

  double g1 = best_of(3, [&] {
    auto t0 = clk::now();
    Tensor r = x;
    for (int i = 0; i < 10000; i++)
      r = (i % 2) ? r.mul(S(r, 1.0001)) : r.add(S(r, 0.0001));
    auto s = r.schedule();
    return secs(t0);
  });
  std::printf("G1 %.2f ms\n", g1 * 1e3);

  Tensor m1 = Tensor::rand({512, 512}), m2 = Tensor::rand({512, 512});
  Tensor::realize_all({&m1, &m2});
  double mm = best_of(5, [&] {
    Tensor r = m1.matmul(m2);
    auto t0 = clk::now();
    r.realize();
    return secs(t0);
  });
  std::printf("M1 %.2f GFLOPS\n", 2.0 * 512 * 512 * 512 / mm * 1e-9);
  return 0;
}
