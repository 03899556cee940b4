// What moongrad lends a Lua C module loaded at run time (the `dist` module's MPI half,
// interp/mgdist.cpp), through the Lua registry: such a module is a separate shared object that
// cannot call the executable's C++, and moongrad itself must not need the module's libraries.
#pragma once
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

struct lua_State;

namespace mg::lua {

// Registry key of a light userdata pointing at a HostMemoryFn.
inline constexpr const char* kHostMemoryKey = "moongrad.host_memory";
// The memory of the realized, contiguous CPU tensor at stack index idx, and its size in bytes;
// raises a Lua error for anything else (the caller realizes and moves tensors first).
using HostMemoryFn = void* (*)(lua_State* L, int idx, size_t* nbytes);

// Registry key of a light userdata pointing at a HostStepFn.
inline constexpr const char* kHostStepKey = "moongrad.host_step";
// The memory of each tensor a host step touches, and its size in bytes, in the order given.
using HostStepBody = std::function<void(const std::vector<std::pair<void*, size_t>>& mem)>;
// Runs `body` now on the memory of the realized, contiguous CPU tensors at the stack indices `idx`
// (the first is the one it writes) as a step of the schedule (engine/realize.h: HostStep): logged
// like a kernel under `name`, and recorded by TinyJit's capture, so that each replay runs it again
// on that replay's buffers. `body` reports failure by throwing std::runtime_error; here that
// becomes a Lua error.
using HostStepFn = void (*)(lua_State* L, const char* name, const std::vector<int>& idx, HostStepBody body);

// Registry key of a function main() calls before it exits on an error: a module that would
// otherwise leave other processes waiting (MPI) stops them there.
inline constexpr const char* kAtErrorKey = "moongrad.at_error";

} // namespace mg::lua
