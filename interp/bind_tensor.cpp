// The Tensor userdata: constructors, properties, operators and methods, bound to mg::Tensor.
// Axes and tensor indices are 0-based (as in tinygrad); plain Lua lists stay 1-based.
#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <string>

#include "engine/device.h"
#include "engine/errors.h"
#include "engine/realize.h"
#include "engine/rng.h"
#include "engine/schedule.h"
#include "interp/host_memory.h"
#include "interp/lua_state.h"

namespace mg::lua {

Tensor* test_tensor(lua_State* L, int idx) {
  auto* t = static_cast<Tensor*>(luaL_testudata(L, idx, kTensorMeta));
  return t && t->uop ? t : nullptr; // a collected tensor (see t_gc) is no tensor
}

Tensor* tensor_underneath(lua_State* L, int idx) {
  if (Tensor* t = test_tensor(L, idx)) return t;
  if (lua_type(L, idx) != LUA_TUSERDATA || luaL_getmetafield(L, idx, "__tensor_underneath") == LUA_TNIL)
    return nullptr;
  lua_pop(L, 1);
  auto* t = static_cast<Tensor*>(lua_touserdata(L, idx));
  return t->uop ? t : nullptr;
}

Tensor* whole_tensor(lua_State* L, int idx) {
  if (Tensor* t = test_tensor(L, idx)) return t;
  idx = lua_absindex(L, idx);
  int ty = lua_type(L, idx);
  if ((ty != LUA_TTABLE && ty != LUA_TUSERDATA) || luaL_getmetafield(L, idx, "__whole") == LUA_TNIL)
    return nullptr;
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  lua_replace(L, idx);
  return test_tensor(L, idx);
}

Tensor& check_tensor(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  if (Tensor* t = whole_tensor(L, idx)) return *t;
  auto* t = static_cast<Tensor*>(luaL_checkudata(L, idx, kTensorMeta));
  if (!t->uop) luaL_error(L, "Tensor: this tensor was garbage-collected");
  return *t;
}

void push_tensor(lua_State* L, Tensor t) {
  // user value 1: a table of the Lua-side attributes (grad, requires_grad), made on first use
  void* p = lua_newuserdatauv(L, sizeof(Tensor), 1);
  new (p) Tensor(std::move(t));
  luaL_setmetatable(L, kTensorMeta);
}

namespace {

// ---------------------------------------------------------------- Lua values -> tensors

// The dtype argument of a constructor: nil or a dtype name. Keyword tables and the device are
// handled before these bindings are reached (stdlib/tensor_create.lua wraps them).
std::optional<DType> opt_dtype(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  return check_dtype(L, idx);
}

// What the scalars in a nested table were, for tinygrad's dtype inference.
struct Collected {
  Shape shape;
  std::vector<double> vals;
  std::vector<int64_t> ints; // the same entries exactly, where they are integers or booleans
  bool any_float = false, any_int = false, any_bool = false;
};

constexpr size_t kMaxDims = 32;

// Number of entries of a proper list (keys exactly 1..n); errors on holes and other keys.
lua_Integer list_len(lua_State* L, int idx, const std::string& path) {
  lua_Integer n = 0, maxk = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
      luaL_error(L, "Tensor: %s is not a list (it has the key %s)", path.c_str(),
                 luaL_tolstring(L, -1, nullptr));
    maxk = std::max(maxk, lua_tointeger(L, -1));
    n++;
  }
  if (maxk != n) luaL_error(L, "Tensor: %s has holes (nil entries); tensors need full lists", path.c_str());
  return n;
}

// The shape, read down the first entries: {{1,2,3},{4,5,6}} -> (2, 3).
Shape first_shape(lua_State* L, int idx) {
  Shape shape;
  lua_pushvalue(L, idx);
  std::string path = "t";
  while (lua_type(L, -1) == LUA_TTABLE) {
    if (shape.size() == kMaxDims) luaL_error(L, "Tensor: table nested more than %d deep", (int)kMaxDims);
    lua_Integer n = list_len(L, lua_gettop(L), path);
    shape.push_back(n);
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
    path += "[1]";
  }
  lua_pop(L, 1);
  return shape;
}

void collect(lua_State* L, int idx, size_t depth, const std::string& path, Collected& c) {
  if (depth == c.shape.size()) {
    if (lua_isinteger(L, idx))
      c.any_int = true;
    else if (lua_type(L, idx) == LUA_TNUMBER)
      c.any_float = true;
    else if (lua_isboolean(L, idx))
      c.any_bool = true;
    else if (lua_type(L, idx) == LUA_TTABLE)
      luaL_error(L,
                 "Tensor: ragged nested table: %s is a table, but the first entry at that depth is a number",
                 path.c_str());
    else
      luaL_error(L, "Tensor: %s is a %s; entries must be numbers or booleans", path.c_str(),
                 luaL_typename(L, idx));
    c.vals.push_back(lua_isboolean(L, idx) ? (lua_toboolean(L, idx) ? 1.0 : 0.0) : lua_tonumber(L, idx));
    c.ints.push_back(lua_isboolean(L, idx)   ? lua_toboolean(L, idx)
                     : lua_isinteger(L, idx) ? lua_tointeger(L, idx)
                                             : 0);
    return;
  }
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "Tensor: ragged nested table: %s is a %s, expected a list of %d (like the first entry)",
               path.c_str(), luaL_typename(L, idx), (int)c.shape[depth]);
  lua_Integer n = list_len(L, idx, path);
  if (n != c.shape[depth])
    luaL_error(L, "Tensor: ragged nested table: %s has %d entries, expected %d (like the first entry)",
               path.c_str(), (int)n, (int)c.shape[depth]);
  luaL_checkstack(L, 2, "nested table");
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    collect(L, lua_gettop(L), depth + 1, path + "[" + std::to_string(i) + "]", c);
    lua_pop(L, 1);
  }
}

// A tensor from a number, boolean or nested table; ints -> int32, floats -> float32, booleans -> bool.
Tensor tensor_from_value(lua_State* L, int idx, std::optional<DType> dtype) {
  idx = lua_absindex(L, idx);
  Collected c;
  if (lua_type(L, idx) == LUA_TTABLE) c.shape = first_shape(L, idx);
  collect(L, idx, 0, "t", c);
  DType dt = dtype         ? *dtype
             : c.any_float ? DType::Float32
             : c.any_int   ? DType::Int32
             : c.any_bool  ? DType::Bool
                           : default_float; // an empty list, as tinygrad's Tensor([])
  // integers exactly when every entry is one (a double holds 53 bits, an int64 64)
  if (is_int(dt) && !c.any_float) return Tensor::from_ints(c.ints, c.shape, dt);
  return Tensor::from_data(c.vals, c.shape, dt);
}

// A binary op's other side: a Tensor, a Lua number/boolean (dtype from `like`) or a nested table.
Tensor operand(lua_State* L, int idx, const Tensor& like) {
  if (Tensor* t = whole_tensor(L, idx)) return *t;
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    return Tensor::from_scalar(
        Scalar{lua_tonumber(L, idx), lua_isinteger(L, idx) ? DType::Int32 : DType::Float32}, like);
  case LUA_TBOOLEAN:
    return Tensor::from_scalar(Scalar{lua_toboolean(L, idx) ? 1.0 : 0.0, DType::Bool}, like);
  case LUA_TTABLE:
    return tensor_from_value(L, idx, std::nullopt);
  default:
    luaL_error(L, "%s: expected a Tensor or a number, got %s", current_name(L), luaL_typename(L, idx));
    return like; // not reached
  }
}

// ---------------------------------------------------------------- constructors

int tensor_call(lua_State* L) { // Tensor(data [, dtype]); arg 1 is the Tensor table
  std::optional<DType> dtype = opt_dtype(L, 3);
  if (Tensor* t = whole_tensor(L, 2)) {
    push_tensor(L, dtype ? t->cast(*dtype) : *t);
    return 1;
  }
  int ty = lua_type(L, 2);
  if (ty != LUA_TNUMBER && ty != LUA_TBOOLEAN && ty != LUA_TTABLE)
    luaL_error(L, "Tensor: cannot make a Tensor from a %s (use a number, boolean or nested table)",
               luaL_typename(L, 2));
  push_tensor(L, tensor_from_value(L, 2, dtype));
  return 1;
}

// zeros({2,3} [, dtype])
template <Tensor (*F)(const Shape&, DType)> int make_shaped(lua_State* L) {
  push_tensor(L, F(shape_list(L, 1, current_name(L)), opt_dtype(L, 2).value_or(default_float)));
  return 1;
}

Tensor empty_fn(const Shape& s, DType d) { return Tensor::empty(s, d); }

Shape shape_arg(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TTABLE) return shape_list(L, idx, current_name(L));
  return {luaL_checkinteger(L, idx)};
}

// The dtype a Lua scalar implies: integer -> int32, float -> float32, boolean -> bool.
DType scalar_dtype(lua_State* L, int idx) {
  if (lua_isboolean(L, idx)) return DType::Bool;
  luaL_checknumber(L, idx);
  return lua_isinteger(L, idx) ? default_int : default_float;
}

int t_full(lua_State* L) {
  Shape shape = shape_arg(L, 1);
  double v = lua_isboolean(L, 2) ? lua_toboolean(L, 2) : luaL_checknumber(L, 2);
  push_tensor(L, Tensor::full(shape, v, opt_dtype(L, 3).value_or(scalar_dtype(L, 2))));
  return 1;
}

int t_arange(lua_State* L) {
  int top = lua_gettop(L);
  std::optional<DType> dtype;
  if (top >= 1 && lua_type(L, top) == LUA_TSTRING) dtype = opt_dtype(L, top--);
  if (top < 1 || top > 3)
    luaL_error(L, "Tensor.arange: expected arange(stop) or arange(start, stop [, step])");
  bool all_int = true;
  double v[3] = {0, 0, 1};
  for (int i = 1; i <= top; i++) {
    v[i - 1] = luaL_checknumber(L, i);
    all_int &= lua_isinteger(L, i) != 0;
  }
  if (top == 1) std::swap(v[0], v[1]); // arange(stop) counts from 0
  if (v[2] == 0) luaL_error(L, "Tensor.arange: step must not be 0");
  DType dt = dtype.value_or(all_int ? default_int : default_float);
  push_tensor(L, Tensor::arange(v[0], v[1], v[2], dt));
  return 1;
}

int t_eye(lua_State* L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  push_tensor(L, Tensor::eye(n, opt_dtype(L, 2).value_or(default_float)));
  return 1;
}

int t_manual_seed(lua_State* L) {
  Tensor::manual_seed(static_cast<uint64_t>(luaL_checkinteger(L, 1)));
  return 0;
}

// Tensor.get_rng_state() -> seed, counter; Tensor.set_rng_state(seed, counter): the random
// generator's whole state, for checkpoints (as torch.get_rng_state).
int t_get_rng_state(lua_State* L) {
  RngState s = rng_state();
  lua_pushinteger(L, static_cast<lua_Integer>(s.seed));
  lua_pushinteger(L, static_cast<lua_Integer>(s.counter));
  return 2;
}
int t_set_rng_state(lua_State* L) {
  set_rng_state(
      {static_cast<uint64_t>(luaL_checkinteger(L, 1)), static_cast<uint64_t>(luaL_checkinteger(L, 2))});
  return 0;
}

int t_realize_all(lua_State* L) {
  std::vector<Tensor*> ts;
  int top = lua_gettop(L);
  if (top == 1 && lua_type(L, 1) == LUA_TTABLE) { // realize_all{a, b}: unpack the list
    lua_Integer n = max_index(L, 1);
    luaL_checkstack(L, static_cast<int>(std::min<lua_Integer>(n, 1000000)),
                    "Tensor.realize_all: too many tensors");
    for (lua_Integer i = 1; i <= n; i++)
      lua_rawgeti(L, 1, i);
  }
  for (int i = (top == 1 && lua_type(L, 1) == LUA_TTABLE) ? 2 : 1; i <= lua_gettop(L); i++)
    ts.push_back(&check_tensor(L, i)); // the userdata stay on the stack, so the pointers stay valid
  Tensor::realize_all(ts);
  return 0;
}

// ---------------------------------------------------------------- operators and elementwise

// A value with a metafield __tensor_binop on either side (a sharded tensor, stdlib/multi.lua: a
// table, or a tensor sharded in place by shard_) takes the operator: __tensor_binop(name, a, b),
// name as the binding reports it ("Tensor +").
bool defer_binop(lua_State* L) {
  for (int i : {1, 2}) {
    int t = lua_type(L, i);
    if ((t != LUA_TTABLE && t != LUA_TUSERDATA) || luaL_getmetafield(L, i, "__tensor_binop") == LUA_TNIL)
      continue;
    lua_pushstring(L, current_name(L));
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 3, 1);
    return true;
  }
  return false;
}

template <Tensor (Tensor::*M)(const Tensor&) const> int binop(lua_State* L) {
  if (defer_binop(L)) return 1;
  if (Tensor* a = test_tensor(L, 1)) {
    Tensor b = operand(L, 2, *a);
    push_tensor(L, (a->*M)(b));
  } else if (Tensor* b = test_tensor(L, 2)) { // 2 - x: the number is on the left
    Tensor a = operand(L, 1, *b);
    push_tensor(L, (a.*M)(*b));
  } else {
    luaL_error(L, "%s: expected a Tensor, got %s and %s", current_name(L), luaL_typename(L, 1),
               luaL_typename(L, 2));
  }
  return 1;
}

template <Tensor (Tensor::*M)() const> int unop(lua_State* L) {
  push_tensor(L, (check_tensor(L, 1).*M)());
  return 1;
}

int t_where(lua_State* L) { // cond:where(a, b); a and b may be numbers
  Tensor& cond = check_tensor(L, 1);
  Tensor *a = test_tensor(L, 2), *b = test_tensor(L, 3);
  if (!a && !b) { // both scalars: their own dtype, as tinygrad's Tensor.where(cond, 1, 0.5)
    DType da = scalar_dtype(L, 2), db = scalar_dtype(L, 3);
    DType d = promote(da, db);
    auto num = [&](int i) {
      return lua_isboolean(L, i) ? (lua_toboolean(L, i) ? 1.0 : 0.0) : lua_tonumber(L, i);
    };
    push_tensor(L, cond.where(Tensor::full({}, num(2), d), Tensor::full({}, num(3), d)));
    return 1;
  }
  Tensor ta = a ? *a : operand(L, 2, *b);
  Tensor tb = b ? *b : operand(L, 3, *a);
  push_tensor(L, cond.where(ta, tb));
  return 1;
}

// Tensor._alu(op, a [, b [, c]]): one primitive elementwise op (any op of engine/ops.h's unary,
// binary or ternary groups, by name) on broadcast, promoted operands, for the methods composed
// in Lua (mod, trunc, the bitwise ops and shifts), as tinygrad's _apply_broadcasted_uop.
int t_alu(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  std::optional<Ops> op;
  for (int o = 0; o < num_ops; o++)
    if (is_elementwise(static_cast<Ops>(o)) && std::strcmp(mg::name(static_cast<Ops>(o)), name) == 0)
      op = static_cast<Ops>(o);
  if (!op || info(*op).result == ResultDType::Given) luaL_error(L, "Tensor._alu: unknown op '%s'", name);
  int arity = info(*op).arity;
  if (arity == 1) {
    push_tensor(L, Tensor(alu(*op, {check_tensor(L, 2).uop})));
    return 1;
  }
  if (arity != 2) luaL_error(L, "Tensor._alu: %s takes %d operands", name, arity);
  Tensor* ta = test_tensor(L, 2);
  Tensor* tb = test_tensor(L, 3);
  if (!ta && !tb) luaL_error(L, "Tensor._alu: expected a Tensor");
  Tensor a = ta ? *ta : operand(L, 2, *tb);
  Tensor b = tb ? *tb : operand(L, 3, *ta);
  auto [x, y] = broadcasted(a, b);
  bool bitwise = *op == Ops::AND || *op == Ops::OR || *op == Ops::XOR || *op == Ops::SHL || *op == Ops::SHR;
  if (bitwise && !is_int(x.dtype()) && x.dtype() != DType::Bool)
    luaL_error(L, "%s needs int or bool tensors, got %s", name, mg::name(x.dtype()));
  push_tensor(L, Tensor(alu(*op, {x.uop, y.uop})));
  return 1;
}

// Tensor._broadcasted(a, b): both operands at one shape and dtype (numbers take tinygrad's rule).
int t_broadcasted(lua_State* L) {
  Tensor* ta = test_tensor(L, 1);
  Tensor* tb = test_tensor(L, 2);
  if (!ta && !tb) luaL_error(L, "Tensor._broadcasted: expected a Tensor");
  auto [x, y] = broadcasted(ta ? *ta : operand(L, 1, *tb), tb ? *tb : operand(L, 2, *ta));
  push_tensor(L, x);
  push_tensor(L, y);
  return 2;
}

int t_bitcast(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  DType d = check_dtype(L, 2);
  if (itemsize(d) != itemsize(x.dtype()))
    luaL_error(L, "bitcast: %s and %s differ in size", mg::name(x.dtype()), mg::name(d));
  push_tensor(L, d == x.dtype() ? x : Tensor(UOp::make(Ops::BITCAST, d, {x.uop})));
  return 1;
}

int t_cast(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.cast(check_dtype(L, 2)));
  return 1;
}

// ---------------------------------------------------------------- reductions

Axes read_axes(lua_State* L, int idx) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  if (lua_type(L, idx) == LUA_TTABLE) return int_list(L, idx, current_name(L));
  int ok = 0;
  lua_Integer a = lua_tointegerx(L, idx, &ok);
  if (!ok)
    luaL_error(L, "%s: axis must be an integer or a list of integers, got %s", current_name(L),
               luaL_typename(L, idx));
  return std::vector<int64_t>{a};
}

std::optional<int64_t> opt_int(lua_State* L, int idx, const char* what) {
  if (lua_isnoneornil(L, idx)) return std::nullopt;
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok) luaL_error(L, "%s: %s must be an integer, got %s", current_name(L), what, luaL_typename(L, idx));
  return v;
}

// x:sum(), x:sum(0), x:sum({0,1}), x:sum(0, true), x:sum{axis=0, keepdim=true}
template <Tensor (Tensor::*M)(Axes, bool) const> int reduce(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, (x.*M)(read_axes(L, 2), lua_toboolean(L, 3)));
  return 1;
}

int t_argmax(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.argmax(opt_int(L, 2, "axis"), lua_toboolean(L, 3)));
  return 1;
}

int t_cumsum(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.cumsum(opt_int(L, 2, "axis").value_or(0)));
  return 1;
}

template <Tensor (Tensor::*M)(int64_t) const> int axis_op(lua_State* L) { // softmax, log_softmax
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, (x.*M)(opt_int(L, 2, "axis").value_or(-1)));
  return 1;
}

// ---------------------------------------------------------------- movement

template <Tensor (Tensor::*M)(const std::vector<int64_t>&) const> int list_op(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, (x.*M)(int_list_args(L, 2, current_name(L))));
  return 1;
}
template <Tensor (Tensor::*M)(const Shape&) const> int shape_op(lua_State* L) { // sizes may be Variables
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, (x.*M)(shape_list_args(L, 2, current_name(L))));
  return 1;
}

int t_transpose(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.transpose(opt_int(L, 2, "dim0").value_or(1), opt_int(L, 3, "dim1").value_or(0)));
  return 1;
}

// One {a, b} pair per dim; nil (or a missing entry) gives `dflt(i)`.
template <class D>
std::vector<std::pair<sint, sint>> read_pairs(lua_State* L, int idx, const Tensor& x, D dflt) {
  const char* fname = current_name(L);
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Integer n = max_index(L, idx);
  if (n > x.ndim())
    luaL_error(L, "%s: %d pairs given for a tensor of shape %s", fname, (int)n, shape_str(x.shape()).c_str());
  std::vector<std::pair<sint, sint>> out;
  for (lua_Integer i = 1; i <= x.ndim(); i++) {
    lua_rawgeti(L, idx, i);
    if (lua_isnil(L, -1)) {
      out.push_back(dflt(i - 1));
    } else {
      auto p = lua_type(L, -1) == LUA_TTABLE ? shape_list(L, lua_gettop(L), fname) : Shape{};
      if (p.size() != 2) luaL_error(L, "%s: entry %d must be a pair {a, b}", fname, (int)i);
      out.push_back({p[0], p[1]});
    }
    lua_pop(L, 1);
  }
  return out;
}

int t_pad(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  auto p = read_pairs(L, 2, x, [](int64_t) { return std::pair<sint, sint>{0, 0}; });
  push_tensor(L, x.pad(int_pairs(p), luaL_optnumber(L, 3, 0)));
  return 1;
}

int t_shrink(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  auto p = read_pairs(L, 2, x, [&](int64_t i) { return std::pair<sint, sint>{0, x.shape()[i]}; });
  push_tensor(L, x.shrink(p));
  return 1;
}

int t_squeeze(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.squeeze(opt_int(L, 2, "axis")));
  return 1;
}

int t_unsqueeze(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.unsqueeze(luaL_checkinteger(L, 2)));
  return 1;
}

int t_flatten(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  push_tensor(L, x.flatten(opt_int(L, 2, "start").value_or(0), opt_int(L, 3, "end").value_or(-1)));
  return 1;
}

// One index entry: an integer, or {start, stop, step} with nil for defaults; nil is a full slice.
Slice read_slice(lua_State* L, int idx, int pos) {
  Slice s;
  const char* fname = current_name(L);
  if (lua_isnil(L, idx)) return s;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    int ok = 0;
    s.index = lua_tointegerx(L, idx, &ok);
    if (!ok) luaL_error(L, "%s: index %d is not an integer", fname, pos);
    s.is_index = true;
    return s;
  }
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "%s: index %d is a %s; use an integer or {start, stop, step}", fname, pos,
               luaL_typename(L, idx));
  if (max_index(L, idx) > 3)
    luaL_error(L, "%s: slice %d has more than 3 entries {start, stop, step}", fname, pos);
  std::optional<int64_t>* parts[] = {&s.start, &s.stop, &s.step};
  for (int i = 0; i < 3; i++) { // read t[1], t[2], t[3] one by one: {nil, nil, 2} has holes
    lua_rawgeti(L, idx, i + 1);
    if (!lua_isnil(L, -1)) {
      int ok = 0;
      *parts[i] = lua_tointegerx(L, -1, &ok);
      if (!ok) luaL_error(L, "%s: slice %d entry %d is not an integer", fname, pos, i + 1);
    }
    lua_pop(L, 1);
  }
  if (s.step && *s.step == 0) luaL_error(L, "%s: slice %d has step 0", fname, pos);
  return s;
}

// a[0], a[{1, {0, 2}}]: a number is one index, a table lists one entry per dim.
std::vector<Slice> read_index(lua_State* L, int idx) {
  std::vector<Slice> out;
  if (lua_type(L, idx) != LUA_TTABLE) {
    out.push_back(read_slice(L, idx, 1));
    return out;
  }
  lua_Integer n = max_index(L, idx);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    out.push_back(read_slice(L, lua_gettop(L), static_cast<int>(i)));
    lua_pop(L, 1);
  }
  return out;
}

int t_slice(lua_State* L) { // x:slice{...} or x:slice(e1, e2, ...)
  Tensor& x = check_tensor(L, 1);
  std::vector<Slice> idx;
  if (lua_gettop(L) == 2)
    idx = read_index(L, 2);
  else
    for (int i = 2; i <= lua_gettop(L); i++)
      idx.push_back(read_slice(L, i, i - 1));
  push_tensor(L, x.slice(idx));
  return 1;
}

// ---------------------------------------------------------------- running and reading back

int t_contiguous(lua_State* L) {
  push_tensor(L, check_tensor(L, 1).contiguous());
  return 1;
}

// x:_copy(device): x on device as a COPY in the graph (Tensor::copy_to), where both devices hold
// host memory; else nil (Tensor:to copies through host memory then)
int t_copy(lua_State* L) {
  const Tensor& x = check_tensor(L, 1);
  std::optional<Tensor> y = x.copy_to(luaL_checkstring(L, 2));
  if (y && y->uop->op == Ops::COPY)
    push_tensor(L, *y);
  else
    lua_pushnil(L);
  return 1;
}

int t_realize(lua_State* L) {
  check_tensor(L, 1).realize();
  lua_settop(L, 1);
  return 1;
}

// A float element as a Lua number.
void push_element(lua_State* L, double v, DType) { lua_pushnumber(L, v); }

// An integer element exactly; a uint64 past 2^63 (no Lua integer holds it) as a float.
void push_element(lua_State* L, int64_t v, DType dt) {
  if (dt == DType::Bool)
    lua_pushboolean(L, v != 0);
  else if (dt == DType::UInt64 && v < 0)
    lua_pushnumber(L, static_cast<lua_Number>(static_cast<uint64_t>(v)));
  else
    lua_pushinteger(L, v);
}

template <class T> void push_nested(lua_State* L, const T*& p, const Shape& shape, size_t dim, DType dt) {
  if (dim == shape.size()) {
    push_element(L, *p++, dt);
    return;
  }
  luaL_checkstack(L, 3, "tolist");
  lua_createtable(L, static_cast<int>(shape[dim]), 0);
  for (int64_t i = 0; i < shape[dim]; i++) {
    push_nested(L, p, shape, dim + 1, dt);
    lua_rawseti(L, -2, i + 1);
  }
}

int t_tolist(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  // the nested lists exist even when there are no elements: (2^40, 0) would be 2^40 tables
  int64_t level = 1;
  for (size_t d = 0; d + 1 < x.shape().size() && level > 0; d++) {
    if (__builtin_mul_overflow(level, x.shape()[d].value(), &level) || level > (int64_t(1) << 27))
      luaL_error(L, "tolist: shape %s needs too many nested lists", shape_str(x.shape()).c_str());
  }
  if (!is_float(x.dtype())) {
    std::vector<int64_t> d = x.int_data();
    const int64_t* p = d.data();
    push_nested(L, p, x.shape(), 0, x.dtype());
    return 1;
  }
  std::vector<double> d = x.data();
  const double* p = d.data();
  push_nested(L, p, x.shape(), 0, x.dtype());
  return 1;
}

int t_item(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  if (!is_float(x.dtype())) {
    if (x.numel() != 1)
      user_error("item() needs a tensor with one element, got shape " + shape_str(x.shape()));
    push_element(L, x.int_data()[0], x.dtype());
    return 1;
  }
  push_element(L, x.item(), x.dtype());
  return 1;
}

int t_numel(lua_State* L) {
  lua_pushinteger(L, check_tensor(L, 1).numel());
  return 1;
}

// x:tobytes() -> the raw little-endian bytes, row-major
int t_tobytes(lua_State* L) {
  std::string b = check_tensor(L, 1).to_bytes();
  lua_pushlstring(L, b.data(), b.size());
  return 1;
}

// Tensor.frombytes(bytes, shape, dtype [, offset]): a tensor from raw little-endian bytes,
// starting at byte `offset` (0-based) of the string; the rest of the string must fit exactly.
int t_frombytes(lua_State* L) {
  size_t len = 0;
  const char* p = luaL_checklstring(L, 1, &len);
  Shape shape = to_shape(int_list(L, 2, "Tensor.frombytes"));
  DType dt = check_dtype(L, 3);
  lua_Integer off = luaL_optinteger(L, 4, 0);
  lua_Integer n = luaL_optinteger(L, 5, -1);
  if (off < 0 || static_cast<size_t>(off) > len)
    luaL_error(L, "Tensor.frombytes: offset %d is outside the %d bytes", (int)off, (int)len);
  size_t count = n < 0 ? len - off : static_cast<size_t>(n);
  if (off + count > len)
    luaL_error(L, "Tensor.frombytes: %d bytes from offset %d run past the %d bytes given", (int)count,
               (int)off, (int)len);
  push_tensor(L, Tensor::from_bytes(p + off, count, shape, dt));
  return 1;
}

int t_schedule(lua_State* L) {
  push_schedule(L, check_tensor(L, 1).schedule());
  return 1;
}

// x:schedule_with_vars() -> items, {start_pos = 5, ...}: the kernels keep their Variables
// symbolic; the values this realize would bind them to come separately (tinygrad's).
int t_schedule_with_vars(lua_State* L) {
  auto items = check_tensor(L, 1).schedule();
  std::map<std::string, int64_t> vals;
  for (auto& it : items)
    for (auto& [var, v] : it.var_vals)
      vals[var->var().name] = v;
  push_schedule(L, std::move(items));
  lua_createtable(L, 0, static_cast<int>(vals.size()));
  for (auto& [n, v] : vals) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, n.c_str());
  }
  return 2;
}

int t_tostring(lua_State* L) {
  std::string s = check_tensor(L, 1).to_string();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int t_gc(lua_State* L) { // no trampoline: a destructor does not throw
  // Drop the graph but leave a valid, empty Tensor: a finalized userdata can still sit in a
  // weak-keyed table (backward's registry) until the next collection, so it must stay readable.
  static_cast<Tensor*>(lua_touserdata(L, 1))->uop.reset();
  return 0;
}

// x.shape, x.dtype, ... and then methods from the Tensor table (upvalue 2), then indexing.
int t_index(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) {
    std::string k = lua_tostring(L, 2);
    if (k == "shape")
      push_shape(L, x.shape());
    else if (k == "dtype")
      lua_pushstring(L, name(x.dtype()));
    else if (k == "device")
      lua_pushstring(L, x.device().c_str());
    else if (k == "ndim")
      lua_pushinteger(L, x.ndim());
    else if (k == "T")
      push_tensor(L, x.T());
    else if (k == "uop")
      push_uop(L, x.uop);
    else if (k == "st")
      push_shapetracker(L, tensor_st(x));
    else if (k == "grad" || k == "requires_grad") {
      get_attr(L, 1, k.c_str());
      if (k == "requires_grad") lua_pushboolean(L, lua_toboolean(L, -1));
    } else {
      lua_pushvalue(L, 2);
      if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNIL)
        luaL_error(L, "Tensor has no method or property '%s'", k.c_str());
    }
    return 1;
  }
  // x[i], x[{...}], x[idx_tensor]: stdlib/tensor_shape.lua's Tensor.__getitem handles every form
  if (lua_getfield(L, lua_upvalueindex(2), "__getitem") != LUA_TFUNCTION)
    return luaL_error(L, "Tensor: indexing is not available (Tensor.__getitem is missing)");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

int t_newindex(lua_State* L) {
  Tensor& x = check_tensor(L, 1);
  const char* k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
  if (std::string(k) == "requires_grad") {
    set_requires_grad(L, 1, lua_toboolean(L, 3));
    return 0;
  }
  if (std::string(k) == "grad") {
    if (!lua_isnil(L, 3)) {
      Tensor& g = check_tensor(L, 3);
      if (g.shape() != x.shape())
        return luaL_error(L, "Tensor: grad of shape %s for a tensor of shape %s",
                          shape_str(g.shape()).c_str(), shape_str(x.shape()).c_str());
    }
    set_attr(L, 1, "grad", 3);
    return 0;
  }
  if (lua_type(L, 2) != LUA_TSTRING) { // x[...] = v: Tensor.__setitem (stdlib/tensor_shape.lua)
    if (lua_getfield(L, lua_upvalueindex(2), "__setitem") != LUA_TFUNCTION)
      return luaL_error(L, "Tensor: index assignment is not available (Tensor.__setitem is missing)");
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_call(L, 3, 0);
    return 0;
  }
  return luaL_error(L,
                    "Tensor: x.%s = v is not supported (only x.grad and x.requires_grad can be set; "
                    "x:assign(y) replaces the value, x[idx] = v writes part of it)",
                    k);
}

// Lua turns a < b into one boolean, so an elementwise compare cannot live there: point to the method.
int t_compare(lua_State* L) {
  return luaL_error(L, "Tensor: Lua's < and <= must give one boolean; use a:lt(b), a:le(b), a:gt(b), a:ge(b) "
                       "for elementwise comparison (and a:eq(b) for ==)");
}

// ---------------------------------------------------------------- tables

const Binding kStatics[] = {
    {"Tensor.zeros", make_shaped<Tensor::zeros>},
    {"Tensor.ones", make_shaped<Tensor::ones>},
    {"Tensor.empty", make_shaped<empty_fn>},
    {"Tensor.rand", make_shaped<Tensor::rand>},
    {"Tensor.randn", make_shaped<Tensor::randn>},
    {"Tensor.full", t_full},
    {"Tensor.arange", t_arange},
    {"Tensor.eye", t_eye},
    {"Tensor.manual_seed", t_manual_seed},
    {"Tensor.get_rng_state", t_get_rng_state},
    {"Tensor.set_rng_state", t_set_rng_state},
    {"Tensor.realize_all", t_realize_all},
    {"Tensor.frombytes", t_frombytes},
    {"Tensor._alu", t_alu},
    {"Tensor._broadcasted", t_broadcasted},
};

const Binding kMethods[] = {
    // elementwise
    {"Tensor:add", binop<&Tensor::add>},
    {"Tensor:sub", binop<&Tensor::sub>},
    {"Tensor:mul", binop<&Tensor::mul>},
    {"Tensor:div", binop<&Tensor::div>},
    {"Tensor:idiv", binop<&Tensor::idiv>},
    {"Tensor:pow", binop<&Tensor::pow>},
    {"Tensor:maximum", binop<&Tensor::maximum>},
    {"Tensor:minimum", binop<&Tensor::minimum>},
    {"Tensor:lt", binop<&Tensor::lt>},
    {"Tensor:le", binop<&Tensor::le>},
    {"Tensor:gt", binop<&Tensor::gt>},
    {"Tensor:ge", binop<&Tensor::ge>},
    {"Tensor:eq", binop<&Tensor::eq>},
    {"Tensor:ne", binop<&Tensor::ne>},
    {"Tensor:matmul", binop<&Tensor::matmul>},
    {"Tensor:dot", binop<&Tensor::dot>},
    {"Tensor:where", t_where},
    {"Tensor:neg", unop<&Tensor::neg>},
    {"Tensor:logical_not", unop<&Tensor::logical_not>},
    {"Tensor:exp", unop<&Tensor::exp>},
    {"Tensor:exp2", unop<&Tensor::exp2>},
    {"Tensor:log", unop<&Tensor::log>},
    {"Tensor:log2", unop<&Tensor::log2>},
    {"Tensor:sqrt", unop<&Tensor::sqrt>},
    {"Tensor:rsqrt", unop<&Tensor::rsqrt>},
    {"Tensor:reciprocal", unop<&Tensor::reciprocal>},
    {"Tensor:sin", unop<&Tensor::sin>},
    {"Tensor:cos", unop<&Tensor::cos>},
    {"Tensor:relu", unop<&Tensor::relu>},
    {"Tensor:sigmoid", unop<&Tensor::sigmoid>},
    {"Tensor:tanh", unop<&Tensor::tanh>},
    {"Tensor:abs", unop<&Tensor::abs>},
    {"Tensor:square", unop<&Tensor::square>},
    {"Tensor:cast", t_cast},
    {"Tensor:bitcast", t_bitcast},
    // reductions
    {"Tensor:sum", reduce<&Tensor::sum>},
    {"Tensor:max", reduce<&Tensor::max>},
    {"Tensor:min", reduce<&Tensor::min>},
    {"Tensor:mean", reduce<&Tensor::mean>},
    {"Tensor:argmax", t_argmax},
    {"Tensor:cumsum", t_cumsum},
    {"Tensor:softmax", axis_op<&Tensor::softmax>},
    {"Tensor:log_softmax", axis_op<&Tensor::log_softmax>},
    // movement
    {"Tensor:reshape", shape_op<&Tensor::reshape>},
    {"Tensor:permute", list_op<&Tensor::permute>},
    {"Tensor:expand", shape_op<&Tensor::expand>},
    {"Tensor:flip", list_op<&Tensor::flip>},
    {"Tensor:transpose", t_transpose},
    {"Tensor:pad", t_pad},
    {"Tensor:shrink", t_shrink},
    {"Tensor:squeeze", t_squeeze},
    {"Tensor:unsqueeze", t_unsqueeze},
    {"Tensor:flatten", t_flatten},
    {"Tensor:slice", t_slice},
    // running and reading back
    {"Tensor:contiguous", t_contiguous},
    {"Tensor:_copy", t_copy},
    {"Tensor:realize", t_realize},
    {"Tensor:tolist", t_tolist},
    {"Tensor:item", t_item},
    {"Tensor:numel", t_numel},
    {"Tensor:schedule", t_schedule},
    {"Tensor:schedule_with_vars", t_schedule_with_vars},
    {"Tensor:tobytes", t_tobytes},
};

// Metamethods, named for error messages as the user wrote them.
struct Meta {
  const char* field;
  Binding b;
};
const Meta kMeta[] = {
    {"__add", {"Tensor +", binop<&Tensor::add>}},
    {"__sub", {"Tensor -", binop<&Tensor::sub>}},
    {"__mul", {"Tensor *", binop<&Tensor::mul>}},
    {"__div", {"Tensor /", binop<&Tensor::div>}},
    {"__idiv", {"Tensor //", binop<&Tensor::idiv>}},
    {"__pow", {"Tensor ^", binop<&Tensor::pow>}},
    {"__unm", {"Tensor unary -", unop<&Tensor::neg>}},
    {"__tostring", {"tostring(Tensor)", t_tostring}},
    {"__lt", {"Tensor <", t_compare}},
    {"__le", {"Tensor <=", t_compare}},
};
const Binding kIndex{"Tensor", t_index};
const Binding kNewIndex{"Tensor", t_newindex};
const Binding kCall{"Tensor", tensor_call};

} // namespace

// The buffer of a realized contiguous CPU tensor (what host_memory and host_step lend).
std::shared_ptr<Buffer> host_buffer(lua_State* L, int idx) {
  Tensor& t = check_tensor(L, idx);
  const UOp* u = t.uop->op == Ops::REALIZED ? t.uop->src[0].get() : t.uop.get();
  if (u->op == Ops::RESHAPE) u = u->src[0].get();
  if (u->op != Ops::BUFFER || u->buffer()->device != "CPU" ||
      u->buffer()->size != static_cast<size_t>(t.numel()))
    luaL_error(L, "expected a realized contiguous tensor on CPU");
  return u->buffer();
}

// HostMemoryFn (interp/host_memory.h): a realized contiguous CPU tensor's memory.
void* host_memory(lua_State* L, int idx, size_t* nbytes) {
  auto b = host_buffer(L, idx);
  *nbytes = b->nbytes();
  return b->ptr();
}

// HostStepFn (interp/host_memory.h): the body as a HostStep on the tensors' buffers.
void host_step(lua_State* L, const char* name, const std::vector<int>& idx, HostStepBody body) {
  std::vector<std::shared_ptr<Buffer>> bufs;
  for (int i : idx)
    bufs.push_back(host_buffer(L, i));
  auto step = std::make_shared<HostStep>();
  step->info.name = name;
  step->info.device = "host";
  step->info.host = true;
  step->info.out_shape = {static_cast<int64_t>(bufs.at(0)->size)};
  for (auto& b : bufs)
    step->info.bytes += static_cast<int64_t>(b->nbytes());
  step->run = [body = std::move(body)](const std::vector<std::shared_ptr<Buffer>>& bs) {
    std::vector<std::pair<void*, size_t>> mem;
    for (auto& b : bs)
      mem.emplace_back(b->ptr(), b->nbytes());
    body(mem);
  };
  std::string error;
  try {
    run_host_step(std::move(step), std::move(bufs));
  } catch (const std::exception& e) {
    error = e.what(); // raised below, once the C++ objects here are gone
  }
  if (!error.empty()) luaL_error(L, "%s", error.c_str());
}

void open_tensor(lua_State* L) {
  lua_pushlightuserdata(L, reinterpret_cast<void*>(&host_memory));
  lua_setfield(L, LUA_REGISTRYINDEX, kHostMemoryKey);
  lua_pushlightuserdata(L, reinterpret_cast<void*>(&host_step));
  lua_setfield(L, LUA_REGISTRYINDEX, kHostStepKey);
  // The Tensor table holds statics and methods, so Tensor.relu(x) == x:relu() and Lua code
  // can add methods to it (function Tensor.gelu(x) ... end) that tensors then have.
  lua_newtable(L);
  int cls = lua_gettop(L);
  set_bindings(L, cls, kStatics);
  set_bindings(L, cls, kMethods);
  lua_newtable(L); // the Tensor table's own metatable: Tensor{...} calls the constructor
  push_binding(L, kCall);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, cls);

  luaL_newmetatable(L, kTensorMeta); // the userdata's metatable
  for (const Meta& m : kMeta) {
    push_binding(L, m.b);
    lua_setfield(L, -2, m.field);
  }
  lua_pushvalue(L, cls);
  push_binding(L, kIndex, 1);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, cls); // x[i] = v looks up Tensor.__setitem there, as x[i] finds Tensor.__getitem
  push_binding(L, kNewIndex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, t_gc);
  lua_setfield(L, -2, "__gc");
  // hide the metatable from Lua: calling __gc by hand would destroy the object twice
  lua_pushstring(L, "locked");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  lua_setglobal(L, "Tensor");
}

} // namespace mg::lua
