-- TinyJit(fn): the first call runs fn normally (compiling its kernels), the second runs it
-- while recording every kernel it launches, and later calls replay those kernels on the new
-- inputs' buffers: no Lua, no graph building, no scheduling. As in tinygrad, fn must do the
-- same work every call: tensor inputs may change their values but not their shapes or
-- dtypes (that is an error), other arguments must not change, and the tensors it returns are
-- the same objects each call, rewritten in place.
local mgjit = require "mgjit"
local is_sharded = require("args").is_sharded

local function describe(t) return ("(%s) %s"):format(table.concat(t.shape, ", "), t.dtype) end

-- Tensor arguments become whole buffers (a slice is copied: replay swaps buffers, and a view
-- into a bigger buffer would keep the captured offset); the call gets those tensors. A sharded
-- tensor's pieces are inputs each. Bound Variables are values that may change between calls: the
-- kernels take them as parameters.
local function split_args(args)
  local tensors, others, vars = {}, {}, {}
  for i = 1, args.n do
    local v = args[i]
    if show.typeof(v) == "Tensor" then
      args[i] = v:contiguous():realize()
      tensors[#tensors + 1] = args[i]
    elseif is_sharded(v) then -- each device's piece is an input of its own
      for k, p in ipairs(v.pieces) do
        v.pieces[k] = p:contiguous():realize()
        tensors[#tensors + 1] = v.pieces[k]
      end
    elseif show.typeof(v) == "Variable" then
      local ok, val = pcall(function() return v.val end)
      if not ok or not v.name then
        error(("TinyJit: argument %d is %s, not a bound Variable: shapes must not depend on an unbound value "
          .. "(pass v:bind(n))"):format(i, tostring(v)), 3)
      end
      vars[i] = { name = v.name, val = val }
    else
      others[i] = v
    end
  end
  return tensors, others, vars
end

local function TinyJit(fn)
  assert(type(fn) == "function", "TinyJit needs a function")
  local jit = { calls = 0 }
  local function call(_, ...)
    local args = table.pack(...)
    local tensors, others, vars = split_args(args)
    jit.calls = jit.calls + 1
    if jit.calls == 1 then return fn(table.unpack(args, 1, args.n)) end
    if jit.calls == 2 then
      local res
      jit.capture, res = (function(cap, ...) return cap, table.pack(...) end)(mgjit.capture(function(...)
        local r = table.pack(fn(...))
        local outs = {}
        for i = 1, r.n do if show.typeof(r[i]) == "Tensor" then outs[#outs + 1] = r[i] end end
        if #outs > 0 then Tensor.realize_all(outs) end -- their kernels belong to the capture
        return table.unpack(r, 1, r.n)
      end, table.unpack(args, 1, args.n)))
      jit.inputs, jit.others, jit.vars, jit.results, jit.n = tensors, others, vars, res, args.n
      local host = jit.capture:host_made()
      if host > 0 then
        io.stderr:write(("TinyJit warning: the captured call read %d tensor(s) it made from Lua data or random numbers "
          .. "(Tensor{...}, rand, dropout); every replay reuses their first values\n"):format(host))
      end
      jit.shapes = {}
      for i, t in ipairs(tensors) do jit.shapes[i] = describe(t) end
      return table.unpack(res, 1, res.n)
    end
    if #tensors ~= #jit.inputs or args.n ~= jit.n then
      error(("TinyJit: called with %d tensor arguments (%d in all); the captured call had %d (%d)")
        :format(#tensors, args.n, #jit.inputs, jit.n), 2)
    end
    for i, t in ipairs(tensors) do
      if describe(t) ~= jit.shapes[i] then
        error(("TinyJit: tensor argument %d is %s, but the captured call had %s (make a new TinyJit for new shapes)")
          :format(i, describe(t), jit.shapes[i]), 2)
      end
    end
    local values = {}
    for i = 1, args.n do
      if jit.others[i] ~= others[i] then
        error(("TinyJit: argument %d changed from %s to %s; values that change must be tensors or bound Variables")
          :format(i, tostring(jit.others[i]), tostring(others[i])), 2)
      end
      if (jit.vars[i] and jit.vars[i].name) ~= (vars[i] and vars[i].name) then
        error(("TinyJit: argument %d was Variable %s in the captured call, now %s")
          :format(i, tostring(jit.vars[i] and jit.vars[i].name), tostring(args[i])), 2)
      end
      if vars[i] then values[vars[i].name] = vars[i].val end
    end
    jit.capture:replay(jit.inputs, tensors, values)
    return table.unpack(jit.results, 1, jit.results.n)
  end
  return setmetatable(jit, { __call = call, __name = "TinyJit" })
end

return TinyJit
