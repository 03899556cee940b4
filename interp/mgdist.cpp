// require "mgdist": the MPI half of `dist` (stdlib/dist.lua), on Open MPI. A Lua C module of its
// own (mgdist.so beside the executable), so that only a script that runs under mpirun needs MPI.
// Tensors reach it realized, contiguous and on the CPU; it moves their memory with MPI's
// collectives on MPI_COMM_WORLD. Each collective runs as a host step of the schedule
// (interp/host_memory.h), so TinyJit records it with the kernels: a data-parallel training step
// replays whole, all-reduce included. It keeps no pointer: each run gets the buffers' memory anew.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <lua.hpp>

#include "interp/host_memory.h"

namespace {

bool g_initialized = false, g_finalized = false;

void* memory_of(lua_State* L, int idx, size_t* nbytes) {
  lua_getfield(L, LUA_REGISTRYINDEX, mg::lua::kHostMemoryKey);
  auto fn = reinterpret_cast<mg::lua::HostMemoryFn>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (!fn) luaL_error(L, "mgdist: moongrad's host memory API is missing");
  return fn(L, idx, nbytes);
}

void host_step(lua_State* L, const char* name, const std::vector<int>& idx, mg::lua::HostStepBody body) {
  lua_getfield(L, LUA_REGISTRYINDEX, mg::lua::kHostStepKey);
  auto fn = reinterpret_cast<mg::lua::HostStepFn>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (!fn) luaL_error(L, "mgdist: moongrad's host step API is missing");
  fn(L, name, idx, std::move(body));
}

std::string failure(int rc, const char* what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string("dist: ") + what + " failed: " + std::string(msg, static_cast<size_t>(len));
}

// A failed MPI call as a Lua error naming the call and MPI's own message.
void check(lua_State* L, int rc, const char* what) {
  if (rc != MPI_SUCCESS) luaL_error(L, "%s", failure(rc, what).c_str());
}

// The same inside a host step, which may run again later from TinyJit's replay.
void check_step(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(failure(rc, what));
}

void need_init(lua_State* L) {
  if (!g_initialized || g_finalized) luaL_error(L, "dist: MPI is not running (dist.init() first)");
}

MPI_Datatype mpi_type(lua_State* L, const char* dtype, const char* what) {
  std::string d = dtype;
  if (d == "float32") return MPI_FLOAT;
  if (d == "float64") return MPI_DOUBLE;
  if (d == "int32") return MPI_INT32_T;
  if (d == "int64") return MPI_INT64_T;
  if (d == "uint8") return MPI_UINT8_T;
  luaL_error(L, "dist.%s: dtype %s is not supported (float32, float64, int32, int64, uint8): cast first",
             what, dtype);
  return MPI_DATATYPE_NULL;
}

// Every rank's `sig` (a tensor's shape and dtype), compared: a mismatch is an error on every rank
// that names each rank's tensor, where MPI would sum unequal buffers or wait forever.
void same_everywhere(lua_State* L, const char* what, const char* sig) {
  constexpr int kLen = 128;
  char mine[kLen] = {};
  std::strncpy(mine, sig, kLen - 1);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(static_cast<size_t>(size) * kLen);
  check(L, MPI_Allgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD), what);
  bool same = true;
  for (int r = 1; r < size; r++)
    same &= std::strncmp(all.data(), all.data() + static_cast<size_t>(r) * kLen, kLen) == 0;
  if (same) return;
  std::string msg = std::string("dist.") + what + ": the ranks' tensors differ:";
  for (int r = 0; r < size; r++)
    msg += " rank " + std::to_string(r) + " " + std::string(all.data() + static_cast<size_t>(r) * kLen) +
           (r + 1 < size ? ";" : "");
  luaL_error(L, "%s", msg.c_str());
}

// Stops every process of the job (main() calls it before exiting on an error).
int mgdist_abort(lua_State* L) {
  if (g_initialized && !g_finalized) MPI_Abort(MPI_COMM_WORLD, static_cast<int>(luaL_optinteger(L, 1, 1)));
  return 0;
}

// Closes MPI when the Lua state closes after a script that ended normally.
int sentinel_gc(lua_State*) {
  if (g_initialized && !g_finalized) {
    g_finalized = true;
    MPI_Finalize();
  }
  return 0;
}

// init() -> rank, size
int mgdist_init(lua_State* L) {
  if (!g_initialized) {
    int provided = 0;
    check(L, MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    g_initialized = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    lua_newuserdata(L, 1);
    lua_newtable(L);
    lua_pushcfunction(L, sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "mgdist.sentinel");
    lua_pushcfunction(L, mgdist_abort);
    lua_setfield(L, LUA_REGISTRYINDEX, mg::lua::kAtErrorKey);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  lua_pushinteger(L, rank);
  lua_pushinteger(L, size);
  return 2;
}

// allreduce(src, dst, op, dtype, sig): dst = op over the ranks of src ("sum", "max", "min")
int mgdist_allreduce(lua_State* L) {
  need_init(L);
  size_t n_src = 0, n_dst = 0;
  memory_of(L, 1, &n_src);
  memory_of(L, 2, &n_dst);
  std::string op = luaL_checkstring(L, 3);
  const char* dtype = luaL_checkstring(L, 4);
  same_everywhere(L, "all_reduce", luaL_checkstring(L, 5));
  if (n_src != n_dst) luaL_error(L, "dist.all_reduce: %d bytes into %d", (int)n_src, (int)n_dst);
  MPI_Op mop = op == "sum" ? MPI_SUM : op == "max" ? MPI_MAX : op == "min" ? MPI_MIN : MPI_OP_NULL;
  if (mop == MPI_OP_NULL)
    luaL_error(L, "dist.all_reduce: op must be sum, mean, max or min, got %s", op.c_str());
  MPI_Datatype t = mpi_type(L, dtype, "all_reduce");
  int item = 0;
  MPI_Type_size(t, &item);
  host_step(L, ("MPI_Allreduce " + op).c_str(), {2, 1}, [t, mop, item](const auto& mem) {
    // MPI counts are ints: a tensor of 2^31 elements or more goes in pieces
    auto [dst, bytes] = mem[0];
    char* src = static_cast<char*>(mem[1].first);
    const size_t total = bytes / static_cast<size_t>(item), piece = size_t{1} << 30;
    for (size_t at = 0; at < total; at += piece) {
      int count = static_cast<int>(std::min(piece, total - at));
      check_step(
          MPI_Allreduce(src + at * item, static_cast<char*>(dst) + at * item, count, t, mop, MPI_COMM_WORLD),
          "MPI_Allreduce");
    }
  });
  return 0;
}

// bcast(buf, root, sig): buf on every rank becomes root's
int mgdist_bcast(lua_State* L) {
  need_init(L);
  int root = static_cast<int>(luaL_checkinteger(L, 2));
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (root < 0 || root >= size)
    luaL_error(L, "dist.broadcast: root %d is not a rank (0..%d)", root, size - 1);
  same_everywhere(L, "broadcast", luaL_checkstring(L, 3));
  host_step(L, "MPI_Bcast", {1}, [root](const auto& mem) {
    auto [buf, n] = mem[0];
    const size_t piece = size_t{1} << 30;
    for (size_t at = 0; at < n; at += piece)
      check_step(MPI_Bcast(static_cast<char*>(buf) + at, static_cast<int>(std::min(piece, n - at)), MPI_BYTE,
                           root, MPI_COMM_WORLD),
                 "MPI_Bcast");
  });
  return 0;
}

int mgdist_barrier(lua_State* L) {
  need_init(L);
  check(L, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  return 0;
}

int mgdist_wtime(lua_State* L) {
  lua_pushnumber(L, MPI_Wtime());
  return 1;
}

// The library's version line ("Open MPI v4.1.4, ...").
int mgdist_version(lua_State* L) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  lua_pushlstring(L, v, static_cast<size_t>(len));
  return 1;
}

} // namespace

extern "C" int luaopen_mgdist(lua_State* L) {
  const luaL_Reg fns[] = {{"init", mgdist_init},       {"allreduce", mgdist_allreduce},
                          {"bcast", mgdist_bcast},     {"barrier", mgdist_barrier},
                          {"abort", mgdist_abort},     {"wtime", mgdist_wtime},
                          {"version", mgdist_version}, {nullptr, nullptr}};
  luaL_newlib(L, fns);
  return 1;
}
