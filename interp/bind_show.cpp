// The C side of the `show` table: what the REPL's colon commands and tab completion need from
// the engine. stdlib/show.lua builds the commands themselves on top of these.
#include <chrono>
#include <filesystem>
#include <optional>
#include <span>

#include "engine/codegen/lowerer.h"
#include "engine/codegen/search.h"
#include "engine/device.h"
#include "engine/inspect.h"
#include "engine/realize.h"
#include "engine/roofline.h"
#include "engine/settings.h"
#include "engine/viz.h"
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
constexpr const char* kItemFields[] = {"ast", "uop", "bufs", "src", "name", "opts", "stages"};
constexpr const char* kVariableFields[] = {"name", "min", "max", "val", "bind", "unbind"};
const Members kMembers[] = {{kTensorMeta, kTensorFields},
                            {kVariableMeta, kVariableFields},
                            {"UOp", kUOpFields},
                            {"ShapeTracker", kSTFields},
                            {"ScheduleItem", kItemFields}};

const Members* members_of(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA) return nullptr;
  for (const Members& m : kMembers)
    if (luaL_testudata(L, idx, m.meta)) return &m;
  return nullptr;
}

// show.typeof(v): "Tensor", "Variable", "UOp", "ShapeTracker", "ScheduleItem", or Lua's type name.
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
// {name, device, shape, seconds, flops, bytes, reason, cores}, and where the device has measured
// limits (engine/roofline.h) share (of the limit that binds it), bound ("compute" or "memory")
// and limit (the two as text: "63% of compute"); followed by fn's results.
int show_kernel_log(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 1;
  std::vector<std::pair<KernelInfo, double>> runs;
  std::vector<ScheduleItem> items;
  {
    KernelLog log;
    lua_call(L, nargs, LUA_MULTRET); // an error propagates; the log unregisters itself
    runs = std::move(log.runs);
    items = std::move(log.items);
  }
  int nres = lua_gettop(L);
  lua_createtable(L, static_cast<int>(runs.size()), 0);
  for (size_t i = 0; i < runs.size(); i++) {
    const auto& [info, s] = runs[i];
    lua_createtable(L, 0, 7);
    lua_pushstring(L, info.name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, info.device.c_str());
    lua_setfield(L, -2, "device");
    push_shape(L, info.out_shape);
    lua_setfield(L, -2, "shape");
    lua_pushnumber(L, s);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, info.flops);
    lua_setfield(L, -2, "flops");
    lua_pushinteger(L, info.bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushstring(L, items[i].reason);
    lua_setfield(L, -2, "reason");
    int cores = kernel_cores(info, settings().threads);
    lua_pushinteger(L, cores);
    lua_setfield(L, -2, "cores");
    if (auto p = roofline_of(info, s, settings().threads)) {
      lua_pushnumber(L, p->share);
      lua_setfield(L, -2, "share");
      lua_pushstring(L, p->memory_bound ? "memory" : "compute");
      lua_setfield(L, -2, "bound");
      lua_pushstring(L, share_text(*p).c_str());
      lua_setfield(L, -2, "limit");
    }
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_insert(L, 1);
  return nres + 1;
}

// Opts from Lua: a list of {name, axis, amount}, e.g. {{"UPCAST", 0, 4}, {"UNROLL", 0, 8}}.
std::vector<Opt> check_opts(lua_State* L, int idx) {
  luaL_checktype(L, idx, LUA_TTABLE);
  std::vector<Opt> opts;
  for (lua_Integer i = 1, n = max_index(L, idx); i <= n; i++) {
    std::string where = "opt " + std::to_string(i);
    if (lua_rawgeti(L, idx, i) != LUA_TTABLE)
      throw std::invalid_argument(where + ": expected {name, axis, amount}, e.g. {\"UPCAST\", 0, 4}");
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    lua_rawgeti(L, -3, 3);
    // {"NOLOCALS"} needs no axis or amount
    bool bare = lua_isstring(L, -3) && lua_isnil(L, -2) && lua_isnil(L, -1) &&
                opt_op(lua_tostring(L, -3)) == OptOp::NOLOCALS;
    if (!bare && (!lua_isstring(L, -3) || !lua_isinteger(L, -2) || !lua_isinteger(L, -1)))
      throw std::invalid_argument(where + ": expected {name, axis, amount} with integer axis and amount");
    opts.push_back(
        {opt_op(lua_tostring(L, -3)), bare ? 0 : lua_tointeger(L, -2), bare ? 0 : lua_tointeger(L, -1)});
    lua_pop(L, 4);
  }
  return opts;
}

// show.kernel_stages(): {{name=, what=}, ...}: the stages of compiling a kernel, in order
// (engine/codegen/pipeline.h's one list).
int show_kernel_stages(lua_State* L) {
  const auto& stages = kernel_stages();
  lua_createtable(L, static_cast<int>(stages.size()), 0);
  for (size_t i = 0; i < stages.size(); i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, stages[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, stages[i].what);
    lua_setfield(L, -2, "what");
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// show.try_opts(x [, opts, repeats]): runs the kernels realizing x, the last one lowered with
// `opts` (default: the opts it would get), on scratch buffers of a schedule that is not kept.
// Returns {name, opts = {...}, seconds (best of repeats), flops, src, kernels}.
int show_try_opts(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  std::optional<std::vector<Opt>> opts;
  if (!lua_isnoneornil(L, 2)) opts = check_opts(L, 2);
  int repeats = static_cast<int>(luaL_optinteger(L, 3, 3));
  auto items = x.schedule();
  if (items.empty())
    throw std::invalid_argument("try_opts: nothing to compute, the tensor is already realized");
  for (auto& it : items)
    if (it.bufs.at(0)->allocated())
      throw std::invalid_argument(
          "try_opts: a kernel of this schedule writes a buffer that holds data (an assign)");
  const ScheduleItem& last = items.back();
  if (!opts) opts = lower_kernel(last.ast).opts;
  run_schedule({items.begin(), items.end() - 1}); // the last kernel's inputs
  KernelInfo info;
  KernelRun run = try_opts(last, *opts, repeats, info);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, info.name.c_str());
  lua_setfield(L, -2, "name");
  lua_createtable(L, static_cast<int>(info.opts.size()), 0);
  for (size_t i = 0; i < info.opts.size(); i++) {
    lua_pushstring(L, info.opts[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "opts");
  lua_pushnumber(L, run.seconds);
  lua_setfield(L, -2, "seconds");
  lua_pushinteger(L, info.flops);
  lua_setfield(L, -2, "flops");
  lua_pushstring(L, info.src.c_str());
  lua_setfield(L, -2, "src");
  lua_pushinteger(L, static_cast<lua_Integer>(items.size()));
  lua_setfield(L, -2, "kernels");
  return 1;
}

// show.beam_cache(): the BEAM cache's path, how many kernels it holds (-1: unreadable) and its
// size in bytes (0: no file yet).
int show_beam_cache(lua_State* L) {
  std::string path = beam_cache_path();
  lua_pushstring(L, path.c_str());
  lua_pushinteger(L, beam_cache_entries());
  std::error_code ec;
  auto bytes = std::filesystem::file_size(path, ec);
  lua_pushinteger(L, ec ? 0 : static_cast<lua_Integer>(bytes));
  return 3;
}

// show.render(x, device [, compiled]): the kernels x would run, built for `device` without
// running them: {{name, src, compiled, launch}, ...}.
int show_render(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  std::string dev = luaL_checkstring(L, 2);
  bool compiled = lua_isnoneornil(L, 3) || lua_toboolean(L, 3);
  auto items = x.schedule();
  lua_createtable(L, static_cast<int>(items.size()), 0);
  for (size_t i = 0; i < items.size(); i++) {
    RenderedKernel k = render_on(items[i], dev, compiled);
    lua_createtable(L, 0, 4);
    for (auto [key, v] :
         {std::pair{"name", &k.name}, {"src", &k.src}, {"compiled", &k.compiled}, {"launch", &k.launch}}) {
      lua_pushlstring(L, v->data(), v->size());
      lua_setfield(L, -2, key);
    }
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// show.viz_write(x, title): the VIZ page of x's graphs at every stage, written to a new file
// (nothing is realized); returns its path. x may be a list of tensors (a sharded tensor's pieces).
int show_viz_write(lua_State* L) {
  std::vector<UOpRef> outs;
  if (lua_type(L, 1) == LUA_TTABLE && !lua_getmetatable(L, 1)) {
    for (lua_Integer i = 1, n = luaL_len(L, 1); i <= n; i++) {
      lua_rawgeti(L, 1, i);
      outs.push_back(check_tensor(L, -1).uop);
      lua_pop(L, 1);
    }
    if (outs.empty()) luaL_argerror(L, 1, "an empty list of tensors");
  } else {
    outs.push_back(check_tensor(L, 1).uop);
  }
  std::string path = viz_write(outs, luaL_optstring(L, 2, "a tensor"));
  lua_pushlstring(L, path.data(), path.size());
  return 1;
}

// show.limits(device [, threads]): {flops =, bytes =, threads =, path =}: the device's roofline
// ceilings in FLOP/s and bytes/s at `threads` threads (default: the MG_THREADS setting), measured
// on first use and kept in `path`; nil where the device has none.
int show_limits(lua_State* L) {
  std::string device = luaL_checkstring(L, 1);
  int threads = static_cast<int>(luaL_optinteger(L, 2, settings().threads));
  if (threads < 1) luaL_argerror(L, 2, "threads must be at least 1");
  auto l = device_limits(device, threads);
  if (!l) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, l->flops);
  lua_setfield(L, -2, "flops");
  lua_pushnumber(L, l->bytes);
  lua_setfield(L, -2, "bytes");
  lua_pushinteger(L, threads);
  lua_setfield(L, -2, "threads");
  lua_pushstring(L, roofline_cache_path().c_str());
  lua_setfield(L, -2, "path");
  return 1;
}

const Binding kShowFns[] = {
    {"show.limits", show_limits},         {"show.render", show_render},
    {"show.beam_cache", show_beam_cache}, {"show.kernel_stages", show_kernel_stages},
    {"show.try_opts", show_try_opts},     {"show.typeof", show_typeof},
    {"show.fields", show_fields},         {"show.clock", show_clock},
    {"show.kernel_log", show_kernel_log}, {"show.viz_write", show_viz_write},
};

} // namespace

void open_show(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kShowFns);
  lua_setglobal(L, "show");
}

} // namespace mg::lua
