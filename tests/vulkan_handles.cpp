// The VULKAN device releases what it made when a later step of making its context, a program or a
// buffer fails: MG_VULKAN_FAIL_AT=<step> (a test hook in backends/vulkan/vulkan_device.cpp) fails
// each step in turn, and after each failure the count of live Vulkan handles is back where it was
// before. A device makes its context once per process, so each context step runs in a child.
//   vulkan_handles    exits 1 on a leak or a wrong message; prints SKIPPED: where VULKAN cannot run
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_device.h"
#include "engine/device.h"

using namespace mg;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) failures++;
}

// A shader of one storage buffer: data0[i] = i + 1.
const char* kShader = R"(#version 450
layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) buffer B0 { float data0[]; };
void main() { data0[gl_GlobalInvocationID.x] = float(gl_GlobalInvocationID.x) + 1.0; }
)";

// In a child process: the context's step `step` fails; the device says why, and no handle is left.
// Exit status 0: as expected, 1: not, 2: VULKAN cannot run here at all (with no step failed).
int context_child(const char* step) {
  if (step) setenv("MG_VULKAN_FAIL_AT", step, 1);
  std::string why = get_device("VULKAN").unavailable();
  int live = vulkan_live_handles();
  if (!step) {
    if (!why.empty()) std::printf("SKIPPED: VULKAN cannot run here: %s\n", why.c_str());
    return why.empty() ? 0 : 2;
  }
  bool named = why.find(std::string("MG_VULKAN_FAIL_AT=") + step) != std::string::npos;
  expect(named && live == 0, std::string("context step ") + step + ": " + std::to_string(live) +
                                 " handles left (want 0); the error: " + why);
  return named && live == 0 ? 0 : 1;
}

int in_child(const char* step) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = context_child(step);
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Runs `make` with step `step` failing: it must throw naming the step and leave the handle count.
template <typename F> void fails_clean(const char* step, F make) {
  int before = vulkan_live_handles();
  setenv("MG_VULKAN_FAIL_AT", step, 1);
  std::string why;
  try {
    make();
  } catch (const std::exception& e) {
    why = e.what();
  }
  unsetenv("MG_VULKAN_FAIL_AT");
  int after = vulkan_live_handles();
  expect(why.find(std::string("MG_VULKAN_FAIL_AT=") + step) != std::string::npos && after == before,
         std::string("step ") + step + ": " + std::to_string(after) + " handles left (want " +
             std::to_string(before) + "); the error: " + (why.empty() ? "none" : why));
}

} // namespace

int main() {
  unsetenv("MG_VULKAN_FAIL_AT");
  if (int rc = in_child(nullptr); rc != 0) return rc == 2 ? 0 : 1;
  for (const char* step : {"instance", "device", "command_pool"})
    if (in_child(step) != 0) failures++;

  Device& d = check_runnable("VULKAN");
  int base = vulkan_live_handles();
  expect(base == 3, "the context holds its instance, device and command pool: " + std::to_string(base));
  for (const char* step : {"shader_module", "descriptor_layout", "pipeline_layout", "pipeline",
                           "descriptor_pool", "descriptor_set", "command_buffer", "fence"})
    fails_clean(step, [&] { d.compile("handles_test", kShader); });
  for (const char* step : {"buffer", "memory", "bind", "map"})
    fails_clean(step, [&] { d.alloc(64); });

  // with nothing failing: made, run, released
  {
    auto prog = d.compile("handles_test", kShader);
    void* buf = d.alloc(4 * sizeof(float));
    expect(vulkan_live_handles() == base + 9, "a program (7 handles) and a buffer (2) are live: " +
                                                  std::to_string(vulkan_live_handles() - base));
    Launch l;
    l.global_size = {4};
    prog->run(&buf, 1, l);
    float out[4] = {};
    d.copyout(out, buf, sizeof out);
    expect(out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 4, "the program ran");
    d.free(buf, sizeof out);
  }
  expect(vulkan_live_handles() == base, "all released again: " + std::to_string(vulkan_live_handles()));
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
