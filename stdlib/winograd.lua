-- winograd: a 3x3, stride-1 convolution as Winograd's F(4x4, 3x3) (Lavin and Gray, "Fast
-- Algorithms for Convolutional Neural Networks", 2015). Each 4x4 tile of the output comes from a
-- 6x6 tile of the input: both tiles and the weights are taken into a transformed space by small
-- constant matrices, where the convolution becomes 36 independent matmuls over the channels
-- (U @ V, one per transformed position), and the product is taken back. The matmuls do 36
-- multiplies per tile and channel pair where the direct convolution does 144; the transforms are
-- additions and multiplies by small constants, written out term by term with the zeros left out,
-- one elementwise kernel per tile dim (M t M^T as M along one dim, then along the other: 44
-- terms where the whole 6x6 at once is 484, which cost more to build and schedule than to run).
--
-- Float32 rounding: the constants (up to 8 in A^T, 1/24 in G) make the result's error about
-- 1e-6 of its largest value, 10-20x the direct convolution's (tests/lua/test_winograd.lua).
--
-- The gradients are Winograd too (the transforms are linear): the output's gradient goes into the
-- transformed space by A, then dU = dM @ V^T and dV = U^T @ dM are the same 36 matmuls, and B and
-- G take them back to the input's windows (added where the 6x6 windows overlap) and the weights.
local args = require "args"
local T = Tensor
local W = {}

-- B^T (6x6), G (6x3) and A^T (4x6) of F(4x4, 3x3) with the points 0, +-1, +-2 and infinity
local BT = {
  { 4, 0, -5, 0, 1, 0 },
  { 0, -4, -4, 1, 1, 0 },
  { 0, 4, -4, -1, 1, 0 },
  { 0, -2, -1, 2, 1, 0 },
  { 0, 2, -1, -2, 1, 0 },
  { 0, 4, 0, -5, 0, 1 },
}
local G = {
  { 1 / 4, 0, 0 },
  { -1 / 6, -1 / 6, -1 / 6 },
  { -1 / 6, 1 / 6, -1 / 6 },
  { 1 / 24, 1 / 12, 1 / 6 },
  { 1 / 24, -1 / 12, 1 / 6 },
  { 0, 0, 1 },
}
local AT = {
  { 1, 1, 1, 1, 1, 0 },
  { 0, 1, -1, 2, -2, 0 },
  { 0, 1, 1, 4, 4, 0 },
  { 0, 1, -1, 8, -8, 1 },
}

-- m applied along dim `ax` (0-based) of t: out[.., r, ..] = sum over k of m[r][k] * t[.., k, ..],
-- each row a sum of its nonzero terms, the rows stacked in place of that dim. The stack is one
-- elementwise kernel, each of its rows a few loads (the heuristic upcasts the stacked dim whole).
local function apply(m, t, ax)
  local slices = {} -- t[.., k, ..] for each k, the dim kept (of size 1)
  for k = 1, #m[1] do
    local sl = {}
    for i, v in ipairs(t.shape) do sl[i] = { 0, v } end
    sl[ax + 1] = { k - 1, k }
    slices[k] = t:shrink(sl)
  end
  local rows = {}
  for r = 1, #m do
    local acc
    for k = 1, #m[r] do
      local c = m[r][k]
      if c ~= 0 then
        local v = slices[k]
        if c ~= 1 and c ~= -1 then v = v * c end
        if acc == nil then acc = c == -1 and -v or v
        else acc = c == -1 and acc - v or acc + v end
      end
    end
    rows[r] = acc
  end
  return T.cat(rows, ax):contiguous()
end

local function transpose(m)
  local t = {}
  for i = 1, #m[1] do
    t[i] = {}
    for j = 1, #m do t[i][j] = m[j][i] end
  end
  return t
end
local B, GT, A = transpose(BT), transpose(G), transpose(AT)

local function ceildiv(a, b) return -((-a) // b) end

-- The tiling of x padded by pads {top, bottom, left, right} for a 3x3 window: the output's size,
-- th x tw tiles of 4x4 over it, and the padding that makes the 6x6 windows cover the input.
local function tiling(x, pads)
  local h, wd = x.shape[3], x.shape[4]
  local oh, ow = h + pads[1] + pads[2] - 2, wd + pads[3] + pads[4] - 2
  local th, tw = ceildiv(oh, 4), ceildiv(ow, 4)
  return oh, ow, th, tw, { { 0, 0 }, { 0, 0 }, { pads[1], 4 * th + 2 - h - pads[1] }, { pads[3], 4 * tw + 2 - wd - pads[3] } }
end

-- U (36, Cin, N*th*tw): the input's 6x6 windows (stride 4) in the transformed space, B^T d B
local function input_transform(x, cover, th, tw)
  local n, cin = x.shape[1], x.shape[2]
  local d = x:pad(cover):_pool({ 6, 6 }, { 4, 4 }):permute(4, 5, 1, 0, 2, 3) -- (6, 6, Cin, N, th, tw)
  return apply(BT, apply(BT, d, 0), 1):reshape(36, cin, n * th * tw)
end

-- V^T (36, Cout, Cin): the weights (Cout, Cin, 3, 3) in the transformed space, G w G^T
local function weight_transform(w)
  local vt = apply(G, apply(G, w:permute(2, 3, 0, 1), 0), 1) -- (6, 6, Cout, Cin)
  return vt:reshape(36, w.shape[1], w.shape[2])
end

-- The 6x6 windows (N, Cin, th, 6, tw, 6) added back onto the input they were taken from, where
-- neighbouring windows overlap by 2. Along a dim, window t's rows 0-3 are rows 0-3 of block t
-- (4 rows each) and its rows 4-5 rows 0-1 of block t + 1: so the sum is four views of dd, each
-- masked along the block and row dims only (no index division), laid out as (N, Cin, th + 1, 4,
-- tw + 1, 4), which is (N, Cin, 4*th + 4, 4*tw + 4) in memory.
local function overlap_add(dd)
  local function part(t, at, tail) -- dims at, at + 1 (0-based): windows, 6 -> blocks, 4
    local sl, pd = {}, {}
    for i, v in ipairs(t.shape) do sl[i], pd[i] = { 0, v }, { 0, 0 } end
    if tail then
      sl[at + 2], pd[at + 2], pd[at + 1] = { 4, 6 }, { 0, 2 }, { 1, 0 }
    else
      sl[at + 2], pd[at + 1] = { 0, 4 }, { 0, 1 }
    end
    return t:shrink(sl):pad(pd)
  end
  local sum
  for _, rows in ipairs({ false, true }) do
    for _, cols in ipairs({ false, true }) do
      local p = part(part(dd, 2, rows), 4, cols)
      sum = sum and sum + p or p
    end
  end
  local n, c, bh, _, bw = table.unpack(sum.shape)
  return sum:contiguous():reshape(n, c, 4 * bh, 4 * bw)
end

-- The gradients of W.conv2d (Tensor._custom_grad), one registered function per padding
local grads = {}
local function winograd_grad(pads)
  local key = table.concat(pads, ",")
  grads[key] = grads[key] or T._grad_fn(function(g, x, w)
    local n, cin, cout = x.shape[1], x.shape[2], w.shape[1]
    local oh, ow, th, tw, cover = tiling(x, pads)
    local u, vt = input_transform(x, cover, th, tw), weight_transform(w)
    -- the output's gradient in the transformed space: A g A^T for every tile
    local gp = g:pad({ { 0, 0 }, { 0, 0 }, { 0, 4 * th - oh }, { 0, 4 * tw - ow } }):reshape(n, cout, th, 4, tw, 4)
    local dm = apply(A, apply(A, gp:permute(3, 5, 1, 0, 2, 4), 0), 1):reshape(36, cout, n * th * tw)
    local du = vt:transpose(1, 2):matmul(dm):reshape(6, 6, cin, n, th, tw)
    local dvt = dm:matmul(u:transpose(1, 2)):reshape(6, 6, cout, cin)
    local dw = apply(GT, apply(GT, dvt, 0), 1):permute(2, 3, 0, 1)
    -- each window's gradient, B dU B^T, laid out as (N, Cin, th, 6, tw, 6), then the windows
    -- added back where they overlap
    local dd = apply(B, apply(B, du, 0):permute(3, 2, 4, 0, 5, 1), 5)
    local dx = overlap_add(dd):shrink({ { 0, n }, { 0, cin }, { pads[1], pads[1] + x.shape[3] },
      { pads[3], pads[3] + x.shape[4] } })
    return dx, dw
  end)
  return grads[key]
end

-- Whether x:conv2d(w, ...) goes this way: WINO=1 (the default), a 2-d 3x3 convolution of float32
-- or float64 with stride and dilation 1, one group, no other accumulation dtype, and at least 16
-- channels in and out, where the matmuls outweigh the transforms (conv1 of bench/user.lua's U5,
-- one channel in, stays direct). Not for float16: F(4x4, 3x3)'s constants (up to 8 and 1/24)
-- would cost it digits it does not have. Not for negative padding (a crop), which the tiling
-- does not take. pads: conv2d's flat list.
function W.applies(x, w, groups, stride, dilation, dtype, pads)
  for _, p in ipairs(pads) do
    if p < 0 then return false end
  end
  local function one(v) return v == nil or v == 1 or (type(v) == "table" and v[1] == 1 and v[2] == 1) end
  return show.setting("WINO") ~= 0 and x.ndim == 4 and w.ndim == 4 and w.shape[3] == 3 and w.shape[4] == 3 and
      groups == 1 and one(stride) and one(dilation) and dtype == nil and (x.dtype == "float32" or x.dtype == "float64") and
      w.dtype == x.dtype and w.shape[1] >= 16 and w.shape[2] >= 16 and not args.is_sharded(x)
end

-- x (N, Cin, H, W) convolved with w (Cout, Cin, 3, 3), padded by pads {top, bottom, left, right}:
-- (N, Cout, H', W'), the same as the direct convolution up to float rounding
function W.conv2d(x, w, pads)
  local n, cout = x.shape[1], w.shape[1]
  local oh, ow, th, tw, cover = tiling(x, pads)
  local m = weight_transform(w):matmul(input_transform(x, cover, th, tw)):reshape(6, 6, cout, n, th, tw)
  -- A^T M A, each 4x4 tile written in place: (N, Cout, th, 4, tw, 4) is the output's layout
  local y = apply(AT, apply(AT, m, 0):permute(3, 2, 4, 0, 5, 1), 5)
  y = y:reshape(n, cout, 4 * th, 4 * tw):shrink({ { 0, n }, { 0, cout }, { 0, oh }, { 0, ow } })
  if T.no_grad then return y end
  return T._custom_grad(y, { x, w }, winograd_grad(pads))
end

return W
