// require "mgjit": the C side of TinyJit (stdlib/jit.lua). capture() records the kernels a
// call runs; replay() runs them again on the next call's input buffers, skipping the Lua
// code, the graph building and the scheduling.
#include <new>
#include <string>
#include <unordered_set>

#include "engine/device.h"
#include "engine/realize.h"
#include "interp/lua_state.h"

namespace mg::lua {

namespace {
constexpr const char* kCaptureMeta = "JitCapture";

struct Captured {
  std::vector<ScheduleItem> items;
  int host_made = 0; // buffers filled from the host during the call that the kernels read
};

// The buffer a realized tensor reads (its whole buffer, as TinyJit inputs must be).
std::shared_ptr<Buffer> buffer_of(Tensor& t, int argn) {
  t.realize();
  const UOp* u = t.uop.get();
  while (is_movement(u->op) || u->op == Ops::REALIZED)
    u = u->src[0].get();
  if (u->op != Ops::BUFFER)
    throw std::invalid_argument("input " + std::to_string(argn) + " did not realize to a buffer");
  return u->buffer();
}

// mgjit.capture(fn, ...) -> capture, fn's results (run under the capture)
int jit_capture(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 1;
  Captured cap;
  int first_new = Buffer::next_id();
  // Values realized before the capture are not read from the graph's cache: a call on the same
  // inputs as the one before would otherwise capture a copy of that call's result, not the
  // kernels that compute it, and every replay would copy the stale result.
  UOp::mutation_epoch()++;
  {
    KernelLog log;
    lua_call(L, nargs, LUA_MULTRET);
    cap.items = std::move(log.items);
  }
  // Data made on the host inside the call (Tensor{...}, rand, dropout's mask) is baked into
  // the capture: every replay reads the same values.
  std::unordered_set<const Buffer*> host;
  for (auto& it : cap.items)
    for (size_t i = 1; i < it.bufs.size(); i++)
      if (it.bufs[i]->id() >= first_new && it.bufs[i]->filled_from_host()) host.insert(it.bufs[i].get());
  cap.host_made = static_cast<int>(host.size());
  int nres = lua_gettop(L);
  new (lua_newuserdatauv(L, sizeof(Captured), 0)) Captured(std::move(cap));
  luaL_setmetatable(L, kCaptureMeta);
  lua_insert(L, 1);
  return nres + 1;
}

// capture:replay({captured inputs}, {new inputs} [, {name = value}]): the captured kernels, with
// each captured input's buffer replaced by the new input's, and Variables bound to new values.
int jit_replay(lua_State* L) {
  auto& cap = *static_cast<Captured*>(luaL_checkudata(L, 1, kCaptureMeta));
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  std::vector<std::pair<const Buffer*, std::shared_ptr<Buffer>>> swap;
  lua_Integer n = max_index(L, 2);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    lua_rawgeti(L, 3, i);
    Tensor* a = test_tensor(L, -2);
    Tensor* b = test_tensor(L, -1);
    if (!a || !b) throw std::invalid_argument("replay: input " + std::to_string(i) + " is not a Tensor");
    auto from = buffer_of(*a, static_cast<int>(i));
    auto to = buffer_of(*b, static_cast<int>(i));
    if (from->dtype != to->dtype || from->size != to->size)
      throw std::invalid_argument("replay: input " + std::to_string(i) + " changed its size or dtype");
    if (from != to) swap.push_back({from.get(), to});
    lua_pop(L, 2);
  }
  std::map<std::string, int64_t> vars;
  if (lua_istable(L, 4)) {
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      vars[luaL_checkstring(L, -2)] = luaL_checkinteger(L, -1);
      lua_pop(L, 1);
    }
  }
  replay(cap.items, swap, vars);
  return 0;
}

int jit_host_made(lua_State* L) {
  lua_pushinteger(L, static_cast<Captured*>(luaL_checkudata(L, 1, kCaptureMeta))->host_made);
  return 1;
}

int jit_count(lua_State* L) {
  lua_pushinteger(
      L, static_cast<lua_Integer>(static_cast<Captured*>(luaL_checkudata(L, 1, kCaptureMeta))->items.size()));
  return 1;
}

int jit_gc(lua_State* L) {
  static_cast<Captured*>(lua_touserdata(L, 1))->~Captured();
  return 0;
}

const Binding kJitFns[] = {{"mgjit.capture", jit_capture}};
const Binding kCaptureMethods[] = {{"JitCapture:replay", jit_replay},
                                   {"JitCapture:kernel_count", jit_count},
                                   {"JitCapture:host_made", jit_host_made}};

} // namespace

int open_mgjit(lua_State* L) {
  if (luaL_newmetatable(L, kCaptureMeta)) {
    lua_pushcfunction(L, jit_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushstring(L, "locked");
    lua_setfield(L, -2, "__metatable");
    lua_newtable(L);
    set_bindings(L, -1, kCaptureMethods);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  set_bindings(L, -1, kJitFns);
  return 1;
}

} // namespace mg::lua
