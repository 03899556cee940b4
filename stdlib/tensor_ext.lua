-- tensor_ext: the ops models need, composed from the primitives in Lua (as tinygrad composes
-- them in tensor.py). Each adds a method to Tensor; gradients come for free from the
-- primitives' rules, so none of these has a backward of its own.
local T = Tensor

local function tuple(v, n) -- 3 -> {3, 3}; {1, 2} stays
  if type(v) == "table" then
    assert(#v == n, ("expected %d values, got %d"):format(n, #v))
    return v
  end
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end

local function ceildiv(a, b) return -((-a) // b) end

local function range(a, b) -- {a, a+1, ..., b}
  local t = {}
  for i = a, b do t[#t + 1] = i end
  return t
end

local function concat(...)
  local out = {}
  for _, t in ipairs({ ... }) do
    for _, v in ipairs(t) do out[#out + 1] = v end
  end
  return out
end

local function ones_list(n) return tuple(1, n) end

-- ---------------------------------------------------------------- activations

function T.leaky_relu(x, slope) slope = slope or 0.01; return x:relu() - (-x):relu() * slope end
function T.elu(x, alpha) alpha = alpha or 1.0; return x:relu() - ((1 - x:exp()):relu() * alpha) end
function T.silu(x) return x * x:sigmoid() end
function T.softplus(x, beta)
  beta = beta or 1
  -- log(1 + e^(beta x)) / beta, stable for large x: max(x,0) + log(1 + e^-|beta x|) / beta
  local bx = x * beta
  return bx:relu() / beta + ((-bx:abs()):exp() + 1):log() / beta
end
function T.gelu(x) -- the tanh approximation, as tinygrad and GPT-2 use
  return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)):tanh())
end
function T.erf(x) -- Abramowitz-Stegun 7.1.26 (max error 1.5e-7), odd-extended
  local s = x:gt(0):where(1.0, -1.0)
  local a = x:abs()
  local t = 1 / (1 + 0.3275911 * a)
  local y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t *
      (-(a * a)):exp()
  return s * y
end

-- ---------------------------------------------------------------- joining and picking

-- Tensor.cat({a, b, ...}, axis): each piece padded to the full length, then summed.
function T.cat(ts, axis)
  axis = axis or 0
  assert(type(ts) == "table" and #ts > 0, "cat needs a list of tensors")
  local first = ts[1]
  local nd = first.ndim
  if axis < 0 then axis = axis + nd end
  assert(axis >= 0 and axis < nd, ("cat: axis %d is out of range for %d dims"):format(axis, nd))
  local total = 0
  for k, t in ipairs(ts) do
    assert(t.ndim == nd, ("cat: tensor %d has %d dims, expected %d"):format(k, t.ndim, nd))
    for d = 1, nd do
      if d ~= axis + 1 and t.shape[d] ~= first.shape[d] then
        error(("cat: tensor %d has shape (%s), which differs from (%s) outside axis %d"):format(k,
          table.concat(t.shape, ", "), table.concat(first.shape, ", "), axis), 2)
      end
    end
    total = total + t.shape[axis + 1]
  end
  local out, at = nil, 0
  for _, t in ipairs(ts) do
    local p = {}
    for d = 1, nd do p[d] = { 0, 0 } end
    p[axis + 1] = { at, total - at - t.shape[axis + 1] }
    at = at + t.shape[axis + 1]
    local piece = t:pad(p)
    out = out and out + piece or piece
  end
  return out
end

function T.stack(ts, axis)
  axis = axis or 0
  local us = {}
  for k, t in ipairs(ts) do us[k] = t:unsqueeze(axis) end
  return T.cat(us, axis)
end

-- x:one_hot(n): int class ids -> float rows with a 1 at the id.
function T.one_hot(x, n)
  return x:unsqueeze(-1):eq(T.arange(n):reshape(concat(ones_list(x.ndim), { n }))):cast("float32")
end

-- x:gather(axis, index): out[i][j] = x[i][index[i][j]] (for axis 1), as a masked sum.
function T.gather(x, axis, index)
  if axis < 0 then axis = axis + x.ndim end
  local n = x.shape[axis + 1]
  local ishape = index.shape
  -- compare index (expanded over a new last dim of size n) with 0..n-1
  local mask = index:unsqueeze(-1):eq(T.arange(n):reshape(concat(ones_list(index.ndim), { n })))
  -- x with the gathered axis moved last, shrunk to the index's other dims
  local order = {}
  for d = 0, x.ndim - 1 do if d ~= axis then order[#order + 1] = d end end
  order[#order + 1] = axis
  local xs = x:permute(order)
  local sh = {}
  for d = 1, x.ndim do
    if d - 1 ~= axis then sh[#sh + 1] = { 0, ishape[d] } end
  end
  sh[#sh + 1] = { 0, n }
  xs = xs:shrink(sh)
  -- put index's gathered axis back in place: xs is (..others.., n); index is (..., k at axis, ...)
  local iorder = {}
  for d = 0, index.ndim - 1 do if d ~= axis then iorder[#iorder + 1] = d end end
  iorder[#iorder + 1] = axis
  local m = mask:permute(concat(iorder, { index.ndim })) -- (...others.., k, n)
  local xe = xs:unsqueeze(-2)                               -- (...others.., 1, n)
  local picked = (m:where(xe, 0)):sum(-1)                    -- (...others.., k)
  local back = {}
  for d = 0, index.ndim - 1 do back[d + 1] = 0 end
  local pos = 0
  for d = 0, index.ndim - 1 do
    if d ~= axis then back[d + 1] = pos; pos = pos + 1 end
  end
  back[axis + 1] = index.ndim - 1
  return picked:permute(back)
end

-- ---------------------------------------------------------------- pooling and convolution

-- The windows of the last #k dims as new dims: (..., i1, i2) -> (..., o1, o2, k1, k2), where
-- out[..., o1, o2, a, b] = x[..., o1*s1 + a*d1, o2*s2 + b*d2]. Movement ops only: a view.
function T._pool(x, k, stride, dilation)
  local n = #k
  local s, d = tuple(stride or 1, n), tuple(dilation or 1, n)
  local nd = x.ndim
  local lead = nd - n
  local noop = {}
  for i = 1, lead do noop[i] = x.shape[i] end
  local ii, o = {}, {}
  for j = 1, n do
    ii[j] = x.shape[lead + j]
    o[j] = ceildiv(ii[j] - d[j] * (k[j] - 1), s[j])
    assert(o[j] > 0, ("pool: a window of %d (dilation %d) does not fit in %d"):format(k[j], d[j], ii[j]))
  end
  local overlap = false
  for j = 1, n do overlap = overlap or k[j] > s[j] or d[j] ~= 1 end
  local function shrink_last(pairs_)
    local p = {}
    for i = 1, lead do p[i] = { 0, noop[i] } end
    for _, q in ipairs(pairs_) do p[#p + 1] = q end
    return p
  end
  if not overlap then
    local pads = {}
    for i = 1, lead do pads[i] = { 0, 0 } end
    for j = 1, n do pads[lead + j] = { 0, math.max(0, o[j] * s[j] - ii[j]) } end
    local y = x:pad(pads)
    local sh = {}
    for j = 1, n do sh[j] = { 0, o[j] * s[j] } end
    y = y:shrink(shrink_last(sh))
    local rs = {}
    for j = 1, n do rs[#rs + 1] = o[j]; rs[#rs + 1] = s[j] end
    y = y:reshape(concat(noop, rs))
    local sh2 = {}
    for j = 1, n do sh2[#sh2 + 1] = { 0, o[j] }; sh2[#sh2 + 1] = { 0, k[j] } end
    y = y:shrink(shrink_last(sh2))
    local perm = range(0, lead - 1)
    for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) end
    for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) + 1 end
    return y:permute(perm)
  end
  -- Overlapping windows: tile each dim so that rows of length r = i*f + d start at offsets
  -- 0, d, 2d, ... (mod i); row a, column o*s is then x[o*s + a*d].
  local f, r, reps = {}, {}, {}
  for j = 1, n do
    f[j] = math.max(1, ceildiv(o[j] * s[j], ii[j]))
    r[j] = ii[j] * f[j] + d[j]
    reps[j] = ceildiv(k[j] * r[j], ii[j])
  end
  -- repeat: (..., i) -> (..., 1, i) -> (..., reps, i) -> (..., reps*i), for every pooled dim
  local rs, ex, flat = {}, {}, {}
  for j = 1, n do
    rs[#rs + 1] = 1; rs[#rs + 1] = ii[j]
    ex[#ex + 1] = reps[j]; ex[#ex + 1] = ii[j]
    flat[j] = reps[j] * ii[j]
  end
  local y = x:reshape(concat(noop, rs)):expand(concat(noop, ex)):reshape(concat(noop, flat))
  local sh = {}
  for j = 1, n do sh[j] = { 0, k[j] * r[j] } end
  y = y:shrink(shrink_last(sh))
  local kr = {}
  for j = 1, n do kr[#kr + 1] = k[j]; kr[#kr + 1] = r[j] end
  y = y:reshape(concat(noop, kr))
  local sh2 = {}
  for j = 1, n do sh2[#sh2 + 1] = { 0, k[j] }; sh2[#sh2 + 1] = { 0, o[j] * s[j] } end
  y = y:shrink(shrink_last(sh2))
  local kos = {}
  for j = 1, n do kos[#kos + 1] = k[j]; kos[#kos + 1] = o[j]; kos[#kos + 1] = s[j] end
  y = y:reshape(concat(noop, kos))
  local sh3 = {}
  for j = 1, n do sh3[#sh3 + 1] = { 0, k[j] }; sh3[#sh3 + 1] = { 0, o[j] }; sh3[#sh3 + 1] = { 0, 1 } end
  y = y:shrink(shrink_last(sh3))
  local ko = {}
  for j = 1, n do ko[#ko + 1] = k[j]; ko[#ko + 1] = o[j] end
  y = y:reshape(concat(noop, ko))
  local perm = range(0, lead - 1)
  for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) + 1 end
  for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) end
  return y:permute(perm)
end

-- padding for the last n dims: a number, {ph, pw}, or {left, right, top, bottom} as tinygrad
local function pad_last(x, padding, n, value)
  if padding == nil or padding == 0 then return x end
  local p = {}
  for i = 1, x.ndim do p[i] = { 0, 0 } end
  if type(padding) == "number" then
    for j = 1, n do p[x.ndim - n + j] = { padding, padding } end
  elseif #padding == n then
    for j = 1, n do p[x.ndim - n + j] = { padding[j], padding[j] } end
  elseif #padding == 2 * n then -- (left, right, top, bottom): the last dim first
    for j = 1, n do p[x.ndim - j + 1] = { padding[2 * j - 1], padding[2 * j] } end
  else
    error(("padding must be a number, %d values or %d values"):format(n, 2 * n), 3)
  end
  return x:pad(p, value or 0)
end

local function opts(t) return type(t) == "table" and t or {} end

-- x:max_pool2d([kernel=2, {stride=kernel, padding=0, dilation=1}])
function T.max_pool2d(x, kernel, o)
  o = opts(o)
  local k = tuple(kernel or 2, 2)
  local xp = pad_last(x, o.padding, 2, -math.huge) -- padding never wins a max
  local pooled = xp:_pool(k, o.stride or k, o.dilation or 1)
  return pooled:max({ -1, -2 })
end

function T.avg_pool2d(x, kernel, o)
  o = opts(o)
  local k = tuple(kernel or 2, 2)
  return pad_last(x, o.padding, 2):_pool(k, o.stride or k, o.dilation or 1):mean({ -1, -2 })
end

-- x:conv2d(w [, b] [, {stride=1, padding=0, dilation=1, groups=1}])
-- x (N, Cin, H, W), w (Cout, Cin/groups, kh, kw): windows (a view) times weights, summed.
function T.conv2d(x, w, b, o)
  if type(b) == "table" then b, o = nil, b end -- x:conv2d(w, {stride=2}): options, no bias
  o = opts(o)
  local groups = o.groups or 1
  local bs, cin_ = x.shape[1], x.shape[2]
  local cout, cin = w.shape[1], w.shape[2]
  assert(x.ndim == 4 and w.ndim == 4, "conv2d needs a 4-d input (N, C, H, W) and a 4-d weight")
  if groups * cin ~= cin_ then
    error(("conv2d: input has %d channels, weight expects %d x %d groups"):format(cin_, cin, groups), 2)
  end
  if cout % groups ~= 0 then error(("conv2d: %d output channels do not split into %d groups"):format(cout, groups), 2) end
  local hw = { w.shape[3], w.shape[4] }
  local xw = pad_last(x, o.padding, 2):_pool(hw, o.stride or 1, o.dilation or 1) -- (bs, cin_, oy, ox, kh, kw)
  local oy, ox = xw.shape[3], xw.shape[4]
  local rcout = cout // groups
  xw = xw:reshape(bs, groups, cin, 1, oy, ox, hw[1], hw[2])
      :expand(bs, groups, cin, rcout, oy, ox, hw[1], hw[2])
      :permute(0, 1, 3, 4, 5, 2, 6, 7) -- (bs, groups, rcout, oy, ox, cin, kh, kw)
  local ret = (xw * w:reshape(1, groups, rcout, 1, 1, cin, hw[1], hw[2])):sum({ -1, -2, -3 }):reshape(bs, cout, oy, ox)
  if b then ret = ret + b:reshape(1, cout, 1, 1) end
  return ret
end

-- x:linear(w [, b]): x @ w.T + b with w (out, in), as nn.Linear stores it
function T.linear(x, w, b)
  local y = x:matmul(w.T)
  if b then y = y + b end
  return y
end

-- ---------------------------------------------------------------- normalization

-- x:layernorm([axis=-1, eps=1e-5]): zero mean, unit variance over axis
function T.layernorm(x, axis, eps)
  axis, eps = axis or -1, eps or 1e-5
  local y = x - x:mean(axis, true)
  return y * ((y * y):mean(axis, true) + eps):rsqrt()
end

-- x:batchnorm(weight, bias, mean, invstd): (x - mean) * invstd * weight + bias over channel 1
function T.batchnorm(x, weight, bias, mean, invstd)
  local shape = { 1, -1 }
  for _ = 3, x.ndim do shape[#shape + 1] = 1 end
  local y = (x - mean:reshape(shape)) * invstd:reshape(shape)
  if weight then y = y * weight:reshape(shape) end
  if bias then y = y + bias:reshape(shape) end
  return y
end

-- ---------------------------------------------------------------- randomness

-- x:dropout([p=0.5]): zero each element with probability p while Tensor.training is set
function T.dropout(x, p)
  p = p or 0.5
  if not Tensor.training or p == 0 then return x end
  local keep = Tensor.rand(table.unpack(x.shape)):ge(p)
  return keep:where(x, 0) * (1 / (1 - p))
end

-- ---------------------------------------------------------------- losses

-- logits:sparse_categorical_crossentropy(labels [, {label_smoothing=0, ignore_index=-1}])
function T.sparse_categorical_crossentropy(x, y, o)
  o = opts(o)
  local ls = o.label_smoothing or 0
  local n = x.shape[x.ndim]
  local logp = x:log_softmax(-1)
  local mask = y:ne(o.ignore_index or -1)
  local hot = y:unsqueeze(-1):eq(T.arange(n):reshape(concat(ones_list(y.ndim), { n })))
  hot = hot:cast(logp.dtype) * mask:unsqueeze(-1):cast(logp.dtype)
  local count = mask:cast(logp.dtype):sum()
  local nll = -(logp * hot):sum()
  if ls == 0 then return nll / count end
  local smooth = -(logp:mean(-1) * mask:cast(logp.dtype)):sum()
  return ((1 - ls) * nll + ls * smooth) / count
end

-- logits:cross_entropy(target [, {label_smoothing=0}]): target is class ids (int) or probabilities
function T.cross_entropy(x, y, o)
  if not dtypes.is_float(y.dtype) then return x:sparse_categorical_crossentropy(y, o) end
  o = opts(o)
  local ls = o.label_smoothing or 0
  local n = x.shape[x.ndim]
  if ls > 0 then y = y * (1 - ls) + ls / n end
  return -(x:log_softmax(-1) * y):sum(-1):mean()
end

-- probs:binary_crossentropy(target), logits:binary_crossentropy_logits(target)
function T.binary_crossentropy(p, y)
  return -(y * p:log() + (1 - y) * (1 - p):log()):mean()
end
function T.binary_crossentropy_logits(x, y)
  -- (1 - y) * x + log(1 + e^-x), stable for large |x|
  return ((1 - y) * x + (-x):softplus()):mean()
end

function T.mse(x, y) return ((x - y) * (x - y)):mean() end

return T
