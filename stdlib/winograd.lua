-- winograd: a stride-1 convolution by a 3x3 or 5x5 window as Winograd's minimal filtering
-- (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): F(4x4, 3x3) and
-- F(2x2, 5x5). Each m x m tile of the output comes from an a x a tile of the input (a = m + r - 1
-- = 6 for both): both tiles and the weights are taken into a transformed space by small constant
-- matrices, where the convolution becomes a^2 = 36 independent matmuls over the channels (U @ V,
-- one per transformed position), and the product is taken back. The matmuls do 36 multiplies per
-- tile and channel pair where the direct convolution does m^2 r^2 (144 for 3x3, 100 for 5x5); the
-- transforms are additions and multiplies by small constants, written out term by term with the
-- zeros left out, M t M^T as M along one tile dim and then along the other (44 terms where the
-- whole 6x6 at once is 484, which cost more to build and schedule than to run). Both are one
-- elementwise kernel: the first is left unrealized, and with both tile dims upcast its stack's
-- masks fold to constants (36 loads per tile, where a kernel per dim wrote and read back a tensor
-- as large as the tiles: U5's step 24 -> 18 kernels, the MNIST CNN's 104 -> 98 and its transforms
-- 54 -> 49 ms). The lowerer folds each upcast copy as it makes it, so such a kernel lowers in
-- milliseconds (folded at the end, 36 copies of 200-500 loads took a second each).
--
-- Both variants interpolate at the same points (0, +-1, +-2 and infinity), so they share B^T;
-- G and A^T are the Vandermonde rows of those points, G's scaled by each point's 1 / prod(p - q).
-- Float32 rounding: the constants (up to 8 in F(4x4, 3x3)'s A^T, 1/24 in G) make the result's
-- error about 1e-6 of its largest value, 10-20x the direct convolution's
-- (tests/lua/test_winograd.lua).
--
-- The gradients are Winograd too (the transforms are linear): the output's gradient goes into the
-- transformed space by A, then dU = dM @ V^T and dV = U^T @ dM are the same 36 matmuls, and B and
-- G take them back to the input's windows (added where the windows overlap) and the weights.
local args = require "args"
local T = Tensor
local W = {}

local function transpose(m)
  local t = {}
  for i = 1, #m[1] do
    t[i] = {}
    for j = 1, #m do t[i][j] = m[j][i] end
  end
  return t
end

-- B^T (6x6) for the points 0, 1, -1, 2, -2 and infinity
local BT = {
  { 4, 0, -5, 0, 1, 0 },
  { 0, -4, -4, 1, 1, 0 },
  { 0, 4, -4, -1, 1, 0 },
  { 0, -2, -1, 2, 1, 0 },
  { 0, 2, -1, -2, 1, 0 },
  { 0, 4, 0, -5, 0, 1 },
}
local POINTS = { 0, 1, -1, 2, -2 } -- the finite ones; infinity is the last row of G, column of A^T

-- F(m x m, r x r): its tile m, window r, a = m + r - 1, and the matrices with their transposes
local function variant(m, r)
  local g, at = {}, {}
  for j, p in ipairs(POINTS) do
    local scale = 1
    for l, q in ipairs(POINTS) do
      if l ~= j then scale = scale * (p - q) end
    end
    g[j] = {}
    for k = 1, r do g[j][k] = p ^ (k - 1) / scale end
  end
  g[#POINTS + 1] = {}
  for k = 1, r do g[#POINTS + 1][k] = k == r and 1 or 0 end
  for i = 1, m do
    at[i] = {}
    for j, p in ipairs(POINTS) do at[i][j] = p ^ (i - 1) end
    at[i][#POINTS + 1] = i == m and 1 or 0
  end
  local a = m + r - 1
  assert(a == #BT)
  return { m = m, r = r, a = a, BT = BT, B = transpose(BT), G = g, GT = transpose(g), AT = at, A = transpose(at) }
end
local VARIANTS = { [3] = variant(4, 3), [5] = variant(2, 5) } -- by window size

-- Whether t's device is the host CPU (CPU, LLVM): there the first pass of each pair stays lazy (the
-- pair is one kernel) and the planes are laid out for the L1 (below). A GPU realizes each pass and
-- keeps the plain layout: fused, the output gradient's transform ran as 16-thread work-groups (its
-- 4 x 4 tiles), 6.7 ms of an H100's 15.9 ms MNIST step; a kernel a pass, the step took 8.7 ms.
local function on_cpu(t) return Device.host_memory(t.device) end

-- m applied along dim `ax` (0-based) of t: out[.., r, ..] = sum over k of m[r][k] * t[.., k, ..],
-- each row a sum of its nonzero terms, the rows stacked in place of that dim; realized unless
-- `lazy` (the first of a pair, on a CPU). The heuristic upcasts a stacked dim whole.
local function apply(m, t, ax, lazy)
  local slices, shape = {}, t.shape -- t[.., k, ..] for each k, the dim kept (of size 1)
  for k = 1, #m[1] do
    local sl = {}
    for i, v in ipairs(shape) do sl[i] = { 0, v } end
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
  local out = T.cat(rows, ax)
  if lazy then return out end
  return out:contiguous()
end

-- How many of `count` streams `stride` bytes apart share the L1 data cache's most crowded set. An
-- x86 L1 is indexed within the 4 KiB page, so its sets repeat every 4 KiB (one way) and it has
-- l1d / 4 KiB ways: 8 on a Zen 3 (32 KiB), 12 on the Xeon (48 KiB).
local function crowding(count, stride)
  local per, most = {}, 0
  for k = 0, count - 1 do
    local set = k * stride % 4096 // 64
    per[set] = (per[set] or 0) + 1
    most = math.max(most, per[set])
  end
  return most
end

-- t stored with `extra[i]` more elements at the end of each dim i, and viewed back at its own
-- shape: the kernel writes only t's elements (assigned into the view of a larger buffer), with
-- the strides of the padded layout. t:pad():contiguous() wrote the padding too, through masks on
-- every load: U5's output-gradient transform ran 42.8 M instructions that way, 21.7 M this way
-- (callgrind).
local function store_padded(t, extra)
  local shape, keep, any = {}, {}, false
  for i, s in ipairs(t.shape) do
    shape[i], keep[i] = s + (extra[i] or 0), { 0, s }
    any = any or shape[i] ~= s
  end
  if not any then return t:contiguous() end
  local view = T.empty(shape, { dtype = t.dtype, device = t.device }):shrink(keep)
  view:assign(t)
  return view
end

-- The first of `candidates` (paddings) under which `planes` streams stride(c) bytes apart leave
-- two ways of each L1 set free, or else the one that crowds a set least.
local function least_crowded(planes, candidates, stride)
  local ways, best, least = select(2, Device.machine()).l1d // 4096, nil, nil
  for _, c in ipairs(candidates) do
    local crowd = crowding(planes, stride(c))
    if not least or crowd < least then best, least = c, crowd end
    if crowd <= ways - 2 then break end
  end
  return best
end

-- The padding, 0 to 3 cache lines, after each of `planes` rows of `row` elements of dtype.
local function lines_of_padding(planes, row, dtype)
  local size = dtype == "float64" and 8 or 4
  local line = 64 // size
  return least_crowded(planes, { 0, line, 2 * line, 3 * line }, function(k) return (row + k) * size end)
end

-- Both helpers realize t (a, a, rows, N, ...), a transformed tensor whose a^2 planes are read
-- or written together, a tile from or to each. Stored as it is, its planes are rows * tiles
-- apart (576 KiB for U5's 64 rows of 2304 tiles): a multiple of 2 KiB, the same cache sets, so
-- the planes evict each other. Measured on the Xeon, 1 thread, U5:
-- stored rows-outer, (rows, a, a, ...) in memory and viewed back: the planes a row apart (9 KiB).
-- The input transform: 2.6 -> 1.6 ms; the output gradient's: 4.2 -> 2.5 ms.
-- On a Zen 3 (8 ways) 9 of U5's 36 planes still shared each of 4 sets, and every one of the
-- transform's 2.65 M stores missed L1 (callgrind's cache model, 32 KiB 8-way); with an image of
-- padding after each row (2340 tiles for 2304), 169 k did, one a line. Zen 3, 1 thread, each
-- kernel's best of 30 steps, 3 runs in turns: the transform 4.4-4.7 -> 2.5-3.0 ms, the forward
-- matmul that reads it 8.2-9.1 -> 7.1-7.6. At 2 threads the step's kernels 29.7-36.9 -> 29.3-33.4
-- ms, its whole time in turns 42-48 against 42-50: no difference this host lets show (a first
-- try, writing the padding as zeros, measured 49 -> 56). The MNIST CNN's rows are 32 KiB, all 36
-- planes in one set, yet its transform did not gain: 10.0-10.5 -> 11.1 ms alone, the step's
-- kernels within noise.
local function realize_rows_outer(t)
  if not on_cpu(t) then return t:contiguous() end
  local order, back = { 2, 0, 1 }, { 1, 2, 0 }
  for i = 3, t.ndim - 1 do order[#order + 1], back[#back + 1] = i, i end
  local p = t:permute(table.unpack(order)) -- (rows, a, a, N, ...)
  local image = p.dtype == "float64" and 8 or 4
  for i = 5, p.ndim do image = image * p.shape[i] end
  local images = p.shape[4]
  local add = least_crowded(p.shape[2] * p.shape[3], { 0, 1, 2 }, function(k) return (images + k) * image end)
  return store_padded(p, { 0, 0, 0, add }):permute(table.unpack(back))
end

-- The output gradient where realize_blocked (below) finds no blocks. Stored as it is, with
-- padding after each plane (left out of the view) where its a^2 planes would crowd one set of the
-- L1: one more row, and where that is not enough one more image in each row as well, whichever
-- first leaves two ways of each set free.
-- - The rows of U5's output gradient are 9 KiB (2304 tiles): its 36 planes of 64 rows all share
--   one set; with a row more, 9 share each of 4 sets (12 ways on the Xeon: 4.2 -> 2.1 ms). With
--   an image more as well, 1 or 2 a set: on a Zen 3 (8 ways), in turns, this transform 8.1-10.5
--   -> 3.9-4.0 ms at 1 thread and 4.8-5.0 -> 3.4-3.5 at 2 (the matmul that reads it 0.5-1 ms
--   slower); U5's step, medians of 5-6 runs, 86.6 -> 78.9 ms and 52.2 -> 49.4.
-- - Where the rows themselves are a multiple of 2 KiB long (the MNIST CNN's 8192 tiles: 32 KiB),
--   each row gets one more image of padding in any case: dU's matmul reads 8 tiles from each of 64
--   rows (Cout) per step, and rows 32 KiB apart share one set of L1 and two of a 512 KiB 8-way L2.
--   Measured on a Zen 3 (AVX2, 1 thread, bench/mnist_kernels.lua): that matmul 94-112 -> 69-72
--   ms, this transform 85 -> 37 ms, the step's kernels 612-623 -> 533-573 ms; on the Xeon (2 MiB
--   16-way L2) the step's kernels 258-267 -> 253 ms.
local function realize_padded_planes(t)
  if not on_cpu(t) then return t:contiguous() end
  local planes, rows, n = t.shape[1] * t.shape[2], t.shape[3], t.shape[4]
  local row = t.dtype == "float64" and 8 or 4 -- a row's bytes
  for i = 4, t.ndim do row = row * t.shape[i] end
  local image, img = row // n, row % 2048 == 0 and 1 or 0
  local choice = least_crowded(planes, { { 0, img }, { 1, img }, { 1, img + 1 } }, -- extra rows, images
    function(c) return (rows + c[1]) * (row + c[2] * image) end)
  return store_padded(t, { 0, 0, choice[1], choice[2] })
end

-- How the tiles (N, th, tw) go in blocks of b for realize_blocked, as two dims: b tiles of one
-- image, whole rows of tiles ({N * th / rows, 1}), or else the same tile of b images ({N / b,
-- th * tw}); nil where neither divides.
local function blocking(n, th, tw, b)
  local rows = b % tw == 0 and b // tw or nil
  if rows and th % rows == 0 then return { n * th // rows, 1 }, rows end
  if n % b == 0 then return { n // b, th * tw } end
end

-- The blocks of realize_blocked below: b a vector's floats (8 where a 16-float vector does not
-- divide the tiles), and how blocking() groups the tiles by b.
local function grad_blocking(n, th, tw)
  local b = select(2, Device.machine()).float_lanes
  local outer, rows = blocking(n, th, tw, b)
  if not outer and b > 8 then
    b = 8
    outer, rows = blocking(n, th, tw, b)
  end
  return outer, rows, b
end

-- The output gradient in the transformed space, t (a, a, Cout, N, th, tw), stored in blocks of b
-- tiles (b the vector's floats) for dU's matmul: (a^2, blocks, blocks', Cout, b), each block all
-- of Cout for b tiles, contiguous. Stored (a^2, Cout, tiles), dU read 64 rows a batch of tiles
-- apart per 8 tiles, too many streams for the prefetcher. Zen 3, 1 thread, each kernel's best of
-- 10 runs: the MNIST CNN's conv2 gradients alone, dU 40-53 -> 17-19 ms; U5's dU 9.0-11.6 -> 4.7-4.9.
-- The MNIST CNN's blocks are 2 x 4 tiles of one image; U5's 6 x 6 tiles take the same tile of 8
-- images, read from 8 images at a time by the transform. A block an even number of lines long gets
-- a line more: dV reads a few Cout rows of every block per pass, and blocks 2 KiB apart stood in a
-- few sets of the L2 (alone, MNIST-sized: dV 24 -> 38 ms); the planes get the padding
-- least_crowded picks. Returns the blocks, or nil where no blocking divides the tiles; the rows of
-- tiles in a block (nil where a block is the same tile of b images); `split`, which views a
-- tensor's last dim (the tiles in order) as (..., blocks, blocks', b) for blocks of images; and
-- `join`, which views (..., blocks, blocks', b, C) back as (..., tiles, C).
local function realize_blocked(t)
  local a, cout, n, th, tw = t.shape[1], t.shape[3], t.shape[4], t.shape[5], t.shape[6]
  local outer, rows, b = grad_blocking(n, th, tw)
  if not outer then return nil end
  local bt -- t in the blocks' order
  if rows then
    bt = t:reshape(a, a, cout, outer[1], rows, tw):permute(0, 1, 3, 2, 4, 5)
  else -- th and tw kept apart: merged, the transform's heuristic took 18 of U5's 36 as its row
    bt = t:reshape(a, a, cout, n // b, b, th, tw):permute(0, 1, 3, 5, 6, 2, 4)
  end
  local blocks, size = outer[1] * outer[2], t.dtype == "float64" and 8 or 4
  local line = 64 // size
  local block = cout * b
  local stride = block + (block // line % 2 == 0 and line or 0)
  local plane = blocks * stride
  local extra = lines_of_padding(a * a, plane, t.dtype)
  local view = T.empty({ a * a, plane + extra }, { dtype = t.dtype, device = t.device })
      :shrink({ { 0, a * a }, { 0, plane } }):reshape(a * a, blocks, stride)
      :shrink({ { 0, a * a }, { 0, blocks }, { 0, block } }):reshape(bt.shape)
  view:assign(bt)
  local function split(x)
    local s = table.move(x.shape, 1, x.ndim - 1, 1, {})
    return x:reshape(table.move({ outer[1], b, outer[2] }, 1, 3, #s + 1, s)):transpose(x.ndim, x.ndim + 1)
  end
  local function join(x)
    local s = table.move(x.shape, 1, x.ndim - 4, 1, {})
    s[#s + 1], s[#s + 2] = n * th * tw, x.shape[x.ndim]
    if rows then return x:reshape(s) end
    return x:transpose(x.ndim - 3, x.ndim - 2):reshape(s)
  end
  return view:reshape(a * a, outer[1], outer[2], cout, b), rows, split, join
end

-- The forward's blocks: b tiles, whole rows of one image (b / tw rows), b two vectors of floats
-- (the matmul's row of 16 on AVX2), else one vector's; only where the output gradient's blocks
-- are whole rows within them, so that dV reads both in step. nil where none fits (U5's 6 x 6
-- tiles).
local function forward_blocking(n, th, tw)
  local _, grows = grad_blocking(n, th, tw)
  if not grows then return nil end
  local lanes = select(2, Device.machine()).float_lanes
  for _, b in ipairs({ 2 * lanes, lanes }) do
    local rows = b % tw == 0 and b // tw or nil
    if rows and th % rows == 0 and rows % grows == 0 then return b, rows end
  end
end

-- t (blocks, planes, ...) stored as (blocks, planes, row) with a line of padding after each
-- plane's row where least_crowded wants it (the planes are written, or read, a tile at a time);
-- returns the view of t's shape.
local function store_plane_rows(t, blocks, planes, row)
  local extra = lines_of_padding(planes, row, t.dtype)
  local view = T.empty({ blocks, planes, row + extra }, { dtype = t.dtype, device = t.device })
      :shrink({ { 0, blocks }, { 0, planes }, { 0, row } }):reshape(t.shape)
  view:assign(t)
  return view
end

local function ceildiv(a, b) return -((-a) // b) end

-- The tiling of x padded by pads {top, bottom, left, right} for variant v: the output's size,
-- th x tw tiles of m x m over it, and the padding that makes the a x a windows cover the input.
local function tiling(v, x, pads)
  local h, wd = x.shape[3], x.shape[4]
  local oh, ow = h + pads[1] + pads[2] - (v.r - 1), wd + pads[3] + pads[4] - (v.r - 1)
  local th, tw = ceildiv(oh, v.m), ceildiv(ow, v.m)
  return oh, ow, th, tw, { { 0, 0 }, { 0, 0 }, { pads[1], v.m * th + v.r - 1 - h - pads[1] },
    { pads[3], v.m * tw + v.r - 1 - wd - pads[3] } }
end

-- The input's a x a windows (stride m) in the transformed space, B^T d B, unrealized:
-- (a, a, Cin, N, th, tw)
local function transformed_input(v, x, cover)
  local d = x:pad(cover):_pool({ v.a, v.a }, { v.m, v.m }):permute(4, 5, 1, 0, 2, 3)
  return apply(v.BT, apply(v.BT, d, 0, on_cpu(x)), 1, true)
end

-- U (a^2, Cin, N*th*tw), stored plane-major (realize_rows_outer)
local function input_transform(v, x, cover, th, tw)
  local n, cin = x.shape[1], x.shape[2]
  return realize_rows_outer(transformed_input(v, x, cover)):reshape(v.a * v.a, cin, n * th * tw)
end

-- V^T (a^2, Cout, Cin): the weights (Cout, Cin, r, r) in the transformed space, G w G^T
local function weight_transform(v, w)
  local vt = apply(v.G, apply(v.G, w:permute(2, 3, 0, 1), 0, on_cpu(w)), 1) -- (a, a, Cout, Cin)
  return vt:reshape(v.a * v.a, w.shape[1], w.shape[2])
end

-- The a x a windows (N, Cin, th, a, tw, a) added back onto the input they were taken from, where
-- neighbouring windows (stride m) overlap. Along a dim, window t's rows k*m .. k*m + m - 1 are
-- rows 0 .. m - 1 of block t + k (m rows each; the last piece may be shorter): so the sum is a
-- view of dd per pair of pieces, each masked along the block and row dims only (no index
-- division), laid out as (N, Cin, th + K - 1, m, tw + K - 1, m) for K = ceil(a / m) pieces,
-- which is (N, Cin, m*(th + K - 1), m*(tw + K - 1)) in memory.
local function overlap_add(v, dd)
  local pieces = ceildiv(v.a, v.m)
  local function part(t, at, k) -- dims at, at + 1 (0-based): windows, a -> blocks, m
    local sl, pd = {}, {}
    for i, s in ipairs(t.shape) do sl[i], pd[i] = { 0, s }, { 0, 0 } end
    local lo = k * v.m
    local len = math.min(v.m, v.a - lo)
    sl[at + 2], pd[at + 2], pd[at + 1] = { lo, lo + len }, { 0, v.m - len }, { k, pieces - 1 - k }
    return t:shrink(sl):pad(pd)
  end
  local sum
  for rows = 0, pieces - 1 do
    for cols = 0, pieces - 1 do
      local p = part(part(dd, 2, rows), 4, cols)
      sum = sum and sum + p or p
    end
  end
  local n, c, bh, _, bw = table.unpack(sum.shape)
  return sum:contiguous():reshape(n, c, v.m * bh, v.m * bw)
end

-- The gradients of W.conv2d (Tensor._custom_grad), one registered function per variant and
-- padding. The forward's transformed input and weights come along as two more inputs (detached:
-- no gradient of their own), so backward does not build their graphs again (0.65 ms of U5's step).
local grads = {}
local function winograd_grad(v, pads)
  local key = v.r .. ":" .. table.concat(pads, ",")
  grads[key] = grads[key] or T._grad_fn(function(g, x, w, u, vt)
    local n, cin, cout, m, a = x.shape[1], x.shape[2], w.shape[1], v.m, v.a
    local oh, ow, th, tw = tiling(v, x, pads)
    -- the output's gradient in the transformed space: A g A^T for every tile
    local gp = g:pad({ { 0, 0 }, { 0, 0 }, { 0, m * th - oh }, { 0, m * tw - ow } }):reshape(n, cout, th, m, tw, m)
    local tm = apply(v.A, apply(v.A, gp:permute(3, 5, 1, 0, 2, 4), 0, on_cpu(g)), 1, true) -- (a, a, Cout, N, th, tw)
    -- dU transposed, dM^T @ V^T: its B operand is V^T, a few KiB read from L1 by every tile, where
    -- dU = V @ dM streams dM's Cout rows, each a whole batch of tiles apart (the same cache
    -- sets): 2x slower (1 thread, the MNIST CNN's conv2)
    -- u: (a^2, Cin, N, T1, T2, tw), T1 x T2 = th, as W.conv2d stored it
    local dm, rows, split, join
    if on_cpu(g) then dm, rows, split, join = realize_blocked(tm) end -- (a^2, blocks, blocks', Cout, b)
    local du, dvt
    if dm then
      local b1, b2, b = dm.shape[2], dm.shape[3], dm.shape[5]
      du = join(dm:transpose(3, 4):matmul(vt:reshape(a * a, 1, 1, cout, cin))):reshape(a, a, n, th, tw, cin)
      if rows then -- dm's blocks, rows x tw tiles, split as u's: (N, T1, T2 / rows, rows, tw)
        local t1, k = u.shape[4], u.shape[5] // rows
        local dmv = dm:reshape(a * a, n, t1, k, cout, rows, tw):permute(0, 4, 1, 2, 3, 5, 6)
        dvt = (dmv:reshape(a * a, cout, 1, n, t1, k, rows, tw) * u:reshape(a * a, 1, cin, n, t1, k, rows, tw))
            :sum({ 3, 4, 5, 6, 7 })
      else
        local ub = split(u:reshape(a * a, cin, n * th * tw)):reshape(a * a, 1, cin, b1, b2, b)
        dvt = (dm:permute(0, 3, 1, 2, 4):reshape(a * a, cout, 1, b1, b2, b) * ub):sum({ 3, 4, 5 })
      end
    else
      dm = realize_padded_planes(tm):reshape(a * a, cout, n * th * tw)
      du = dm:transpose(1, 2):matmul(vt):reshape(a, a, n, th, tw, cin)
      dvt = dm:matmul(u:reshape(a * a, cin, n * th * tw):transpose(1, 2))
    end
    dvt = dvt:reshape(a, a, cout, cin)
    local dw = apply(v.GT, apply(v.GT, dvt, 0, on_cpu(g)), 1):permute(2, 3, 0, 1)
    -- each window's gradient, B dU B^T, stored (N, th, a, tw, a, Cin) as dU's rows run (channels
    -- innermost: writing (N, Cin, ...) scattered 32 streams of 6 floats) and viewed as
    -- (N, Cin, th, a, tw, a); then the windows added back where they overlap
    local dd = apply(v.B, apply(v.B, du, 0, on_cpu(g)):permute(2, 3, 0, 4, 1, 5), 4):permute(0, 5, 1, 2, 3, 4)
    local dx = overlap_add(v, dd):shrink({ { 0, n }, { 0, cin }, { pads[1], pads[1] + x.shape[3] },
      { pads[3], pads[3] + x.shape[4] } })
    return dx, dw
  end)
  return grads[key]
end

-- Whether x:conv2d(w, ...) goes this way: WINO=1 (the default), a 2-d 3x3 or 5x5 convolution of
-- float32 or float64 with stride and dilation 1, one group, no other accumulation dtype, and at
-- least 16 channels in and out, where the matmuls outweigh the transforms (conv1 of bench/user.lua's
-- U5 and of the MNIST CNN, one channel in, stays direct). Not for float16: the constants (up to 8
-- and 1/24) would cost it digits it does not have. Not for negative padding (a crop), which the
-- tiling does not take. pads: conv2d's flat list.
function W.applies(x, w, groups, stride, dilation, dtype, pads)
  for _, p in ipairs(pads) do
    if p < 0 then return false end
  end
  local function one(v) return v == nil or v == 1 or (type(v) == "table" and v[1] == 1 and v[2] == 1) end
  return show.setting("WINO") ~= 0 and x.ndim == 4 and w.ndim == 4 and VARIANTS[w.shape[3]] ~= nil and
      w.shape[4] == w.shape[3] and groups == 1 and one(stride) and one(dilation) and dtype == nil and
      (x.dtype == "float32" or x.dtype == "float64") and w.dtype == x.dtype and w.shape[1] >= 16 and
      w.shape[2] >= 16 and not args.is_sharded(x)
end

-- The forward on a CPU where forward_blocking finds blocks of b tiles (rows rows of tiles of one
-- image). U is stored (blocks, a^2, Cin, b), each block's planes one after another; the 36
-- matmuls run block by block, (1, a^2, Cout, Cin) @ (blocks, a^2, Cin, b), writing M (blocks,
-- a^2, Cout, b) the same way; and the output transform writes y as (N, Cout, H, W). Stored
-- plane-major instead ((Cin, a^2, tiles) and (Cout, a^2, tiles)), the transform wrote 36 streams
-- far apart, the matmul wrote 64 rows (Cout) 36 planes apart or read its B operand again for
-- every 4 of Cout, and y came out (Cout, N, H, W), which the layers after it read as (N, Cout).
-- Zen 3, 1 thread, the MNIST CNN's conv2 (512 images of 4 x 4 tiles, 32 -> 64 channels), each
-- kernel's best of 12 steps, summed by name: the matmul 36.2 -> 18.9 ms, the input transform 24.4
-- -> 12.1, the output transform 15.1 -> 10.5, the output gradient's (reading y in one layout now)
-- 36.8 -> 22.5; dV's pack of U, which now reads a slice of every block per plane, 5.8 -> 13.2; the
-- step's kernels 352 -> 288 ms. U5's 6 x 6 tiles (no blocks) stay plane-major: there a plane of U
-- fits L2, and blocked matmuls ran 10.5 ms (blocks of 12 tiles) against 6.7. Returns u (a^2, Cin,
-- N, T1, rows, tw), T1 x rows = th, and y.
local function blocked_forward(v, x, vt, cover, th, tw, b, rows)
  local n, cin, cout, a, m = x.shape[1], x.shape[2], vt.shape[2], v.a, v.m
  local t1 = th // rows
  local t = transformed_input(v, x, cover):reshape(a, a, cin, n, t1, rows, tw)
  local ub = store_plane_rows(t:permute(3, 4, 0, 1, 2, 5, 6), n * t1, a * a, cin * b) -- (N, T1, a, a, Cin, rows, tw)
  local mb = vt:reshape(1, a * a, cout, cin):matmul(ub:reshape(n * t1, a * a, cin, b)) -- (blocks, a^2, Cout, b)
  mb = store_plane_rows(mb, n * t1, a * a, cout * b)
  local mm = mb:reshape(n, t1, a, a, cout, rows, tw):permute(2, 3, 0, 4, 1, 5, 6) -- (a, a, N, Cout, T1, rows, tw)
  local y = apply(v.AT, apply(v.AT, mm, 0, true):permute(2, 3, 4, 5, 0, 6, 1), 6) -- (N, Cout, T1, rows, m, tw, m)
  return ub:permute(2, 3, 4, 0, 1, 5, 6):reshape(a * a, cin, n, t1, rows, tw), y:reshape(n, cout, m * th, m * tw)
end

-- x (N, Cin, H, W) convolved with w (Cout, Cin, r, r), padded by pads {top, bottom, left, right}:
-- (N, Cout, H', W'), the same as the direct convolution up to float rounding
function W.conv2d(x, w, pads)
  local v = VARIANTS[w.shape[3]]
  local n, cout, m = x.shape[1], w.shape[1], v.m
  local oh, ow, th, tw, cover = tiling(v, x, pads)
  local vt = weight_transform(v, w):detach()
  local b, rows
  if on_cpu(x) then b, rows = forward_blocking(n, th, tw) end
  local u, y
  if b then
    u, y = blocked_forward(v, x, vt, cover, th, tw, b, rows)
    u = u:detach()
  else
    u = input_transform(v, x, cover, th, tw):detach()
    -- M = V^T U, stored (Cout, a^2, N*th*tw): the output transform reads a tile from each of the
    -- a^2 planes, which stored (a^2, Cout, ...) were 576 KiB apart, the same cache sets (U5's, 3.1
    -- ms; 2.0 ms with them 9 KiB apart). The matmul still runs plane by plane (the heuristic's
    -- batch_loop_first).
    local mm = vt:permute(1, 0, 2):reshape(cout, v.a * v.a, 1, x.shape[2]):matmul(u)
    mm = mm:reshape(cout, v.a, v.a, n, th, tw):permute(1, 2, 0, 3, 4, 5)
    -- A^T M A, each m x m tile written in place, stored (Cout, N, th, m, tw, m) in M's order (read
    -- in (N, Cout) order, M's rows were 9 KiB apart: 1.3x slower) and viewed as (N, Cout, H, W)
    y = apply(v.AT, apply(v.AT, mm, 0, on_cpu(x)):permute(2, 3, 4, 0, 5, 1), 5)
    y = y:reshape(cout, n, m * th, m * tw):permute(1, 0, 2, 3)
    u = u:reshape(v.a * v.a, x.shape[2], n, 1, th, tw)
  end
  y = y:shrink({ { 0, n }, { 0, cout }, { 0, oh }, { 0, ow } })
  if T.no_grad then return y end
  return T._custom_grad(y, { x, w, u, vt }, winograd_grad(v, pads))
end

return W
