// Core-engine benchmark: prints one "name value unit" line per workload for bench/run.sh.
// W1: ((a+1)*2).relu() - b*0.5 over 4,194,304 float32 (GB/s: two reads and one write)
// W6: a 100-op elementwise chain on 16 elements, built and realized (ms per realize, no JIT)
// G1: 10,000-op chain build + schedule (ms)
// M1: 512x512 float32 matmul (GFLOPS)
// P6, Q6, R6: 1024x1024 float32 matmul, moongrad's (P6) and OpenBLAS's cblas_sgemm (Q6) in turns
//     in this one process on MG_THREADS threads (GFLOPS, medians of 15 rounds), and the median of
//     the rounds' ratios (R6): a host that slows down or speeds up between runs moves both
//     sides alike. OpenBLAS is loaded at run time (Debian's libopenblas0); absent, nothing prints.
// B0: the machine's triad bandwidth, a[i] = b[i] + s*c[i] in a plain C++ loop over the same
//     4,194,304 float32 on MG_THREADS threads (GB/s): the ceiling W1 and U1 are measured against
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engine/settings.h"
#include "engine/tensor.h"

using namespace mg;
using clk = std::chrono::steady_clock;

static double secs(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }
static Tensor S(const Tensor& t, double v) { return Tensor::from_scalar({v, DType::Float32}, t); }

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F> static double best_of(int n, F f) { // the median of n runs
  std::vector<double> t;
  for (int i = 0; i < n; i++)
    t.push_back(f());
  return median(std::move(t));
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

// P6, Q6, R6 (above)
static void matmul_in_turns() {
  // OpenBLAS's idle threads spin for 2^28 cycles by default, on the cores moongrad's turn needs
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  using Sgemm =
      void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"));
  if (!sgemm || !set_threads) return;
  const int n = 1024;
  set_threads(settings().threads);
  Tensor m1 = Tensor::rand({n, n}), m2 = Tensor::rand({n, n});
  Tensor::realize_all({&m1, &m2});
  std::vector<double> da = m1.data(), db = m2.data();
  std::vector<float> a(da.begin(), da.end()), b(db.begin(), db.end()), c(size_t(n) * n);
  auto ours = [&] {
    Tensor r = m1.matmul(m2);
    auto t0 = clk::now();
    r.realize();
    return secs(t0);
  };
  auto theirs = [&] {
    auto t0 = clk::now();
    // row-major (101), neither operand transposed (111)
    sgemm(101, 111, 111, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    return secs(t0);
  };
  ours(), theirs(); // compiled, warm
  std::vector<double> want = m1.matmul(m2).data(); // a temporary: no realized node outlives it
  for (size_t i = 0; i < want.size(); i += 997)
    if (std::abs(c[i] - want[i]) > 1e-3 * std::abs(want[i])) {
      std::fprintf(stderr, "mgbench: OpenBLAS's and moongrad's matmul differ at %zu: %g vs %g\n", i, c[i],
                   want[i]);
      return;
    }
  std::vector<double> p, q, ratio;
  for (int round = 0; round < 15; round++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // the other side's threads settle
    p.push_back(ours());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.push_back(theirs());
    ratio.push_back(q.back() / p.back());
  }
  double flop = 2.0 * n * n * n * 1e-9;
  std::printf("P6 %.2f GFLOPS\nQ6 %.2f GFLOPS\nR6 %.3f x\n", flop / median(p), flop / median(q),
              median(ratio));
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
  matmul_in_turns();
  return 0;
}
