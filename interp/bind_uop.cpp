// Read-only Lua views of the engine's data: UOp graphs (x.uop), ShapeTrackers (x.st, and a small
// ShapeTracker playground) and schedule items (x:schedule()).
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "engine/device.h"
#include "engine/inspect.h"
#include "engine/kernel_cache.h"
#include "engine/realize.h"
#include "engine/schedule.h"
#include "interp/lua_state.h"

namespace mg::lua {

namespace {
constexpr const char* kUOpMeta = "UOp";
constexpr const char* kSTMeta = "ShapeTracker";
constexpr const char* kItemMeta = "ScheduleItem";

template <class T> T& check_ud(lua_State* L, int idx, const char* meta) {
  return *static_cast<T*>(luaL_checkudata(L, idx, meta));
}

template <class T> void push_ud(lua_State* L, T v, const char* meta) {
  new (lua_newuserdatauv(L, sizeof(T), 0)) T(std::move(v));
  luaL_setmetatable(L, meta);
}

template <class T> int gc_ud(lua_State* L) {
  static_cast<T*>(lua_touserdata(L, 1))->~T();
  return 0;
}

// Looks key (arg 2) up in the method table held as upvalue 2; errors on unknown names.
int method_or_error(lua_State* L, const char* type) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNIL)
    luaL_error(L, "%s has no field '%s'", type, luaL_tolstring(L, 2, nullptr));
  return 1;
}

// ---------------------------------------------------------------- UOp

int uop_index(lua_State* L) {
  const UOpRef& u = check_ud<UOpRef>(L, 1, kUOpMeta);
  std::string k = luaL_checkstring(L, 2);
  if (k == "op")
    lua_pushstring(L, name(u->op));
  else if (k == "dtype")
    lua_pushstring(L, name(u->dtype));
  else if (k == "arg")
    lua_pushstring(L, u->arg_string().c_str());
  else if (k == "shape")
    u->has_shape ? push_shape(L, u->shape) : lua_pushnil(L);
  else if (k == "src") {
    lua_createtable(L, static_cast<int>(u->src.size()), 0);
    for (size_t i = 0; i < u->src.size(); i++) {
      push_uop(L, u->src[i]);
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else
    return method_or_error(L, "UOp");
  return 1;
}

int uop_tostring(lua_State* L) {
  std::string s = print_tree(check_ud<UOpRef>(L, 1, kUOpMeta));
  if (!s.empty() && s.back() == '\n') s.pop_back();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int uop_eq(lua_State* L) { // hash-consing: equal graphs are the same node
  auto* a = static_cast<UOpRef*>(luaL_testudata(L, 1, kUOpMeta));
  auto* b = static_cast<UOpRef*>(luaL_testudata(L, 2, kUOpMeta));
  lua_pushboolean(L, a && b && a->get() == b->get());
  return 1;
}

int uop_toposort(lua_State* L) { // every node, sources before users
  const UOpRef& u = check_ud<UOpRef>(L, 1, kUOpMeta);
  // toposort gives raw pointers; map them back to owning references for push_uop.
  std::unordered_map<const UOp*, UOpRef> refs{{u.get(), u}};
  std::vector<UOpRef> stack{u};
  while (!stack.empty()) {
    UOpRef r = stack.back();
    stack.pop_back();
    for (auto& s : r->src)
      if (refs.emplace(s.get(), s).second) stack.push_back(s);
  }
  auto order = toposort(u.get());
  lua_createtable(L, static_cast<int>(order.size()), 0);
  for (size_t i = 0; i < order.size(); i++) {
    push_uop(L, refs.at(order[i]));
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// ---------------------------------------------------------------- ShapeTracker

const ShapeTracker& check_st(lua_State* L, int idx) { return check_ud<ShapeTracker>(L, idx, kSTMeta); }

void push_view(lua_State* L, const View& v) {
  lua_newtable(L);
  push_shape(L, v.shape);
  lua_setfield(L, -2, "shape");
  push_int_list(L, v.strides);
  lua_setfield(L, -2, "strides");
  push_sint(L, v.offset);
  lua_setfield(L, -2, "offset");
  if (v.mask) {
    lua_createtable(L, static_cast<int>(v.mask->size()), 0);
    for (size_t i = 0; i < v.mask->size(); i++) {
      push_int_list(L, {(*v.mask)[i].first, (*v.mask)[i].second});
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "mask");
  }
  lua_pushboolean(L, v.contiguous);
  lua_setfield(L, -2, "contiguous");
}

int st_index(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  std::string k = luaL_checkstring(L, 2);
  if (k == "shape")
    push_shape(L, st.shape());
  else if (k == "size")
    lua_pushinteger(L, st.size());
  else if (k == "contiguous")
    lua_pushboolean(L, st.is_contiguous());
  else if (k == "views") {
    lua_createtable(L, static_cast<int>(st.views.size()), 0);
    for (size_t i = 0; i < st.views.size(); i++) {
      push_view(L, st.views[i]);
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else
    return method_or_error(L, "ShapeTracker");
  return 1;
}

int st_tostring(lua_State* L) {
  std::string s = check_st(L, 1).to_string();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int st_eq(lua_State* L) {
  auto* a = static_cast<ShapeTracker*>(luaL_testudata(L, 1, kSTMeta));
  auto* b = static_cast<ShapeTracker*>(luaL_testudata(L, 2, kSTMeta));
  lua_pushboolean(L, a && b && *a == *b);
  return 1;
}

// The engine's ShapeTracker trusts its callers (the Tensor layer checks), so these playground
// methods check their arguments here.
[[noreturn]] void bad(const std::string& what, const Shape& s) {
  throw std::invalid_argument(what + " for shape " + shape_str(s));
}

int64_t axis_in(int64_t a, size_t n, const Shape& s) {
  int64_t r = a < 0 ? a + static_cast<int64_t>(n) : a;
  if (r < 0 || r >= static_cast<int64_t>(n)) bad("axis " + std::to_string(a) + " is out of range", s);
  return r;
}

std::vector<std::pair<int64_t, int64_t>> st_pairs(lua_State* L, int idx, const Shape& s) {
  luaL_checktype(L, idx, LUA_TTABLE);
  std::vector<std::pair<int64_t, int64_t>> out;
  lua_Integer n = max_index(L, idx);
  if (n != static_cast<lua_Integer>(s.size())) bad(std::to_string(n) + " pairs given", s);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    auto p = lua_istable(L, -1) ? int_list(L, lua_gettop(L), current_name(L)) : std::vector<int64_t>{};
    if (p.size() != 2) bad("entry " + std::to_string(i) + " is not a pair {a, b}", s);
    out.push_back({p[0], p[1]});
    lua_pop(L, 1);
  }
  return out;
}

int st_reshape(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  Shape ns = shape_list_args(L, 2, current_name(L));
  int64_t n = 1;
  for (auto d : ns) {
    if (d < 0) bad("negative dim in reshape to " + shape_str(ns), st.shape());
    n *= d;
  }
  if (n != st.size()) bad("cannot reshape to " + shape_str(ns) + " (element counts differ)", st.shape());
  push_shapetracker(L, st.reshape(ns));
  return 1;
}

int st_permute(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  auto order = int_list_args(L, 2, current_name(L));
  std::vector<bool> used(st.shape().size());
  if (order.size() != used.size())
    bad("permute order " + shape_str(order) + " has the wrong length", st.shape());
  for (auto& o : order) {
    o = axis_in(o, used.size(), st.shape());
    if (used[o]) bad("permute order repeats axis " + std::to_string(o), st.shape());
    used[o] = true;
  }
  push_shapetracker(L, st.permute(order));
  return 1;
}

int st_expand(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  Shape ns = shape_list_args(L, 2, current_name(L));
  const Shape& s = st.shape();
  if (ns.size() != s.size()) bad("cannot expand to " + shape_str(ns) + " (dims differ)", s);
  for (size_t i = 0; i < s.size(); i++) {
    if (ns[i] == -1) ns[i] = s[i];
    if (ns[i] != s[i] && s[i] != 1)
      bad("cannot expand to " + shape_str(ns) + " (only size-1 dims expand)", s);
  }
  push_shapetracker(L, st.expand(ns));
  return 1;
}

int st_pad(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  auto p = st_pairs(L, 2, st.shape());
  for (auto [a, b] : p)
    if (a < 0 || b < 0) bad("negative padding", st.shape());
  push_shapetracker(L, st.pad(p));
  return 1;
}

int st_shrink(lua_State* L) {
  const ShapeTracker& st = check_st(L, 1);
  auto p = st_pairs(L, 2, st.shape());
  for (size_t i = 0; i < p.size(); i++)
    if (p[i].first < 0 || p[i].first > p[i].second || p[i].second > st.shape()[i])
      bad("shrink pair " + std::to_string(i + 1) + " is out of range", st.shape());
  push_shapetracker(L, st.shrink({p.begin(), p.end()}));
  return 1;
}

int st_flip(lua_State* L) { // axes to flip, as Tensor:flip takes them
  const ShapeTracker& st = check_st(L, 1);
  std::vector<bool> f(st.shape().size());
  for (auto a : int_list_args(L, 2, current_name(L)))
    f[axis_in(a, f.size(), st.shape())] = true;
  push_shapetracker(L, st.flip(f));
  return 1;
}

int st_simplify(lua_State* L) {
  push_shapetracker(L, check_st(L, 1).simplify());
  return 1;
}

int st_offset_of(lua_State* L) { // memory offset of one index (0-based), or -1 where masked
  const ShapeTracker& st = check_st(L, 1);
  auto idx = int_list_args(L, 2, current_name(L));
  const Shape& s = st.shape();
  if (idx.size() != s.size()) bad("index " + shape_str(idx) + " has the wrong length", s);
  for (size_t i = 0; i < s.size(); i++)
    if (idx[i] < 0 || idx[i] >= s[i]) bad("index " + shape_str(idx) + " is out of range", s);
  lua_pushinteger(L, st.offset_of(idx));
  return 1;
}

int st_contiguous(lua_State* L) { // ShapeTracker.contiguous{2,3}
  Shape s = shape_list_args(L, 1, current_name(L));
  for (auto d : s)
    if (d < 0) bad("negative dim", s);
  push_shapetracker(L, ShapeTracker::contiguous(s));
  return 1;
}

// ---------------------------------------------------------------- ScheduleItem

int item_index(lua_State* L) {
  const ScheduleItem& it = check_ud<ScheduleItem>(L, 1, kItemMeta);
  std::string k = luaL_checkstring(L, 2);
  if (k == "ast") {
    std::string s = print_tree(it.ast);
    lua_pushlstring(L, s.data(), s.size());
  } else if (k == "uop")
    push_uop(L, it.ast);
  else if (k == "bufs") {
    lua_createtable(L, static_cast<int>(it.bufs.size()), 0);
    for (size_t i = 0; i < it.bufs.size(); i++) {
      lua_pushstring(L, it.bufs[i] ? buffer_string(*it.bufs[i]).c_str() : "<none>");
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else if (k == "src")
    lua_pushstring(L, kernel_for(it).src.c_str()); // compiles (cached)
  else if (k == "name")
    lua_pushstring(L, kernel_for(it).name.c_str());
  else if (k == "reason") // why this node is a kernel of its own
    lua_pushstring(L, it.reason);
  else if (k == "opts") { // {"UPCAST(0, 16)", ...}: what the kernel was lowered with
    const auto& opts = kernel_for(it).opts;
    lua_createtable(L, static_cast<int>(opts.size()), 0);
    for (size_t i = 0; i < opts.size(); i++) {
      lua_pushstring(L, opts[i].c_str());
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else if (k == "stages") { // {{name=, text=}, ...} from the AST down to the linear program
    auto stages = ir_stages(compiled_for(it)); // compiles (cached): the stages that run
    lua_createtable(L, static_cast<int>(stages.size()), 0);
    for (size_t i = 0; i < stages.size(); i++) {
      lua_createtable(L, 0, 2);
      lua_pushstring(L, stages[i].first.c_str());
      lua_setfield(L, -2, "name");
      lua_pushlstring(L, stages[i].second.data(), stages[i].second.size());
      lua_setfield(L, -2, "text");
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else
    luaL_error(L, "ScheduleItem has no field '%s' (ast, uop, bufs, src, name, reason, opts, stages)",
               k.c_str());
  return 1;
}

int item_tostring(lua_State* L) {
  std::string s = check_ud<ScheduleItem>(L, 1, kItemMeta).to_string();
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

const Binding kUOpMethods[] = {{"UOp:toposort", uop_toposort}};
const Binding kUOpMetaFns[] = {{"tostring(UOp)", uop_tostring}, {"UOp ==", uop_eq}};
const Binding kUOpIndex{"UOp", uop_index};

const Binding kSTMethods[] = {
    {"ShapeTracker:reshape", st_reshape},       {"ShapeTracker:permute", st_permute},
    {"ShapeTracker:expand", st_expand},         {"ShapeTracker:pad", st_pad},
    {"ShapeTracker:shrink", st_shrink},         {"ShapeTracker:flip", st_flip},
    {"ShapeTracker:simplify", st_simplify},     {"ShapeTracker:offset_of", st_offset_of},
    {"ShapeTracker.contiguous", st_contiguous},
};
const Binding kSTIndex{"ShapeTracker", st_index};
const Binding kSTTostring{"tostring(ShapeTracker)", st_tostring};
const Binding kSTEq{"ShapeTracker ==", st_eq};

const Binding kItemIndex{"ScheduleItem", item_index};
const Binding kItemTostring{"tostring(ScheduleItem)", item_tostring};

// A userdata metatable: __gc, __tostring, optional __eq, and __index with `methods` (at the
// stack top, popped) as upvalue 2.
template <class T>
void new_meta(lua_State* L, const char* meta, const Binding& index, const Binding& tostr, const Binding* eq) {
  int methods = lua_gettop(L);
  luaL_newmetatable(L, meta);
  lua_pushcfunction(L, gc_ud<T>);
  lua_setfield(L, -2, "__gc");
  // hide the metatable from Lua: calling __gc by hand would destroy the object twice
  lua_pushstring(L, "locked");
  lua_setfield(L, -2, "__metatable");
  push_binding(L, tostr);
  lua_setfield(L, -2, "__tostring");
  if (eq) {
    push_binding(L, *eq);
    lua_setfield(L, -2, "__eq");
  }
  lua_pushvalue(L, methods);
  push_binding(L, index, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 2);
}
} // namespace

void push_uop(lua_State* L, UOpRef u) { push_ud(L, std::move(u), kUOpMeta); }
void push_shapetracker(lua_State* L, ShapeTracker st) { push_ud(L, std::move(st), kSTMeta); }

void push_schedule(lua_State* L, std::vector<ScheduleItem> items) {
  lua_createtable(L, static_cast<int>(items.size()), 0);
  for (size_t i = 0; i < items.size(); i++) {
    push_ud(L, std::move(items[i]), kItemMeta);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

ShapeTracker tensor_st(const Tensor& t) {
  // Walk down the movement ops to the base, then replay them from the bottom up.
  std::vector<const UOp*> chain;
  const UOp* n = t.uop.get();
  for (;;) {
    if (auto r = n->cached()) n = r.get(); // a realized node reads its buffer view
    if (!is_movement(n->op)) break;
    chain.push_back(n);
    n = n->src[0].get();
  }
  ShapeTracker st;
  if (n->op == Ops::BUFFER || n->op == Ops::CONST)
    st = ShapeTracker::contiguous(n->shape);
  else if (n->op == Ops::VIEW && std::holds_alternative<std::shared_ptr<const ShapeTracker>>(n->arg))
    st = n->st();
  else
    throw std::invalid_argument(std::string("not a view: the graph has ") + name(n->op) +
                                " under its movement ops (only movement ops over a BUFFER or CONST have a "
                                "ShapeTracker; realize() it first)");
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    st = st.apply((*it)->op, (*it)->arg);
  return st;
}

void open_uop(lua_State* L) {
  lua_newtable(L);
  set_bindings(L, -1, kUOpMethods);
  new_meta<UOpRef>(L, kUOpMeta, kUOpIndex, kUOpMetaFns[0], &kUOpMetaFns[1]);

  lua_newtable(L); // also the global ShapeTracker: ShapeTracker.contiguous{2,3}
  set_bindings(L, -1, kSTMethods);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "ShapeTracker");
  new_meta<ShapeTracker>(L, kSTMeta, kSTIndex, kSTTostring, &kSTEq);

  lua_newtable(L);
  new_meta<ScheduleItem>(L, kItemMeta, kItemIndex, kItemTostring, nullptr);
}

} // namespace mg::lua
