-- multi: one tensor split over several devices, as tinygrad's multi-device tensors
-- (x:shard({"CPU:0", "CPU:1"}, {axis = 0})): a piece on each device, cut along `axis`, or the
-- whole tensor on each where axis is nil (replicated). Ops run piece by piece, each on its own
-- device; a reduction over the cut axis reduces each piece and then combines the partial results
-- across the devices (a ring all-reduce through copies, so gradients flow back through it); a plain
-- tensor meeting a sharded one is copied to every device, cut where it spans the cut axis.
-- Methods written in Lua over others (conv2d, batchnorm, the losses) run unchanged on a sharded
-- tensor: their inner calls reach the primitives below.
local args = require "args"
local T = Tensor
local raw = {} -- the C++ bindings, before this module routes sharded arguments through them
for k, v in pairs(args.raw) do raw[k] = v end

local MT = {}
local all_reduce -- below
local function is_multi(v) return getmetatable(v) == MT end
local function is_tensor(v) return show.typeof(v) == "Tensor" end
local function numel(shape)
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  return n
end

local function shape_of(pieces, axis)
  local s = table.move(pieces[1].shape, 1, #pieces[1].shape, 1, {})
  if axis then
    s[axis + 1] = 0
    for _, p in ipairs(pieces) do s[axis + 1] = s[axis + 1] + p.shape[axis + 1] end
  end
  return s
end

local made_any = false -- until a sharded tensor exists, no call needs to look for one
local function new(pieces, devices, axis)
  made_any = true
  return setmetatable({ pieces = pieces, devices = devices, axis = axis, shape = shape_of(pieces, axis),
    ndim = #pieces[1].shape, dtype = pieces[1].dtype }, MT)
end

-- Whether a copy between these devices is made at once (Tensor:to realizes what it copies, alone):
-- any device whose buffers are not host memory (CL, VULKAN). Between CPU:n and LLVM:n the copies
-- are lazy graph nodes, and one realize runs every device's kernels and copies on lanes of their
-- own; with eager copies, what several copies read is realized together first, else each copy's
-- realize would compute its shared graph again.
local function eager(devices)
  for _, d in ipairs(devices) do
    if not Device.host_memory(d) then return true end
  end
  return false
end

-- ---------------------------------------------------------------- making and gathering

local function shard(x, devices, axis, copy)
  if type(devices) ~= "table" or #devices < 1 then error("shard: devices must be a list of device names", 3) end
  -- {axis = a} with a nil is an empty table, which keywords never see (no string key): no axis
  if type(axis) == "table" and next(axis) == nil then axis = nil end
  if axis then
    if math.type(axis) ~= "integer" then error("shard: axis must be an integer", 3) end
    if axis < 0 then axis = axis + x.ndim end
    if axis < 0 or axis >= x.ndim then error(("shard: axis %d is out of range for %d dims"):format(axis, x.ndim), 3) end
    if x.shape[axis + 1] % #devices ~= 0 then
      error(("shard: dim %d (%d) does not split into %d devices"):format(axis, x.shape[axis + 1], #devices), 3)
    end
  end
  local pieces, devs, n = {}, {}, axis and x.shape[axis + 1] // #devices
  for i, d in ipairs(devices) do
    local part = x
    if axis then
      local arg = {}
      for j = 1, x.ndim do arg[j] = { 0, x.shape[j] } end
      arg[axis + 1] = { (i - 1) * n, i * n }
      part = x:shrink(arg)
    end
    if copy then -- shard_: never x itself, which is to stand for the sharded tensor
      d = T._check_device("shard_", d)
      -- on x's own device a view of it: made from its bytes, it would be a tensor from host data,
      -- which TinyJit's replays do not read again (the replayed steps used the first weights)
      pieces[i] = d == part.device and part:reshape(part.shape) or T._copy_to(part, d)
    else
      pieces[i] = part:to(d)
    end
    devs[i] = pieces[i].device
  end
  return new(pieces, devs, axis)
end

-- the whole tensor on one device
local function gather(m, device)
  device = device or m.devices[1]
  if m.axis == nil then return m.pieces[1]:to(device) end
  if eager(m.devices) then raw.realize_all(m.pieces) end
  local moved = {}
  for i, p in ipairs(m.pieces) do moved[i] = p:to(device) end
  return #moved == 1 and moved[1] or moved[1]:cat(table.unpack(moved, 2, #moved), { dim = m.axis })
end

-- ---------------------------------------------------------------- arguments, piece by piece

-- The sharded axis of an op over `args` and its device list (a sharded argument decides; else the
-- first replicated one).
local function layout(list)
  local axis, devices, ndim
  for _, v in ipairs(list) do
    if is_multi(v) then
      devices = devices or v.devices
      if #v.devices ~= #devices then error("tensors sharded over different devices meet in one op", 4) end
      if v.axis then
        -- broadcasting aligns dims from the right: (4, 11, 2) cut along 2 meets (11, 2) cut along 1
        if axis and ndim - axis ~= v.ndim - v.axis then
          error(("tensors sharded along axes %d and %d meet in one op"):format(axis, v.axis), 4)
        end
        if not axis or v.ndim > ndim then axis, ndim = v.axis, v.ndim end
      end
    end
  end
  return axis, devices, ndim
end

-- Argument v as piece i sees it: a sharded tensor's piece; a replicated or plain tensor on
-- device i, cut like the pieces where it spans the sharded axis (aligned from the right).
local function piece(v, i, axis, devices, ndim, cache, cut)
  if is_multi(v) then
    if v.axis == axis or v.axis ~= nil then return v.pieces[i] end
    v = v.pieces[i]
  elseif is_tensor(v) then
    cache[v] = cache[v] or {}
    cache[v][i] = cache[v][i] or v:to(devices[i])
    v = cache[v][i]
  elseif type(v) == "table" and getmetatable(v) == nil then
    local out = {}
    for k, x in pairs(v) do out[k] = piece(x, i, axis, devices, ndim, cache, cut) end
    return out
  else
    return v
  end
  local a = cut and axis and axis - (ndim - v.ndim)
  if a and a >= 0 and v.shape[a + 1] ~= 1 then
    local n = v.shape[a + 1] // #devices
    local arg = {}
    for j = 1, v.ndim do arg[j] = { 0, v.shape[j] } end
    arg[a + 1] = { (i - 1) * n, i * n }
    v = raw.shrink(v, arg)
  end
  return v
end

-- The elementwise primitives: their whole (replicated or plain) arguments broadcast against the
-- pieces, so each piece takes its share of them. Any other primitive (a custom gradient's
-- inputs, a matmul's weights) takes them whole.
local broadcasting = {}
for _, k in ipairs({ "_alu", "_broadcasted", "add", "sub", "mul", "div", "idiv", "pow", "eq", "ne", "lt", "le", "gt",
  "ge", "maximum", "minimum", "where" }) do broadcasting[k] = true end

-- f applied piece by piece; each of its results that is a tensor (_broadcasted has two) becomes
-- sharded along `out_axis`; `cut`: whole arguments are cut as the pieces are.
local function map(f, list, out_axis_fn, cut)
  local axis, devices, ndim = layout(list)
  local outs, cache = {}, {}
  for i = 1, #devices do
    local a = {}
    for k = 1, list.n or #list do a[k] = piece(list[k], i, axis, devices, ndim, cache, cut) end
    -- the piece's device is the default while its op runs: a constant an op makes (argmax's
    -- arange) belongs beside the piece
    local prev = Device.DEFAULT
    Device.DEFAULT = devices[i]
    local r = table.pack(pcall(f, table.unpack(a, 1, list.n or #list)))
    Device.DEFAULT = prev
    if not r[1] then error(r[2], 0) end
    outs[i] = r
  end
  local results = {}
  for j = 2, outs[1].n do
    local first = outs[1][j]
    if is_tensor(first) then
      local out_axis = axis
      if out_axis_fn and axis then
        out_axis = out_axis_fn(axis, first)
      elseif cut and axis then -- broadcast against higher ranks: the same dim counted from the right
        out_axis = axis + first.ndim - ndim
      end
      local pieces = {}
      for i = 1, #devices do pieces[i] = outs[i][j] end
      results[j - 1] = new(pieces, devices, out_axis)
    else
      results[j - 1] = first
    end
  end
  return table.unpack(results, 1, outs[1].n - 1)
end

-- Arguments cut along different axes meet as tinygrad's do: each cut otherwise than the first
-- sharded argument of its rank is gathered and cut again along that one's axis (copies, so
-- gradients flow back). Arguments of other ranks are left to layout(), which names the clash.
local function align(list)
  local first
  for k = 1, list.n do
    local v = list[k]
    if is_multi(v) and v.axis ~= nil then
      if not first then
        first = v
      elseif v.ndim - v.axis ~= first.ndim - first.axis and #v.devices == #first.devices then
        -- the first's dim, counted from the right (broadcasting); whole where v lacks it or has 1
        local a = first.axis - (first.ndim - v.ndim)
        local cut = a >= 0 and v.shape[a + 1] % #first.devices == 0 and v.shape[a + 1] > 1
        list[k] = shard(gather(v), first.devices, cut and a or nil)
      end
    end
  end
  return list
end

-- ---------------------------------------------------------------- the primitives' rules

local function axes(x, axis)
  local out = {}
  if axis == nil then
    for i = 0, x.ndim - 1 do out[#out + 1] = i end
    return out
  end
  for _, a in ipairs(type(axis) == "table" and axis or { axis }) do out[#out + 1] = a < 0 and a + x.ndim or a end
  return out
end

-- When the ring is used (tinygrad's RING): mode 0 never, 2 always, 1 (the default) for more than
-- two devices and at least min_elements each, where its smaller copies outweigh its 2 (n - 1)
-- steps, each a wait between devices (a batch norm's 32 means are latency, not bandwidth).
local ring = { mode = tonumber(os.getenv("RING") or "") or 1, min_elements = 1 << 18 }

-- Combines one tensor per device (`op`: "add", "maximum", "minimum") so that every device holds
-- the result. As tinygrad's ring: each tensor is cut into one chunk per device; in n - 1 steps each
-- device passes a chunk to the next, which combines it with its own (reduce-scatter), then n - 1
-- more steps pass the combined chunks round (all-gather). Each device sends 2 (n - 1) / n of the
-- data instead of n - 1 times all of it. Otherwise (`ring`), and for tensors with fewer elements
-- than devices, every device combines the others' whole tensors copied to it.
all_reduce = function(parts, devices, op)
  local n, count = #parts, numel(parts[1].shape)
  if n == 1 then return parts end
  if eager(devices) then raw.realize_all(parts) end
  local use_ring = ring.mode >= 2 or (ring.mode == 1 and n > 2 and count >= ring.min_elements)
  if count < n or not use_ring then
    local out = {}
    for i, d in ipairs(devices) do
      local acc
      for _, p in ipairs(parts) do
        local q = p:to(d)
        acc = acc and raw[op](acc, q) or q
      end
      out[i] = acc
    end
    return out
  end
  local shape = parts[1].shape
  local bounds = {} -- chunk c is elements [bounds[c], bounds[c + 1]) of the flattened tensor
  for c = 0, n do bounds[c + 1] = c * count // n end
  local chunks = {} -- chunks[i][c]: device i's chunk c
  for i, p in ipairs(parts) do
    local flat = raw.reshape(p, { count })
    chunks[i] = {}
    for c = 1, n do chunks[i][c] = raw.shrink(flat, { { bounds[c], bounds[c + 1] } }) end
  end
  local function pass(combine_it, first_step)
    for s = first_step, first_step + n - 2 do
      local sent = {}
      for i = 1, n do sent[i] = chunks[i][(i - s) % n + 1] end
      if eager(devices) then raw.realize_all(sent) end
      local moved = {}
      for i = 1, n do
        local c, to = (i - s) % n + 1, i % n + 1
        moved[to] = { c, chunks[i][c]:to(devices[to]) }
      end
      for to, m in pairs(moved) do
        chunks[to][m[1]] = combine_it and raw[op](chunks[to][m[1]], m[2]) or m[2]
      end
    end
  end
  pass(true, 1)  -- reduce-scatter: device i ends with chunk i + 1 combined
  pass(false, 0) -- all-gather
  local out = {}
  for i = 1, n do
    local whole
    for c = 1, n do
      local placed = raw.pad(chunks[i][c], { { bounds[c], count - bounds[c + 1] } }, 0)
      whole = whole and raw.add(whole, placed) or placed
    end
    out[i] = raw.reshape(whole, shape)
  end
  return out
end

-- sum, max, min over axes that include the sharded one: each piece's, then combined across the
-- devices on every device (the result is replicated)
local combine = { sum = "add", max = "maximum", min = "minimum" }
-- A max or min over the sharded axis (out, keepdim) takes its gradient as on one device: split
-- evenly among every element equal to it, on every device. Through the pieces' own reduces and the
-- combining maximum, ties split per device, then in halves between devices (1/8 where one device
-- gives 1/7). The ties are found and counted in backward only: a forward pass runs no more kernels.
local tie_grad
local reshape -- below
local function even_ties(out, x)
  if T.no_grad then return out end
  tie_grad = tie_grad or T._grad_fn(function(g, ...) -- inputs: x's pieces, then out's on each device
    local ins = table.pack(...)
    local n, hits, counts = ins.n // 2, {}, {}
    for i = 1, n do
      local xi, m = ins[i], ins[n + i]
      hits[i] = xi:eq(m):cast(xi.dtype)
      local axes = {} -- out's dims of 1: the reduced ones (a sum over any other of 1 changes nothing)
      for a, v in ipairs(m.shape) do
        if v == 1 then axes[#axes + 1] = a - 1 end
      end
      counts[i] = hits[i]:sum(axes, true)
    end
    local grads = {}
    for i = 1, n do
      local d, total = ins[i].device, counts[i]
      for k = 1, n do
        if k ~= i then total = total + counts[k]:to(d) end
      end
      grads[i] = g:to(d) * hits[i] / total
    end
    return table.unpack(grads, 1, ins.n)
  end)
  local ins = table.move(x.pieces, 1, #x.pieces, 1, {})
  for _, p in ipairs(out.pieces) do ins[#ins + 1] = p:detach() end
  local pieces = {}
  for j, p in ipairs(out.pieces) do pieces[j] = T._custom_grad(p, ins, tie_grad) end
  return new(pieces, out.devices, nil)
end

local function reduce(name, x, axis, keepdim)
  local over = axes(x, axis)
  local cut = x.axis ~= nil
  if cut then
    cut = false
    for _, a in ipairs(over) do cut = cut or a == x.axis end
  end
  if not cut then
    return map(function(p) return raw[name](p, axis, keepdim) end, { x, n = 1 }, function(a)
      if keepdim then return a end
      local shift = 0
      for _, o in ipairs(over) do if o < a then shift = shift + 1 end end
      return a - shift
    end)
  end
  if name == "mean" then
    local sum = reduce("sum", x, axis, keepdim)
    local count = 1
    for _, a in ipairs(over) do count = count * x.shape[a + 1] end
    return sum / count
  end
  if not combine[name] then error(name .. ": not over the sharded axis of a sharded tensor", 3) end
  if name ~= "sum" and not keepdim then -- through keepdim, where even_ties compares x with it
    local shape = {}
    for j, v in ipairs(x.shape) do
      local kept = true
      for _, a in ipairs(over) do kept = kept and a ~= j - 1 end
      if kept then shape[#shape + 1] = v end
    end
    return reshape(reduce(name, x, axis, true), shape)
  end
  local partial = {}
  for i, p in ipairs(x.pieces) do partial[i] = raw[name](p, axis, keepdim) end
  -- with eager copies, the pieces stored with their partials: the graph above them (a convolution)
  -- is then computed once, where every later realize that reads them (a variance after a mean)
  -- would compute it again (the sharded MNIST step ran each conv 8 times)
  if eager(x.devices) then
    local both = table.move(x.pieces, 1, #x.pieces, 1, {})
    table.move(partial, 1, #partial, #both + 1, both)
    raw.realize_all(both)
  end
  local out = new(all_reduce(partial, x.devices, combine[name]), x.devices, nil)
  return name == "sum" and out or even_ties(out, x)
end

-- a shape or order given as a list or as separate numbers
local function list_of(...)
  if select("#", ...) == 1 and type(...) == "table" then return ... end
  return { ... }
end

-- the pieces' own shape for a global `shape` of a sharded result (the sharded dim at `axis`)
local function local_shape(x, shape, axis)
  local s = table.move(shape, 1, #shape, 1, {})
  s[axis + 1] = x.pieces[1].shape[x.axis + 1]
  return s
end

-- The new position of the sharded axis after a reshape: the first dim (not of size 1) that starts
-- where the elements before the sharded dim still end. The sharded dim may be split there or
-- merged with the dims after it: each piece is a contiguous run of every such block, so it is
-- that dim's share when the dim divides into the devices (8 cut over 2 devices as (2, 4): a row
-- each; (4, 2) as 2 rows each; (3, ...) not at all). The pieces reshape with that dim divided.
function reshape(x, ...)
  local shape = list_of(...)
  if x.axis == nil then return map(function(p) return raw.reshape(p, shape) end, { x, n = 1 }) end
  local s = {}
  local known, infer = 1, nil
  for j, v in ipairs(shape) do
    s[j] = v
    if v == -1 then infer = j else known = known * v end
  end
  if infer then s[infer] = numel(x.shape) // known end
  local before = 1
  for j = 1, x.axis do before = before * x.shape[j] end
  local at, prod, n = nil, 1, #x.pieces
  for j = 1, #s do
    if prod == before and s[j] ~= 1 then
      if s[j] % n == 0 then at = j - 1 end
      break
    end
    prod = prod * s[j]
  end
  -- no dim of the new shape holds whole runs of each piece: the whole tensor's reshape, on every
  -- device (tinygrad refuses it)
  if not at then return shard(raw.reshape(gather(x), s), x.devices) end
  local ls = table.move(s, 1, #s, 1, {})
  ls[at + 1] = s[at + 1] // n
  local out = {}
  for i, p in ipairs(x.pieces) do out[i] = raw.reshape(p, ls) end
  return new(out, x.devices, at)
end

-- x @ w with sharded operands, either side (tinygrad's multi-device matmul):
-- - x cut along a dim other than the contracted one, w whole: each piece's product, cut the same
--   way (a batch's rows, each device its share; data parallelism);
-- - w cut along its columns, x whole: each device's columns of the product, cut along the last dim
--   (a column-parallel linear layer);
-- - the contracted dim cut (x along its last dim, w along its rows; a whole operand is cut to
--   match): each device's partial product, summed across the devices by the ring all-reduce and
--   whole on each (a row-parallel layer).
local function matmul(x, w)
  local xm, wm = is_multi(x), is_multi(w)
  local xa, wa = xm and x.axis or nil, wm and w.axis or nil
  local devices = xm and x.devices or w.devices
  if xm and wm and #x.devices ~= #w.devices then error("matmul: operands sharded over different devices", 3) end
  local w_rows = w.ndim >= 2 and w.ndim - 2 or 0 -- w's contracted dim
  local xk, wk = xa ~= nil and xa == x.ndim - 1, wa ~= nil and wa == w_rows
  local function whole(t) return is_multi(t) and t.pieces[1] or t end
  if xk or wk then
    -- the other cut along another dim: gathered, then cut along the contracted dim as well
    if xa ~= nil and not xk then x = gather(x) end
    if wa ~= nil and not wk then w = gather(w) end
    local xs = xk and x or shard(whole(x), devices, x.ndim - 1)
    local ws = wk and w or shard(whole(w), devices, w_rows)
    local partial = {}
    for i = 1, #devices do partial[i] = raw.matmul(xs.pieces[i], ws.pieces[i]) end
    return new(all_reduce(partial, devices, "add"), devices, nil)
  end
  -- both cut, the left along a batch or row dim and the right along its columns: the right one
  -- whole on every device (gathered), so each device multiplies its rows by all of it
  if xa ~= nil and wa ~= nil then w, wa = shard(gather(w), devices), nil end
  local out = {}
  for i, d in ipairs(devices) do
    out[i] = raw.matmul(xm and x.pieces[i] or x:to(d), wm and w.pieces[i] or w:to(d))
  end
  local axis = nil
  if wa ~= nil then axis = out[1].ndim - 1 end             -- w's columns
  if xa ~= nil then axis = xa + out[1].ndim - x.ndim end    -- x's batch or row dim, batch dims broadcast
  return new(out, devices, axis)
end

-- x:slice (what x[...] runs): an entry that keeps all of the sharded dim slices each piece alike;
-- an integer there is one piece's slice, any other range of it the whole tensor's: a plain tensor
-- on the first device either way, where x:to() gathers (not beside tensors of the first device on
-- another one, which no op could then mix with them).
local function slice(x, ...)
  local e = select("#", ...) == 1 and type(...) == "table" and table.move(..., 1, #..., 1, {}) or table.pack(...)
  e.n = nil
  if x.axis == nil then return map(function(p) return raw.slice(p, e) end, { x, n = 1 }) end
  local n, size = x.shape[x.axis + 1], x.pieces[1].shape[x.axis + 1]
  local at = e[x.axis + 1]
  local whole = at == nil or type(at) == "table" and (at[1] == nil or at[1] == 0 or at[1] <= -n)
    and (at[2] == nil or at[2] >= n) and (at[3] == nil or at[3] == 1)
  if whole then
    local ints = 0
    for j = 1, x.axis do ints = ints + (math.type(e[j]) == "integer" and 1 or 0) end
    e[x.axis + 1] = {}
    return map(function(p) return raw.slice(p, e) end, { x, n = 1 }, function(a) return a - ints end)
  end
  if math.type(at) == "integer" and at >= -n and at < n then
    local i = at < 0 and at + n or at
    e[x.axis + 1] = i % size
    return raw.slice(x.pieces[i // size + 1], e):to(x.devices[1])
  end
  return raw.slice(gather(x), e)
end

-- f of the whole tensor, gathered, cut again along the same dim (counted from the right) where it
-- still divides into the devices, else whole on each. repeat_ and roll along the sharded dim take
-- this way (each piece would need the other pieces' rows); along any other dim, they run piece by
-- piece as they are written.
local function on_whole(x, f, ...)
  local whole = f(gather(x), ...)
  local a = x.axis + whole.ndim - x.ndim
  return shard(whole, x.devices, whole.shape[a + 1] % #x.devices == 0 and a or nil)
end
local repeat_pieces, roll_pieces = T.repeat_, T.roll
local function repeat_(x, ...)
  local reps = list_of(...)
  local along = x.axis and reps[#reps - x.ndim + x.axis + 1]
  if along == nil or along == 1 then return repeat_pieces(x, ...) end
  return on_whole(x, repeat_pieces, ...)
end
local function roll(x, shifts, dims)
  for _, d in ipairs(type(dims) == "table" and dims or { dims }) do
    if x.axis and math.type(d) == "integer" and (d < 0 and d + x.ndim or d) == x.axis then
      return on_whole(x, roll_pieces, shifts, dims)
    end
  end
  return roll_pieces(x, shifts, dims)
end

local rules = {
  matmul = matmul,
  slice = slice,
  repeat_ = repeat_,
  ["repeat"] = repeat_,
  roll = roll,
  expand = function(x, ...)
    local shape = list_of(...)
    if x.axis == nil then return map(function(p) return raw.expand(p, shape) end, { x, n = 1 }) end
    local at = x.axis + #shape - x.ndim
    local want = shape[at + 1]
    if want ~= -1 and want ~= x.shape[x.axis + 1] then error("expand: the sharded dim cannot grow", 3) end
    local s = local_shape(x, shape, at)
    local out = {}
    for i, p in ipairs(x.pieces) do out[i] = raw.expand(p, s) end
    return new(out, x.devices, at)
  end,
  shrink = function(x, arg)
    if x.axis == nil then return map(function(p) return raw.shrink(p, arg) end, { x, n = 1 }) end
    local a = {}
    for j = 1, x.ndim do a[j] = arg[j] end
    local r = a[x.axis + 1]
    if r and (r[1] ~= 0 or r[2] ~= x.shape[x.axis + 1]) then
      -- a cut within one device's piece is that piece's cut, moved to the first device as any
      -- result no longer sharded (else no op could mix it with the first device's tensors)
      local size = x.pieces[1].shape[x.axis + 1]
      local i = r[1] // size
      if r[2] > r[1] and (r[2] - 1) // size == i then
        local b = {}
        for j = 1, x.ndim do b[j] = a[j] or { 0, x.shape[j] } end
        b[x.axis + 1] = { r[1] - i * size, r[2] - i * size }
        return raw.shrink(x.pieces[i + 1], b):to(x.devices[1])
      end
      return raw.shrink(gather(x), arg) -- across pieces: the whole tensor's, on the first device
    end
    a[x.axis + 1] = { 0, x.pieces[1].shape[x.axis + 1] }
    for j = 1, x.ndim do a[j] = a[j] or { 0, x.pieces[1].shape[j] } end
    return map(function(p) return raw.shrink(p, a) end, { x, n = 1 })
  end,
  -- along the sharded dim, each piece flipped and the pieces in reverse order: device i gets the
  -- flip of the piece of device n + 1 - i
  flip = function(x, ...)
    local ax = list_of(...)
    local along = false
    for _, d in ipairs(ax) do along = along or (x.axis and (d < 0 and d + x.ndim or d) == x.axis) end
    local out = map(function(p) return raw.flip(p, ax) end, { x, n = 1 })
    if not along then return out end
    if eager(x.devices) then raw.realize_all(out.pieces) end
    local moved = {}
    for i, d in ipairs(x.devices) do moved[i] = out.pieces[#out.pieces + 1 - i]:to(d) end
    return new(moved, x.devices, x.axis)
  end,
  dot = matmul,
  sum = function(x, axis, keepdim) return reduce("sum", x, axis, keepdim) end,
  max = function(x, axis, keepdim) return reduce("max", x, axis, keepdim) end,
  min = function(x, axis, keepdim) return reduce("min", x, axis, keepdim) end,
  mean = function(x, axis, keepdim) return reduce("mean", x, axis, keepdim) end,
  reshape = reshape,
  flatten = function(x, s, e)
    s, e = s or 0, e or -1
    if s < 0 then s = s + x.ndim end
    if e < 0 then e = e + x.ndim end
    local shape = {}
    for j = 0, s - 1 do shape[#shape + 1] = x.shape[j + 1] end
    local n = 1
    for j = s, e do n = n * x.shape[j + 1] end
    shape[#shape + 1] = n
    for j = e + 1, x.ndim - 1 do shape[#shape + 1] = x.shape[j + 1] end
    return reshape(x, shape)
  end,
  permute = function(x, ...)
    local order = list_of(...)
    return map(function(p) return raw.permute(p, order) end, { x, n = 1 }, function(a)
      for j, o in ipairs(order) do if (o < 0 and o + x.ndim or o) == a then return j - 1 end end
    end)
  end,
  transpose = function(x, d0, d1)
    d0, d1 = d0 or 1, d1 or 0 -- the plain tensor's defaults
    return map(function(p) return raw.transpose(p, d0, d1) end, { x, n = 1 }, function(a)
      d0, d1 = d0 < 0 and d0 + x.ndim or d0, d1 < 0 and d1 + x.ndim or d1
      return a == d0 and d1 or a == d1 and d0 or a
    end)
  end,
  unsqueeze = function(x, d)
    return map(function(p) return raw.unsqueeze(p, d) end, { x, n = 1 }, function(a)
      d = d < 0 and d + x.ndim + 1 or d
      return d <= a and a + 1 or a
    end)
  end,
  squeeze = function(x, d)
    if d == nil then -- every dim of size 1 in the whole tensor (a piece's share may be 1 too)
      local ones = {}
      for i = x.ndim, 1, -1 do
        if x.shape[i] == 1 then ones[#ones + 1] = i - 1 end
      end
      return map(function(p)
        for _, i in ipairs(ones) do p = raw.squeeze(p, i) end
        return p
      end, { x, n = 1 }, function(a)
        local below = 0
        for _, i in ipairs(ones) do below = below + (i < a and 1 or 0) end
        return a - below
      end)
    end
    return map(function(p) return raw.squeeze(p, d) end, { x, n = 1 }, function(a)
      d = d < 0 and d + x.ndim or d
      return d < a and a - 1 or a
    end)
  end,
  backward = function(x, g)
    if x.axis ~= nil then error("backward: reduce a sharded tensor first (its pieces hold different values)", 3) end
    return raw.backward(x.pieces[1], g)
  end,
  numel = function(x) return numel(x.shape) end,
  -- a plain target takes a replicated value's piece on its device (or a sharded value gathered);
  -- a sharded target, piece by piece
  assign = function(target, value)
    if not is_multi(target) then return raw.assign(target, gather(value, target.device)) end
    -- a whole value (a checkpoint's) is cut as the target is; one cut otherwise, cut again
    return map(raw.assign, align({ target, value, n = 2 }), nil, true)
  end,
  realize = function(x) raw.realize_all(x.pieces); return x end,
  -- every piece's kernels, in device order (each item's buffers name their device)
  schedule = function(x)
    local items = {}
    for _, p in ipairs(x.pieces) do
      for _, it in ipairs(raw.schedule(p)) do items[#items + 1] = it end
    end
    return items
  end,
  realize_all = function(...)
    local list, flat = list_of(...), {}
    for _, t in ipairs(list) do
      if is_multi(t) then
        for _, p in ipairs(t.pieces) do flat[#flat + 1] = p end
      else
        flat[#flat + 1] = t
      end
    end
    return raw.realize_all(flat)
  end,
  to = function(x, d) return gather(x, d) end,
}
for _, k in ipairs({ "item", "tolist", "tobytes", "data" }) do
  rules[k] = function(x, ...) return T[k](gather(x), ...) end
end
-- argmax's arange is one cached buffer whichever device asks first: it runs on the gathered tensor
rules.argmax = function(x, ...) return gather(x):argmax(...) end
-- Along the sharded axis these combine the pieces: softmax and log_softmax from the max and the
-- sum over that axis (each combined across the devices, so gradients flow back through the
-- copies); cumsum as each piece's own cumsum plus the sums of the pieces before it, copied over.
local along_sharded = {
  softmax = function(x, a)
    local e = (x - reduce("max", x, a, true)):exp()
    return e / reduce("sum", e, a, true)
  end,
  log_softmax = function(x, a)
    local s = x - reduce("max", x, a, true)
    return s - reduce("sum", s:exp(), a, true):log()
  end,
  cumsum = function(x, a)
    local out = {}
    for i, p in ipairs(x.pieces) do
      out[i] = raw.cumsum(p, a)
      for j = 1, i - 1 do out[i] = out[i] + raw.sum(x.pieces[j], a, true):to(x.devices[i]) end
    end
    return new(out, x.devices, x.axis)
  end,
}
for _, k in ipairs({ "softmax", "log_softmax", "cumsum" }) do
  rules[k] = function(x, axis, ...)
    local a = axis or (k:match("softmax") and -1) or 0
    a = a < 0 and a + x.ndim or a
    if x.axis and a == x.axis then return along_sharded[k](x, a) end
    return map(function(p, ...) return raw[k](p, axis, ...) end, table.pack(x, ...))
  end
end

-- Per image, where the batch is cut along dim 0: each device runs the plain method on its own
-- images (its fast paths included: Winograd, max_pool2d's stored gradient), and a weight whole on
-- every device (plain or replicated) gets its gradient back through its copies, summed. Any other
-- cut, or what `whole_only(...)` (the call's other arguments) refuses, takes the method's
-- composition of primitives.
local function per_image(name, whole_only)
  local composed = T[name]
  rules[name] = function(x, ...)
    if x.axis ~= 0 or x.ndim < 3 or (whole_only and whole_only(...)) then return composed(x, ...) end
    return map(function(p, ...) return composed(p, ...) end, table.pack(x, ...))
  end
  -- Tensor.max_pool2d as a function (nn.Sequential's layers) as well as x:max_pool2d
  T[name] = function(x, ...)
    if is_multi(x) then return rules[name](x, ...) end
    return composed(x, ...)
  end
end
-- x:conv2d(w, ...) or x:conv2d{weight = w, ...}: not with w cut
per_image("conv2d", function(w)
  if type(w) == "table" and not is_multi(w) then w = w.weight end
  return is_multi(w) and w.axis ~= nil
end)
per_image("avg_pool2d")
-- not with return_indices (two results; the 6th argument, after kernel_size ... ceil_mode)
per_image("max_pool2d", function(k, ...)
  local rest = table.pack(...)
  return rest[5] or (type(k) == "table" and k.return_indices)
end)

-- The primitive pad ({before, after} for each dim; x:pad, written in Lua, reaches it). Padding the
-- sharded dim pads the whole tensor, not each device's share: it is gathered, padded, and cut
-- again along that dim where the padded length still divides into the devices (else whole on
-- each). cat joins by padding, so it takes this path along the sharded dim.
local function pad(x, arg, ...)
  local r = x.axis and type(arg) == "table" and arg[x.axis + 1]
  if not (r and (r[1] ~= 0 or r[2] ~= 0)) then return map(raw.pad, table.pack(x, arg, ...)) end
  return on_whole(x, raw.pad, arg, ...)
end
-- rules of primitives whose Tensor method is written in Lua over them (the method itself runs on
-- a sharded tensor unchanged)
local primitive_rules = { pad = pad }

-- A primitive called with a sharded argument anywhere: its rule, else piece by piece.
local function call(name, ...)
  local first = ...
  if rules[name] and (is_multi(first) or name == "realize_all" or name == "assign" or name == "matmul") then
    return rules[name](...)
  end
  if primitive_rules[name] and is_multi(first) then return primitive_rules[name](...) end
  if not raw[name] then error(("Tensor.%s does not take sharded tensors yet"):format(name), 3) end
  return map(raw[name], align(table.pack(...)), nil, broadcasting[name])
end

-- ---------------------------------------------------------------- hooking in

-- Each primitive that the Lua-written methods call through args.raw, or that is called as
-- Tensor.name, looks for sharded arguments first.
local hooked = false
local function hook()
  if hooked then return end
  hooked = true
  -- a sharded tensor, or a list holding one anywhere (realize_all({bias, w}))
  local function holds(v)
    if is_multi(v) then return true end
    if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
    for _, e in ipairs(v) do
      if is_multi(e) then return true end
    end
    return false
  end
  local function routed(k, f)
    return function(...)
      if not made_any then return f(...) end -- the check was a fifth of the Lua in a Winograd graph's build
      for i = 1, select("#", ...) do
        if holds((select(i, ...))) then return call(k, ...) end
      end
      return f(...)
    end
  end
  for k, f in pairs(raw) do
    if type(f) == "function" then
      args.raw[k] = routed(k, f)
      -- Tensor.k too, where it is this binding or its keyword wrapper (not a method written in Lua)
      local t = rawget(T, k)
      if t and not args.composed[k] then T[k] = routed(k, t) end
    end
  end
end

-- A method's options its rule does not take: matmul's reverse, a dtype to compute in.
local function in_dtype(x, dtype) return dtype and x:cast(dtype) or x end
local options = {
  matmul = function(x, w, reverse, dtype)
    return in_dtype(reverse and rules.matmul(w, x) or rules.matmul(x, w), dtype)
  end,
  dot = function(x, w, dtype) return in_dtype(rules.matmul(x, w), dtype) end,
  sum = function(x, axis, keepdim, dtype) return rules.sum(in_dtype(x, dtype), axis, keepdim) end,
  softmax = function(x, axis, dtype) return rules.softmax(in_dtype(x, dtype), axis) end,
  log_softmax = function(x, axis, dtype) return rules.log_softmax(in_dtype(x, dtype), axis) end,
}
local method = {}
MT.__index = function(m, k)
  if k == "T" then return rules.transpose(m, 1, 0) end -- the plain tensor's property (x.T)
  if type(k) ~= "string" then return T.__getitem(m, k) end -- x[i], x[{...}]: over the primitives
  k = args.alias_of[k] or k
  local f = T[k]
  if type(f) ~= "function" then return nil end
  if rules[k] then
    -- with the method's keywords and its options that the rule lacks (a rule of a shape given as
    -- numbers or a list takes it as it comes)
    local params = args.params[k]
    if not method[k] then
      local listed = params and table.concat(params, ","):find("...", 1, true)
      method[k] = params and not listed and args.wrap(k, params, options[k] or rules[k]) or rules[k]
    end
    return method[k]
  end
  -- written in Lua: runs on the sharded tensor as it is
  if args.composed[k] or debug.getinfo(f, "S").what ~= "C" then return f end
  return function(...) return call(k, ...) end
end
-- x[key] = v: the plain tensor's index assignment on the whole tensor gathered, assigned back
-- piece by piece (it runs on the host anyway); no new fields on the table itself
local function setitem(m, key, v)
  if m.requires_grad then error("index assignment to a tensor that requires grad is not supported", 0) end
  local whole = gather(m):contiguous():realize()
  T.__setitem(whole, key, v)
  rules.realize(rules.assign(m, whole))
end
MT.__newindex = function(m, k, v)
  if type(k) ~= "string" then return setitem(m, k, v) end
  error(("a sharded tensor has no field '%s' to set"):format(k), 2)
end
-- A C++ binding that takes one tensor (interp/bind_tensor.cpp, whole_tensor) and meets a sharded
-- one takes the whole of it, gathered onto its first device, as the fall-backs above do.
MT.__whole = function(m) return gather(m) end
MT.__tostring = function(m)
  return ("<sharded Tensor (%s) %s on %s, axis %s>"):format(table.concat(m.shape, ", "), m.dtype,
    table.concat(m.devices, ", "), tostring(m.axis))
end
-- an operator: its primitive's rule, or the method written in Lua over the primitives (mod)
local function binop(op, a, b)
  if raw[op] then return call(op, a, b) end
  return T[op](a, b)
end
for _, op in ipairs({ "add", "sub", "mul", "div", "pow", "idiv", "mod" }) do
  MT["__" .. op] = function(a, b) return binop(op, a, b) end
end
MT.__unm = function(a) return call("neg", a) end

-- A plain tensor on the left of an operator with a sharded one on the right: the plain tensor's
-- operator (interp/bind_tensor.cpp, binop) hands the pair to this.
local op_names = { ["+"] = "add", ["-"] = "sub", ["*"] = "mul", ["/"] = "div", ["^"] = "pow", ["//"] = "idiv",
  ["%"] = "mod" }
MT.__tensor_binop = function(name, a, b)
  local op = op_names[name:match("^Tensor (%S+)$") or ""] or name:match("^Tensor:(%w+)$")
  if not op then error(name .. ": does not take sharded tensors", 2) end
  return binop(op, a, b)
end

-- Routed from the start: a function taken from Tensor before the first shard (nn.Sequential's
-- Tensor.relu) must route sharded tensors too. Measured: no cost on a 100-op chain (U2).
hook()

-- x:shard_(devices, {axis}): x itself becomes the sharded tensor, as tinygrad's shard_. A table
-- cannot take a userdata's place in the variables that hold it, so x keeps its identity and gets
-- a metatable of its own (a full userdata's metatable is its own: debug.setmetatable) that hands
-- every field, method and operator to the sharded tensor it now stands for, and answers
-- getmetatable with MT, so every check above takes it for one. Its gradient stays the plain
-- tensor's (the pieces are copies of it, and gradients flow back through copies): x.grad and
-- x.requires_grad are read and written on the tensor underneath.
local standing = setmetatable({}, { __mode = "k" }) -- x -> the sharded tensor it stands for
local stale = setmetatable({}, { __mode = "k" })    -- x -> true: its pieces are to be made again
local fresh -- below: standing[x], its pieces made again first where stale
local TENSOR_MT = debug.getmetatable(T.zeros(1))
-- __name: what an error names it; __whole: what a binding that takes one tensor reads
local STAND = { __metatable = MT, __name = "sharded Tensor", __tensor_underneath = true }
STAND.__whole = function(x) return gather(fresh(x)) end
local function underneath(x, f)
  debug.setmetatable(x, TENSOR_MT)
  local ok, r = pcall(f, x)
  debug.setmetatable(x, STAND)
  if not ok then error(r, 0) end
  return r
end
local own = { grad = true, requires_grad = true }
STAND.__index = function(x, k)
  if own[k] then return underneath(x, function(t) return t[k] end) end
  return fresh(x)[k]
end
STAND.__newindex = function(x, k, v)
  if type(k) ~= "string" then return setitem(x, k, v) end
  if not own[k] then error(("a sharded tensor has no field '%s' to set"):format(tostring(k)), 2) end
  underneath(x, function(t) t[k] = v end)
end
STAND.__gc = function(x) -- the plain tensor's finalizer, which checks its metatable
  debug.setmetatable(x, TENSOR_MT)
  TENSOR_MT.__gc(x)
end
for _, k in ipairs({ "__add", "__sub", "__mul", "__div", "__pow", "__idiv", "__mod", "__unm", "__tostring",
  "__tensor_binop" }) do
  STAND[k] = MT[k]
end
-- An assign to x (an optimizer's step) is an assign to the tensor underneath, the one whose
-- gradient backward fills, and the pieces are made again as copies of it once it is realized: a
-- copy made before would hang from the assign, not from the tensor, and assigned piece by piece,
-- the pieces no longer came from it (the next backward found nothing that required a gradient).
fresh = function(x)
  if stale[x] then
    local m = standing[x]
    standing[x] = underneath(x, function(t) return shard(t, m.devices, m.axis, true) end)
    stale[x] = nil
  end
  return standing[x]
end
local assign_pieces = rules.assign
rules.assign = function(target, value)
  if not standing[target] then return assign_pieces(target, value) end
  local device = underneath(target, function(t) return t.device end)
  local whole = is_multi(value) and gather(value, device) or value
  underneath(target, function(t) raw.assign(t, whole) end)
  stale[target] = true
  return target
end
-- Realizing x (the optimizer's step realizes its parameters) realizes the tensor underneath.
local realize_pieces = rules.realize_all
rules.realize_all = function(...)
  local list, stood = list_of(...), {}
  for _, t in ipairs(list) do
    if standing[t] then stood[#stood + 1] = t end
  end
  if #stood == 0 then return realize_pieces(list) end
  for _, t in ipairs(stood) do debug.setmetatable(t, TENSOR_MT) end -- read as the plain tensors
  local ok, r = pcall(realize_pieces, list)
  for _, t in ipairs(stood) do debug.setmetatable(t, STAND) end
  if not ok then error(r, 0) end
  return r
end
rules.realize = function(x)
  rules.realize_all({ x })
  return x
end

args.is_sharded = is_multi
local M = { is_multi = is_multi, ring = ring }
args.def(T, "shard", { "self", "devices", "axis" }, function(self, devices, axis)
  return shard(self, devices, axis)
end)
args.doc("shard", "a tensor split over devices along axis (or copied whole to each, axis nil); ops run per piece")
args.def(T, "shard_", { "self", "devices", "axis" }, function(self, devices, axis)
  if is_multi(self) then error("shard_: the tensor is sharded already", 2) end
  local m = shard(self, devices, axis, true)
  standing[self] = m
  debug.setmetatable(self, STAND)
  return self
end)
args.doc("shard_", "shard in place: x itself becomes the tensor split over devices (x.grad stays the whole tensor's)")
return M
