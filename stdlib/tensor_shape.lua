-- tensor_shape: movement, joining, splitting and indexing with tinygrad's parameters. Every op
-- here is a view (reshape, permute, expand, pad, shrink, flip) or composed from views and masks.
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it
local is_tensor = args.is_tensor

-- a 0-based dim, checked; `extra` allows one past the end (unsqueeze)
local function dim_of(name, x, d, extra)
  local n = x.ndim + (extra and 1 or 0)
  if math.type(d) ~= "integer" then error(("%s: dim must be an integer, got %s"):format(name, tostring(d)), 0) end
  local m = math.max(n, 1)
  if d < -m or d >= m then
    error(("%s: dim %d is out of range for shape (%s)"):format(name, d, table.concat(x.shape, ", ")), 0)
  end
  return d < 0 and math.max(d + n, 0) or d
end

local function full_pairs(x)
  local t = {}
  for i = 1, x.ndim do t[i] = { 0, x.shape[i] } end
  return t
end
local function zero_pairs(n)
  local t = {}
  for i = 1, n do t[i] = { 0, 0 } end
  return t
end
-- list args: f(2, 3) and f({2, 3}) are the same
local function list_of(first, rest)
  if type(first) == "table" and rest.n == 0 then return first end
  local t = { first }
  for i = 1, rest.n do t[#t + 1] = rest[i] end
  return t
end

-- ---------------------------------------------------------------- views

doc("reshape", "same elements, new shape (-1 infers one dim): x:reshape(2, -1) or x:reshape{2, -1}")
doc("permute", "reorder the axes")
doc("expand", "broadcast size-1 dims to a larger size (stride 0, no copy); -1 keeps a dim")
doc("flip", "reverse along the given axes")
for _, name in ipairs({ "reshape", "expand", "permute", "flip" }) do
  local f = C[name]
  local p = ({ reshape = "shape", expand = "shape", permute = "order", flip = "axis" })[name]
  def(name, { "self", p, "..." }, function(self, first, rest)
    if first == nil then error(("%s: needs a %s"):format(name, p), 0) end
    return f(self, list_of(first, rest))
  end)
end
doc("view", "alias of reshape")
args.alias(T, "view", "reshape")
doc("shrink", "keep [start, stop) of each dim: x:shrink{{0, 2}, nil}")
def("shrink", { "self", "arg" }, C.shrink)
doc("squeeze", "drop size-1 dims (or the one given)")
def("squeeze", { "self", "dim" }, function(self, dim)
  if dim ~= nil then dim_of("squeeze", self, dim) end
  return C.squeeze(self, dim)
end)
doc("unsqueeze", "insert a size-1 dim at dim")
def("unsqueeze", { "self", "dim" }, function(self, dim) return C.unsqueeze(self, dim_of("unsqueeze", self, dim, true)) end)
doc("transpose", "swap two axes (default dims 1 and 0)")
def("transpose", { "self", "dim0", "dim1" }, function(self, d0, d1)
  return C.transpose(self, dim_of("transpose", self, d0 or 1), dim_of("transpose", self, d1 or 0))
end)
doc("flatten", "merge dims start_dim..end_dim into one")
def("flatten", { "self", "start_dim", "end_dim" }, function(self, s, e)
  s, e = dim_of("flatten", self, s or 0), dim_of("flatten", self, e or -1)
  if self.ndim == 0 then return self:reshape(1) end
  return C.flatten(self, s, e)
end)
doc("unflatten", "split dim into sizes")
def("unflatten", { "self", "dim", "sizes" }, function(self, dim, sizes)
  local d = dim_of("unflatten", self, dim)
  local s = {}
  for i = 1, d do s[#s + 1] = self.shape[i] end
  for _, v in ipairs(sizes) do s[#s + 1] = v end
  for i = d + 2, self.ndim do s[#s + 1] = self.shape[i] end
  return self:reshape(s)
end)

-- pad(padding [, mode="constant"] [, value=0]). padding is one {before, after} per dim (nil
-- for none), or PyTorch's flat list {left, right, top, bottom, ...} from the last dim back.
-- Negative amounts cut. Modes: constant, reflect, replicate, circular.
doc("pad", "pad with pairs {{before, after}, ...} or the flat {left, right, top, bottom}; negative cuts; " ..
  "modes constant, reflect, replicate, circular")
def("pad", { "self", "padding", "mode", "value" }, function(self, padding, mode, value)
  mode, value = mode or "constant", value or 0
  if type(padding) ~= "table" then error("pad: padding must be a list of {before, after} pairs or a flat list", 0) end
  local n, flat = self.ndim, true
  local maxk = 0
  for k, v in pairs(padding) do
    if math.type(k) ~= "integer" then error("pad: padding must be a list", 0) end
    maxk = math.max(maxk, k)
    if type(v) ~= "number" then flat = false end
  end
  local px = {}
  if flat and maxk > 0 then
    if maxk % 2 ~= 0 then error("pad: a flat padding needs an even number of values", 0) end
    if maxk // 2 > n then error(("pad: %d values pad %d dims, the tensor has %d"):format(maxk, maxk // 2, n), 0) end
    for i = 1, n do px[i] = { 0, 0 } end
    for j = 1, maxk // 2 do
      local a, b = padding[2 * j - 1], padding[2 * j]
      if math.type(a) ~= "integer" or math.type(b) ~= "integer" then error("pad: amounts must be integers", 0) end
      px[n - j + 1] = { a, b }
    end
  else
    -- trailing nil entries (tinygrad's None) cannot be seen in a Lua list: missing pairs pad nothing
    if maxk > n then error(("pad: %d pairs given for %d dims"):format(maxk, n), 0) end
    for i = 1, n do
      local p = padding[i]
      if p == nil then px[i] = { 0, 0 }
      elseif type(p) == "table" and math.type(p[1]) == "integer" and math.type(p[2]) == "integer" then px[i] = { p[1], p[2] }
      else error(("pad: entry %d must be a pair of integers {before, after}"):format(i), 0) end
    end
  end
  local pos, any_neg = {}, false
  for i = 1, n do
    local b, a = px[i][1], px[i][2]
    pos[i] = { math.max(b, 0), math.max(a, 0) }
    any_neg = any_neg or b < 0 or a < 0
  end
  -- negative amounts cut from that side of each dim of x
  local function cut_negative(x)
    if not any_neg then return x end
    local cut = {}
    for i = 1, n do
      local b, a, s = px[i][1], px[i][2], x.shape[i]
      cut[i] = { -math.min(b, 0), math.min(a, 0) + s }
      if cut[i][1] > cut[i][2] then error(("pad: dim %d is cut below size 0"):format(i - 1), 0) end
    end
    return x:shrink(cut)
  end
  -- constant: cut first, then pad the positive amounts; the other modes pad, then cut
  if mode == "constant" then return C.pad(cut_negative(self), pos, value) end
  local X = self
  if mode == "circular" then
    for i = 1, n do
      local b, a = px[i][1], px[i][2]
      if b < 0 or a < 0 then error("pad: negative amounts are not supported with mode 'circular'", 0) end
      if b > X.shape[i] or a > X.shape[i] then error("pad: circular padding wraps around more than once", 0) end
    end
    local reps = {}
    for i = 1, n do reps[i] = 1 + (pos[i][1] > 0 and 1 or 0) + (pos[i][2] > 0 and 1 or 0) end
    local orig = self.shape
    X = X:repeat_(reps)
    local sh = {}
    for i = 1, n do
      local b, a, o, s = pos[i][1], pos[i][2], orig[i], X.shape[i]
      sh[i] = { b == 0 and 0 or o - b, a == 0 and s or s - o + a }
    end
    return X:shrink(sh)
  end
  if mode ~= "reflect" and mode ~= "replicate" then
    error(("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '%s'"):format(tostring(mode)), 0)
  end
  for d = 1, n do
    local b, a, s = pos[d][1], pos[d][2], X.shape[d]
    local parts = {}
    local function take(lo, hi, flip)
      local sh = full_pairs(X)
      sh[d] = { lo, hi }
      local v = X:shrink(sh)
      return flip and v:flip(d - 1) or v
    end
    if mode == "reflect" then
      if b >= s or a >= s then error(("pad: reflect padding (%d, %d) must be less than the size %d of dim %d"):format(b, a, s, d - 1), 0) end
      if b > 0 then parts[#parts + 1] = take(1, b + 1, true) end
      parts[#parts + 1] = X
      if a > 0 then parts[#parts + 1] = take(s - 1 - a, s - 1, true) end
    else
      if s == 0 and (a > 0 or b > 0) then error("pad: replicate padding of an empty dim", 0) end
      local function edge(lo, cnt)
        local v = take(lo, lo + 1)
        local e = {}
        for i = 1, n do e[i] = v.shape[i] end
        e[d] = cnt
        return v:expand(e)
      end
      if b > 0 then parts[#parts + 1] = edge(0, b) end
      parts[#parts + 1] = X
      if a > 0 then parts[#parts + 1] = edge(s - 1, a) end
    end
    if #parts > 1 then X = T.cat(parts, d - 1) end
  end
  return cut_negative(X)
end)

-- ---------------------------------------------------------------- joining and splitting

local function tensor_list(self, rest)
  local ts = {}
  if not is_tensor(self) and type(self) == "table" then -- Tensor.cat({a, b}, 1)
    for i, t in ipairs(self) do ts[i] = t end
    return ts, rest.n > 0 and rest[1] or nil
  end
  ts[1] = self
  for i = 1, rest.n do ts[#ts + 1] = rest[i] end
  return ts
end

doc("cat", "join along dim: a:cat(b, c, {dim=1}) or Tensor.cat({a, b}, 1)")
def("cat", { "self", "...", "dim" }, function(self, rest, dim)
  local ts, d2 = tensor_list(self, rest)
  dim = dim or d2 or 0
  if #ts == 0 then error("cat: needs at least one tensor", 0) end
  for k, t in ipairs(ts) do
    if not is_tensor(t) then error(("cat: argument %d is not a Tensor"):format(k), 0) end
  end
  local first = ts[1]
  local nd = first.ndim
  if nd == 0 then error("cat: 0-d tensors cannot be joined (use stack)", 0) end
  local axis = dim_of("cat", first, dim)
  local total, shapes = 0, {} -- each .shape is a new table: read once per tensor
  local shape1 = first.shape
  for k, t in ipairs(ts) do
    local shape = t.shape
    if #shape ~= nd then error(("cat: tensor %d has %d dims, expected %d"):format(k, #shape, nd), 0) end
    for d = 1, nd do
      if d ~= axis + 1 and shape[d] ~= shape1[d] then
        error(("cat: tensor %d has shape (%s), which differs from (%s) outside dim %d"):format(k,
          table.concat(shape, ", "), table.concat(shape1, ", "), axis), 0)
      end
    end
    shapes[k] = shape
    total = total + shape[axis + 1]
  end
  local out, at = nil, 0
  for k, t in ipairs(ts) do
    local p = zero_pairs(nd)
    local len = shapes[k][axis + 1]
    p[axis + 1] = { at, total - at - len }
    at = at + len
    local piece = C.pad(t, p)
    out = out and out + piece or piece
  end
  return out
end)

doc("stack", "join along a new dim")
def("stack", { "self", "...", "dim" }, function(self, rest, dim)
  local ts, d2 = tensor_list(self, rest)
  dim = dim or d2 or 0
  local us = {}
  for k, t in ipairs(ts) do
    if not is_tensor(t) then error(("stack: argument %d is not a Tensor"):format(k), 0) end
    us[k] = t:unsqueeze(dim)
  end
  return T.cat(us, dim)
end)

doc("repeat_", "tile: x:repeat_(2, 3) (tinygrad's repeat; `repeat` is a Lua keyword, x['repeat'] works too)")
def("repeat_", { "self", "repeats", "..." }, function(self, first, rest)
  local reps = list_of(first, rest)
  if #reps < self.ndim then
    error(("repeat: %d repeats for %d dims"):format(#reps, self.ndim), 0)
  end
  local base = {}
  for i = 1, #reps - self.ndim do base[i] = 1 end
  for _, s in ipairs(self.shape) do base[#base + 1] = s end
  local un, ex, fin = {}, {}, {}
  for i, r in ipairs(reps) do
    if math.type(r) ~= "integer" or r < 0 then error("repeat: repeats must be non-negative integers", 0) end
    un[#un + 1] = 1; un[#un + 1] = base[i]
    ex[#ex + 1] = r; ex[#ex + 1] = base[i]
    fin[i] = r * base[i]
  end
  return self:reshape(un):expand(ex):reshape(fin)
end)
doc("repeat", "tile (write x:repeat_(...) in Lua: `repeat` is a keyword)")
T["repeat"] = T.repeat_ -- x:repeat(2, 3); `repeat` is a Lua keyword, so x["repeat"] or x:repeat_ in code
args.params["repeat"] = args.params.repeat_

doc("repeat_interleave", "repeat each element along dim (flattened when dim is nil)")
def("repeat_interleave", { "self", "repeats", "dim" }, function(self, repeats, dim)
  local x, d = self, 0
  if dim == nil then x = self:flatten() else d = dim_of("repeat_interleave", self, dim) end
  if math.type(repeats) ~= "integer" or repeats < 0 then error("repeat_interleave: repeats must be a non-negative integer", 0) end
  local s = x.shape
  local a, b, c = {}, {}, {}
  for i = 1, #s do
    a[#a + 1] = s[i]; b[#b + 1] = s[i]
    if i == d + 1 then a[#a + 1] = 1; b[#b + 1] = repeats; c[#c + 1] = s[i] * repeats else c[#c + 1] = s[i] end
  end
  return x:reshape(a):expand(b):reshape(c)
end)

-- x:split(sizes [, dim=0]) -> a list of tensors: sizes is one size (the last piece may be
-- smaller) or a list that sums to the dim
doc("split", "a list of pieces of the given size(s) along dim")
def("split", { "self", "sizes", "dim" }, function(self, sizes, dim)
  local d = dim_of("split", self, dim or 0)
  local n = self.shape[d + 1]
  local list = {}
  if math.type(sizes) == "integer" then
    if sizes <= 0 then error("split: the size must be positive", 0) end
    local i = 0
    repeat
      list[#list + 1] = math.min(sizes, n - i)
      i = i + sizes
    until i >= n
  elseif type(sizes) == "table" then
    local sum = 0
    for k, s in ipairs(sizes) do
      if math.type(s) ~= "integer" or s < 0 then error(("split: size %d is not a non-negative integer"):format(k), 0) end
      list[k] = s
      sum = sum + s
    end
    if sum ~= n then error(("split: sizes sum to %d, dim %d has %d"):format(sum, d, n), 0) end
  else
    error("split: sizes must be an integer or a list of integers", 0)
  end
  local out, at = {}, 0
  for k, s in ipairs(list) do
    local sh = full_pairs(self)
    sh[d + 1] = { at, at + s }
    out[k] = self:shrink(sh)
    at = at + s
  end
  return out
end)

doc("chunk", "a list of chunks pieces along dim")
def("chunk", { "self", "chunks", "dim" }, function(self, chunks, dim)
  if math.type(chunks) ~= "integer" or chunks <= 0 then error("chunk: chunks must be a positive integer", 0) end
  local d = dim_of("chunk", self, dim or 0)
  local n = self.shape[d + 1]
  if n == 0 then
    -- as tinygrad, an empty dim gives `chunks` empty pieces; a list that long must be buildable
    if chunks > (1 << 20) then error(("chunk: %d empty pieces is too many"):format(chunks), 0) end
    local z = {}
    for i = 1, chunks do z[i] = 0 end
    return self:split(z, d)
  end
  return self:split(-(-n // chunks), d)
end)

doc("meshgrid", "a list of grids from 1-d tensors (indexing 'ij' or 'xy')")
def("meshgrid", { "self", "...", "indexing" }, function(self, rest, indexing)
  indexing = indexing or "ij"
  if indexing ~= "ij" and indexing ~= "xy" then error("meshgrid: indexing must be 'ij' or 'xy'", 0) end
  local ts = tensor_list(self, rest)
  if #ts == 1 then return { ts[1] } end
  local n = #ts
  local shape = {}
  for i, t in ipairs(ts) do shape[i] = t:numel() end
  if indexing == "xy" then shape[1], shape[2] = shape[2], shape[1] end
  local out = {}
  for i, t in ipairs(ts) do
    local pos = i
    if indexing == "xy" and i <= 2 then pos = 3 - i end
    local v = {}
    for k = 1, n do v[k] = 1 end
    v[pos] = -1
    out[i] = t:reshape(v):expand(shape)
  end
  return out
end)

doc("roll", "shift elements along dims, wrapping around")
def("roll", { "self", "shifts", "dims" }, function(self, shifts, dims)
  if type(shifts) ~= "table" then shifts = { shifts } end
  if type(dims) ~= "table" then dims = { dims } end
  if #shifts ~= #dims then error("roll: shifts and dims must have the same length", 0) end
  local x = self
  for i, d in ipairs(dims) do
    local a = dim_of("roll", x, d)
    local n = x.shape[a + 1]
    if math.type(shifts[i]) ~= "integer" then error("roll: shifts must be integers", 0) end
    if n > 0 then
      local s = shifts[i] % n
      if s ~= 0 then
        local p = x:split({ n - s, s }, a)
        x = T.cat(p[2], p[1], { dim = a })
      end
    end
  end
  return x
end)

-- triu keeps j - i >= diagonal over the last two dims; tril keeps j - i <= diagonal
local function tri_mask(x, diagonal, upper)
  if x.ndim < 2 then error((upper and "triu" or "tril") .. ": needs at least 2 dims", 0) end
  local r, c = x.shape[x.ndim - 1], x.shape[x.ndim]
  local d = T.arange(c):unsqueeze(0) - T.arange(r):unsqueeze(1)
  return upper and d:ge(diagonal or 0) or d:le(diagonal or 0)
end
doc("triu", "the upper triangle (j - i >= diagonal) of the last two dims")
def("triu", { "self", "diagonal" }, function(self, diagonal) return tri_mask(self, diagonal, true):where(self, 0):cast(self.dtype) end)
doc("tril", "the lower triangle (j - i <= diagonal) of the last two dims")
def("tril", { "self", "diagonal" }, function(self, diagonal) return tri_mask(self, diagonal, false):where(self, 0):cast(self.dtype) end)

-- ---------------------------------------------------------------- gather, scatter

-- (index == 0..n-1) with the n along a new last dim
local function one_hot_last(index, n)
  if not dtypes.is_int(index.dtype) then error("expected an int index tensor, got " .. index.dtype, 0) end
  return index:unsqueeze(-1):eq(T.arange(n))
end

-- x:gather(dim, index): out[i][j] = x[i][index[i][j]] along dim (index no larger than x elsewhere)
doc("gather", "out[i][j] = x[i][index[i][j]] along dim (a masked sum)")
def("gather", { "self", "dim", "index" }, function(self, dim, index)
  if not is_tensor(index) then error("gather: index must be a Tensor", 0) end
  if index.ndim ~= self.ndim then error(("gather: index has %d dims, the tensor %d"):format(index.ndim, self.ndim), 0) end
  local d = dim_of("gather", self, dim)
  if self.ndim == 0 then return self end
  local sh = {}
  for i = 1, self.ndim do
    if i ~= d + 1 and index.shape[i] > self.shape[i] then
      error(("gather: index dim %d (%d) is larger than the tensor's (%d)"):format(i - 1, index.shape[i], self.shape[i]), 0)
    end
    sh[i] = i == d + 1 and { 0, self.shape[i] } or { 0, index.shape[i] }
  end
  local x = self:shrink(sh):unsqueeze(-1):transpose(-1, d) -- the gathered dim moved last
  return one_hot_last(index, self.shape[d + 1]):where(x, 0):sum(-1, false, self.dtype)
end)

-- src and a one-hot mask, both (self.shape..., n) with n the index's size along dim
local function pre_scatter(self, dim, index, src)
  local d = dim_of("scatter", self, dim)
  if index.ndim ~= self.ndim or src.ndim ~= self.ndim then error("scatter: self, index and src need the same number of dims", 0) end
  for i = 1, self.ndim do
    if (i ~= d + 1 and self.shape[i] < index.shape[i]) or src.shape[i] < index.shape[i] then
      error("scatter: index must not be larger than src, or than self outside dim", 0)
    end
  end
  src = src:cast(self.dtype):shrink((function() local t = {} for i = 1, index.ndim do t[i] = { 0, index.shape[i] } end return t end)())
  local n = self.shape[d + 1]
  local e = {}
  for i = 1, src.ndim do e[i] = src.shape[i] end
  e[#e + 1] = n
  src = src:unsqueeze(-1):expand(e):transpose(-1, d)
  local mask = one_hot_last(index, n):transpose(-1, d)
  local function fit(x)
    local p = {}
    for i = 1, self.ndim do p[i] = i == d + 1 and { 0, 0 } or { 0, self.shape[i] - x.shape[i] } end
    p[self.ndim + 1] = { 0, 0 }
    return C.pad(x, p)
  end
  return fit(src), fit(mask)
end

doc("scatter_reduce", "combine src into x at index along dim: sum, prod, mean, amax or amin")
def("scatter_reduce", { "self", "dim", "index", "src", "reduce", "include_self" }, function(self, dim, index, src, reduce, include_self)
  local s, mask = pre_scatter(self, dim, index, src)
  if include_self == nil then include_self = true end
  local function inv(a, b) return mask:any(-1):logical_not():where(a, b) end
  if reduce == "sum" then return mask:where(s, 0):sum(-1, false, self.dtype) + (include_self and self or inv(self, 0)) end
  if reduce == "prod" then return mask:where(s, 1):prod(-1, false, self.dtype) * (include_self and self or inv(self, 1)) end
  if reduce == "amax" then return mask:where(s, -math.huge):max(-1):maximum(include_self and self or inv(self, -math.huge)):cast(self.dtype) end
  if reduce == "amin" then return mask:where(s, math.huge):min(-1):minimum(include_self and self or inv(self, math.huge)):cast(self.dtype) end
  if reduce == "mean" then
    local cnt = mask:where(1, 0):sum(-1, false, self.dtype) + (include_self and 1 or inv(1, 0))
    return (mask:where(s, 0):sum(-1, false, self.dtype) + (include_self and self or inv(self, 0))) / cnt
  end
  error(("scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got %s"):format(tostring(reduce)), 0)
end)

doc("scatter", "write src (or a number) at index along dim; reduce 'add' or 'multiply'")
def("scatter", { "self", "dim", "index", "src", "reduce" }, function(self, dim, index, src, reduce)
  if not is_tensor(index) then error("scatter: index must be a Tensor", 0) end
  if not is_tensor(src) then
    if reduce then error("scatter: reduce needs a number src (use scatter_reduce for a Tensor src)", 0) end
    src = T.full_like(index, src, { dtype = self.dtype })
  elseif reduce then
    error("scatter: a Tensor src with reduce is not supported; use scatter_reduce", 0)
  end
  if reduce == "add" then return self:scatter_reduce(dim, index, src, "sum") end
  if reduce == "multiply" then return self:scatter_reduce(dim, index, src, "prod") end
  if reduce ~= nil then error("scatter: reduce must be nil, 'add' or 'multiply'", 0) end
  local s, mask = pre_scatter(self, dim, index, src)
  -- a repeated index keeps the last write: fold the index axis from first to last
  local k = mask.shape[mask.ndim]
  local m, v
  for i = 0, k - 1 do
    local sh = full_pairs(mask)
    sh[#sh] = { i, i + 1 }
    local mi, vi = mask:shrink(sh), s:shrink(sh)
    if m then m, v = m:bitwise_or(mi), mi:where(vi, v) else m, v = mi, vi end
  end
  if not m then return self end
  return m:squeeze(-1):where(v:squeeze(-1), self)
end)

doc("masked_select", "the elements where mask is true, as a 1-d tensor")
def("masked_select", { "self", "mask" }, function(self, mask)
  if not is_tensor(mask) or mask.dtype ~= "bool" then error("masked_select: mask must be a bool Tensor", 0) end
  local _, m = T._broadcasted(self, mask)
  m = m:cast("bool"):flatten()
  local picks, i = {}, 0
  for _, on in ipairs(m:tolist()) do
    if on then picks[#picks + 1] = i end
    i = i + 1
  end
  if #picks == 0 then return T.zeros({ 0 }, { dtype = self.dtype }) end
  local x = T._broadcasted(self, mask)
  return x:flatten()[T(picks)]
end)

-- ---------------------------------------------------------------- interpolate

doc("interpolate", "resize the last dims to size: linear, nearest or nearest-exact")
def("interpolate", { "self", "size", "mode", "align_corners" }, function(self, size, mode, align_corners)
  mode = mode or "linear"
  if type(size) ~= "table" or #size == 0 or #size > self.ndim then error("interpolate: size must be a list of up to ndim sizes", 0) end
  if mode ~= "linear" and mode ~= "nearest" and mode ~= "nearest-exact" then
    error("interpolate: mode must be 'linear', 'nearest' or 'nearest-exact'", 0)
  end
  if align_corners and mode ~= "linear" then error("interpolate: align_corners needs mode 'linear'", 0) end
  local x, expand = self, { table.unpack(self.shape) }
  local ac = align_corners and 1 or 0
  for i = -1, -#size, -1 do
    local d = self.ndim + i + 1
    local si = size[#size + i + 1]
    if math.type(si) ~= "integer" or si < 1 then error("interpolate: sizes must be positive integers", 0) end
    local scale = (self.shape[d] - ac) / (si - ac)
    local arr = T.arange(si, { dtype = "float32" })
    local shape = {}
    for k = 1, self.ndim do shape[k] = 1 end
    shape[d], expand[d] = si, si
    if mode == "linear" then
      local index = (align_corners and arr * scale or (arr + 0.5) * scale - 0.5):clip(0, self.shape[d] - 1)
      local lo = index:floor():int():reshape(shape):expand(expand)
      local hi = index:ceil():int():reshape(shape):expand(expand)
      local perc = (index - index:floor()):reshape(shape):expand(expand)
      x = x:gather(d - 1, lo):lerp(x:gather(d - 1, hi), perc)
    else
      local index = (mode == "nearest-exact" and (arr + 0.5) * scale or arr * scale):cast("int32"):reshape(shape):expand(expand)
      x = x:gather(d - 1, index)
    end
  end
  return x:cast(self.dtype)
end)

-- x:rearrange("b c h w -> b (c h) w" [, {h=2, ...}]): einops' notation for reshape and permute;
-- ( ) groups dims, 1 is a new dim of size 1, "..." stands for the dims not named
doc("rearrange", "reshape and permute in einops notation: x:rearrange('b (c h) w -> b c h w', {h=2})")
def("rearrange", { "self", "formula", "**sizes" }, function(self, formula, sizes)
  sizes = sizes or {}
  if type(formula) ~= "string" then error("rearrange: formula must be a string", 0) end
  local lhs_s, rhs_s = formula:match("^(.-)%->(.*)$")
  if not lhs_s or rhs_s:find("->", 1, true) then error("rearrange: the formula needs exactly one '->'", 0) end
  local function parse(side)
    local names, groups, open = {}, {}, nil
    local text = side:gsub("%(", " ( "):gsub("%)", " ) ")
    for tok in text:gmatch("%S+") do
      if tok == "(" then
        if open then error("rearrange: nested parentheses", 0) end
        open = #names + 1
      elseif tok == ")" then
        if not open then error("rearrange: bracket mismatch", 0) end
        groups[#groups + 1] = { open, #names }
        open = nil
      elseif tok == "1" then
        groups[#groups + 1] = { #names + 1, #names } -- an empty group: a dim of size 1
      else
        if tok ~= "..." and not tok:match("^[%a][%w_]*$") then error(("rearrange: invalid axis name '%s'"):format(tok), 0) end
        names[#names + 1] = tok
      end
    end
    if open then error("rearrange: bracket mismatch", 0) end
    return names, groups
  end
  local lhs, ugroups = parse(lhs_s)
  local rhs, fgroups = parse(rhs_s)
  local sl, sr, seen = {}, {}, {}
  for _, n in ipairs(lhs) do
    if seen[n] then error(("rearrange: '%s' appears twice"):format(n), 0) end
    seen[n] = true; sl[#sl + 1] = n
  end
  for _, n in ipairs(rhs) do sr[#sr + 1] = n end
  table.sort(sl); table.sort(sr)
  if table.concat(sl, " ") ~= table.concat(sr, " ") then error("rearrange: the two sides name different axes", 0) end
  for k in pairs(sizes) do
    if not seen[k] then error(("rearrange: axis '%s' is not in the formula"):format(k), 0) end
  end
  -- "..." becomes as many names as the dims it stands for
  local ell = 0
  if seen["..."] then
    local grouped = 0
    for _, g in ipairs(ugroups) do grouped = grouped + (g[2] - g[1]) end
    ell = self.ndim - #lhs + 1 + grouped
    for _, g in ipairs(ugroups) do
      for i = g[1], g[2] do if lhs[i] == "..." then error("rearrange: '...' cannot be inside ( ) on the left", 0) end end
    end
  end
  local function expand_ell(list, groups)
    local at
    for i, n in ipairs(list) do if n == "..." then at = i end end
    if not at then return list, groups end
    local out = {}
    for i = 1, at - 1 do out[#out + 1] = list[i] end
    for j = 0, ell - 1 do out[#out + 1] = "..." .. j end
    for i = at + 1, #list do out[#out + 1] = list[i] end
    local g2 = {}
    for _, g in ipairs(groups) do
      local s, e = g[1], g[2]
      if s > at then s = s + ell - 1 end
      if e >= at then e = e + ell - 1 end
      g2[#g2 + 1] = { s, e }
    end
    return out, g2
  end
  lhs, ugroups = expand_ell(lhs, ugroups)
  rhs, fgroups = expand_ell(rhs, fgroups)
  -- unflatten the left's groups (from the last, so earlier positions stay valid)
  local t = self
  for gi = #ugroups, 1, -1 do
    local g = ugroups[gi]
    local s = {}
    for d = g[1], g[2] do s[#s + 1] = sizes[lhs[d]] or -1 end
    local pos = g[1] - 1
    for gj = 1, gi - 1 do pos = pos - (ugroups[gj][2] - ugroups[gj][1]) end
    if #s == 0 then t = t:squeeze(pos) else t = t:unflatten(pos, s) end
  end
  if t.ndim ~= #lhs then error(("rearrange: the left side names %d dims, the tensor has %d"):format(#lhs, t.ndim), 0) end
  for i, n in ipairs(lhs) do
    if sizes[n] and sizes[n] ~= t.shape[i] then error(("rearrange: size given for '%s' is wrong"):format(n), 0) end
  end
  local index, order = {}, {}
  for i, n in ipairs(lhs) do index[n] = i - 1 end
  for i, n in ipairs(rhs) do order[i] = index[n] end
  if #order > 0 then t = t:permute(order) end
  -- flatten the right's groups, from the last
  for gi = #fgroups, 1, -1 do
    local g = fgroups[gi]
    if g[1] <= g[2] then t = t:flatten(g[1] - 1, g[2] - 1) else t = t:unsqueeze(g[1] - 1) end
  end
  return t
end)

-- ---------------------------------------------------------------- indexing

-- Tensor.newaxis in an index adds a dim of size 1 (Python's None; nil in a Lua table is a hole,
-- which means a full slice here).
T.newaxis = setmetatable({}, { __tostring = function() return "Tensor.newaxis" end, __name = "newaxis" })

-- one index entry: "int", "slice", "tensor", "newaxis" or "ellipsis"
local function kind(v, pos)
  if v == nil then return "slice" end
  if v == T.newaxis then return "newaxis" end
  if v == "..." then return "ellipsis" end
  if math.type(v) == "integer" then return "int" end
  if is_tensor(v) then
    if not dtypes.is_int(v.dtype) then
      error(("index %d: a %s tensor cannot index (use an int tensor; masked_select for bool masks)"):format(pos, v.dtype), 0)
    end
    return "tensor"
  end
  if type(v) == "table" then return "slice" end
  error(("index %d is a %s (use an integer, {start, stop, step}, \"...\", Tensor.newaxis or an int Tensor)"):format(pos,
    math.type(v) == "float" and "float" or type(v)), 0)
end

local function entries(key)
  if type(key) ~= "table" or getmetatable(key) ~= nil then return { key }, 1 end
  local n = 0
  for k in pairs(key) do
    if math.type(k) ~= "integer" or k < 1 then error("an index table must be a list of entries", 0) end
    n = math.max(n, k)
  end
  return key, n
end

function T.__getitem(x, key)
  local list, n = entries(key)
  local kinds, consume, ell = {}, 0, nil
  for i = 1, n do
    kinds[i] = kind(list[i], i)
    if kinds[i] == "ellipsis" then
      if ell then error("an index can have only one '...'", 0) end
      ell = i
    elseif kinds[i] ~= "newaxis" then
      consume = consume + 1
    end
  end
  if consume > x.ndim then
    error(("too many indices (%d) for a tensor of shape (%s)"):format(consume, table.concat(x.shape, ", ")), 0)
  end
  -- expand "..." (or the missing tail) into full slices
  local es, ek = {}, {}
  for i = 1, n do
    if i == ell then
      for _ = 1, x.ndim - consume do es[#es + 1] = false; ek[#ek + 1] = "slice" end
    else
      local v = list[i]
      if v == nil then v = false end -- a hole is a full slice; false keeps the list dense
      es[#es + 1] = v; ek[#ek + 1] = kinds[i]
    end
  end
  if not ell then
    for _ = 1, x.ndim - consume do es[#es + 1] = false; ek[#ek + 1] = "slice" end
  end
  -- basic part: ints and slices through the engine's slice, tensors as full slices
  local basic, out_dims, tdims, tidx = {}, {}, {}, {}
  for i, k in ipairs(ek) do
    if k == "int" then basic[#basic + 1] = es[i]
    elseif k == "slice" then
      basic[#basic + 1] = es[i] or {}
      out_dims[#out_dims + 1] = "d"
    elseif k == "tensor" then
      basic[#basic + 1] = {}
      out_dims[#out_dims + 1] = "t"
      tidx[#tidx + 1] = es[i]
    else
      out_dims[#out_dims + 1] = "n"
    end
  end
  local y = #basic > 0 and C.slice(x, basic) or x
  -- newaxis: insert the 1s
  local shape, src = {}, 1
  for j, k in ipairs(out_dims) do
    if k == "n" then shape[j] = 1 else shape[j] = y.shape[src]; src = src + 1 end
    if k == "t" then tdims[#tdims + 1] = j - 1 end
  end
  if #shape ~= y.ndim then y = y:reshape(shape) end
  if #tdims == 0 then return y end
  -- fancy part: the index tensors broadcast to one shape B; the picked dims become B
  local b = tidx[1]
  for k = 2, #tidx do b = T._broadcasted(b, tidx[k]) end
  local B = b.shape
  local keep, moved = {}, {}
  local is_t = {}
  for _, d in ipairs(tdims) do is_t[d] = true end
  for d = 0, y.ndim - 1 do if not is_t[d] then keep[#keep + 1] = d end end
  for _, d in ipairs(keep) do moved[#moved + 1] = d end
  for _, d in ipairs(tdims) do moved[#moved + 1] = d end
  local yp = y:permute(moved) -- (R..., s1..sk)
  local nk, nb, nr = #tdims, #B, #keep
  local view = {}
  for i = 1, nr do view[#view + 1] = yp.shape[i] end
  for _ = 1, nb do view[#view + 1] = 1 end
  for i = 1, nk do view[#view + 1] = yp.shape[nr + i] end
  yp = yp:reshape(view)
  local mask
  for k, d in ipairs(tdims) do
    local s = y.shape[d + 1]
    local idx = T._broadcasted(tidx[k], b):cast("int32")
    idx = idx:lt(0):where(idx + s, idx)
    local hot = one_hot_last(idx, s) -- B + (s)
    local r = { table.unpack(B) }
    for j = 1, nk do r[#r + 1] = j == k and s or 1 end
    hot = hot:reshape(r)
    mask = mask and mask:bitwise_and(hot) or hot
  end
  local axes = {}
  for j = 1, nk do axes[j] = nr + nb + j - 1 end
  local res = mask:where(yp, 0):sum(axes, false, y.dtype) -- (R..., B...)
  -- numpy's rule: consecutive index dims stay in place, others go first
  local consecutive = true
  for k = 2, #tdims do consecutive = consecutive and tdims[k] == tdims[k - 1] + 1 end
  local order = {}
  if consecutive then
    local before = 0
    for _, d in ipairs(keep) do if d < tdims[1] then before = before + 1 end end
    for i = 0, before - 1 do order[#order + 1] = i end
    for i = 0, nb - 1 do order[#order + 1] = nr + i end
    for i = before, nr - 1 do order[#order + 1] = i end
  else
    for i = 0, nb - 1 do order[#order + 1] = nr + i end
    for i = 0, nr - 1 do order[#order + 1] = i end
  end
  return res:permute(order)
end

-- x[key] = v: the selected elements take v (broadcast), and x keeps its buffer (an assign).
-- The write is done on the host: the positions come from indexing an arange the same way.
function T.__setitem(x, key, v)
  if x.requires_grad then error("index assignment to a tensor that requires grad is not supported", 0) end
  local n = x:numel()
  local pos = T.arange(n):reshape(x.shape)[key]
  local vt = is_tensor(v) and v or T.full({}, v)
  vt = vt:cast(x.dtype)
  local ok, err = pcall(function() vt = vt:expand(pos.shape) end)
  if not ok then
    error(("cannot assign a value of shape (%s) to an index of shape (%s)"):format(table.concat(vt.shape, ", "),
      table.concat(pos.shape, ", ")), 0)
  end
  local p, vals = pos:flatten():tolist(), vt:flatten():tolist()
  local data = x:flatten():tolist()
  for i = 1, #p do data[p[i] + 1] = vals[i] end
  local new = n == 0 and T.zeros(x.shape, { dtype = x.dtype }) or T(data, { dtype = x.dtype }):reshape(x.shape)
  x:assign(new):realize()
end

return T
