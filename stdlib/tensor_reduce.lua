-- tensor_reduce: reductions, scans, sorting and einsum with tinygrad's parameters. The
-- primitives are REDUCE_AXIS with ADD or MAX; everything else here is composed from them.
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it

-- Axes as a sorted list of 0-based dims; nil means all. A 0-d tensor takes 0 or -1 and has none.
local function axes_of(name, x, axis)
  local n, out = x.ndim, {}
  local list = axis
  if axis == nil then
    for i = 0, n - 1 do out[#out + 1] = i end
    return out
  end
  if type(axis) ~= "table" then list = { axis } end
  local seen = {}
  for _, a in ipairs(list) do
    if math.type(a) ~= "integer" then error(("%s: axis must be an integer, got %s"):format(name, tostring(a)), 0) end
    local m = math.max(n, 1)
    if a < -m or a >= m then
      error(("%s: axis %d is out of range for shape (%s)"):format(name, a, table.concat(x.shape, ", ")), 0)
    end
    if n > 0 then
      a = a % n
      if seen[a] then error(("%s: axis %d is repeated"):format(name, a), 0) end
      seen[a] = true
      out[#out + 1] = a
    end
  end
  table.sort(out)
  return out
end
T._axes = axes_of

-- the number of elements a reduce over `axes` combines
local function count(x, axes)
  local n = 1
  for _, a in ipairs(axes) do n = n * x.shape[a + 1] end
  return n
end

local function kept_shape(x, axes, keepdim)
  local drop, s = {}, {}
  for _, a in ipairs(axes) do drop[a] = true end
  for i = 0, x.ndim - 1 do
    if not drop[i] then s[#s + 1] = x.shape[i + 1] elseif keepdim then s[#s + 1] = 1 end
  end
  return s
end

-- the reduced dims moved last and merged into one: (kept..., n)
local function to_last(x, axes)
  local order, shape = {}, {}
  local red = {}
  for _, a in ipairs(axes) do red[a] = true end
  for i = 0, x.ndim - 1 do
    if not red[i] then order[#order + 1] = i; shape[#shape + 1] = x.shape[i + 1] end
  end
  for _, a in ipairs(axes) do order[#order + 1] = a end
  shape[#shape + 1] = count(x, axes)
  return x:permute(order):reshape(shape)
end

local function reduce_def(name, f)
  def(name, { "self", "axis", "keepdim" }, function(self, axis, keepdim)
    axes_of(name, self, axis)
    return f(self, axis, keepdim)
  end)
end
doc("max", "maximum over axis, or everything")
reduce_def("max", C.max)
doc("min", "minimum over axis, or everything")
reduce_def("min", C.min)
doc("mean", "mean over axis, or everything")
reduce_def("mean", C.mean)
doc("sum", "sum over axis (a number or a list), or everything; dtype sets the accumulator")
def("sum", { "self", "axis", "keepdim", "dtype" }, function(self, axis, keepdim, dtype)
  axes_of("sum", self, axis)
  return C.sum(dtype and self:cast(dtype) or self, axis, keepdim)
end)

-- prod by pairwise products: pad the row to even length with 1s, multiply its halves, repeat
-- (log2 n elementwise steps, exact gradients even where an element is 0)
doc("prod", "product over axis, or everything")
def("prod", { "self", "axis", "keepdim", "dtype" }, function(self, axis, keepdim, dtype)
  local x = dtype and self:cast(dtype) or self
  local axes = axes_of("prod", x, axis)
  local out = kept_shape(x, axes, keepdim)
  if #axes == 0 then return x:reshape(out) end
  local y = to_last(x, axes)
  local n, nd = y.shape[y.ndim], y.ndim
  if n == 0 then return T.ones(out, { dtype = x.dtype }) end
  local function last(p)
    local t = {}
    for i = 1, nd - 1 do t[i] = { 0, y.shape[i] } end
    t[nd] = p
    return t
  end
  while n > 1 do
    local h = (n + 1) // 2
    local pads = {}
    for i = 1, nd - 1 do pads[i] = { 0, 0 } end
    pads[nd] = { 0, 2 * h - n }
    local p = C.pad(y, pads, 1)
    y = p:shrink(last({ 0, h })) * p:shrink(last({ h, 2 * h }))
    n = h
  end
  return y:reshape(out)
end)

doc("any", "true if any element (over axis) is nonzero")
def("any", { "self", "axis", "keepdim" }, function(self, axis, keepdim)
  axes_of("any", self, axis)
  return self:bool():max(axis, keepdim)
end)
doc("all", "true if every element (over axis) is nonzero")
def("all", { "self", "axis", "keepdim" }, function(self, axis, keepdim)
  return self:logical_not():any(axis, keepdim):logical_not()
end)

doc("var", "variance over axis, divided by n - correction (default 1)")
def("var", { "self", "axis", "keepdim", "correction" }, function(self, axis, keepdim, correction)
  local axes = axes_of("var", self, axis)
  local sq = (self - self:mean(axis, true)):square()
  local n = count(self, axes) - (correction == nil and 1 or correction)
  return sq:sum(axis, keepdim):div(math.max(0, n))
end)
doc("std", "standard deviation over axis (with correction)")
def("std", { "self", "axis", "keepdim", "correction" }, function(self, axis, keepdim, correction)
  return self:var(axis, keepdim, correction):sqrt()
end)
doc("var_mean", "var and mean, as two results")
def("var_mean", { "self", "axis", "keepdim", "correction" }, function(self, axis, keepdim, correction)
  return self:var(axis, keepdim, correction), self:mean(axis, keepdim)
end)
doc("std_mean", "std and mean, as two results")
def("std_mean", { "self", "axis", "keepdim", "correction" }, function(self, axis, keepdim, correction)
  return self:std(axis, keepdim, correction), self:mean(axis, keepdim)
end)

doc("isclose", "|x - other| <= atol + rtol * |other| elementwise (equal_nan: nan matches nan)")
def("isclose", { "self", "other", "rtol", "atol", "equal_nan" }, function(self, other, rtol, atol, equal_nan)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  local a, b = T._broadcasted(self, other)
  local close = a:isfinite():bitwise_and(b:isfinite()):bitwise_and((a - b):abs():le(b:abs() * rtol + atol))
  local inf = a:isinf():bitwise_or(b:isinf()):bitwise_and(a:eq(b))
  local r = close:bitwise_or(inf)
  if equal_nan then r = r:bitwise_or(a:isnan():bitwise_and(b:isnan())) end
  return r
end)

local function axis_of(name, x, axis)
  if type(axis) == "table" then error(("%s: axis must be one integer"):format(name), 0) end
  return axes_of(name, x, axis)[1] -- nil for a 0-d tensor
end

doc("softmax", "exp(x - max) normalised to sum 1 along axis (default -1)")
def("softmax", { "self", "axis", "dtype" }, function(self, axis, dtype)
  axis_of("softmax", self, axis or -1)
  return C.softmax(dtype and self:cast(dtype) or self, axis or -1)
end)
doc("log_softmax", "log of softmax, computed stably")
def("log_softmax", { "self", "axis", "dtype" }, function(self, axis, dtype)
  axis_of("log_softmax", self, axis or -1)
  return C.log_softmax(dtype and self:cast(dtype) or self, axis or -1)
end)
doc("logsumexp", "log(sum(exp(x))) over axis, computed stably")
def("logsumexp", { "self", "axis", "keepdim" }, function(self, axis, keepdim)
  axes_of("logsumexp", self, axis)
  local m = self:max(axis, true)
  return (self - m):exp():sum(axis, keepdim):log() + self:max(axis, keepdim)
end)

doc("argmax", "index of the maximum (the first one on ties)")
def("argmax", { "self", "axis", "keepdim" }, function(self, axis, keepdim)
  if axis ~= nil then axis_of("argmax", self, axis) end
  if self:numel() == 0 then error("argmax: the tensor has no elements", 0) end
  return C.argmax(self, axis, keepdim)
end)
doc("argmin", "index of the minimum (the first one on ties)")
def("argmin", { "self", "axis", "keepdim" }, function(self, axis, keepdim)
  local flipped
  if dtypes.is_float(self.dtype) then flipped = -self
  elseif self.dtype == "bool" then flipped = self:logical_not()
  else flipped = self:bitwise_not() end -- ~x = -x - 1 reverses the order without overflow
  return flipped:argmax(axis, keepdim)
end)

-- ---------------------------------------------------------------- scans

doc("cumsum", "running sum along axis")
def("cumsum", { "self", "axis" }, function(self, axis)
  axis_of("cumsum", self, axis or 0)
  return C.cumsum(self, axis or 0)
end)

-- Hillis-Steele scan along `axis`: log2(n) steps of combining each element with the one 2^k
-- before it. Positions with no partner keep their value (op(x, x) = x for max; 1 for prod).
local function scan(name, self, axis, op, fill)
  local a = axis_of(name, self, axis or 0)
  if a == nil then return self end
  local x = self:transpose(a, -1)
  local n, nd = x.shape[x.ndim], x.ndim
  local k = 1
  while k < n do
    local pads, sh = {}, {}
    for i = 1, nd - 1 do pads[i] = { 0, 0 }; sh[i] = { 0, x.shape[i] } end
    pads[nd], sh[nd] = { k, 0 }, { 0, n }
    local shifted = x:pad(pads):shrink(sh)
    if fill == nil then
      shifted = T.arange(n):ge(k):where(shifted, x)
    elseif fill ~= 0 then
      shifted = T.arange(n):ge(k):where(shifted, fill)
    end
    x = op(x, shifted)
    k = k * 2
  end
  return x:transpose(a, -1)
end
doc("cumprod", "running product along axis")
def("cumprod", { "self", "axis" }, function(self, axis) return scan("cumprod", self, axis, T.mul, 1) end)
doc("cummax", "running maximum along axis")
def("cummax", { "self", "axis" }, function(self, axis) return scan("cummax", self, axis, T.maximum, nil) end)

-- log(cumsum(exp x)) with each prefix shifted by its own running max, as tinygrad
doc("logcumsumexp", "log of the running sum of exp along axis, computed stably")
def("logcumsumexp", { "self", "axis" }, function(self, axis)
  local a = axis_of("logcumsumexp", self, axis or 0)
  if a == nil then return self end
  local x = self:transpose(a, -1)
  local n = x.shape[x.ndim]
  if n == 0 then return self end
  local xr = x:reshape(-1, n)
  local cm = xr:cummax(-1):unsqueeze(-1)                 -- (r, n, 1)
  local xe = xr:unsqueeze(1):expand(xr.shape[1], n, n)     -- (r, n, n): row j sees every i
  local mask = T.ones(n, n):tril():unsqueeze(0)
  local r = ((xe - cm):exp() * mask):sum(-1):log() + cm:squeeze(-1)
  return r:reshape(x.shape):transpose(-1, a)
end)

-- ---------------------------------------------------------------- sort, topk

-- Sort by rank: element i goes to position #{j : x_j before x_i}, ties kept in index order,
-- NaN last (as PyTorch). O(n^2) work per row: fine for the rows people sort at a prompt.
doc("sort", "sorted values and their indices along dim (two results; O(n^2) per row)")
def("sort", { "self", "dim", "descending" }, function(self, dim, descending)
  local a = axis_of("sort", self, dim or -1)
  if a == nil then return self, T.zeros({}, { dtype = "int32" }) end
  local x = self:transpose(a, -1)
  local n = x.shape[x.ndim]
  local xi, xj = x:unsqueeze(-1), x:unsqueeze(-2) -- (..., n, 1) and (..., 1, n)
  local before
  if dtypes.is_float(x.dtype) then
    local ni, nj = xi:isnan(), xj:isnan()
    local less = descending and xj:gt(xi) or xj:lt(xi)
    before = less:bitwise_and(nj:logical_not()):bitwise_or(ni:bitwise_and(nj:logical_not()))
    local same = xj:eq(xi):bitwise_or(ni:bitwise_and(nj))
    local idx = T.arange(n)
    before = before:bitwise_or(same:bitwise_and(idx:unsqueeze(0):lt(idx:unsqueeze(1))))
  else
    local less = descending and xj:gt(xi) or xj:lt(xi)
    local idx = T.arange(n)
    before = less:bitwise_or(xj:eq(xi):bitwise_and(idx:unsqueeze(0):lt(idx:unsqueeze(1))))
  end
  local rank = before:cast("int32"):sum(-1)                       -- (..., n): where x_i goes
  local hot = rank:unsqueeze(-1):eq(T.arange(n))                   -- (..., i, r)
  local vals = hot:where(xi, 0):sum(-2):cast(x.dtype)             -- (..., r)
  local idx = hot:where(T.arange(n):unsqueeze(-1), 0):sum(-2):cast("int32")
  return vals:transpose(a, -1), idx:transpose(a, -1)
end)

doc("topk", "the k largest (or smallest) values and their indices along dim")
def("topk", { "self", "k", "dim", "largest", "sorted_" }, function(self, k, dim, largest, sorted_)
  if sorted_ == false then error("topk: sorted_=false is not supported (as in tinygrad)", 0) end
  local a = axis_of("topk", self, dim or -1)
  local n = a and self.shape[a + 1] or 1
  if math.type(k) ~= "integer" or k < 0 or k > n then
    error(("topk: k=%s is out of range for a dim of %d"):format(tostring(k), n), 0)
  end
  local v, i = self:sort(dim or -1, largest ~= false)
  if a == nil then return v, i end
  local sh = {}
  for d = 1, self.ndim do sh[d] = { 0, self.shape[d] } end
  sh[a + 1] = { 0, k }
  return v:shrink(sh), i:shrink(sh)
end)

-- ---------------------------------------------------------------- einsum

-- x's diagonal over dims p and q (0-based, the same size n), as its last dim: the two dims moved
-- last and flattened, then every (n+1)th element (a view: pad, reshape, shrink)
local function diagonal_last(x, p, q)
  local n = x.shape[p + 1]
  local perm, lead = {}, {}
  for i = 0, x.ndim - 1 do
    if i ~= p and i ~= q then perm[#perm + 1] = i; lead[#lead + 1] = x.shape[i + 1] end
  end
  perm[#perm + 1], perm[#perm + 2] = p, q
  local function shape(...)
    local s = { table.unpack(lead) }
    for _, v in ipairs({ ... }) do s[#s + 1] = v end
    return s
  end
  local pads = {}
  for i = 1, #lead do pads[i] = { 0, 0 } end
  pads[#lead + 1] = { 0, n }
  local cut = {}
  for i, v in ipairs(lead) do cut[i] = { 0, v } end
  cut[#lead + 1], cut[#lead + 2] = { 0, n }, { 0, 1 }
  return x:permute(perm):reshape(shape(n * n)):pad(pads):reshape(shape(n, n + 1)):shrink(cut):reshape(shape(n))
end

-- Tensor.einsum("ij,jk->ik", a, b): every operand viewed over all the letters (broadcast),
-- multiplied, and summed over the letters the output lacks. A letter repeated in one operand
-- ("ii->i") takes the diagonal of its dims first.
doc("einsum", "Einstein summation: Tensor.einsum('ij,jk->ik', a, b)")
def("einsum", { "formula", "...", "dtype" }, function(formula, ops, dtype)
  if type(formula) ~= "string" then error("einsum: the formula must be a string like 'ij,jk->ik'", 0) end
  if ops.n == 1 and type(ops[1]) == "table" and show.typeof(ops[1]) ~= "Tensor" then ops = ops[1] end
  ops = { table.unpack(ops, 1, ops.n or #ops) } -- a copy: diagonals replace operands
  local f = formula:gsub("%s", "")
  local lhs, rhs = f:match("^(.-)%->(.*)$")
  lhs = lhs or f
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= #ops then error(("einsum: the formula has %d operands, %d tensors given"):format(#terms, #ops), 0) end
  -- "..." becomes placeholder dims (control characters, sorted before letters), right-aligned
  -- across operands as in broadcasting
  local ell = 0
  for k, term in ipairs(terms) do
    local s, e = term:find("...", 1, true)
    if s then
      local x = ops[k]
      local named = #term - 3
      if show.typeof(x) ~= "Tensor" or x.ndim < named then error(("einsum: operand %d has too few dims for '%s'"):format(k, term), 0) end
      ell = math.max(ell, x.ndim - named)
    end
  end
  local function placeholders(cnt)
    local t = {}
    for i = ell - cnt + 1, ell do t[#t + 1] = string.char(i) end
    return table.concat(t)
  end
  for k, term in ipairs(terms) do
    if term:find("...", 1, true) then
      terms[k] = term:gsub("%.%.%.", placeholders(ops[k].ndim - (#term - 3)), 1)
    end
  end
  if rhs then rhs = rhs:gsub("%.%.%.", placeholders(ell), 1) end
  local size, uses = {}, {}
  for k, term in ipairs(terms) do
    local x = ops[k]
    if show.typeof(x) ~= "Tensor" then error(("einsum: operand %d is not a Tensor"):format(k), 0) end
    if #term ~= x.ndim then
      error(("einsum: '%s' names %d dims, operand %d has %d"):format(term, #term, k, x.ndim), 0)
    end
    local seen = {}
    local i = 1
    while i <= #term do -- a repeated letter: the diagonal of its two dims, moved last
      local c = term:sub(i, i)
      if seen[c] then
        local p = seen[c]
        if x.shape[p] ~= x.shape[i] then
          error(("einsum: letter '%s' repeats in operand %d with sizes %d and %d"):format(c, k, x.shape[p],
            x.shape[i]), 0)
        end
        x = diagonal_last(x, p - 1, i - 1)
        term = term:sub(1, p - 1) .. term:sub(p + 1, i - 1) .. term:sub(i + 1) .. c
        ops[k], terms[k] = x, term
        uses[c] = (uses[c] or 0) + 1 -- counted as written, for the implicit output
        seen, i = {}, 1
      else
        seen[c] = i
        i = i + 1
      end
    end
    for i = 1, #term do
      local c = term:sub(i, i)
      if not c:match("%a") and c:byte() > 31 then error(("einsum: '%s' is not a letter"):format(c), 0) end
      local s = x.shape[i]
      if size[c] and size[c] ~= s and s ~= 1 and size[c] ~= 1 then
        error(("einsum: letter '%s' has sizes %d and %d"):format(c, size[c], s), 0)
      end
      if size[c] == nil or size[c] == 1 then size[c] = s end -- a size 1 broadcasts
      uses[c] = (uses[c] or 0) + 1
    end
  end
  local letters = {}
  for c in pairs(size) do letters[#letters + 1] = c end
  table.sort(letters)
  if not rhs then -- implicit output: the "..." dims, then the letters used once, in alphabetical order
    local o = { placeholders(ell) }
    for _, c in ipairs(letters) do if uses[c] == 1 and c:byte() > 31 then o[#o + 1] = c end end
    rhs = table.concat(o)
  end
  for i = 1, #rhs do
    if not size[rhs:sub(i, i)] then error(("einsum: output letter '%s' is not in the inputs"):format(rhs:sub(i, i)), 0) end
  end
  local pos, full = {}, {}
  for i, c in ipairs(letters) do pos[c] = i - 1; full[i] = size[c] end
  local prod
  for k, term in ipairs(terms) do
    local x, order, view = ops[k], {}, {}
    local chars = {}
    for i = 1, #term do chars[i] = term:sub(i, i) end
    local sorted = { table.unpack(chars) }
    table.sort(sorted, function(p, q) return pos[p] < pos[q] end)
    local idx = {}
    for i, c in ipairs(chars) do idx[c] = i - 1 end
    for i, c in ipairs(sorted) do order[i] = idx[c] end
    local have = {}
    for _, c in ipairs(sorted) do have[c] = x.shape[idx[c] + 1] end
    for i, c in ipairs(letters) do view[i] = have[c] or 1 end
    local v = x:permute(order):reshape(view):expand(full)
    prod = prod and prod * v or v
  end
  local sum_axes, out_order = {}, {}
  local keep = {}
  for i = 1, #rhs do keep[rhs:sub(i, i)] = true end
  for _, c in ipairs(letters) do if not keep[c] then sum_axes[#sum_axes + 1] = pos[c] end end
  local r = #sum_axes > 0 and prod:sum(sum_axes, false, dtype) or (dtype and prod:cast(dtype) or prod)
  -- r's dims are the kept letters in alphabetical order; put them in rhs order
  local kept = {}
  for _, c in ipairs(letters) do if keep[c] then kept[#kept + 1] = c end end
  local at = {}
  for i, c in ipairs(kept) do at[c] = i - 1 end
  for i = 1, #rhs do out_order[i] = at[rhs:sub(i, i)] end
  return #out_order > 0 and r:permute(out_order) or r
end)

return T
