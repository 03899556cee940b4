// The Lua side of moongrad: one Lua state with the engine bound into it, plus the helpers
// every bind_*.cpp shares. This is the only header that knows Lua.
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <lua.hpp>

#include "engine/shapetracker.h"
#include "engine/tensor.h"

namespace mg::lua {

// ---- bound functions
// A C++ function exposed to Lua. Its body may throw std::exception: the trampoline turns the
// exception into a Lua error "where: name: what" once the C++ handler has been left, so no
// C++ exception ever crosses Lua's C API.
struct Binding {
  const char* name; // as the user wrote the call: "Tensor.zeros", "reshape", "a + b"
  lua_CFunction fn;
};

// Pushes a closure for `b`; `nup` values on top of the stack become upvalues 2..nup+1.
void push_binding(lua_State* L, const Binding& b, int nup = 0);
// table[name] = closure for each binding, for the table at `idx`.
void set_bindings(lua_State* L, int idx, std::span<const Binding> bs);
// The name of the running binding (valid inside a Binding's fn), for error messages.
const char* current_name(lua_State* L);

// ---- argument helpers (shared by the bind_*.cpp files)
// A list of integers, either as varargs from `first` on or as one table at `first`.
std::vector<int64_t> int_list_args(lua_State* L, int first, const char* what);
// A Lua list of integers at `idx`.
std::vector<int64_t> int_list(lua_State* L, int idx, const char* what);
// Pushes a 1-based Lua list of integers (a shape).
void push_int_list(lua_State* L, const std::vector<int64_t>& v);
// Sizes that may be symbolic: integers or Variables (bind_variable.cpp), as a table or varargs.
Shape shape_list(lua_State* L, int idx, const char* what);
Shape shape_list_args(lua_State* L, int first, const char* what);
void push_shape(lua_State* L, const Shape& s); // numbers, and Variable objects for symbolic dims
// ---- Variables (bind_variable.cpp): a symbolic int, unbound or bound to a value
inline constexpr const char* kVariableMeta = "Variable";
const sint* test_sint(lua_State* L, int idx); // nullptr if not a Variable object
sint check_sint(lua_State* L, int idx, const char* what); // an integer or a Variable object
void push_sint(lua_State* L, const sint& s);              // an integer when it is one
void open_variable(lua_State* L);                         // sets global Variable
// A dtype from a string ("float32", "dtypes.float32", "float", ...).
DType check_dtype(lua_State* L, int idx);
// The highest positive integer key of the table at idx (a list's length, holes allowed).
lua_Integer max_index(lua_State* L, int idx);

// ---- Tensor userdata (bind_tensor.cpp)
inline constexpr const char* kTensorMeta = "Tensor";
Tensor* test_tensor(lua_State* L, int idx); // nullptr if not a Tensor
// Also a tensor sharded in place (x:shard_, stdlib/multi.lua): still a Tensor underneath, its
// metatable marked __tensor_underneath. For autograd, whose gradient it keeps.
Tensor* tensor_underneath(lua_State* L, int idx);
// A tensor, or the whole of a sharded one (stdlib/multi.lua's __whole: its pieces gathered onto
// one device), which then takes the sharded tensor's place at idx on the stack. nullptr otherwise.
Tensor* whole_tensor(lua_State* L, int idx);
Tensor& check_tensor(lua_State* L, int idx); // whole_tensor, else an error naming what came
void push_tensor(lua_State* L, Tensor t);
void open_tensor(lua_State* L); // sets global Tensor
// Lua-side attributes of a tensor (x.grad, x.requires_grad), kept in its user value table.
void get_attr(lua_State* L, int idx, const char* key); // pushes the value (nil if unset)
void set_attr(lua_State* L, int idx, const char* key, int value_idx);
// Sets requires_grad and keeps the tensor in the weak registry backward() searches.
void set_requires_grad(lua_State* L, int idx, bool on);
// Tensor:backward, Tensor.gradient, assign, detach (bind_autograd.cpp)
void open_autograd(lua_State* L);
int open_mgio(lua_State* L);   // require "mgio" (bind_io.cpp)
int open_mgimage(lua_State* L); // require "mgimage" (bind_image.cpp)
int open_mgjit(lua_State* L);  // require "mgjit" (bind_jit.cpp)
int open_mgargs(lua_State* L); // require "mgargs" (bind_args.cpp): keyword arguments
int open_mgjson(lua_State* L); // require "mgjson" (bind_json.cpp): JSON through nlohmann-json
int open_mgonnx(lua_State* L); // require "mgonnx" (bind_onnx.cpp): ONNX files through libonnx

// ---- UOp, ShapeTracker and ScheduleItem objects (bind_uop.cpp)
void push_uop(lua_State* L, UOpRef u);
void push_shapetracker(lua_State* L, ShapeTracker st);
void push_schedule(lua_State* L, std::vector<ScheduleItem> items); // a Lua list
// The ShapeTracker of a tensor whose graph is movement ops over a BUFFER or CONST; throws if not.
ShapeTracker tensor_st(const Tensor& t);
void open_uop(lua_State* L); // sets global ShapeTracker

// ---- devices written in Lua: Device.register, Device.bytes, Device.load_kernel (bind_device.cpp)
void open_lua_devices(lua_State* L, int device_table);
void close_lua_devices(); // before lua_close: the devices stop calling into Lua

// ---- the `show` table's C functions (bind_show.cpp)
void open_show(lua_State* L);

// ---- the Lua modules under stdlib/, compiled into the binary (see cmake/embed_lua.cmake)
struct EmbeddedModule {
  const char* name; // "show" for stdlib/show.lua
  const char* source;
  size_t size;
};
extern const EmbeddedModule kEmbeddedModules[];
extern const size_t kEmbeddedModuleCount;

// Pushes stdlib/repl.lua's module table, loaded once at start-up (a table even if the user
// has since replaced `require` or package.loaded).
void push_repl_module(lua_State* L);

// ---- the state
class LuaState {
public:
  LuaState();
  ~LuaState();
  LuaState(const LuaState&) = delete;
  LuaState& operator=(const LuaState&) = delete;

  lua_State* get() const { return L_; }
  // Sets the global `arg` table: arg[0] = script, arg[1..] = script args, arg[-k] = what came before.
  void set_args(const std::vector<std::string>& argv, int script_index);
  // Each returns false on a Lua or engine error; error() and traceback() then describe it.
  bool run_file(const std::string& path, const std::vector<std::string>& args);
  bool run_string(const std::string& code, const std::string& chunkname);
  // One REPL entry: tries "return <code>" first, prints results (repl.print_results). nullopt: the chunk is
  // incomplete (the caller reads another line); else whether it ran without error.
  std::optional<bool> run_repl(const std::string& code);
  // Calls the function under nargs arguments on the stack, as lua_pcall does, recording the
  // error and traceback on failure.
  bool pcall(int nargs, int nresults);
  const std::string& error() const { return error_; }
  const std::string& traceback() const { return traceback_; }

private:
  lua_State* L_;
  std::string error_, traceback_;
};

} // namespace mg::lua
