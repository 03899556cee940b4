// The compiled-kernel cache: in memory (same kernel, same process: no compile) and on disk
// (a kernel compiled by one process is loaded, not compiled, by the next). The cache lives
// under $XDG_CACHE_HOME, pointed at a fresh temporary directory before anything compiles.
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/device.h"
#include "tensor_helpers.h"

extern char** environ;

using namespace mg;
using namespace mgtest;
namespace fs = std::filesystem;

namespace {
// Runs before main: every test here (and a child process started by one) sees the same fresh
// cache directory. A child inherits MGTEST_CACHE_DIR and reuses the parent's directory.
struct FreshCache {
  std::string dir;
  bool owner = false;
  FreshCache() {
    if (const char* d = std::getenv("MGTEST_CACHE_DIR"); d && *d) {
      dir = d;
    } else {
      std::string tmpl = (fs::temp_directory_path() / "mgtest-cache-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) std::abort();
      dir = tmpl;
      owner = true;
      ::setenv("MGTEST_CACHE_DIR", dir.c_str(), 1);
    }
    ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  }
  ~FreshCache() {
    std::error_code ec;
    if (owner) fs::remove_all(dir, ec);
  }
};
FreshCache fresh_cache;

int compiles() { return get_device("CPU").compile_count(); }

size_t files_under(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file()) n++;
  return n;
}

// A kernel no other test compiles: its constants are unique to `tag`.
Tensor tagged_kernel(double tag, const std::vector<double>& data) {
  Tensor a = Tensor::from_data(data, {static_cast<int64_t>(data.size())}, DType::Float32);
  a.realize();
  return a.mul(scalar_like(a, tag)).add(scalar_like(a, 1000 + tag));
}

std::string self_exe() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).string();
}
} // namespace

TEST_CASE("kernel cache: a new kernel compiles once, the same kernel again compiles nothing", "[cache]") {
  REQUIRE(std::string(std::getenv("XDG_CACHE_HOME")) == fresh_cache.dir);
  size_t files_before = files_under(fresh_cache.dir);

  int c0 = compiles();
  Tensor x = tagged_kernel(3.25, {1, 2, 3, 4, 5});
  x.realize();
  CHECK(compiles() - c0 == 1);
  check_values(x, A({5}, {3.25 + 1003.25, 6.5 + 1003.25, 9.75 + 1003.25, 13 + 1003.25, 16.25 + 1003.25}),
               1e-6, 1e-6);

  // the same kernel on other data: served from memory
  int c1 = compiles();
  Tensor y = tagged_kernel(3.25, {-1, -2, -3, -4, -5});
  y.realize();
  CHECK(compiles() - c1 == 0);
  check_values(y, A({5}, {-3.25 + 1003.25, -6.5 + 1003.25, -9.75 + 1003.25, -13 + 1003.25, -16.25 + 1003.25}),
               1e-6, 1e-6);

  // a different kernel compiles again
  int c2 = compiles();
  Tensor z = tagged_kernel(5.5, {1, 2, 3, 4, 5});
  z.realize();
  CHECK(compiles() - c2 == 1);

  // compiled kernels were written to the cache directory
  CHECK(files_under(fresh_cache.dir) > files_before);
  CHECK(files_under(fresh_cache.dir) >= 2);
}

// Started by the next test in a child process: compiles one kernel into the shared cache.
TEST_CASE("kernel cache child process", "[.][cache_child]") {
  if (!std::getenv("MGTEST_CACHE_CHILD")) return; // only meaningful when started by the parent
  int c0 = compiles();
  Tensor x = tagged_kernel(7.75, {1, 2, 3});
  x.realize();
  REQUIRE(compiles() - c0 == 1); // fresh directory, fresh process: this compile is real
  check_values(x, A({3}, {7.75 + 1007.75, 15.5 + 1007.75, 23.25 + 1007.75}), 1e-6, 1e-6);
}

TEST_CASE("kernel cache: a kernel compiled by another process is loaded from disk", "[cache]") {
  std::string exe = self_exe();
  REQUIRE(!exe.empty());
  ::setenv("MGTEST_CACHE_CHILD", "1", 1);
  std::string test_name = "kernel cache child process", warn = "--warn", no_tests = "NoTests";
  std::vector<char*> argv{exe.data(), test_name.data(), warn.data(), no_tests.data(), nullptr};
  pid_t pid;
  REQUIRE(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ::unsetenv("MGTEST_CACHE_CHILD");
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  // this process never compiled the child's kernel; the disk cache must make it free
  int c0 = compiles();
  Tensor x = tagged_kernel(7.75, {1, 2, 3});
  x.realize();
  CHECK(compiles() - c0 == 0);
  check_values(x, A({3}, {7.75 + 1007.75, 15.5 + 1007.75, 23.25 + 1007.75}), 1e-6, 1e-6);
}
