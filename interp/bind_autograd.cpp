// Autograd at the Lua level: x.requires_grad, x.grad, loss:backward(), Tensor.gradient,
// x:assign(y), x:detach(). The gradients themselves are lazy graphs (engine/gradient).
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/device.h"
#include "engine/gradient.h"
#include "interp/lua_state.h"

namespace mg::lua {

namespace {
// The state running backward() or Tensor.gradient(): custom gradient functions written in Lua
// are called on it (it may be a coroutine).
thread_local lua_State* grad_state = nullptr;
struct GradState {
  lua_State* saved;
  explicit GradState(lua_State* L) : saved(grad_state) { grad_state = L; }
  ~GradState() { grad_state = saved; }
};

constexpr const char* kGradRegistry = "moongrad.requires_grad"; // weak-keyed: tensor -> true

void push_attrs(lua_State* L, int idx) { // the user value table, created on first use
  idx = lua_absindex(L, idx);
  if (lua_getiuservalue(L, idx, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, idx, 1);
  }
}
} // namespace

void get_attr(lua_State* L, int idx, const char* key) {
  idx = lua_absindex(L, idx);
  if (lua_getiuservalue(L, idx, 1) != LUA_TTABLE) return; // leaves nil
  lua_getfield(L, -1, key);
  lua_remove(L, -2);
}

void set_attr(lua_State* L, int idx, const char* key, int value_idx) {
  idx = lua_absindex(L, idx);
  value_idx = lua_absindex(L, value_idx);
  push_attrs(L, idx);
  lua_pushvalue(L, value_idx);
  lua_setfield(L, -2, key);
  lua_pop(L, 1);
}

namespace {
// The buffer a realized tensor reads.
std::shared_ptr<Buffer> buffer_of(const Tensor& t) {
  const UOp* u = t.uop.get();
  while (u->op == Ops::REALIZED || is_movement(u->op))
    u = u->src[0].get();
  return u->op == Ops::BUFFER ? u->buffer() : nullptr;
}
} // namespace

void set_requires_grad(lua_State* L, int idx, bool on) {
  idx = lua_absindex(L, idx);
  // a parameter is its own buffer: two equal unrealized graphs (two Tensor.ones(3)) are one
  // graph node, and gradients are matched by node
  Tensor& t = check_tensor(L, idx);
  if (on) t.realize();
  lua_pushboolean(L, on);
  set_attr(L, idx, "requires_grad", -1);
  lua_pop(L, 1);
  if (luaL_getsubtable(L, LUA_REGISTRYINDEX, kGradRegistry) == 0) { // new: make its keys weak
    lua_createtable(L, 0, 1);
    lua_pushstring(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
  }
  lua_pushvalue(L, idx);
  bool was = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 1);
  // the buffer counts its tensors with requires_grad: realizing a graph that reads it keeps the
  // graph for backward (a tensor collected while on still counts: the cost is memory, never a
  // lost gradient)
  if (auto b = buffer_of(t); b && was != on) b->add_requires_grad(on ? 1 : -1);
  lua_pushvalue(L, idx);
  if (on)
    lua_pushboolean(L, 1);
  else
    lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

namespace {

// x:requires_grad_([on]) -> x
int t_requires_grad_(lua_State* L) {
  check_tensor(L, 1);
  set_requires_grad(L, 1, lua_isnone(L, 2) || lua_toboolean(L, 2));
  lua_settop(L, 1);
  return 1;
}

bool no_grad(lua_State*) { return !grad_enabled(); }

// The seed d(out)/d(out): ones for a scalar, else the given gradient.
UOpRef seed_for(lua_State* L, const Tensor& out, int idx, const char* fname) {
  if (!lua_isnoneornil(L, idx)) {
    Tensor& g = check_tensor(L, idx);
    if (g.shape() != out.shape())
      throw std::invalid_argument("gradient of shape " + shape_str(g.shape()) + " for an output of shape " +
                                  shape_str(out.shape()));
    return g.cast(out.dtype()).uop;
  }
  if (out.numel() != 1)
    throw std::invalid_argument(std::string(fname) + " of a tensor with shape " + shape_str(out.shape()) +
                                " needs a gradient argument (it is implicit only for one element)");
  if (!is_float(out.dtype()))
    throw std::invalid_argument(std::string(fname) + " needs a float output, got " + name(out.dtype()));
  return Tensor::full(out.shape(), 1, out.dtype()).uop;
}

// loss:backward([gradient]): adds d(loss)/d(t) to t.grad for every live t with requires_grad
// that loss depends on. The gradients are lazy; the optimizer's realize runs them.
int t_backward(lua_State* L) {
  Tensor& out = check_tensor(L, 1);
  if (no_grad(L)) throw std::invalid_argument("backward() while Tensor.no_grad is set");
  UOpRef seed = seed_for(L, out, 2, "backward()");
  lua_settop(L, 1);
  std::vector<UOpRef> targets;
  if (luaL_getsubtable(L, LUA_REGISTRYINDEX, kGradRegistry)) {
    lua_newtable(L); // the tensors, in order (index 3)
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pop(L, 1);
      if (Tensor* t = tensor_underneath(L, -1)) {
        targets.push_back(t->uop);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 3, static_cast<lua_Integer>(targets.size()));
      }
    }
  } else
    lua_newtable(L);
  GradState gs(L);
  auto grads = gradient(out.uop, seed, targets);
  int found = 0;
  for (size_t i = 0; i < grads.size(); i++) {
    if (!grads[i]) continue;
    found++;
    lua_rawgeti(L, 3, static_cast<lua_Integer>(i + 1));
    int t = lua_gettop(L);
    Tensor g((*grads[i]));
    g = g.cast(tensor_underneath(L, t)->dtype());
    get_attr(L, t, "grad");
    if (Tensor* old = test_tensor(L, -1)) g = old->add(g); // gradients accumulate, as in PyTorch
    lua_pop(L, 1);
    push_tensor(L, g.detach()); // as in PyTorch: a gradient is a value, not a graph to differentiate
    set_attr(L, t, "grad", -1);
    lua_settop(L, 3);
  }
  if (found == 0)
    throw std::invalid_argument("backward(): the output does not depend on any tensor with requires_grad");
  lua_settop(L, 1);
  return 1;
}

// Tensor.gradient(out, {t1, t2, ...} [, gradient]) -> {dt1, dt2, ...} (a zero tensor where out
// does not depend on t), leaving .grad alone.
int t_gradient(lua_State* L) {
  Tensor& out = check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  UOpRef seed = seed_for(L, out, 3, "gradient");
  std::vector<UOpRef> targets;
  std::vector<Tensor> ts;
  lua_Integer n = max_index(L, 2);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    Tensor* t = test_tensor(L, -1);
    if (!t) throw std::invalid_argument("target " + std::to_string(i) + " is not a Tensor");
    targets.push_back(t->uop);
    ts.push_back(*t);
    lua_pop(L, 1);
  }
  GradState gs(L);
  auto grads = gradient(out.uop, seed, targets);
  lua_createtable(L, static_cast<int>(n), 0);
  for (size_t i = 0; i < grads.size(); i++) {
    push_tensor(L, grads[i] ? Tensor(*grads[i]).cast(ts[i].dtype())
                            : Tensor::zeros(ts[i].shape(), ts[i].dtype()));
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// x:assign(y): x now stands for y's value (same shape; cast to x's dtype). Lazy, like any op;
// it is how optimizers update parameters in place, keeping the Lua object.
int t_assign(lua_State* L) {
  check_tensor(L, 1).assign(check_tensor(L, 2));
  lua_settop(L, 1);
  return 1;
}

int t_detach(lua_State* L) {
  push_tensor(L, check_tensor(L, 1).detach());
  return 1;
}

// Tensor._grad_fn(fn) -> id. fn(g, input1, input2, ...) returns the inputs' gradients (nil:
// the one the value's own ops imply, not counting paths through the other inputs). Each call
// registers fn for good, so callers keep one per distinct use. A tensor the value depends on
// that is not among the inputs gets no gradient through it.
int t_grad_fn(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  int id = register_custom_grad([ref](const Tensor& g, const std::vector<Tensor>& inputs) {
    lua_State* L = grad_state;
    if (!L) throw std::logic_error("a custom gradient written in Lua ran outside backward()");
    int top = lua_gettop(L), n = static_cast<int>(inputs.size());
    if (!lua_checkstack(L, n + 2)) throw std::runtime_error("custom gradient: Lua stack overflow");
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    push_tensor(L, g);
    for (auto& t : inputs)
      push_tensor(L, t);
    if (lua_pcall(L, n + 1, n, 0) != LUA_OK) {
      std::string msg = lua_isstring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)";
      lua_settop(L, top);
      throw std::runtime_error("custom gradient: " + msg);
    }
    std::vector<std::optional<Tensor>> out;
    for (int i = 0; i < n; i++) {
      Tensor* t = test_tensor(L, top + 1 + i);
      if (!t && !lua_isnil(L, top + 1 + i)) {
        lua_settop(L, top);
        throw std::runtime_error("custom gradient: result " + std::to_string(i + 1) +
                                 " is not a Tensor or nil");
      }
      out.push_back(t ? std::optional<Tensor>(*t) : std::nullopt);
    }
    lua_settop(L, top);
    return out;
  });
  lua_pushinteger(L, id);
  return 1;
}

// Tensor._custom_grad(value, {inputs...}, id) -> value, whose backward calls function id.
int t_custom_grad(lua_State* L) {
  Tensor& v = check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<UOpRef> inputs;
  for (lua_Integer i = 1, n = max_index(L, 2); i <= n; i++) {
    lua_rawgeti(L, 2, i);
    Tensor* t = test_tensor(L, -1);
    if (!t) throw std::invalid_argument("custom gradient: input " + std::to_string(i) + " is not a Tensor");
    inputs.push_back(t->uop);
    lua_pop(L, 1);
  }
  lua_Integer id = luaL_checkinteger(L, 3);
  if (id < 0 || id > INT32_MAX)
    throw std::invalid_argument("custom gradient: no function with id " + std::to_string(id));
  push_tensor(L, Tensor(custom_grad(v.uop, inputs, static_cast<int>(id))));
  return 1;
}

// Tensor.no_grad is grad_enabled() negated (engine/gradient.h), so that realizing reads it too:
// the Tensor table's metatable answers for that one key; other new keys are stored as usual.
int tensor_class_index(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING && std::string(lua_tostring(L, 2)) == "no_grad")
    lua_pushboolean(L, !grad_enabled());
  else
    lua_pushnil(L);
  return 1;
}
int tensor_class_newindex(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING && std::string(lua_tostring(L, 2)) == "no_grad") {
    grad_enabled() = !lua_toboolean(L, 3);
    return 0;
  }
  lua_settop(L, 3);
  lua_rawset(L, 1);
  return 0;
}
const Binding kClassIndex{"Tensor", tensor_class_index};
const Binding kClassNewindex{"Tensor", tensor_class_newindex};

const Binding kAutogradFns[] = {
    {"Tensor._grad_fn", t_grad_fn},
    {"Tensor._custom_grad", t_custom_grad},
    {"Tensor:backward", t_backward},
    {"Tensor.gradient", t_gradient},
    {"Tensor:assign", t_assign},
    {"Tensor:detach", t_detach},
    {"Tensor:requires_grad_", t_requires_grad_},
};
} // namespace

void open_autograd(lua_State* L) {
  lua_getglobal(L, "Tensor");
  set_bindings(L, -1, kAutogradFns);
  grad_enabled() = true;
  lua_getmetatable(L, -1); // made by open_tensor (its __call is the constructor)
  push_binding(L, kClassIndex);
  lua_setfield(L, -2, "__index");
  push_binding(L, kClassNewindex);
  lua_setfield(L, -2, "__newindex");
  lua_pop(L, 1);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "training");
  lua_pop(L, 1);
}

} // namespace mg::lua
