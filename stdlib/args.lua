-- args: keyword arguments for every Tensor function, in one place. tinygrad's
-- `x.max_pool2d(3, stride=2)` is `x:max_pool2d(3, {stride=2})` or `x:max_pool2d{kernel_size=3, stride=2}`:
-- a trailing plain table with a string key is a keyword table. wrap() (interp/bind_args.cpp)
-- turns it into positional arguments by parameter name, and rejects unknown names and names
-- given twice, so a typo is an error and never a silently ignored option. It also reports errors
-- raised inside stdlib/ at the caller's line.
local M = {}

-- wrap(name, params, fn): params lists the parameter names in order ("self" first for a
-- method). A "..." entry collects the remaining positional arguments into one list (with .n),
-- passed in its place; the names after it are keyword-only. fn receives exactly the positional
-- parameters; a missing one is nil.
M.wrap = require("mgargs").wrap

M.params = {} -- name -> parameter names, for :help

-- name -> its :help text: a string, or {signature, text} where the parameter names do not make
-- one. Each stdlib/tensor*.lua file calls doc(name, text) beside the method's definition, so a
-- method and its doc have one home; stdlib/help.lua serves this table as help.tensor.
M.docs = {}
function M.doc(name, text)
  assert(M.docs[name] == nil, "args.doc: Tensor." .. name .. " is documented twice")
  M.docs[name] = text
end

-- A Tensor, or a tensor sharded over devices (stdlib/multi.lua sets is_sharded).
M.is_sharded = function() return false end
function M.is_tensor(v) return show.typeof(v) == "Tensor" or M.is_sharded(v) end

-- The C++ bindings as they were before any Lua wrapped them (taken when this module loads,
-- which stdlib/tensor.lua does first): wrappers call these, never themselves.
M.raw = {}
for k, v in pairs(Tensor) do M.raw[k] = v end

-- Wraps T[name] (a C++ binding) in place, with the given parameter names.
function M.sign(T, name, params)
  local f = rawget(T, name)
  assert(f, "args.sign: no Tensor." .. name)
  M.params[name] = params
  T[name] = M.wrap(name, params, f)
end

-- name -> true for the methods written in Lua over others (a sharded tensor runs them as they
-- are, its pieces' own methods then doing the work: stdlib/multi.lua)
M.composed = {}

-- Defines T[name] = wrap(fn) and records its parameter names for :help.
function M.def(T, name, params, fn)
  M.params[name] = params
  M.composed[name] = debug.getinfo(fn, "S").what ~= "C"
  T[name] = M.wrap(name, params, fn)
  return T[name]
end

-- name -> the name it is another name for (view: reshape), so that whatever routes by name
-- (stdlib/multi.lua) treats both alike
M.alias_of = {}
function M.alias(T, name, of)
  T[name], M.params[name], M.composed[name], M.alias_of[name] = T[of], M.params[of], M.composed[of], of
end

-- A function whose trailing options are named parameters too: options(name, {"self", "cin"},
-- {"stride", "bias"}, body) accepts f(self, cin, 2, false), f(self, cin, {bias=false}) or
-- f(self, {cin=3, stride=2}), rejects unknown names, and calls body(self, cin, o) with o the
-- options as a table.
function M.options(name, lead, names, body)
  local params = { table.unpack(lead) }
  for _, n in ipairs(names) do params[#params + 1] = n end
  local nlead = #lead
  return M.wrap(name, params, function(...)
    local a = table.pack(...)
    local o = {}
    for i, n in ipairs(names) do o[n] = a[nlead + i] end
    a[nlead + 1] = o
    return body(table.unpack(a, 1, nlead + 1))
  end)
end

return M
