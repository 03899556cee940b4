// Variable objects: symbolic ints for shapes that change at run time (tinygrad's Variable).
//   local v = Variable("start_pos", 1, 1024)   -- unbound: a name and the range of its values
//   local vp = v:bind(5)                        -- bound: stands in shapes and slices
//   x:shrink{{0, 1}, {0, vp}}                   -- a kernel takes start_pos as a parameter
// Arithmetic with numbers and other Variables gives expressions (vp + 1), folded where it can be.
#include <cctype>
#include <stdexcept>

#include "interp/lua_state.h"

namespace mg::lua {

const sint* test_sint(lua_State* L, int idx) {
  return static_cast<const sint*>(luaL_testudata(L, idx, kVariableMeta));
}

sint check_sint(lua_State* L, int idx, const char* what) {
  if (const sint* s = test_sint(L, idx)) return *s;
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok)
    throw std::invalid_argument(std::string(what) + ": expected an integer or a Variable, got " +
                                luaL_typename(L, idx));
  return sint(v);
}

void push_sint(lua_State* L, const sint& s) {
  if (s.is_const()) return lua_pushinteger(L, s.value());
  new (lua_newuserdatauv(L, sizeof(sint), 0)) sint(s);
  luaL_setmetatable(L, kVariableMeta);
}

namespace {

const UOp& var_of(const sint& s) { return s.expr()->op == Ops::BIND ? *s.expr()->src[0] : *s.expr(); }
bool is_var(const sint& s) {
  return !s.is_const() && (s.expr()->op == Ops::DEFINE_VAR || s.expr()->op == Ops::BIND);
}

int v_new(lua_State* L) { // Variable(name, min, max)
  std::string n = luaL_checkstring(L, 1);
  bool ident = !n.empty() && !std::isdigit(static_cast<unsigned char>(n[0]));
  for (char c : n)
    ident &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  if (!ident)
    throw std::invalid_argument("Variable: name '" + n + "' must be an identifier (letters, digits, _)");
  lua_Integer lo = luaL_checkinteger(L, 2), hi = luaL_checkinteger(L, 3);
  if (lo > hi || lo < 0 || hi > INT32_MAX)
    throw std::invalid_argument("Variable " + n + ": range [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "] must have 0 <= min <= max <= 2^31-1");
  push_sint(L, sint(UOp::make(Ops::DEFINE_VAR, DType::Int32, {}, VarArg{n, lo, hi})));
  return 1;
}

int v_bind(lua_State* L) { // v:bind(5)
  sint s = check_sint(L, 1, "bind");
  if (s.is_const() || s.expr()->op != Ops::DEFINE_VAR)
    throw std::invalid_argument("bind: only an unbound Variable can be bound, not " + s.str());
  const VarArg& v = s.expr()->var();
  lua_Integer x = luaL_checkinteger(L, 2);
  if (x < v.lo || x > v.hi)
    throw std::out_of_range("bind: " + v.name + " = " + std::to_string(x) + " is outside its range [" +
                            std::to_string(v.lo) + ", " + std::to_string(v.hi) + "]");
  push_sint(L, sint(UOp::make(Ops::BIND, DType::Int32,
                              {s.expr(), UOp::cconst(DType::Int32, static_cast<double>(x))})));
  return 1;
}

int v_unbind(lua_State* L) { // vp:unbind() -> v, 5
  sint s = check_sint(L, 1, "unbind");
  if (s.is_const() || s.expr()->op != Ops::BIND)
    throw std::invalid_argument("unbind: " + s.str() + " is not a bound Variable");
  push_sint(L, sint(s.expr()->src[0]));
  lua_pushinteger(L, s.expr()->src[1]->const_bits());
  return 2;
}

int v_index(lua_State* L) {
  sint s = check_sint(L, 1, "Variable");
  std::string k = luaL_checkstring(L, 2);
  if (k == "name" && is_var(s))
    lua_pushstring(L, var_of(s).var().name.c_str());
  else if (k == "min")
    lua_pushinteger(L, s.vmin());
  else if (k == "max")
    lua_pushinteger(L, s.vmax());
  else if (k == "val") {
    if (!is_var(s) || s.expr()->op != Ops::BIND)
      throw std::invalid_argument("val: " + s.str() + " is not a bound Variable (bind it first)");
    lua_pushinteger(L, s.expr()->src[1]->const_bits());
  } else if (k == "bind") {
    static const Binding b{"Variable:bind", v_bind};
    push_binding(L, b);
  } else if (k == "unbind") {
    static const Binding b{"Variable:unbind", v_unbind};
    push_binding(L, b);
  } else
    lua_pushnil(L);
  return 1;
}

int v_tostring(lua_State* L) {
  sint s = check_sint(L, 1, "tostring");
  std::string t = s.str();
  if (s.expr()->op == Ops::BIND)
    t += "=" + std::to_string(s.expr()->src[1]->const_bits());
  else if (s.expr()->op == Ops::DEFINE_VAR)
    t = "Variable(" + t + ", " + std::to_string(s.vmin()) + ", " + std::to_string(s.vmax()) + ")";
  lua_pushstring(L, t.c_str());
  return 1;
}

template <char OP> int v_arith(lua_State* L) {
  sint a = check_sint(L, 1, "Variable arithmetic"), b = check_sint(L, 2, "Variable arithmetic");
  push_sint(L, OP == '+' ? a + b : OP == '-' ? a - b : a * b);
  return 1;
}

int v_eq(lua_State* L) {
  lua_pushboolean(L, check_sint(L, 1, "==") == check_sint(L, 2, "=="));
  return 1;
}

int v_gc(lua_State* L) {
  static_cast<sint*>(luaL_checkudata(L, 1, kVariableMeta))->~sint();
  return 0;
}

} // namespace

void open_variable(lua_State* L) {
  luaL_newmetatable(L, kVariableMeta);
  static const Binding meta[] = {
      {"__index", v_index},    {"__tostring", v_tostring}, {"__add", v_arith<'+'>},
      {"__sub", v_arith<'-'>}, {"__mul", v_arith<'*'>},    {"__eq", v_eq},
      {"__gc", v_gc},
  };
  set_bindings(L, -1, meta);
  lua_pop(L, 1);
  static const Binding ctor{"Variable", v_new};
  push_binding(L, ctor);
  lua_setglobal(L, "Variable");
}

} // namespace mg::lua
