-- ONNX op handlers: elementwise math and activations beyond the basic ones, normalizations
-- (MeanVarianceNormalization, LRN), Det, ReverseSequence, and the data-dependent NonZero
-- and Unique. Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local axis_of, axes_list, ops = U.axis_of, U.axes_list, U.ops

for name, m in pairs({ Asin = "asin", Acos = "acos", Atan = "atan", Sinh = "sinh", Cosh = "cosh",
  Asinh = "asinh", Acosh = "acosh", Atanh = "atanh", HardSwish = "hardswish" }) do
  op(name, 1, function(_, x) return x[1][m](x[1]) end)
end
op("Celu", 12, function(_, x, at) return x[1]:celu(at.alpha or 1.0) end)

-- (x - mean) / std over the axes (default: all but the channel), std the biased one
op("MeanVarianceNormalization", 9, function(_, x, at)
  local axes = axes_list(at.axes or { 0, 2, 3 }, x[1].ndim)
  local y = x[1] - x[1]:mean(axes, true)
  return y / ((y * y):mean(axes, true):sqrt() + 1e-9)
end)

-- LRN: each element divided by (bias + alpha/size * the sum of squares over a window of `size`
-- channels around it)^beta; the window as a sum of shifted views of the zero-padded squares
op("LRN", 1, function(_, x, at)
  local size = at.size
  local alpha, beta, bias = at.alpha or 1e-4, at.beta or 0.75, at.bias or 1.0
  local c = x[1].shape[2]
  local pads = {}
  for i = 1, x[1].ndim do pads[i] = { 0, 0 } end
  pads[2] = { (size - 1) // 2, size - 1 - (size - 1) // 2 }
  local sq = (x[1] * x[1]):pad(pads)
  local sum
  for k = 0, size - 1 do
    local cut = {}
    for i = 1, x[1].ndim do cut[i] = { 0, sq.shape[i] } end
    cut[2] = { k, k + c }
    sum = sum and sum + sq:shrink(cut) or sq:shrink(cut)
  end
  return x[1] / (sum * (alpha / size) + bias):pow(beta)
end)

-- Det of the last two dims: Gaussian elimination with partial pivoting, all lazy; each step
-- swaps the largest remaining pivot into row k (one-hot selects, a sign flip), then clears the
-- column below it. The determinant is the signed product of the pivots.
op("Det", 11, function(_, x)
  local a = x[1]
  local n = a.shape[a.ndim]
  local rows = Tensor.arange(n, { dtype = "int64" })
  local det
  for k = 0, n - 1 do
    local col = a[{ "...", { nil }, k }]                                     -- (..., n)
    local cand = rows:ge(k):where(col:abs(), -1)
    local p = cand:argmax({ axis = -1, keepdim = true }):cast("int64")       -- (..., 1)
    local at_p = rows:eq(p)                                                  -- (..., n)
    local row_p = at_p:unsqueeze(-1):where(a, 0):sum({ axis = -2 })        -- (..., n)
    local row_k = a[{ "...", k, { nil } }]
    local is_k = rows:eq(k):unsqueeze(-1)                                    -- (n, 1)
    a = is_k:where(row_p:unsqueeze(-2), at_p:unsqueeze(-1):where(row_k:unsqueeze(-2), a))
    local pivot = a[{ "...", k, k }]
    local sign = p:squeeze(-1):eq(k):where(1, -1):cast(a.dtype)
    det = (det and det * pivot or pivot) * sign
    local safe = pivot:eq(0):where(1, pivot)                                 -- a zero pivot: det is 0
    local f = rows:gt(k):where(a[{ "...", { nil }, k }] / safe:unsqueeze(-1), 0)
    a = a - f:unsqueeze(-1) * a[{ "...", k, { nil } }]:unsqueeze(-2)
  end
  return det
end)

-- ReverseSequence: along the time axis, the first seq_len[b] elements of batch b reversed, the
-- rest kept; a gather with the source time of each position
op("ReverseSequence", 10, function(_, x, at)
  local d, lens = x[1], x[2]:cast("int64")
  local ta, ba = at.time_axis or 0, at.batch_axis or 1
  local nt, nb = d.shape[ta + 1], d.shape[ba + 1]
  local shape_t, shape_b = {}, {}
  for i = 1, d.ndim do shape_t[i], shape_b[i] = 1, 1 end
  shape_t[ta + 1], shape_b[ba + 1] = nt, nb
  local t = Tensor.arange(nt, { dtype = "int64" }):reshape(shape_t)
  local len = lens:reshape(shape_b)
  local src = t:lt(len):where(len - 1 - t, t):expand(d.shape)
  return d:gather(ta, src)
end)

-- NonZero: the indices of the nonzero elements, one row per dim (data-dependent: read back)
op("NonZero", 9, function(_, x)
  local d = x[1]
  local flags = d:ne(0):reshape(-1):tolist()
  local idx, strides = {}, {}
  local s = 1
  for i = d.ndim, 1, -1 do strides[i] = s; s = s * d.shape[i] end
  for i = 1, d.ndim do idx[i] = {} end
  for f, on in ipairs(flags) do
    if on then
      local r = f - 1
      for i = 1, d.ndim do idx[i][#idx[i] + 1] = r // strides[i]; r = r % strides[i] end
    end
  end
  local n = #(idx[1] or {})
  if d.ndim == 0 then return Tensor.zeros({ 0, flags[1] and 1 or 0 }, { dtype = "int64" }) end
  if n == 0 then return Tensor.zeros({ d.ndim, 0 }, { dtype = "int64" }) end
  return Tensor(idx, "int64")
end)

-- Unique: the distinct slices along the axis (or elements of the flattened tensor), sorted
-- (lexicographically) or in order of first appearance, with the index of each one's first
-- occurrence, each slice's position among them, and their counts. Keys are read back; the
-- output slices are gathered from the input.
op("Unique", 11, function(_, x, at)
  local d = x[1]
  local axis = at.axis and axis_of(at.axis, d.ndim)
  if not axis then d, axis = d:reshape(-1), 0 end
  local perm = { axis }
  for i = 0, d.ndim - 1 do if i ~= axis then perm[#perm + 1] = i end end
  local n = d.shape[axis + 1]
  local rows = n > 0 and d:permute(perm):reshape(n, -1):tolist() or {}
  local first, order = {}, {}
  for i, r in ipairs(rows) do
    local parts = {} -- the key: floats in hex (%a), exact where tostring's %.14g is not
    for j, v in ipairs(r) do parts[j] = math.type(v) == "float" and ("%a"):format(v) or tostring(v) end
    local k = table.concat(parts, ",")
    if not first[k] then first[k] = { at = i - 1, row = r, count = 0 }; order[#order + 1] = k end
    first[k].count = first[k].count + 1
    rows[i] = k
  end
  if at.sorted ~= 0 then
    table.sort(order, function(p, q)
      local a, b = first[p].row, first[q].row
      for j = 1, #a do if a[j] ~= b[j] then return a[j] < b[j] end end
      return false
    end)
  end
  local pos, indices, counts = {}, {}, {}
  for i, k in ipairs(order) do pos[k] = i - 1; indices[i] = first[k].at; counts[i] = first[k].count end
  local inverse = {}
  for i, k in ipairs(rows) do inverse[i] = pos[k] end
  local function list(t) return #t > 0 and Tensor(t, "int64") or Tensor.zeros({ 0 }, { dtype = "int64" }) end
  local y = #indices > 0 and ops.Gather.fn(nil, { d, list(indices) }, { axis = axis }) or d
  return y, list(indices), list(inverse), list(counts)
end)
end
