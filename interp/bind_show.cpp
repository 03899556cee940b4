// The C side of the `show` table: what the REPL's colon commands and tab completion need from
// the engine. stdlib/show.lua builds the commands themselves on top of these.
#include <chrono>
#include <span>

#include "engine/realize.h"
#include "interp/lua_state.h"

namespace mg::lua {

namespace {

// The readable fields of each userdata type, as their __index functions answer them
// (bind_tensor.cpp, bind_uop.cpp); tests/lua/test_repl.lua checks each one resolves.
struct Members {
  const char* meta;
  std::span<const char* const> fields;
};
constexpr const char* kTensorFields[] = {"shape", "dtype", "device", "ndim",         "T",
                                         "uop",   "st",    "grad",   "requires_grad"};
constexpr const char* kUOpFields[] = {"op", "dtype", "arg", "shape", "src", "toposort"};
constexpr const char* kSTFields[] = {"shape",  "size", "contiguous", "views", "reshape",  "permute",
                                     "expand", "pad",  "shrink",     "flip",  "simplify", "offset_of"};
constexpr const char* kItemFields[] = {"ast", "uop", "bufs", "src", "name", "stages"};
const Members kMembers[] = {{kTensorMeta, kTensorFields},
                            {"UOp", kUOpFields},
                            {"ShapeTracker", kSTFields},
                            {"ScheduleItem", kItemFields}};

const Members* members_of(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA) return nullptr;
  for (const Members& m : kMembers)
    if (luaL_testudata(L, idx, m.meta)) return &m;
  return nullptr;
}

// show.typeof(v): "Tensor", "UOp", "ShapeTracker", "ScheduleItem", or Lua's type name.
int show_typeof(lua_State* L) {
  luaL_checkany(L, 1);
  const Members* m = members_of(L, 1);
  lua_pushstring(L, m ? m->meta : luaL_typename(L, 1));
  return 1;
}

// show.fields(v): the field names of a moongrad userdata (methods of a Tensor come from the
// Tensor table, which Lua can read), or nil for other values.
int show_fields(lua_State* L) {
  luaL_checkany(L, 1);
  const Members* m = members_of(L, 1);
  if (!m) return 0;
  lua_createtable(L, static_cast<int>(m->fields.size()), 0);
  for (size_t i = 0; i < m->fields.size(); i++) {
    lua_pushstring(L, m->fields[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// show.clock(): seconds on a monotonic wall clock (os.clock is CPU time, summed over threads).
int show_clock(lua_State* L) {
  using namespace std::chrono;
  lua_pushnumber(L, duration<double>(steady_clock::now().time_since_epoch()).count());
  return 1;
}

// show.kernel_log(fn, ...): calls fn(...) and returns a list of the kernels it ran, each
// {name, device, shape, seconds, flops, bytes}, followed by fn's results.
int show_kernel_log(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 1;
  std::vector<std::pair<KernelInfo, double>> runs;
  {
    KernelLog log;
    lua_call(L, nargs, LUA_MULTRET); // an error propagates; the log unregisters itself
    runs = std::move(log.runs);
  }
  int nres = lua_gettop(L);
  lua_createtable(L, static_cast<int>(runs.size()), 0);
  for (size_t i = 0; i < runs.size(); i++) {
    const auto& [info, s] = runs[i];
    lua_createtable(L, 0, 6);
    lua_pushstring(L, info.name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, info.device.c_str());
    lua_setfield(L, -2, "device");
    push_int_list(L, info.out_shape);
    lua_setfield(L, -2, "shape");
    lua_pushnumber(L, s);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, info.flops);
    lua_setfield(L, -2, "flops");
    lua_pushinteger(L, info.bytes);
    lua_setfield(L, -2, "bytes");
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_insert(L, 1);
  return nres + 1;
}

const Binding kShowFns[] = {
    {"show.typeof", show_typeof},
    {"show.fields", show_fields},
    {"show.clock", show_clock},
    {"show.kernel_log", show_kernel_log},
};

} // namespace

void open_show(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kShowFns);
  lua_setglobal(L, "show");
}

} // namespace mg::lua
