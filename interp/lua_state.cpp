// The Lua state: shared binding helpers, the small globals (dtypes, GlobalCounters, Context,
// Device, setdebug) and running chunks with clear error messages.
#include "interp/lua_state.h"
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "engine/device.h"
#include "engine/machine.h"
#include "engine/settings.h"

namespace mg::lua {

// ---------------------------------------------------------------- bound functions

namespace {
// Runs the Binding in upvalue 1. The std::exception is caught and its message copied; the Lua
// error is raised only after the handler is left (Lua errors are C++ exceptions in lua5.4-c++).
int trampoline(lua_State* L) {
  const auto* b = static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)));
  std::string err;
  try {
    return b->fn(L);
  } catch (const std::bad_alloc&) {
    err = "out of memory (is the tensor larger than this machine can hold?)";
  } catch (const std::exception& e) {
    err = e.what();
  }
  return luaL_error(L, "%s: %s", b->name, err.c_str());
}
} // namespace

void push_binding(lua_State* L, const Binding& b, int nup) {
  lua_pushlightuserdata(L, const_cast<Binding*>(&b));
  if (nup > 0) lua_rotate(L, -(nup + 1), 1); // the Binding goes below the extra upvalues
  lua_pushcclosure(L, trampoline, nup + 1);
}

const char* current_name(lua_State* L) {
  // The fn runs as a plain C call inside the trampoline, so upvalue 1 is still the Binding.
  const auto* b = static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)));
  return b ? b->name : "?";
}

void set_bindings(lua_State* L, int idx, std::span<const Binding> bs) {
  idx = lua_absindex(L, idx);
  for (const Binding& b : bs) {
    // Field names are the part after the last '.' or ':' ("Tensor.zeros" -> "zeros").
    const char* field = b.name;
    for (const char* p = b.name; *p; p++)
      if (*p == '.' || *p == ':') field = p + 1;
    push_binding(L, b);
    lua_setfield(L, idx, field);
  }
}

// ---------------------------------------------------------------- argument helpers

lua_Integer max_index(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  lua_Integer m = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1)) m = std::max(m, lua_tointeger(L, -1));
  }
  return m;
}

std::vector<int64_t> int_list(lua_State* L, int idx, const char* what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Integer n = max_index(L, idx);
  std::vector<int64_t> out;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok) luaL_error(L, "%s: entry %d is %s, expected an integer", what, (int)i, luaL_typename(L, -1));
    out.push_back(v);
    lua_pop(L, 1);
  }
  return out;
}

std::vector<int64_t> int_list_args(lua_State* L, int first, const char* what) {
  int top = lua_gettop(L);
  if (top == first && lua_type(L, first) == LUA_TTABLE) return int_list(L, first, what);
  std::vector<int64_t> out;
  for (int i = first; i <= top; i++) {
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, i, &ok);
    if (!ok)
      luaL_error(L, "%s: argument %d is %s, expected an integer", what, i - first + 1, luaL_typename(L, i));
    out.push_back(v);
  }
  return out;
}

Shape shape_list(lua_State* L, int idx, const char* what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  idx = lua_absindex(L, idx);
  lua_Integer n = max_index(L, idx);
  Shape out;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    out.push_back(check_sint(L, -1, what));
    lua_pop(L, 1);
  }
  return out;
}

Shape shape_list_args(lua_State* L, int first, const char* what) {
  int top = lua_gettop(L);
  if (top == first && lua_type(L, first) == LUA_TTABLE && !test_sint(L, first))
    return shape_list(L, first, what);
  Shape out;
  for (int i = first; i <= top; i++)
    out.push_back(check_sint(L, i, what));
  return out;
}

void push_shape(lua_State* L, const Shape& s) {
  lua_createtable(L, static_cast<int>(s.size()), 0);
  for (size_t i = 0; i < s.size(); i++) {
    push_sint(L, s[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

void push_int_list(lua_State* L, const std::vector<int64_t>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

DType check_dtype(lua_State* L, int idx) {
  std::string s = luaL_checkstring(L, idx);
  if (s.rfind("dtypes.", 0) == 0) s = s.substr(7);
  return dtype_from_name(s); // throws invalid_argument naming the bad dtype
}

// ---------------------------------------------------------------- globals

namespace {
constexpr DType kAllDtypes[] = {
#define X(n, s, c, sz, p) DType::n,
    MG_DTYPES(X)
#undef X
};

int dtypes_index(lua_State* L) { // dtypes.<typo> is an error, not a silent nil
  return luaL_error(L, "unknown dtype 'dtypes.%s'", luaL_tolstring(L, 2, nullptr));
}
int dtypes_itemsize(lua_State* L) {
  lua_pushinteger(L, itemsize(check_dtype(L, 1)));
  return 1;
}
int dtypes_is_float(lua_State* L) {
  lua_pushboolean(L, is_float(check_dtype(L, 1)));
  return 1;
}
int dtypes_is_int(lua_State* L) {
  lua_pushboolean(L, is_int(check_dtype(L, 1)));
  return 1;
}
const Binding kDtypeFns[] = {{"dtypes.itemsize", dtypes_itemsize},
                             {"dtypes.is_float", dtypes_is_float},
                             {"dtypes.is_int", dtypes_is_int}};

void open_dtypes(lua_State* L) {
  lua_newtable(L);
  for (DType d : kAllDtypes) {
    if (d == DType::Void) continue;
    lua_pushstring(L, name(d));
    lua_setfield(L, -2, name(d));
  }
  const char* aliases[] = {"float", "half",  "double", "int",  "long", "char",
                           "uchar", "short", "ushort", "uint", "ulong"};
  for (const char* a : aliases) {
    lua_pushstring(L, name(dtype_from_name(a)));
    lua_setfield(L, -2, a);
  }
  lua_pushstring(L, name(default_float));
  lua_setfield(L, -2, "default_float");
  lua_pushstring(L, name(default_int));
  lua_setfield(L, -2, "default_int");
  set_bindings(L, -1, kDtypeFns);
  lua_newtable(L);
  lua_pushcfunction(L, dtypes_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, "dtypes");
}

// GlobalCounters fields are read live from the engine on each access.
struct CounterField {
  const char* name;
  bool is_int;
  int64_t GlobalCounters::*i;
  double GlobalCounters::*d;
};
const CounterField kCounters[] = {
    {"kernel_count", true, &GlobalCounters::kernel_count, nullptr},
    {"mem_used", true, &GlobalCounters::mem_used, nullptr},
    {"global_ops", true, &GlobalCounters::global_ops, nullptr},
    {"global_mem", true, &GlobalCounters::global_mem, nullptr},
    {"time_sum_s", false, nullptr, &GlobalCounters::time_sum_s},
    {"kernels_compiled", true, &GlobalCounters::kernels_compiled, nullptr},
    {"schedules_cached", true, &GlobalCounters::schedules_cached, nullptr},
};
const CounterField* find_counter(lua_State* L, int idx) {
  const char* k = luaL_checkstring(L, idx);
  for (const auto& f : kCounters)
    if (std::strcmp(f.name, k) == 0) return &f;
  luaL_error(L,
             "GlobalCounters has no field '%s' (kernel_count, mem_used, global_ops, global_mem, time_sum_s, "
             "kernels_compiled, schedules_cached)",
             k);
  return nullptr;
}
int counters_index(lua_State* L) {
  const CounterField* f = find_counter(L, 2);
  auto& gc = global_counters();
  if (f->is_int)
    lua_pushinteger(L, gc.*(f->i));
  else
    lua_pushnumber(L, gc.*(f->d));
  return 1;
}
int counters_newindex(lua_State* L) {
  const CounterField* f = find_counter(L, 2);
  auto& gc = global_counters();
  if (f->is_int)
    gc.*(f->i) = luaL_checkinteger(L, 3);
  else
    gc.*(f->d) = luaL_checknumber(L, 3);
  return 0;
}
int counters_reset(lua_State* L) {
  int64_t mem = global_counters().mem_used; // memory still held is not a count to reset
  global_counters() = GlobalCounters{};
  global_counters().mem_used = mem;
  return 0;
}
const Binding kCounterFns[] = {{"GlobalCounters.reset", counters_reset}};
const Binding kCounterIndex{"GlobalCounters", counters_index};
const Binding kCounterNewindex{"GlobalCounters", counters_newindex};

// A metatable with __index / __newindex bindings for the table on top of the stack.
void set_accessors(lua_State* L, const Binding& index, const Binding& newindex) {
  lua_newtable(L);
  push_binding(L, index);
  lua_setfield(L, -2, "__index");
  push_binding(L, newindex);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
}

void open_counters(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kCounterFns);
  set_accessors(L, kCounterIndex, kCounterNewindex);
  lua_setglobal(L, "GlobalCounters");
}

// Context({DEBUG=3, BEAM=2, NOOPT=1, VIZ=1, WINO=0, DEV="CPU"}, fn): settings for the duration of fn only.
int setting_int(lua_State* L, const char* key, int v) {
  if (lua_isboolean(L, v)) return lua_toboolean(L, v);
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, v, &ok);
  if (!ok) luaL_error(L, "Context: %s must be an integer, got %s", key, luaL_typename(L, v));
  return static_cast<int>(i);
}

void apply_setting(lua_State* L, Settings& s, const char* key, int v) {
  std::string k = key;
  if (k == "DEBUG")
    s.debug = setting_int(L, key, v);
  else if (k == "BEAM")
    s.beam = setting_int(L, key, v);
  else if (k == "NOOPT")
    s.noopt = setting_int(L, key, v) != 0;
  else if (k == "VIZ")
    s.viz = setting_int(L, key, v) != 0;
  else if (k == "WINO")
    s.wino = setting_int(L, key, v) != 0;
  else if (k == "SCACHE")
    s.scache = setting_int(L, key, v) != 0;
  else if (k == "DEV" || k == "DEVICE") {
    if (lua_type(L, v) != LUA_TSTRING) luaL_error(L, "Context: %s must be a device name", key);
    std::string d = lua_tostring(L, v);
    check_runnable(d); // throws for unknown devices (naming the known ones) and ones that cannot run
    s.device = d;
  } else
    luaL_error(L, "Context: unknown setting '%s' (DEBUG, BEAM, NOOPT, VIZ, WINO, SCACHE, DEV)", key);
}

int context(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  Settings saved = settings();
  Settings next = saved;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "Context: setting names must be strings");
    apply_setting(L, next, lua_tostring(L, -2), lua_gettop(L));
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  settings() = next;
  int status = lua_pcall(L, 0, LUA_MULTRET, 0);
  settings() = saved; // restored on success and on error
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - 1;
}

// show.setting(NAME [, value]): reads, or sets then reads, DEBUG, BEAM, NOOPT, VIZ, WINO, SCACHE or DEV.
int show_setting(lua_State* L) {
  std::string k = luaL_checkstring(L, 1);
  if (!lua_isnoneornil(L, 2)) apply_setting(L, settings(), k.c_str(), 2);
  const Settings& s = settings();
  if (k == "DEBUG")
    lua_pushinteger(L, s.debug);
  else if (k == "BEAM")
    lua_pushinteger(L, s.beam);
  else if (k == "NOOPT")
    lua_pushinteger(L, s.noopt ? 1 : 0);
  else if (k == "VIZ")
    lua_pushinteger(L, s.viz ? 1 : 0);
  else if (k == "WINO")
    lua_pushinteger(L, s.wino ? 1 : 0);
  else if (k == "SCACHE")
    lua_pushinteger(L, s.scache ? 1 : 0);
  else if (k == "DEV" || k == "DEVICE")
    lua_pushstring(L, s.device.c_str());
  else
    luaL_error(L, "unknown setting '%s' (DEBUG, BEAM, NOOPT, VIZ, WINO, SCACHE, DEV)", k.c_str());
  return 1;
}

int setdebug(lua_State* L) {
  settings().debug = static_cast<int>(luaL_checkinteger(L, 1));
  return 0;
}
int getdebug(lua_State* L) {
  lua_pushinteger(L, settings().debug);
  return 1;
}

// Device.DEFAULT reads and sets the engine's default device.
int device_index(lua_State* L) {
  std::string k = luaL_checkstring(L, 2);
  if (k != "DEFAULT") return luaL_error(L, "Device has no field '%s'", k.c_str());
  lua_pushstring(L, default_device().c_str());
  return 1;
}
int device_newindex(lua_State* L) {
  std::string k = luaL_checkstring(L, 2);
  if (k != "DEFAULT") return luaL_error(L, "Device has no field '%s'", k.c_str());
  std::string d = luaL_checkstring(L, 3);
  check_runnable(d);
  settings().device = d;
  return 0;
}
// Device.names(): the devices compiled in, and a table of why each one that cannot run here
// cannot ({CUDA = "no CUDA driver here ..."}).
int device_names_fn(lua_State* L) {
  auto names = device_names();
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); i++) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_newtable(L);
  for (auto& n : names) {
    std::string why = get_device(n).unavailable();
    if (why.empty()) continue;
    lua_pushstring(L, why.c_str());
    lua_setfield(L, -2, n.c_str());
  }
  return 2;
}

// Device.why(name): why that device cannot run here, or nil where it runs. Device.names() asks
// every device, which starts each driver (PoCL, lavapipe: 40 ms at start-up on the Xeon); a tensor
// made on the CPU needs only the CPU's answer.
int device_why_fn(lua_State* L) {
  std::string why = get_device(luaL_checkstring(L, 1)).unavailable();
  if (why.empty()) return 0;
  lua_pushstring(L, why.c_str());
  return 1;
}

// Device.machine(): the CPU the hand-coded opts are sized for, as one line ("AVX-512: 16 float
// lanes, 32 registers; L1d 32 KiB, ..."), and as a table of its numbers (bytes, lanes, counts).
int device_machine_fn(lua_State* L) {
  const Machine& m = machine();
  lua_pushstring(L, m.describe().c_str());
  lua_createtable(L, 0, 9);
  lua_pushstring(L, m.simd.isa.c_str());
  lua_setfield(L, -2, "isa");
  const std::pair<const char*, int64_t> numbers[] = {{"float_lanes", m.simd.float_lanes},
                                                     {"vector_registers", m.simd.vector_registers},
                                                     {"l1d", m.l1d.bytes},
                                                     {"l2", m.l2.bytes},
                                                     {"l3", m.l3.bytes},
                                                     {"l3_shared_by", m.l3.shared_by},
                                                     {"cores", m.cores}};
  for (auto [k, v] : numbers) {
    lua_pushinteger(L, static_cast<lua_Integer>(v));
    lua_setfield(L, -2, k);
  }
  lua_pushboolean(L, m.caches_from_sysfs);
  lua_setfield(L, -2, "caches_from_sysfs");
  return 2;
}

// Device.host_memory(name): whether the device's buffers are host memory (CPU:n, LLVM:n), so that
// copies between such devices are lazy kernels (Tensor:to)
int device_host_memory_fn(lua_State* L) {
  lua_pushboolean(L, get_device(canonical_device(luaL_checkstring(L, 1))).host_memory());
  return 1;
}

// Device.synchronize([name]): waits until the kernels queued on the device (default: DEFAULT) have
// finished, as tinygrad's Device[d].synchronize(); a no-op where runs finish before they return.
int device_synchronize_fn(lua_State* L) {
  std::string name = luaL_optstring(L, 1, settings().device.c_str());
  check_runnable(canonical_device(name)).synchronize();
  return 0;
}

const Binding kGlobalFns[] = {{"Context", context}, {"setdebug", setdebug}, {"getdebug", getdebug}};
const Binding kDeviceFns[] = {{"Device.names", device_names_fn},
                              {"Device.why", device_why_fn},
                              {"Device.machine", device_machine_fn},
                              {"Device.host_memory", device_host_memory_fn},
                              {"Device.synchronize", device_synchronize_fn}};
const Binding kShowSetting[] = {{"show.setting", show_setting}};
const Binding kDeviceIndex{"Device", device_index};
const Binding kDeviceNewindex{"Device.DEFAULT", device_newindex};

void open_globals(lua_State* L) {
  open_dtypes(L);
  open_counters(L);
  lua_pushglobaltable(L);
  set_bindings(L, -1, kGlobalFns);
  lua_pop(L, 1);
  lua_newtable(L);
  set_bindings(L, -1, kDeviceFns);
  open_lua_devices(L, -1);
  set_accessors(L, kDeviceIndex, kDeviceNewindex);
  lua_setglobal(L, "Device");
  lua_getglobal(L, "show");
  set_bindings(L, -1, kShowSetting);
  lua_pop(L, 1);
}

// stdlib/*.lua become package.preload entries; the modules that define globals are loaded.
void open_stdlib(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (size_t i = 0; i < kEmbeddedModuleCount; i++) {
    const EmbeddedModule& m = kEmbeddedModules[i];
    std::string chunk = std::string("@stdlib/") + m.name + ".lua";
    // MG_STDLIB_DIR: edit stdlib/*.lua and rerun without rebuilding (CONTRIBUTING.md)
    if (const char* dir = std::getenv("MG_STDLIB_DIR")) { // named as the embedded copy is
      std::string path = std::string(dir) + "/" + m.name + ".lua";
      std::ifstream f(path, std::ios::binary);
      if (!f) luaL_error(L, "MG_STDLIB_DIR: cannot read %s", path.c_str());
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (luaL_loadbuffer(L, text.data(), text.size(), chunk.c_str()) != LUA_OK) lua_error(L);
    } else if (luaL_loadbuffer(L, m.source, m.size, chunk.c_str()) != LUA_OK) {
      lua_error(L);
    }
    lua_setfield(L, -2, m.name);
  }
  lua_pop(L, 1);
  if (const char* dir = std::getenv("MG_STDLIB_DIR")) { // and modules the binary does not have yet
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;", dir);
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
  }
  // C modules built beside the executable, loaded only when required (mgdist.so: the MPI half of
  // `dist`, so that moongrad itself needs no MPI library)
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.so;", exe.parent_path().c_str());
    lua_getfield(L, -2, "cpath");
    lua_concat(L, 2);
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
  }
  // module -> the global it becomes ("" for modules that only add Tensor methods)
  const std::pair<const char*, const char*> globals[] = {
      {"show", "show"},         {"tensor", ""},     {"nn", "nn"},     {"optim", "optim"}, {"state", "state"},
      {"datasets", "datasets"}, {"jit", "TinyJit"}, {"onnx", "onnx"}, {"dist", "dist"}};
  for (auto [mod, global] : globals) {
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    lua_call(L, 1, 1);
    if (*global)
      lua_setglobal(L, global);
    else
      lua_pop(L, 1);
  }
}

constexpr const char* kReplModuleKey = "moongrad.repl";

void load_repl_module(lua_State* L) {
  lua_getglobal(L, "require");
  lua_pushstring(L, "repl");
  lua_call(L, 1, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, kReplModuleKey);
}

int open_all(lua_State* L) {
  luaL_openlibs(L);
  open_tensor(L);
  open_autograd(L);
  open_uop(L);
  open_variable(L);
  open_show(L);
  open_globals(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE); // C modules for stdlib/*.lua
  lua_pushcfunction(L, open_mgio);
  lua_setfield(L, -2, "mgio");
  lua_pushcfunction(L, open_mgimage);
  lua_setfield(L, -2, "mgimage");
  lua_pushcfunction(L, open_mgjit);
  lua_setfield(L, -2, "mgjit");
  lua_pushcfunction(L, open_mgargs);
  lua_setfield(L, -2, "mgargs");
  lua_pushcfunction(L, open_mgjson);
  lua_setfield(L, -2, "mgjson");
  lua_pushcfunction(L, open_mgonnx);
  lua_setfield(L, -2, "mgonnx");
  lua_pop(L, 1);
  open_stdlib(L);
  load_repl_module(L);
  return 0;
}

constexpr const char* kTracebackKey = "moongrad.traceback";

// Message handler: turns the error object into a string and keeps the traceback aside.
int message_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, nullptr, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, kTracebackKey);
  lua_pushstring(L, msg);
  return 1;
}
} // namespace

void push_repl_module(lua_State* L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, kReplModuleKey) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
}

// ---------------------------------------------------------------- LuaState

LuaState::LuaState() : L_(luaL_newstate()) {
  if (!L_) throw std::runtime_error("cannot create a Lua state (out of memory)");
  lua_pushcfunction(L_, open_all);
  if (!pcall(0, 0)) {
    std::string e = error_;
    lua_close(L_);
    throw std::runtime_error("cannot set up the Lua state: " + e);
  }
  // Fresh device memory is the moment to let the collector find dropped tensors. The collector
  // runs in generational mode: a result made and dropped since the last collection is young, and
  // a minor collection, which looks at young objects only, gives its buffer back for far less than
  // a full one costs on a heap holding the standard library (0.4-0.8 ms). So when the free list
  // cannot serve a buffer, a minor collection runs first once the buffers taken since the last
  // one would cost more to fault in than it took (fresh pages: about 1 s per 8 GB). Only when that
  // frees nothing of the size either, and the memory taken fresh since the last full collection
  // passes 32 MiB (or 1/16 of all device memory, or what faulting would cost beside that
  // collection's time), does a full one run, for tensors that lived long enough to grow old: it
  // makes every survivor old, so the results alive at that moment escape the next minor ones too.
  // A loop that realizes a new tensor each time then cycles through a fixed set of buffers that
  // stay mapped (and warm) instead of faulting in new pages every time. A loop that reuses its
  // buffers (TinyJit, in-place assigns) takes no new ones and never triggers either.
  lua_gc(L_, LUA_GCGEN, 0, 0);
  struct Pace { // when one kind of collection next runs
    int64_t floor, since = 0, after = floor;
    bool due(size_t bytes) {
      since += static_cast<int64_t>(bytes);
      return since > after;
    }
    void run(lua_State* L, int what) {
      constexpr double kFaultBytesPerSecond = 8e9;
      since = 0;
      auto t0 = std::chrono::steady_clock::now();
      lua_gc(L, what, 0);
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // never above 1/16 of device memory (or the floor): one collection slowed by a busy machine
      // must not leave dropped buffers unclaimed for long
      int64_t cap = std::max(floor, global_counters().mem_used / 16);
      after = std::clamp(static_cast<int64_t>(took * kFaultBytesPerSecond), floor, cap);
    }
  };
  set_alloc_hook([L = L_, minor = Pace{int64_t(256) << 10},
                  full = Pace{int64_t(32) << 20}](size_t bytes, AllocEvent what) mutable {
    if (what == AllocEvent::fresh) {
      if (full.due(bytes)) full.run(L, LUA_GCCOLLECT);
    } else if (minor.due(bytes) && what == AllocEvent::miss) {
      // reused buffers count too: once the free list runs dry, the next miss collects at once
      // instead of faulting in that many bytes more first (memory would grow by that every cycle)
      minor.run(L, LUA_GCSTEP);
    }
  });
}

LuaState::~LuaState() {
  set_alloc_hook(nullptr);
  close_lua_devices();
  lua_close(L_);
}

void LuaState::set_args(const std::vector<std::string>& argv, int script_index) {
  lua_createtable(L_, static_cast<int>(argv.size()), script_index + 1);
  for (size_t i = 0; i < argv.size(); i++) {
    lua_pushstring(L_, argv[i].c_str());
    lua_rawseti(L_, -2, static_cast<lua_Integer>(i) - script_index);
  }
  lua_setglobal(L_, "arg");
}

bool LuaState::pcall(int nargs, int nresults) {
  int base = lua_gettop(L_) - nargs; // the function's slot
  lua_pushcfunction(L_, message_handler);
  lua_insert(L_, base);
  lua_pushnil(L_);
  lua_setfield(L_, LUA_REGISTRYINDEX, kTracebackKey);
  int status = lua_pcall(L_, nargs, nresults, base);
  lua_remove(L_, base);
  if (status == LUA_OK) return true;
  const char* m = lua_tostring(L_, -1);
  error_ = m ? m : "(error object is not a string)";
  lua_pop(L_, 1);
  lua_getfield(L_, LUA_REGISTRYINDEX, kTracebackKey);
  traceback_ = lua_isstring(L_, -1) ? lua_tostring(L_, -1) : "";
  lua_pop(L_, 1);
  return false;
}

bool LuaState::run_file(const std::string& path, const std::vector<std::string>& args) {
  // An empty path reads stdin (luaL_loadfile also skips a '#!' first line).
  if (luaL_loadfile(L_, path.empty() ? nullptr : path.c_str()) != LUA_OK) {
    error_ = lua_tostring(L_, -1);
    traceback_.clear();
    lua_pop(L_, 1);
    return false;
  }
  luaL_checkstack(L_, static_cast<int>(args.size()) + 2, "too many arguments");
  for (const auto& a : args)
    lua_pushstring(L_, a.c_str());
  return pcall(static_cast<int>(args.size()), 0);
}

bool LuaState::run_string(const std::string& code, const std::string& chunkname) {
  if (luaL_loadbuffer(L_, code.data(), code.size(), chunkname.c_str()) != LUA_OK) {
    error_ = lua_tostring(L_, -1);
    traceback_.clear();
    lua_pop(L_, 1);
    return false;
  }
  return pcall(0, 0);
}

std::optional<bool> LuaState::run_repl(const std::string& code) {
  int top = lua_gettop(L_);
  std::string ret = "return " + code;
  if (luaL_loadbuffer(L_, ret.data(), ret.size(), "=stdin") != LUA_OK) {
    lua_pop(L_, 1);
    int st = luaL_loadbuffer(L_, code.data(), code.size(), "=stdin");
    if (st != LUA_OK) {
      std::string msg = lua_tostring(L_, -1);
      lua_pop(L_, 1);
      const std::string eof = "<eof>"; // Lua's "unexpected <eof>": wait for more lines
      if (st == LUA_ERRSYNTAX && msg.size() >= eof.size() &&
          msg.compare(msg.size() - eof.size(), eof.size(), eof) == 0)
        return std::nullopt;
      error_ = msg;
      traceback_.clear();
      return false;
    }
  }
  if (!pcall(0, LUA_MULTRET)) return false;
  int n = lua_gettop(L_) - top;
  if (n > 0) { // print the results (tables as Lua source, tensors as tensors)
    push_repl_module(L_);
    lua_pushstring(L_, "print_results");
    lua_rawget(L_, -2);
    lua_remove(L_, -2);
    lua_insert(L_, top + 1);
    return pcall(n, 0);
  }
  return true;
}

} // namespace mg::lua
