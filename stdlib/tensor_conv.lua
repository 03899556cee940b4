-- tensor_conv: pooling and convolution in any number of spatial dims. A window is a view
-- (movement ops only, T._pool); a convolution is windows times weights, summed, as the seeds teach.
local args = require "args"
local T, C = Tensor, args.raw
local def = function(name, params, fn) return args.def(T, name, params, fn) end
local doc = args.doc -- the method's :help text, kept beside it
local is_tensor = args.is_tensor
local winograd = require "winograd"

local function tuple(name, v, n)
  if type(v) == "table" then
    if #v ~= n then error(("%s: expected %d values, got %d"):format(name, n, #v), 0) end
    return v
  end
  if math.type(v) ~= "integer" then error(("%s: expected an integer or a list of %d, got %s"):format(name, n, tostring(v)), 0) end
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end
local function ceildiv(a, b) return -((-a) // b) end

-- The windows of the last #k dims as new dims: (..., i1, i2) -> (..., o1, o2, k1, k2), where
-- out[..., o1, o2, a, b] = x[..., o1*s1 + a*d1, o2*s2 + b*d2]. Movement ops only: a view.
function T._pool(x, k, stride, dilation)
  local n = #k
  local s, d = tuple("pool", stride or 1, n), tuple("pool", dilation or 1, n)
  if x.ndim < n then error(("pool: a %d-d window needs at least %d dims, got shape (%s)"):format(n, n,
    table.concat(x.shape, ", ")), 0) end
  local lead = x.ndim - n
  local noop, ii, o = {}, {}, {}
  for i = 1, lead do noop[i] = x.shape[i] end
  for j = 1, n do
    if k[j] < 1 or s[j] < 1 or d[j] < 1 then error("pool: kernel, stride and dilation must be positive", 0) end
    ii[j] = x.shape[lead + j]
    o[j] = ceildiv(ii[j] - d[j] * (k[j] - 1), s[j])
    if o[j] <= 0 then
      error(("pool: a window of %d (dilation %d) does not fit in %d"):format(k[j], d[j], ii[j]), 0)
    end
  end
  local function with(tail)
    local t = { table.unpack(noop) }
    for _, v in ipairs(tail) do t[#t + 1] = v end
    return t
  end
  local function shrink_last(ps)
    local p = {}
    for i = 1, lead do p[i] = { 0, noop[i] } end
    for _, q in ipairs(ps) do p[#p + 1] = q end
    return p
  end
  local overlap = false
  for j = 1, n do overlap = overlap or k[j] > s[j] or d[j] ~= 1 end
  if not overlap then
    local pads = {}
    for i = 1, lead do pads[i] = { 0, 0 } end
    for j = 1, n do pads[lead + j] = { 0, math.max(0, o[j] * s[j] - ii[j]) } end
    local y, sh, rs, sh2 = C.pad(x, pads), {}, {}, {}
    for j = 1, n do sh[j] = { 0, o[j] * s[j] } end
    y = y:shrink(shrink_last(sh))
    for j = 1, n do rs[#rs + 1] = o[j]; rs[#rs + 1] = s[j] end
    y = y:reshape(with(rs))
    for j = 1, n do sh2[#sh2 + 1] = { 0, o[j] }; sh2[#sh2 + 1] = { 0, k[j] } end
    y = y:shrink(shrink_last(sh2))
    local perm = {}
    for i = 0, lead - 1 do perm[#perm + 1] = i end
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
  local rs, ex, flat = {}, {}, {}
  for j = 1, n do
    rs[#rs + 1] = 1; rs[#rs + 1] = ii[j]
    ex[#ex + 1] = reps[j]; ex[#ex + 1] = ii[j]
    flat[j] = reps[j] * ii[j]
  end
  local y = x:reshape(with(rs)):expand(with(ex)):reshape(with(flat))
  local sh, kr, sh2, kos, sh3, ko = {}, {}, {}, {}, {}, {}
  for j = 1, n do sh[j] = { 0, k[j] * r[j] } end
  y = y:shrink(shrink_last(sh))
  for j = 1, n do kr[#kr + 1] = k[j]; kr[#kr + 1] = r[j] end
  y = y:reshape(with(kr))
  for j = 1, n do sh2[#sh2 + 1] = { 0, k[j] }; sh2[#sh2 + 1] = { 0, o[j] * s[j] } end
  y = y:shrink(shrink_last(sh2))
  for j = 1, n do kos[#kos + 1] = k[j]; kos[#kos + 1] = o[j]; kos[#kos + 1] = s[j] end
  y = y:reshape(with(kos))
  for j = 1, n do sh3[#sh3 + 1] = { 0, k[j] }; sh3[#sh3 + 1] = { 0, o[j] }; sh3[#sh3 + 1] = { 0, 1 } end
  y = y:shrink(shrink_last(sh3))
  for j = 1, n do ko[#ko + 1] = k[j]; ko[#ko + 1] = o[j] end
  y = y:reshape(with(ko))
  local perm = {}
  for i = 0, lead - 1 do perm[#perm + 1] = i end
  for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) + 1 end
  for j = 1, n do perm[#perm + 1] = lead + 2 * (j - 1) end
  return y:permute(perm)
end

-- padding for n spatial dims as a flat list, PyTorch's order (last dim first), as tinygrad:
-- an int pads every side, n values pad both sides of each dim, 2n values are taken as they are
local function pool_pads(name, padding, n)
  padding = padding or 0
  if math.type(padding) == "integer" then
    local t = {}
    for i = 1, 2 * n do t[i] = padding end
    return t
  end
  if type(padding) ~= "table" or (#padding ~= n and #padding ~= 2 * n) then
    error(("%s: padding must be an int or a list of %d or %d ints"):format(name, n, 2 * n), 0)
  end
  if #padding == 2 * n then return { table.unpack(padding) } end
  local t = {}
  for j = n, 1, -1 do t[#t + 1] = padding[j]; t[#t + 1] = padding[j] end
  return t
end
-- {before, after} of spatial dim j (1-based, first spatial dim first) in a flat list
local function pair_of(flat, n, j) return flat[2 * (n - j) + 1], flat[2 * (n - j) + 2] end

-- extra padding after each spatial dim, so that the last partial window is kept (ceil_mode)
local function ceil_pads(x, pads, k, s, d)
  local n = #k
  pads = { table.unpack(pads) }
  for j = 1, n do
    local i = x.shape[x.ndim - n + j]
    local pB, pA = pair_of(pads, n, j)
    local o = ceildiv(i + pB + pA - (d[j] * (k[j] - 1) + 1), s[j]) + 1
    local at = 2 * (n - j) + 2
    pads[at] = pads[at] + s[j] * (o - 1) + (d[j] * (k[j] - 1) + 1) - (i + pB + pA) -
        math.max(s[j] * (o - 1) - (pB + i - 1), 0)
  end
  return pads
end

local function dtype_min(dt)
  if dtypes.is_float(dt) then return -math.huge end
  if dt == "bool" or dt:match("^uint") then return 0 end
  return -(1 << (8 * dtypes.itemsize(dt) - 1))
end

local function pool_setup(name, x, kernel_size, stride, dilation, padding)
  local k = type(kernel_size) == "table" and kernel_size or tuple(name, kernel_size or 2, 2)
  local n = #k
  if x.ndim < n then error(("%s: a %d-d kernel needs at least %d dims, got %d"):format(name, n, n, x.ndim), 0) end
  local s = tuple(name, stride or k, n)
  local d = tuple(name, dilation or 1, n)
  local axes = {}
  for i = 1, n do axes[i] = -i end
  return k, s, d, pool_pads(name, padding, n), axes
end

-- max_pool2d's gradient where the windows tile the input (stride = kernel, no padding or
-- dilation, the dims divisible): the output's gradient spread over each window's maxima (shared
-- among ties, as the automatic gradient does) and stored once. The automatic gradient reaches the
-- same values through the window views, recomputed inside every kernel that reads it: a batch
-- norm's backward read it in five sums through x / 2 indices clang would not vectorize.
local tiled_grads = {}
local function tiled_pool_grad(k)
  local key = table.concat(k, ",")
  tiled_grads[key] = tiled_grads[key] or T._grad_fn(function(g, x)
    local n, lead = #k, x.ndim - #k
    local split, up, win = {}, {}, {}
    for i = 1, lead do split[i], up[i] = x.shape[i], x.shape[i] end
    for j = 1, n do
      local o = x.shape[lead + j] // k[j]
      split[#split + 1], split[#split + 2] = o, k[j]
      up[#up + 1], up[#up + 2] = o, 1
      win[#win + 1] = lead + 2 * j - 1
    end
    local xr = x:reshape(split)
    local hit = xr:eq(xr:max(win, true))
    local share = g:reshape(up) / hit:sum(win, true)
    return hit:where(share, 0):reshape(x.shape):contiguous()
  end)
  return tiled_grads[key]
end

doc("max_pool2d", "max over each window of the last dims (kernel_size default 2x2, stride = kernel)")
def("max_pool2d", { "self", "kernel_size", "stride", "dilation", "padding", "ceil_mode", "return_indices" },
  function(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices)
    local k, s, d, pads, axes = pool_setup("max_pool2d", self, kernel_size, stride, dilation, padding)
    if ceil_mode then pads = ceil_pads(self, pads, k, s, d) end
    local pooled = self:pad(pads, nil, dtype_min(self.dtype)):_pool(k, s, d)
    if not return_indices then
      local tiled = not T.no_grad and not args.is_sharded(self)
      for j = 1, #k do
        local p0, p1 = pair_of(pads, #k, j)
        tiled = tiled and s[j] == k[j] and d[j] == 1 and p0 == 0 and p1 == 0 and
            self.shape[self.ndim - #k + j] % k[j] == 0
      end
      if tiled then return T._custom_grad(pooled:max(axes), { self }, tiled_pool_grad(k)) end
      return pooled:max(axes)
    end
    local spatial, sz = {}, 1
    for j = 1, #k do spatial[j] = self.shape[self.ndim - #k + j]; sz = sz * spatial[j] end
    local idx = T.arange(sz, 0, -1):reshape(spatial)
    local m = pooled:eq(pooled:max(axes, true))
    idx = m:where(idx:pad(pads, nil, dtype_min("int32")):_pool(k, s, d), 0)
    return pooled:max(axes), sz - idx:max(axes)
  end)

doc("avg_pool2d", "mean over each window of the last dims")
def("avg_pool2d", { "self", "kernel_size", "stride", "dilation", "padding", "ceil_mode", "count_include_pad" },
  function(self, kernel_size, stride, dilation, padding, ceil_mode, count_include_pad)
    local k, s, d, reg, axes = pool_setup("avg_pool2d", self, kernel_size, stride, dilation, padding)
    local function pool(x, p) return x:pad(p):_pool(k, s, d) end
    local cp = ceil_pads(self, reg, k, s, d)
    if count_include_pad == false then
      local p = ceil_mode and cp or reg
      return pool(self, p):sum(axes) / pool(T.ones_like(self), p):sum(axes)
    end
    if not ceil_mode then return pool(self, reg):mean(axes) end
    local extra = {}
    for i = 1, #cp do extra[i] = cp[i] - reg[i] end
    return pool(self, cp):sum(axes) / pool(T.ones_like(self:pad(reg)), extra):sum(axes)
  end)

doc("max_unpool2d", "put each value back at the position max_pool2d's indices name")
def("max_unpool2d", { "self", "indices", "kernel_size", "stride", "dilation", "padding", "output_size" },
  function(self, indices, kernel_size, stride, dilation, padding, output_size)
    local bs, c = self.shape[1], self.shape[2]
    local spatial = { table.unpack(self.shape, 3) }
    local n = #spatial
    local out = {}
    if output_size == nil then
      local k = tuple("max_unpool2d", kernel_size or 2, n)
      local s = tuple("max_unpool2d", stride or k, n)
      local d = tuple("max_unpool2d", dilation or 1, n)
      local pads = pool_pads("max_unpool2d", padding, n)
      for j = 1, n do
        local pB, pA = pair_of(pads, n, j)
        out[j] = (spatial[j] - 1) * s[j] - (pB + pA) + (d[j] * (k[j] - 1) + 1)
      end
    else
      for j = 1, n do out[j] = output_size[#output_size - n + j] end
    end
    local total = 1
    for _, v in ipairs(out) do total = total * v end
    local hot = indices:reshape(bs, c, -1, 1):eq(T.arange(total)) -- (bs, c, in, total)
    local r = hot:where(self:reshape(bs, c, -1, 1), 0):sum(2)
    return r:reshape(bs, c, table.unpack(out))
  end)

-- The input's gradient as a matmul and a fold, where the transposed convolution would spend most
-- of its multiplies on the zeros around a small output (a 5x5 kernel over an 8x8 output: 12x12
-- pixels of 16x16 padded windows, 44% of them inside): the weights times the output's gradient
-- give each window's gradient (batch, cin*window, positions), a matmul with no zeros; then each
-- window offset's slice, padded into place, is summed onto the input. MNIST's second conv: 98 ->
-- 33 + 11 ms at 1 thread (AMD Zen 4). Stride and dilation 1, one group, few window offsets, and
-- only where the zeros dominate; nil otherwise (the caller transposes).
local function fold_grad(g, w, groups, s, d, op)
  local n, taps, inside = #s, 1, 1
  for j = 1, n do
    if s[j] ~= 1 or d[j] ~= 1 or op[j] ~= 0 then return nil end
    local o, k = g.shape[2 + j], w.shape[2 + j]
    taps, inside = taps * k, inside * o / (o + k - 1)
  end
  if groups ~= 1 or taps > 49 or inside > 0.75 then return nil end
  local bs, cout, cin = g.shape[1], w.shape[1], w.shape[2]
  local positions = 1
  for j = 1, n do positions = positions * g.shape[2 + j] end
  local wt = w:reshape(cout, cin * taps):transpose(0, 1):reshape(1, cin * taps, cout)
  local cols_shape = { bs, cin }
  for j = 1, n do cols_shape[#cols_shape + 1] = w.shape[2 + j] end
  for j = 1, n do cols_shape[#cols_shape + 1] = g.shape[2 + j] end
  -- (batch, cin, *window, *positions): each offset's slice is contiguous along the positions
  local cols = wt:matmul(g:reshape(bs, cout, positions)):contiguous():reshape(cols_shape)
  local dx
  local at = {}
  for j = 1, n do at[j] = 0 end
  for _ = 1, taps do
    local sl, pads = { { 0, bs }, { 0, cin } }, { { 0, 0 }, { 0, 0 } }
    for j = 1, n do sl[2 + j] = { at[j], at[j] + 1 } end
    for j = 1, n do sl[2 + n + j] = { 0, g.shape[2 + j] } end
    for j = 1, n do pads[2 + j] = { at[j], w.shape[2 + j] - 1 - at[j] } end
    local part = cols:shrink(sl):reshape(bs, cin, table.unpack(g.shape, 3)):pad(pads)
    dx = dx and dx + part or part
    for j = n, 1, -1 do -- the next window offset, the last dim fastest
      at[j] = at[j] + 1
      if at[j] < w.shape[2 + j] then break end
      at[j] = 0
    end
  end
  -- stored once: every reader of the input's gradient (a pool's and a norm's backward) would
  -- otherwise sum the windows again (MNIST step 340 -> 790 ms)
  return dx:contiguous()
end

-- conv2d's gradients, written out (Tensor._custom_grad). The input's: fold_grad above where it
-- applies, else one transposed convolution of the output's gradient, where the windows' own
-- gradient (the automatic one) folds each window back
-- onto the input through div/mod index math, several times slower. One registered function per
-- option set (the registry is never emptied, and there are few distinct sets).
local grad_fns = {}
local function conv_grads(groups, s, d, pads)
  local key = table.concat({ groups, table.concat(s, ","), table.concat(d, ","), table.concat(pads, ",") }, ";")
  if grad_fns[key] then return grad_fns[key] end
  local n = #s
  local crop = {}
  for i, p in ipairs(pads) do crop[i] = -p end
  grad_fns[key] = T._grad_fn(function(g, x, w)
    -- stored once: both gradients read it many times over, and it may be a long expression
    -- (a pool's and a norm's backward)
    g = g:contiguous()
    -- the padded input's size can exceed what the windows cover (a stride that does not
    -- divide it): output_padding makes up the rest, then the padding is cut off again
    local op = {}
    for j = 1, n do
      local pB, pA = pair_of(pads, n, j)
      op[j] = x.shape[2 + j] + pB + pA - ((g.shape[2 + j] - 1) * s[j] + d[j] * (w.shape[2 + j] - 1) + 1)
    end
    local dx = fold_grad(g, w, groups, s, d, op) or
      g:conv_transpose2d(w, nil, { groups = groups, stride = s, dilation = d, output_padding = op })
    -- The weight's gradient as one matmul: the output gradient (cout, batch*positions) times
    -- the input's windows laid out as (batch*positions, cin*window), copied once (3x faster
    -- for 32 channels of 3x3). One input channel too: the automatic gradient, a tile over the
    -- window, ran at 15% of the Xeon's peak for the MNIST CNN's conv1 (1.4-2x slower than the
    -- copy and the matmul, 1 and 2 threads; 2-3x for 3x3 windows over 1-2 channels).
    local hw, dw = { table.unpack(w.shape, 3) }, nil
    if groups == 1 then
      local cols = x:pad(pads):_pool(hw, s, d) -- (b, cin, *o, *hw)
      local order = { 0 }
      for j = 1, n do order[#order + 1] = 1 + j end
      order[#order + 1] = 1
      for j = 1, n do order[#order + 1] = 1 + n + j end
      local k = g.shape[1]
      for j = 1, n do k = k * g.shape[2 + j] end
      cols = cols:permute(order):contiguous():reshape({ k, -1 })
      local gm = g:transpose(0, 1):reshape({ g.shape[2], k })
      dw = gm:matmul(cols):reshape(w.shape):cast(w.dtype)
    end
    return dx:pad(crop):cast(x.dtype), dw -- dw nil: the automatic gradient
  end)
  return grad_fns[key]
end

-- Whether a kernel on this device reads a padded view's tested loads as vectors: a GPU predicates
-- them, AVX-512 has masked loads; a CPU without AVX-512 (the machine's profile) does not.
local function masked_loads(device)
  local dev = type(device) == "string" and device or ""
  if not (dev:match("^CPU") or dev:match("^LLVM")) then return true end
  return select(2, Device.machine()).float_lanes >= 16
end

-- x:conv2d(weight [, bias, groups=1, stride=1, dilation=1, padding=0, dtype]), as tinygrad: x is
-- (N, Cin, *spatial), weight (Cout, Cin/groups, *kernel); any number of spatial dims (conv1d
-- on 3-d input). Windows (a view) times weights, summed.
doc("conv2d", "convolution over the spatial dims of (N, C, ...) (1-d, 2-d, ...): windows (a view) times weight, summed; " ..
  "a 3x3 or 5x5 one with stride 1 and 16+ channels runs as Winograd F(4x4, 3x3) or F(2x2, 5x5) (stdlib/winograd.lua; WINO=0: direct)")
def("conv2d", { "self", "weight", "bias", "groups", "stride", "dilation", "padding", "dtype" },
  function(self, w, b, groups, stride, dilation, padding, dtype)
    if not is_tensor(w) then error("conv2d: weight must be a Tensor", 0) end
    groups = groups or 1
    if self.ndim < 3 or self.ndim ~= w.ndim then
      error(("conv2d: input (%s) and weight (%s) need the same number of dims, at least 3"):format(
        table.concat(self.shape, ", "), table.concat(w.shape, ", ")), 0)
    end
    local bs, cin_ = self.shape[1], self.shape[2]
    local cout, cin = w.shape[1], w.shape[2]
    local hw = { table.unpack(w.shape, 3) }
    local n = #hw
    if math.type(groups) ~= "integer" or groups < 1 then error("conv2d: groups must be a positive integer", 0) end
    if groups * cin ~= cin_ then
      error(("conv2d: input has %d channels, weight expects %d x %d groups"):format(cin_, cin, groups), 0)
    end
    if cout % groups ~= 0 then error(("conv2d: %d output channels do not split into %d groups"):format(cout, groups), 0) end
    -- a sharded input: the weights copied to its devices once, so that the value and its custom
    -- gradient below see the same copy on each device (stdlib/multi.lua)
    if args.is_sharded(self) and not args.is_sharded(w) then w = w:shard(self.devices) end
    local pads = pool_pads("conv2d", padding, n)
    if winograd.applies(self, w, groups, stride, dilation, dtype, pads) then
      local ret = winograd.conv2d(self, w, { pads[3], pads[4], pads[1], pads[2] })
      return b and ret + b:reshape(1, cout, 1, 1) or ret
    end
    local rcout = cout // groups
    local xp = self:pad(pads)
    -- zeros written once: a padded view read in the conv's inner loop tests every load against
    -- the border (a transposed conv ran 8x slower than on a padded copy). Not for a depthwise
    -- conv (one output channel per input channel) where AVX-512 runs the tests as masked loads:
    -- it reads each element only once per tap, and the copy cost more than the checks. Without
    -- AVX-512 (masked_loads), clang leaves a loop of tested loads scalar: on a Zen 3 (AVX2),
    -- PaddleOCR rec's depthwise 5x5 convs ran 2.5 -> 0.24 ms each on the padded copy (which
    -- the layer before writes as it stores).
    local copy = rcout > 1 or not masked_loads(self.device)
    for _, p in ipairs(pads) do
      if p > 0 and copy then xp = xp:contiguous(); break end
    end
    local xw = xp:_pool(hw, stride or 1, dilation or 1)
    local oyx = {}
    for j = 1, n do oyx[j] = xw.shape[2 + j] end
    local a, e = { bs, groups, cin, 1 }, { bs, groups, cin, rcout }
    for _, v in ipairs(oyx) do a[#a + 1] = v; e[#e + 1] = v end
    for _, v in ipairs(hw) do a[#a + 1] = v; e[#e + 1] = v end
    local perm = { 0, 1, 3 }
    for j = 1, n do perm[#perm + 1] = 3 + j end
    perm[#perm + 1] = 2
    for j = 1, n do perm[#perm + 1] = 3 + n + j end
    xw = xw:reshape(a):expand(e):permute(perm) -- (bs, groups, rcout, *oyx, cin, *hw)
    local wv = { 1, groups, rcout }
    for _ = 1, n do wv[#wv + 1] = 1 end
    wv[#wv + 1] = cin
    for _, v in ipairs(hw) do wv[#wv + 1] = v end
    local red = {}
    for i = 1, n + 1 do red[i] = -i end
    local outs = { bs, cout }
    for _, v in ipairs(oyx) do outs[#outs + 1] = v end
    local ret = (xw * w:reshape(wv)):sum(red, false, dtype):reshape(outs)
    if not T.no_grad then
      ret = T._custom_grad(ret, { self, w }, conv_grads(groups, tuple("conv2d", stride or 1, n),
        tuple("conv2d", dilation or 1, n), pads))
    end
    if b then
      local bv = { 1, cout }
      for _ = 1, n do bv[#bv + 1] = 1 end
      ret = ret + b:reshape(bv)
    end
    return ret
  end)

-- A transposed convolution whose kernel is no larger than its stride (an upsampling layer, k = s = 2):
-- the windows do not overlap, so every input pixel times the weights is one block of the output.
-- A matmul gives all blocks, laid side by side; no zeros are inserted or multiplied.
local function transpose_blocks(x, w, b, groups, s, pads, op)
  local n = x.ndim - 2
  local N, cin, cog = x.shape[1], x.shape[2], w.shape[2]
  local cig = cin // groups
  local S, K = { table.unpack(x.shape, 3) }, { table.unpack(w.shape, 3) }
  local P, KK = 1, 1
  for j = 1, n do P, KK = P * S[j], KK * K[j] end
  local order = { 0, 1 } -- (N, G, *S, cig)
  for j = 1, n do order[#order + 1] = 2 + j end
  order[#order + 1] = 2
  local xg = x:reshape({ N, groups, cig, table.unpack(S) }):permute(order):reshape(N, groups, P, cig)
  local y = xg:matmul(w:reshape(1, groups, cig, cog * KK)) -- (N, G, P, cog*KK)
  local shape = { N, groups, table.unpack(S) }
  shape[#shape + 1] = cog
  for j = 1, n do shape[#shape + 1] = K[j] end
  y = y:reshape(shape) -- (N, G, *S, cog, *K)
  local grow = {}
  for i = 1, #shape do grow[i] = { 0, 0 } end
  for j = 1, n do grow[3 + n + j] = { 0, s[j] - K[j] } end -- each block padded to the stride
  y = C.pad(y, grow)
  order = { 0, 1, 2 + n } -- (N, G, cog, S1, s1, S2, s2, ...)
  for j = 1, n do order[#order + 1] = 1 + j; order[#order + 1] = 2 + n + j end
  local out = { N, groups * cog }
  for j = 1, n do out[#out + 1] = S[j] * s[j] end
  y = y:permute(order):reshape(out)
  -- the full result is (S-1)*s + K long; keep [pB, pB + size) of it, zeros past its end
  local cut, fill = { { 0, N }, { 0, groups * cog } }, { { 0, 0 }, { 0, 0 } }
  for j = 1, n do
    local pB, pA = pair_of(pads, n, j)
    local size = (S[j] - 1) * s[j] + K[j] - pB - pA + op[j]
    local stop = math.min(S[j] * s[j], pB + size)
    cut[#cut + 1] = { pB, stop }
    fill[#fill + 1] = { 0, pB + size - stop }
  end
  y = C.pad(y:shrink(cut), fill)
  if b then
    local bs = { 1, groups * cog }
    for _ = 1, n do bs[#bs + 1] = 1 end
    y = y + b:reshape(bs)
  end
  return y
end

-- x:conv_transpose2d(weight [, bias, groups, stride, dilation, padding, output_padding]): weight
-- is (Cin, Cout/groups, *kernel). The input is spread out by the stride (zeros between), then
-- convolved with the flipped, transposed weight.
doc("conv_transpose2d", "transposed convolution (the gradient of conv2d w.r.t. its input)")
def("conv_transpose2d", { "self", "weight", "bias", "groups", "stride", "dilation", "padding", "output_padding" },
  function(self, w, b, groups, stride, dilation, padding, output_padding)
    if not is_tensor(w) then error("conv_transpose2d: weight must be a Tensor", 0) end
    groups = groups or 1
    local hw = { table.unpack(w.shape, 3) }
    local n = #hw
    if self.ndim ~= n + 2 then error("conv_transpose2d: input and weight dims do not match", 0) end
    local s = tuple("conv_transpose2d", stride or 1, n)
    local d = tuple("conv_transpose2d", dilation or 1, n)
    local op = tuple("conv_transpose2d", output_padding or 0, n)
    local pads = pool_pads("conv_transpose2d", padding, n)
    local cin = w.shape[1]
    if cin % groups ~= 0 or self.shape[2] ~= cin then
      error(("conv_transpose2d: input has %d channels, weight %d (groups %d)"):format(self.shape[2], cin, groups), 0)
    end
    local blocks = true -- each output position gets at most one input position per kernel tap
    for j = 1, n do blocks = blocks and d[j] == 1 and hw[j] <= s[j] end
    if blocks then return transpose_blocks(self, w, b, groups, s, pads, op) end
    local flips = {}
    for j = 1, n do flips[j] = 2 + j end
    local order = { 0, 2, 1 }
    for j = 1, n do order[#order + 1] = 2 + j end
    local wt = w:unflatten(0, { groups, cin // groups }):permute(order):flip(flips)
        :flatten(0, 1) -- (groups*rcout, cin/groups, *kernel)
    local x = self
    local any_stride = false
    for j = 1, n do any_stride = any_stride or s[j] > 1 end
    if any_stride then
      local lead = { x.shape[1], x.shape[2] }
      local a, p, m, sh = { lead[1], lead[2] }, { { 0, 0 }, { 0, 0 } }, { lead[1], lead[2] }, { { 0, lead[1] }, { 0, lead[2] } }
      for j = 1, n do
        local i = x.shape[2 + j]
        a[#a + 1] = i; a[#a + 1] = 1
        p[#p + 1] = { 0, 0 }; p[#p + 1] = { 0, s[j] - 1 }
        m[#m + 1] = i * s[j]
        sh[#sh + 1] = { 0, (i - 1) * s[j] + 1 }
      end
      x = C.pad(x:reshape(a), p):reshape(m):shrink(sh)
    end
    local flat = {}
    for j = n, 1, -1 do
      local pB, pA = pair_of(pads, n, j)
      flat[#flat + 1] = (hw[j] - 1) * d[j] - pB
      flat[#flat + 1] = (hw[j] - 1) * d[j] - pA + op[j]
    end
    return x:conv2d(wt, b, { groups = groups, dilation = d, padding = flat })
  end)

return T
