// Keyword arguments for every Tensor function (require "mgargs", used by stdlib/args.lua).
// wrap(name, params, fn) returns a C closure that turns a trailing keyword table into
// positional arguments by parameter name, rejects unknown names and names given twice, calls fn,
// and reports fn's errors at the caller's line. It is a C function, not Lua, so a Lua tail call
// to it (`return x:reshape(5)`) keeps the caller's frame, and error positions name that line.
#include <algorithm>
#include <cstring>
#include <string>

#include "interp/lua_state.h"

namespace mg::lua {
namespace {

// upvalues of a wrapped function
enum Up { kName = 1, kParams, kFn, kVararg, kAccepted, kKwRest };

// A keyword table: a plain table (no metatable) with at least one string key.
bool plain_kwargs(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return false;
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    return false;
  }
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    bool str = lua_type(L, -2) == LUA_TSTRING;
    lua_pop(L, 1);
    if (str) {
      lua_pop(L, 1);
      return true;
    }
  }
  return false;
}

// "stdlib/x.lua:12: msg" -> "msg"; a message with another position is left alone (false).
bool strip_stdlib_position(std::string& msg) {
  if (msg.rfind("stdlib/", 0) == 0) {
    size_t colon = msg.find(':');
    size_t end = msg.find(": ", colon + 1);
    if (colon != std::string::npos && end != std::string::npos) {
      msg = msg.substr(end + 2);
      return true;
    }
  }
  size_t colon = msg.find(':');
  if (colon != std::string::npos && colon > 0 && msg.find('\n') > colon) {
    size_t i = colon + 1;
    while (i < msg.size() && msg[i] >= '0' && msg[i] <= '9')
      i++;
    if (i > colon + 1 && msg.compare(i, 2, ": ") == 0) return false; // a position of its own
  }
  return true;
}

int relocate_error(lua_State* L) {
  if (lua_type(L, -1) == LUA_TSTRING) {
    std::string msg = lua_tostring(L, -1);
    if (strip_stdlib_position(msg)) {
      luaL_where(L, 1); // the caller of this wrapper: the user's line (or an outer wrapper's)
      lua_pushstring(L, msg.c_str());
      lua_concat(L, 2);
    }
  }
  return lua_error(L);
}

int call_fn(lua_State* L, int nargs) {
  int base = lua_gettop(L) - nargs;
  lua_pushvalue(L, lua_upvalueindex(kFn));
  lua_insert(L, base + 1);
  if (lua_pcall(L, nargs, LUA_MULTRET, 0) != LUA_OK) return relocate_error(L);
  return lua_gettop(L) - base;
}

int wrapped(lua_State* L) {
  const char* name = lua_tostring(L, lua_upvalueindex(kName));
  int nparams = static_cast<int>(lua_rawlen(L, lua_upvalueindex(kParams)));
  int vararg = static_cast<int>(lua_tointeger(L, lua_upvalueindex(kVararg)));
  int kwrest = static_cast<int>(lua_tointeger(L, lua_upvalueindex(kKwRest)));
  int n = lua_gettop(L);
  bool kw = n > 0 && plain_kwargs(L, n);
  lua_rawgeti(L, lua_upvalueindex(kParams), 1);
  bool method = lua_type(L, -1) == LUA_TSTRING && std::strcmp(lua_tostring(L, -1), "self") == 0;
  lua_pop(L, 1);
  int npos = kw ? n - 1 : n;
  if (kwrest && npos >= kwrest) // the **name slot takes keywords only
    return luaL_error(L, "%s: too many arguments (%d given; it takes %s)", name, npos - (method ? 1 : 0),
                      lua_tostring(L, lua_upvalueindex(kAccepted)));
  if (!vararg && npos > nparams)
    return luaL_error(L, "%s: too many arguments (%d given; it takes %s)", name, npos - (method ? 1 : 0),
                      lua_tostring(L, lua_upvalueindex(kAccepted)));
  if (!kw && !vararg) return call_fn(L, n);

  // out[1..nparams]: the positional values, then the named ones
  luaL_checkstack(L, nparams + 8, "too many arguments");
  lua_createtable(L, nparams, 0);
  int out = lua_gettop(L);
  int fixed = vararg ? std::min(npos, vararg - 1) : npos;
  for (int i = 1; i <= fixed; i++) {
    lua_pushvalue(L, i);
    lua_rawseti(L, out, i);
  }
  if (vararg) { // the rest of the positional values as one list with .n
    int cnt = std::max(0, npos - (vararg - 1));
    lua_createtable(L, cnt, 1);
    for (int i = 0; i < cnt; i++) {
      lua_pushvalue(L, vararg + i);
      lua_rawseti(L, -2, i + 1);
    }
    lua_pushinteger(L, cnt);
    lua_setfield(L, -2, "n");
    lua_rawseti(L, out, vararg);
  }
  if (kw) {
    lua_pushnil(L);
    while (lua_next(L, n)) {
      int pos = 0;
      const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : nullptr;
      if (key)
        for (int i = 1; i <= nparams && !pos; i++) {
          lua_rawgeti(L, lua_upvalueindex(kParams), i);
          if (lua_rawequal(L, -1, -3) && std::strcmp(lua_tostring(L, -1), "self") != 0 &&
              std::strcmp(lua_tostring(L, -1), "...") != 0)
            pos = i;
          lua_pop(L, 1);
        }
      if (!pos && kwrest && key) { // f(..., **rest): other names go to one table
        if (lua_rawgeti(L, out, kwrest) == LUA_TNIL) {
          lua_pop(L, 1);
          lua_newtable(L);
          lua_pushvalue(L, -1);
          lua_rawseti(L, out, kwrest);
        }
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_rawset(L, -3);
        lua_pop(L, 2);
        continue;
      }
      if (!pos)
        return luaL_error(L, "%s: unknown keyword '%s' (accepted: %s)", name, luaL_tolstring(L, -2, nullptr),
                          lua_tostring(L, lua_upvalueindex(kAccepted)));
      bool given_by_position = pos <= fixed && (!vararg || pos < vararg);
      if (given_by_position || lua_rawgeti(L, out, pos) != LUA_TNIL)
        return luaL_error(L, "%s: '%s' is given twice (by position and by name)", name, key);
      if (!given_by_position) lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, out, pos);
      lua_pop(L, 1);
    }
  }
  int top = lua_gettop(L);
  for (int i = 1; i <= nparams; i++)
    lua_rawgeti(L, out, i);
  lua_rotate(L, 1, -top); // drop the original arguments and the out table, keep the new ones
  lua_settop(L, nparams);
  return call_fn(L, nparams);
}

// mgargs.wrap(name, params, fn)
int args_wrap(lua_State* L) {
  luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  int nparams = static_cast<int>(lua_rawlen(L, 2));
  int vararg = 0, kwrest = 0;
  std::string accepted;
  for (int i = 1; i <= nparams; i++) {
    lua_rawgeti(L, 2, i);
    const char* p = luaL_checkstring(L, -1);
    if (std::strcmp(p, "...") == 0)
      vararg = i;
    else if (std::strncmp(p, "**", 2) == 0)
      kwrest = i;
    else if (std::strcmp(p, "self") != 0 && std::strncmp(p, "**", 2) != 0)
      accepted += (accepted.empty() ? "" : ", ") + std::string(p);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_pushinteger(L, vararg);
  lua_pushstring(L, accepted.empty() ? "no arguments" : accepted.c_str());
  lua_pushinteger(L, kwrest);
  lua_pushcclosure(L, wrapped, 6);
  return 1;
}

} // namespace

int open_mgargs(lua_State* L) {
  lua_newtable(L);
  lua_pushcfunction(L, args_wrap);
  lua_setfield(L, -2, "wrap");
  return 1;
}

} // namespace mg::lua
