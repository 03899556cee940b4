// The CPU device's in-process compiler: C to an object file with libclang-cpp, linked by ORC.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

#include "backends/cpu/clang_jit.h"
#include "engine/device.h"

#include <pthread.h>
#include <vector>

using namespace mg;

namespace {
const std::vector<std::string> kFlags{"-O2", "-march=native", "-fPIC", "-fno-math-errno", "-w"};
using Fn = void (*)(float*, const float*, int);
} // namespace

TEST_CASE("C compiled in process runs and computes what a C++ loop computes") {
  ObjectLinker linker;
  std::string obj = compile_c("float sinf(float);\n"
                              "void k(float* out, const float* in, int n) {\n"
                              "  for (int i = 0; i < n; i++) out[i] = sinf(in[i]) * 2.0f + in[i] * in[i];\n"
                              "}\n",
                              kFlags);
  REQUIRE(obj.size() > 4);
  CHECK(obj.compare(0, 4,
                    "\x7f"
                    "ELF") == 0);
  auto k = reinterpret_cast<Fn>(linker.load(obj, "k").address);
  std::vector<float> in(1003), out(1003);
  for (size_t i = 0; i < in.size(); i++)
    in[i] = 0.01f * static_cast<float>(i) - 5.0f;
  k(out.data(), in.data(), static_cast<int>(in.size()));
  for (size_t i = 0; i < in.size(); i++)
    CHECK(out[i] == Approx(std::sin(in[i]) * 2.0f + in[i] * in[i]).margin(1e-5));
}

TEST_CASE("two objects may define the same function name") {
  ObjectLinker linker;
  auto src = [](const char* c) {
    return std::string("void k(float* o, const float* i, int n) { o[0] = ") + c + "; }";
  };
  auto one = reinterpret_cast<Fn>(linker.load(compile_c(src("1.0f"), kFlags), "k").address);
  auto two = reinterpret_cast<Fn>(linker.load(compile_c(src("2.0f"), kFlags), "k").address);
  float o = 0;
  one(&o, nullptr, 0);
  CHECK(o == 1.0f);
  two(&o, nullptr, 0);
  CHECK(o == 2.0f);
}

TEST_CASE("a C error comes back as an exception carrying clang's diagnostic") {
  try {
    compile_c("void k(float* o) { o[0] = undefined_name; }", kFlags);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    CHECK(msg.find("kernel compile failed") != std::string::npos);
    CHECK(msg.find("undefined_name") != std::string::npos);
    CHECK(msg.find("error:") != std::string::npos);
  }
  // the compiler is still usable after a failure
  CHECK_FALSE(compile_c("void k(void) {}", kFlags).empty());
}

TEST_CASE("a damaged object or a missing symbol is an error, not a crash") {
  ObjectLinker linker;
  CHECK_THROWS_WITH(linker.load("garbage", "k"), Catch::Contains("not a valid object file"));
  std::string obj = compile_c("void k(void) {}", kFlags);
  CHECK_THROWS_WITH(linker.load(obj.substr(0, obj.size() / 2), "k"),
                    Catch::Contains("not a valid object file"));
  CHECK_THROWS_WITH(linker.load(obj, "not_there"), Catch::Contains("not_there"));
  CHECK(linker.load(obj, "k").address != nullptr);
}

TEST_CASE("the host CPU id names the CPU and its features") {
  std::string id = host_cpu_id();
  CHECK_FALSE(id.empty());
  CHECK(id == host_cpu_id()); // stable: it is part of every cache key
}

TEST_CASE("a library can be unloaded, and the linker goes on loading others") {
  ObjectLinker linker;
  std::string obj = compile_c("void k(float* o, const float* i, int n) { o[0] = 7.0f; }", kFlags);
  for (int round = 0; round < 200; round++) {
    auto l = linker.load(obj, "k");
    float o = 0;
    reinterpret_cast<Fn>(l.address)(&o, nullptr, 0);
    REQUIRE(o == 7.0f);
    linker.unload(l.library);
  }
  linker.unload(12345); // an unknown library: nothing happens
}

// The CPU device's cores take a kernel's shares as they come free (cpu_device.cpp, ThreadPool).
// Share 0, the calling thread's first, waits until another thread has run one of the calling
// thread's own shares: it returns only if the worker, its own shares done, took them.
TEST_CASE("a parallel kernel's shares each run once, and a held-up core's are taken by the others") {
  Device& cpu = get_device("CPU");
  auto program = cpu.compile("mg_shares_probe",
                             "unsigned long pthread_self(void);\n"
                             "void mg_shares_probe(void** bufs, int share, int shares) {\n"
                             "  int* runs = (int*)bufs[0];\n"
                             "  unsigned long* who = (unsigned long*)bufs[1];\n"
                             "  volatile int* taken = (volatile int*)bufs[2];\n"
                             "  unsigned long caller = *(const unsigned long*)bufs[3];\n"
                             "  int own = *(const int*)bufs[4];\n"
                             "  __atomic_fetch_add(&runs[share], 1, __ATOMIC_SEQ_CST);\n"
                             "  who[share] = pthread_self();\n"
                             "  if (share > 0 && share < own && who[share] != caller) *taken = 1;\n"
                             "  if (share == 0 && own > 1)\n"
                             "    for (long i = 0; i < 100000000L && !*taken; i++) __builtin_ia32_pause();\n"
                             "}\n");
  for (int shares : {2, 16}) {
    CAPTURE(shares);
    std::vector<int> runs(static_cast<size_t>(shares));
    std::vector<unsigned long> who(static_cast<size_t>(shares));
    int taken = 0, own = shares / 2;
    unsigned long caller = static_cast<unsigned long>(pthread_self());
    void* bufs[] = {runs.data(), who.data(), &taken, &caller, &own};
    Launch launch;
    launch.cores = 2;
    launch.shares = shares;
    program->run(bufs, 5, launch);
    for (int r : runs)
      CHECK(r == 1);
    CHECK(who[0] == caller); // the calling thread starts at its own front
    if (shares == 16) {
      CHECK(taken == 1);
      CHECK(who[static_cast<size_t>(own - 1)] != caller); // its last one, taken from the back
    }
  }
}
