// Devices written in Lua: the hooks Project 7 (scripts/07_custom_backend/) builds a backend on.
//   Device.register(name, spec)  the Lua face of the engine's register_device: the engine calls
//                                spec.alloc, copyin, copyout, compile and run (below)
//   Device.bytes(n)              a block of n zeroed bytes Lua can read and write: what
//                                spec.alloc returns, and what compiled kernels run on
//   Device.load_kernel(so, fn)   a kernel function from a shared object, callable from Lua
// The engine renders a Lua device's kernels with the C renderer, the outermost loop split by
// (core, ncores) as for the CPU's threads: called with ncores = that loop's size, each call runs
// one index of it.
#include <dlfcn.h>

#include <cstring>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "backends/cpu/c_renderer.h"
#include "engine/device.h"
#include "engine/kernel_cache.h"
#include "engine/realize.h"
#include "interp/lua_state.h"

namespace mg::lua {
namespace {

constexpr const char* kBytesMeta = "ByteBuffer";
constexpr const char* kKernelMeta = "CKernel";
constexpr size_t kAlign = 64; // as the CPU device's buffers: the kernels' loads may assume it

// A ByteBuffer is one userdata: this header, then the bytes at the first 64-byte boundary.
struct BytesHeader {
  size_t size;
  size_t offset; // from the userdata's start to the bytes
};
unsigned char* bytes_data(BytesHeader* h) { return reinterpret_cast<unsigned char*>(h) + h->offset; }

BytesHeader* test_bytes(lua_State* L, int idx) {
  return static_cast<BytesHeader*>(luaL_testudata(L, idx, kBytesMeta));
}
BytesHeader* check_bytes(lua_State* L, int idx) {
  return static_cast<BytesHeader*>(luaL_checkudata(L, idx, kBytesMeta));
}

void push_bytes(lua_State* L, size_t n) {
  auto* h = static_cast<BytesHeader*>(lua_newuserdatauv(L, sizeof(BytesHeader) + kAlign + n, 0));
  auto start = reinterpret_cast<uintptr_t>(h) + sizeof(BytesHeader);
  h->size = n;
  h->offset = sizeof(BytesHeader) + (kAlign - start % kAlign) % kAlign;
  std::memset(bytes_data(h), 0, n);
  luaL_setmetatable(L, kBytesMeta);
}

// Device.bytes(n): n zeroed bytes.
int bytes_new(lua_State* L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 0 || n > (lua_Integer(1) << 36))
    throw std::invalid_argument("size must be 0 to 2^36 bytes, got " + std::to_string(n));
  push_bytes(L, static_cast<size_t>(n));
  return 1;
}

// The range [offset, offset + len) of b, or an error that names it.
void check_range(const BytesHeader* h, lua_Integer offset, lua_Integer len) {
  if (offset < 0 || len < 0 || static_cast<size_t>(offset) > h->size ||
      static_cast<size_t>(len) > h->size - static_cast<size_t>(offset))
    throw std::out_of_range("bytes " + std::to_string(offset) + " to " + std::to_string(offset + len) +
                            " are outside a ByteBuffer of " + std::to_string(h->size) + " bytes");
}

// b:read([offset [, len]]): the bytes as a Lua string (offset from 0; all of them by default).
int bytes_read(lua_State* L) {
  BytesHeader* h = check_bytes(L, 1);
  lua_Integer off = luaL_optinteger(L, 2, 0);
  lua_Integer len = luaL_optinteger(L, 3, static_cast<lua_Integer>(h->size) - off);
  check_range(h, off, len);
  lua_pushlstring(L, reinterpret_cast<const char*>(bytes_data(h)) + off, static_cast<size_t>(len));
  return 1;
}

// b:write(offset, s): s's bytes into b from offset.
int bytes_write(lua_State* L) {
  BytesHeader* h = check_bytes(L, 1);
  lua_Integer off = luaL_checkinteger(L, 2);
  size_t len;
  const char* s = luaL_checklstring(L, 3, &len);
  check_range(h, off, static_cast<lua_Integer>(len));
  std::memcpy(bytes_data(h) + off, s, len);
  return 0;
}

int bytes_len(lua_State* L) {
  lua_pushinteger(L, static_cast<lua_Integer>(check_bytes(L, 1)->size));
  return 1;
}
int bytes_tostring(lua_State* L) {
  BytesHeader* h = check_bytes(L, 1);
  lua_pushfstring(L, "ByteBuffer(%I bytes at %p)", static_cast<lua_Integer>(h->size),
                  static_cast<void*>(bytes_data(h)));
  return 1;
}

// ---------------------------------------------------------------- kernels from shared objects

using KernelFn = void (*)(void**, int, int);
struct CKernel {
  void* lib = nullptr;
  KernelFn fn = nullptr;
};

// Device.load_kernel(path, name): the function `name` of the shared object at `path`, with the C
// renderer's signature void name(void** bufs, int core, int ncores).
int kernel_load(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  const char* fn = luaL_checkstring(L, 2);
  auto* k = static_cast<CKernel*>(lua_newuserdatauv(L, sizeof(CKernel), 0));
  *k = {};
  luaL_setmetatable(L, kKernelMeta); // from here __gc closes the library, whatever happens
  k->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!k->lib) throw std::invalid_argument(std::string("cannot load ") + path + ": " + dlerror());
  k->fn = reinterpret_cast<KernelFn>(dlsym(k->lib, fn));
  if (!k->fn) throw std::invalid_argument(std::string(path) + " has no function " + fn);
  return 1;
}

int kernel_gc(lua_State* L) {
  auto* k = static_cast<CKernel*>(luaL_checkudata(L, 1, kKernelMeta));
  if (k->lib) dlclose(k->lib);
  k->lib = nullptr, k->fn = nullptr;
  return 0;
}

// k(bufs, core, ncores): runs the kernel on a list of ByteBuffers (buffer 1 is the output),
// the share `core` of its outermost loop split into `ncores`. The kernel trusts the buffers to
// be as large as the engine made them.
int kernel_call(lua_State* L) {
  auto* k = static_cast<CKernel*>(luaL_checkudata(L, 1, kKernelMeta));
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer core = luaL_checkinteger(L, 3), ncores = luaL_checkinteger(L, 4);
  if (!k->fn) throw std::logic_error("the kernel's library is closed");
  if (ncores < 1 || core < 0 || core >= ncores || ncores > INT32_MAX)
    throw std::invalid_argument("core must be 0 to ncores - 1, got core " + std::to_string(core) + " of " +
                                std::to_string(ncores));
  std::vector<void*> ptrs;
  for (lua_Integer i = 1, n = max_index(L, 2); i <= n; i++) {
    lua_rawgeti(L, 2, i);
    BytesHeader* h = test_bytes(L, -1);
    if (!h)
      throw std::invalid_argument("buffer " + std::to_string(i) + " is not a ByteBuffer (Device.bytes)");
    ptrs.push_back(bytes_data(h));
    lua_pop(L, 1);
  }
  k->fn(ptrs.data(), static_cast<int>(core), static_cast<int>(ncores));
  return 0;
}

// ---------------------------------------------------------------- the device

class LuaDevice;
std::vector<LuaDevice*>& lua_devices() {
  static std::vector<LuaDevice*> v;
  return v;
}

// Calls into Lua run on a thread of their own (anchored in the registry), so that the engine can
// call the device from inside any binding without disturbing that binding's stack.
class LuaDevice : public Device {
public:
  LuaDevice(std::string name, lua_State* L, int spec_idx)
      : name_(std::move(name)), owner_(std::this_thread::get_id()) {
    T_ = lua_newthread(L);
    thread_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    set_spec(L, spec_idx);
    lua_devices().push_back(this);
  }
  ~LuaDevice() override { std::erase(lua_devices(), this); } // the Lua state may be gone: no unref
  void set_spec(lua_State* L, int idx) {
    lua_pushvalue(L, idx);
    if (spec_ref_ != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, spec_ref_);
    spec_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  void close() { closed_ = true; }

  std::string name() const override { return name_; }
  std::string unavailable() const override {
    return closed_ ? "the Lua state that registered it is closed" : "";
  }
  int compile_count() const override { return compiles_; }

  void* alloc(size_t bytes) override {
    Stack st(T_);
    push_fn("alloc");
    lua_pushinteger(T_, static_cast<lua_Integer>(bytes));
    call("alloc", 1, 1);
    BytesHeader* h = test_bytes(T_, -1);
    if (!h || h->size < bytes)
      throw std::runtime_error(name_ +
                               ".alloc must return Device.bytes(n) with n >= " + std::to_string(bytes));
    void* p = bytes_data(h);
    if (refs_.count(p)) throw std::runtime_error(name_ + ".alloc returned a buffer that is still in use");
    refs_[p] = luaL_ref(T_, LUA_REGISTRYINDEX);
    return p;
  }
  // The engine keeps dropped buffers for reuse (its free list) and seldom frees one; when it does,
  // the collector may take the bytes.
  void free(void* p, size_t) override {
    auto it = refs_.find(p);
    if (closed_ || it == refs_.end()) return;
    luaL_unref(T_, LUA_REGISTRYINDEX, it->second);
    refs_.erase(it);
  }
  void copyin(void* dst, const void* src, size_t bytes) override {
    Stack st(T_);
    push_fn("copyin");
    push_buffer(dst);
    lua_pushlstring(T_, static_cast<const char*>(src), bytes);
    call("copyin", 2, 0);
  }
  void copyout(void* dst, const void* src, size_t bytes) override {
    Stack st(T_);
    push_fn("copyout");
    push_buffer(const_cast<void*>(src));
    lua_pushinteger(T_, static_cast<lua_Integer>(bytes));
    call("copyout", 2, 1);
    size_t len = 0;
    const char* s = lua_type(T_, -1) == LUA_TSTRING ? lua_tolstring(T_, -1, &len) : nullptr;
    if (!s || len < bytes)
      throw std::runtime_error(name_ + ".copyout must return a string of " + std::to_string(bytes) +
                               " bytes");
    std::memcpy(dst, s, bytes);
  }
  std::string render(const std::string& fn, const std::vector<UOpRef>& linear, bool) override {
    return render_c(fn, linear, true); // always split: the runner calls it once per index
  }
  std::unique_ptr<Program> compile(const std::string& fn, const std::string& src) override;

  // Runs spec.run(program, bufs, launch).
  void run(int program_ref, void** bufs, size_t n, const Launch& launch) {
    Stack st(T_);
    push_fn("run");
    lua_rawgeti(T_, LUA_REGISTRYINDEX, program_ref);
    lua_createtable(T_, static_cast<int>(n), 0);
    for (size_t i = 0; i < n; i++) {
      push_buffer(bufs[i]);
      lua_rawseti(T_, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_createtable(T_, 0, 2);
    push_shape(T_, launch.global_size);
    lua_setfield(T_, -2, "global_size");
    push_shape(T_, launch.local_size);
    lua_setfield(T_, -2, "local_size");
    call("run", 3, 0);
  }
  void unref(int ref) {
    if (!closed_) luaL_unref(T_, LUA_REGISTRYINDEX, ref);
  }

private:
  void live() const {
    if (closed_) throw std::runtime_error("device " + name_ + ": the Lua state that registered it is closed");
    if (std::this_thread::get_id() != owner_)
      throw std::runtime_error("device " + name_ + " is written in Lua and runs on the Lua thread only");
  }
  // Each operation leaves the callback thread's stack as it found it: a callback that reaches
  // this device again (printing a tensor on it) must not lose the outer call's values.
  struct Stack {
    lua_State* T;
    int top;
    explicit Stack(lua_State* t) : T(t), top(lua_gettop(t)) {}
    ~Stack() { lua_settop(T, top); }
  };
  void push_fn(const char* f) {
    live();
    luaL_checkstack(T_, 8, "Lua device");
    lua_rawgeti(T_, LUA_REGISTRYINDEX, spec_ref_);
    lua_pushstring(T_, f);
    lua_rawget(T_, -2); // no metamethods: nothing runs outside a pcall
    lua_remove(T_, -2);
    if (!lua_isfunction(T_, -1)) throw std::runtime_error("device " + name_ + " has no function " + f);
  }
  void push_buffer(void* p) {
    auto it = refs_.find(p);
    if (it == refs_.end()) throw std::logic_error("device " + name_ + " did not allocate this buffer");
    lua_rawgeti(T_, LUA_REGISTRYINDEX, it->second);
  }
  // An error in the Lua function becomes an exception naming the device and the function.
  void call(const char* f, int nargs, int nres) {
    if (lua_pcall(T_, nargs, nres, 0) != LUA_OK) {
      std::string e = lua_tostring(T_, -1) ? lua_tostring(T_, -1) : "(an error that is not a string)";
      throw std::runtime_error(name_ + "." + f + ": " + e);
    }
  }

  std::string name_;
  std::thread::id owner_;
  lua_State* T_ = nullptr;
  int thread_ref_ = LUA_NOREF, spec_ref_ = LUA_NOREF;
  std::unordered_map<void*, int> refs_; // buffer -> registry ref of its ByteBuffer
  int compiles_ = 0;
  bool closed_ = false;
};

// What spec.compile returned, kept alive in the registry until the engine drops the program.
class LuaProgram : public Program {
public:
  LuaProgram(LuaDevice& d, int ref) : d_(d), ref_(ref) {}
  ~LuaProgram() override { d_.unref(ref_); }
  void run(void** bufs, size_t n, const Launch& launch) override { d_.run(ref_, bufs, n, launch); }

private:
  LuaDevice& d_;
  int ref_;
};

std::unique_ptr<Program> LuaDevice::compile(const std::string& fn, const std::string& src) {
  Stack st(T_);
  push_fn("compile");
  lua_pushlstring(T_, fn.data(), fn.size());
  lua_pushlstring(T_, src.data(), src.size());
  call("compile", 2, 1);
  compiles_++;
  return std::make_unique<LuaProgram>(*this, luaL_ref(T_, LUA_REGISTRYINDEX));
}

// Device.register(name, {alloc=, copyin=, copyout=, compile=, run=}): a device whose every
// operation is a Lua function. Registering a Lua device's name again replaces its functions and
// forgets the kernels compiled by the old ones (buffers already allocated stay).
int device_register(lua_State* L) {
  std::string name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos)
    throw std::invalid_argument("a device name is upper-case letters, digits and _, got '" + name + "'");
  std::string missing;
  for (const char* f : {"alloc", "copyin", "copyout", "compile", "run"}) {
    lua_getfield(L, 2, f);
    if (!lua_isfunction(L, -1)) missing += std::string(missing.empty() ? "" : ", ") + f;
    lua_pop(L, 1);
  }
  if (!missing.empty()) throw std::invalid_argument("the device table needs the functions: " + missing);
  for (LuaDevice* d : lua_devices())
    if (d->name() == name) {
      d->set_spec(L, 2);
      drop_compiled(name);
      return 0;
    }
  for (auto& n : device_names())
    if (n == name) throw std::invalid_argument("device " + name + " is built in: register another name");
  // made here, while L and the table are at hand; the engine's registry takes it over at once
  auto made = std::make_shared<std::unique_ptr<Device>>(std::make_unique<LuaDevice>(name, L, 2));
  register_device(name, [made]() -> std::unique_ptr<Device> {
    if (!*made) throw std::logic_error("a Lua device is made once");
    return std::move(*made);
  });
  get_device(name);
  return 0;
}

const Binding kDeviceFns[] = {
    {"Device.register", device_register}, {"Device.bytes", bytes_new}, {"Device.load_kernel", kernel_load}};
const Binding kBytesMethods[] = {{"ByteBuffer:read", bytes_read}, {"ByteBuffer:write", bytes_write}};
const Binding kBytesLen{"#ByteBuffer", bytes_len};
const Binding kBytesTostring{"tostring(ByteBuffer)", bytes_tostring};
const Binding kKernelCall{"CKernel()", kernel_call};

} // namespace

void close_lua_devices() {
  for (LuaDevice* d : lua_devices())
    d->close();
}

void open_lua_devices(lua_State* L, int device_table) {
  device_table = lua_absindex(L, device_table);
  set_bindings(L, device_table, kDeviceFns);
  luaL_newmetatable(L, kBytesMeta);
  lua_newtable(L);
  set_bindings(L, -1, kBytesMethods);
  lua_setfield(L, -2, "__index");
  push_binding(L, kBytesLen);
  lua_setfield(L, -2, "__len");
  push_binding(L, kBytesTostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, kKernelMeta);
  lua_pushcfunction(L, kernel_gc);
  lua_setfield(L, -2, "__gc");
  push_binding(L, kKernelCall);
  lua_setfield(L, -2, "__call");
  lua_pushstring(L, "locked"); // calling __gc by hand would close the library under a live kernel
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

} // namespace mg::lua
