// require "mgjson": JSON through nlohmann-json (safetensors headers). The only file that includes
// <nlohmann/json.hpp>: the header is heavy, so it is compiled once.
//
// decode: objects -> tables, arrays -> sequences (marked with mgjson.array's metatable, so an empty
// one encodes back as []), null -> mgjson.null, integers -> Lua integers (exact over the whole int64
// range; a larger one becomes a float, as Lua's own tonumber does), other numbers -> floats.
// encode: the reverse; a table is an array when marked by mgjson.array or when its keys are exactly
// 1..n (n >= 1), else an object with string keys. Keys come out sorted, so the text is the same on
// every run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "interp/lua_state.h"

namespace mg::lua {

namespace {

using nlohmann::json;

constexpr int kMaxDepth = 200; // deeper nesting is an error in both directions (and finds cycles)
constexpr const char* kNullKey = "moongrad.json.null";
constexpr const char* kArrayMetaKey = "moongrad.json.array";

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
std::string plain_message(const std::exception& e) {
  std::string_view m = e.what();
  if (m.rfind("[json.exception.", 0) == 0) {
    size_t end = m.find("] ");
    if (end != std::string_view::npos) m.remove_prefix(end + 2);
  }
  return std::string(m);
}

// ---------------------------------------------------------------- decode

void push_value(lua_State* L, const json& v, int depth);

void push_array(lua_State* L, const json& v, int depth) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  lua_Integer i = 1;
  for (const json& e : v) {
    push_value(L, e, depth + 1);
    lua_rawseti(L, -2, i++);
  }
  lua_getfield(L, LUA_REGISTRYINDEX, kArrayMetaKey);
  lua_setmetatable(L, -2);
}

void push_object(lua_State* L, const json& v, int depth) {
  lua_createtable(L, 0, static_cast<int>(v.size()));
  for (const auto& [k, e] : v.items()) {
    lua_pushlstring(L, k.data(), k.size());
    push_value(L, e, depth + 1);
    lua_rawset(L, -3);
  }
}

void push_value(lua_State* L, const json& v, int depth) {
  if (depth > kMaxDepth)
    throw std::runtime_error("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  luaL_checkstack(L, 4, "mgjson.decode: nested too deep");
  switch (v.type()) {
  case json::value_t::null:
    lua_getfield(L, LUA_REGISTRYINDEX, kNullKey);
    break;
  case json::value_t::boolean:
    lua_pushboolean(L, v.get<bool>());
    break;
  case json::value_t::number_integer:
    lua_pushinteger(L, v.get<int64_t>());
    break;
  case json::value_t::number_unsigned: {
    auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<lua_Integer>::max()))
      lua_pushinteger(L, static_cast<lua_Integer>(u));
    else
      lua_pushnumber(L, static_cast<lua_Number>(u));
    break;
  }
  case json::value_t::number_float:
    lua_pushnumber(L, v.get<double>());
    break;
  case json::value_t::string: {
    const auto& s = v.get_ref<const std::string&>();
    lua_pushlstring(L, s.data(), s.size());
    break;
  }
  case json::value_t::array:
    push_array(L, v, depth);
    break;
  case json::value_t::object:
    push_object(L, v, depth);
    break;
  default:
    throw std::runtime_error("internal error: unexpected JSON value type in mgjson.decode");
  }
}

// mgjson.decode(text [, what]) -> the value; `what` (a file name, say) starts the error message.
int json_decode(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  std::string what = luaL_optstring(L, 2, "");
  std::string prefix = what.empty() ? "" : what + ": ";
  json v;
  try {
    v = json::parse(s, s + n);
  } catch (const json::exception& e) { // parse_error, or out_of_range for a number like 1e999
    throw std::runtime_error(prefix + "bad JSON: " + plain_message(e));
  }
  try {
    push_value(L, v, 0);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(prefix + "bad JSON: " + e.what());
  }
  return 1;
}

// ---------------------------------------------------------------- encode

json to_json(lua_State* L, int idx, int depth, const std::string& path);

// n >= 1 when the table's keys are exactly 1..n; 0 otherwise.
lua_Integer sequence_length(lua_State* L, int idx) {
  lua_Integer count = 0, max = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
      lua_pop(L, 1);
      return 0;
    }
    count++;
    max = std::max(max, lua_tointeger(L, -1));
  }
  return count == max ? max : 0;
}

bool marked_array(lua_State* L, int idx) {
  if (!lua_getmetatable(L, idx)) return false;
  lua_getfield(L, LUA_REGISTRYINDEX, kArrayMetaKey);
  bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

json table_to_json(lua_State* L, int idx, int depth, const std::string& path) {
  bool marked = marked_array(L, idx);
  lua_Integer n = marked ? luaL_len(L, idx) : sequence_length(L, idx);
  if (marked || n > 0) {
    json a = json::array();
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, idx, i);
      a.push_back(to_json(L, lua_gettop(L), depth + 1, path + "[" + std::to_string(i) + "]"));
      lua_pop(L, 1);
    }
    return a;
  }
  json o = json::object();
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      throw std::runtime_error((path.empty() ? std::string("the value") : path) + " has a key of type " +
                               luaL_typename(L, -2) + ": a JSON object's keys are strings");
    size_t kn = 0;
    const char* k = lua_tolstring(L, -2, &kn);
    std::string key(k, kn);
    o[key] = to_json(L, lua_gettop(L), depth + 1, path + "." + key);
    lua_pop(L, 1);
  }
  return o;
}

json to_json(lua_State* L, int idx, int depth, const std::string& path) {
  if (depth > kMaxDepth)
    throw std::runtime_error("nested deeper than " + std::to_string(kMaxDepth) +
                             " levels (a table that contains itself?)");
  luaL_checkstack(L, 4, "mgjson.encode: nested too deep");
  auto where = [&] { return path.empty() ? std::string("the value") : path; };
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    return json(static_cast<bool>(lua_toboolean(L, idx)));
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) return json(static_cast<int64_t>(lua_tointeger(L, idx)));
    if (!std::isfinite(lua_tonumber(L, idx)))
      throw std::runtime_error(where() + " is " + luaL_tolstring(L, idx, nullptr) +
                               ", which JSON cannot hold");
    return json(static_cast<double>(lua_tonumber(L, idx)));
  case LUA_TSTRING: {
    size_t n = 0;
    const char* s = lua_tolstring(L, idx, &n);
    return json(std::string(s, n));
  }
  case LUA_TTABLE: {
    lua_getfield(L, LUA_REGISTRYINDEX, kNullKey);
    bool is_null = lua_rawequal(L, -1, idx);
    lua_pop(L, 1);
    if (is_null) return json(nullptr);
    return table_to_json(L, idx, depth, path);
  }
  default:
    throw std::runtime_error(where() + " is a " + luaL_typename(L, idx) +
                             ": JSON holds tables, strings, numbers, booleans and mgjson.null");
  }
}

// mgjson.encode(value) -> compact JSON text, keys sorted. Strings must be UTF-8.
int json_encode(lua_State* L) {
  luaL_checkany(L, 1);
  json v = to_json(L, 1, 0, "");
  std::string out;
  try {
    out = v.dump();
  } catch (const json::type_error& e) { // a string that is not UTF-8
    throw std::runtime_error(plain_message(e));
  }
  lua_pushlstring(L, out.data(), out.size());
  return 1;
}

// mgjson.array(t) -> t, marked to encode as an array even when empty.
int json_array(lua_State* L) {
  if (lua_isnoneornil(L, 1)) lua_newtable(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, kArrayMetaKey);
  lua_setmetatable(L, 1);
  return 1;
}

int null_tostring(lua_State* L) {
  lua_pushliteral(L, "mgjson.null");
  return 1;
}

const Binding kJsonFns[] = {
    {"mgjson.decode", json_decode}, {"mgjson.encode", json_encode}, {"mgjson.array", json_array}};

} // namespace

int open_mgjson(lua_State* L) {
  lua_newtable(L); // the metatable that marks arrays
  lua_pushliteral(L, "mgjson.array");
  lua_setfield(L, -2, "__name");
  lua_setfield(L, LUA_REGISTRYINDEX, kArrayMetaKey);
  lua_newtable(L); // null: one shared empty table, printed as mgjson.null
  lua_newtable(L);
  lua_pushcfunction(L, null_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "mgjson.null");
  lua_setfield(L, -2, "__name");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, kNullKey);

  lua_newtable(L);
  set_bindings(L, -1, kJsonFns);
  lua_getfield(L, LUA_REGISTRYINDEX, kNullKey);
  lua_setfield(L, -2, "null");
  return 1;
}

} // namespace mg::lua
