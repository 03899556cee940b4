// What moongrad lends a Lua C module loaded at run time (the `dist` module's MPI half,
// interp/mgdist.cpp), through the Lua registry: such a module is a separate shared object that
// cannot call the executable's C++, and moongrad itself must not need the module's libraries.
#pragma once
#include <cstddef>

struct lua_State;

namespace mg::lua {

// Registry key of a light userdata pointing at a HostMemoryFn.
inline constexpr const char* kHostMemoryKey = "moongrad.host_memory";
// The memory of the realized, contiguous CPU tensor at stack index idx, and its size in bytes;
// raises a Lua error for anything else (the caller realizes and moves tensors first).
using HostMemoryFn = void* (*)(lua_State* L, int idx, size_t* nbytes);

// Registry key of a function main() calls before it exits on an error: a module that would
// otherwise leave other processes waiting (MPI) stops them there.
inline constexpr const char* kAtErrorKey = "moongrad.at_error";

} // namespace mg::lua
