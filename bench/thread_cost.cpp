// What starting one thread costs graph building for the rest of the process: glibc and
// libstdc++ drop their single-thread fast paths (atomic shared_ptr counts, locked malloc) once
// a thread has existed. Prints ms per 25-op chain built and realized, before and after.
// Build: ninja -C build mgthreadcost; run: MG_THREADS=1 build/mgthreadcost
#include <chrono>
#include <cstdio>
#include <thread>

#include "engine/tensor.h"

using namespace mg;

static double chain_ms(Tensor& x) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5000; i++) {
    Tensor y = x;
    for (int k = 0; k < 25; k++)
      y = y.add(Tensor::from_scalar({1.0, DType::Float32}, y)).relu();
    y.realize();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5000 * 1e3;
}

int main() {
  Tensor x = Tensor::rand({16});
  x.realize();
  chain_ms(x); // warm up: compile the kernel once
  std::printf("single-threaded process: %.4f ms per chain\n", chain_ms(x));
  std::thread([] {}).join();
  std::printf("after one thread was started and joined: %.4f ms per chain\n", chain_ms(x));
}
