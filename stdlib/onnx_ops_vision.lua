-- The ONNX vision ops: Upsample, NonMaxSuppression, GridSample, RoiAlign, MaxUnpool,
-- TfIdfVectorizer. Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local ints, axis_of, ops = U.ints, U.axis_of, U.ops

-- Upsample (Resize's forerunner): each output index o reads the input at o / scale, the row
-- below it for nearest, the two around it for linear
op("Upsample", 7, function(node, x, at, opset)
  local scales = opset >= 9 and x[2] or Tensor(at.scales, "float32")
  local mode = at.mode or "nearest"
  if mode ~= "nearest" and mode ~= "linear" then error("onnx: Upsample mode " .. mode .. " is not supported", 0) end
  return ops.Resize.fn(node, { x[1], scales }, { mode = mode, coordinate_transformation_mode = "asymmetric",
    nearest_mode = "floor" }, 10)
end)

-- NonMaxSuppression: per batch and class, the boxes by falling score (ties: the lower index
-- first), each kept unless its IoU with a kept one is above iou_threshold, up to
-- max_output_boxes_per_class. The result's size depends on the values, so the boxes and scores
-- are read back and the (small) greedy selection runs here.
local function iou_over(a, b, center, threshold)
  local ax0, ay0, ax1, ay1, bx0, by0, bx1, by1
  if center == 1 then -- (x_center, y_center, width, height)
    ax0, ax1, ay0, ay1 = a[1] - a[3] / 2, a[1] + a[3] / 2, a[2] - a[4] / 2, a[2] + a[4] / 2
    bx0, bx1, by0, by1 = b[1] - b[3] / 2, b[1] + b[3] / 2, b[2] - b[4] / 2, b[2] + b[4] / 2
  else -- (y1, x1, y2, x2), any two opposite corners
    ay0, ay1, ax0, ax1 = math.min(a[1], a[3]), math.max(a[1], a[3]), math.min(a[2], a[4]), math.max(a[2], a[4])
    by0, by1, bx0, bx1 = math.min(b[1], b[3]), math.max(b[1], b[3]), math.min(b[2], b[4]), math.max(b[2], b[4])
  end
  local iw = math.min(ax1, bx1) - math.max(ax0, bx0)
  local ih = math.min(ay1, by1) - math.max(ay0, by0)
  if iw <= 0 or ih <= 0 then return false end
  local inter = iw * ih
  local area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
  local union = area_a + area_b - inter
  if area_a <= 0 or area_b <= 0 or union <= 0 then return false end
  return inter / union > threshold
end
op("NonMaxSuppression", 10, function(_, x, at)
  local boxes, scores = x[1]:cast("float64"):tolist(), x[2]:cast("float64"):tolist()
  local function scalar(t, default)
    if t == nil or t:numel() == 0 then return default end
    return t:reshape(-1):tolist()[1]
  end
  local limit = math.max(scalar(x[3], 0), 0)
  local iou, min_score = scalar(x[4], 0), scalar(x[5], nil)
  local picked = {}
  for b, per_class in ipairs(scores) do
    for c, s in ipairs(per_class) do
      local order = {}
      for i, v in ipairs(s) do
        if min_score == nil or v > min_score then order[#order + 1] = i end
      end
      table.sort(order, function(i, j) return s[i] > s[j] or (s[i] == s[j] and i < j) end)
      local kept = {}
      for _, i in ipairs(order) do
        if #kept >= limit then break end
        local ok = true
        for _, k in ipairs(kept) do
          if iou_over(boxes[b][i], boxes[b][k], at.center_point_box or 0, iou) then ok = false; break end
        end
        if ok then
          kept[#kept + 1] = i
          picked[#picked + 1] = { b - 1, c - 1, i - 1 }
        end
      end
    end
  end
  if #picked == 0 then return Tensor.zeros({ 0, 3 }, { dtype = "int64" }) end
  return Tensor(picked, "int64")
end)

-- MaxUnpool: each value put back at its index (MaxPool's, flat over the whole input), in a
-- tensor of the size MaxPool's input had, then zeros up to output_shape if given
op("MaxUnpool", 9, function(_, x, at)
  local d, idx = x[1], x[2]
  local n = d.ndim - 2
  local k, s, pads = at.kernel_shape, at.strides or {}, at.pads or {}
  local spatial, count = {}, 1
  for i = 1, n do
    spatial[i] = (d.shape[i + 2] - 1) * (s[i] or 1) - ((pads[i] or 0) + (pads[i + n] or 0)) + k[i]
    count = count * spatial[i]
  end
  -- the indices within one (batch, channel) plane
  local y = d:max_unpool2d(idx:cast("int64") % count, k, s, 1, 0, spatial)
  if x[3] then
    local want, p = ints(x[3]), {}
    for i = 1, d.ndim do p[i] = { 0, want[i] - y.shape[i] } end
    y = y:pad(p)
  end
  return y
end)

-- TfIdfVectorizer: counts of the pool's n-grams in each row (n from min_gram_length to
-- max_gram_length, items skip apart for skip 0..max_skip_count), weighted by mode. The counting
-- reads the (integer) tokens back; strings are not supported by moongrad.
op("TfIdfVectorizer", 9, function(_, x, at)
  if not at.pool_int64s then error("onnx: TfIdfVectorizer with pool_strings is not supported (no strings)", 0) end
  local pool, counts, indexes = at.pool_int64s, at.ngram_counts, at.ngram_indexes
  local min_n, max_n, max_skip = at.min_gram_length, at.max_gram_length, at.max_skip_count or 0
  local mode = at.mode
  if mode ~= "TF" and mode ~= "IDF" and mode ~= "TFIDF" then error("onnx: TfIdfVectorizer mode " .. tostring(mode) .. " is not supported", 0) end
  -- the pool: counts[g] is where its g-grams start; each n-gram's key -> its output column
  local column, id, width = {}, 0, 0
  for _, i in ipairs(indexes) do width = math.max(width, i + 1) end
  for g = 1, #counts do
    local first, last = counts[g] + 1, (counts[g + 1] or #pool)
    for at0 = first, last - g + 1, g do
      id = id + 1
      if g >= min_n and g <= max_n then
        column[table.concat(pool, ",", at0, at0 + g - 1)] = indexes[id] + 1
      end
    end
  end
  local rows = x[1]:cast("int64"):tolist()
  local flat = x[1].ndim <= 1
  if x[1].ndim == 0 then rows = { { rows } } elseif flat then rows = { rows } end
  local out = {}
  for r, row in ipairs(rows) do
    local freq = {}
    for c = 1, width do freq[c] = 0 end
    for skip = 0, max_skip do
      for start = 1, #row do
        -- a unigram is the same whatever the skip: counted once, at skip 0
        for g = math.max(min_n, skip > 0 and 2 or 1), max_n do
          local last = start + (g - 1) * (skip + 1)
          if last > #row then break end
          local items = {}
          for p = start, last, skip + 1 do items[#items + 1] = row[p] end
          local c = column[table.concat(items, ",")]
          if c then freq[c] = freq[c] + 1 end
        end
      end
    end
    local w = at.weights
    for c = 1, width do
      local f = freq[c]
      if mode == "IDF" then f = f > 0 and (w and w[c] or 1) or 0
      elseif mode == "TFIDF" then f = w and w[c] * f or f end
      freq[c] = f
    end
    out[r] = freq
  end
  return Tensor(flat and out[1] or out, "float32")
end)

-- GridSample (4-d): output (n, c, i, j) samples input plane (n, c) at grid[n, i, j] = (x, y),
-- from -1 to 1 across the plane (the corner pixels' centres with align_corners, else their
-- outer edges). Positions past the plane are clamped (border) or folded back (reflection)
-- first; then nearest takes the closest pixel, bilinear 2x2 and bicubic 4x4 pixels around the
-- position, with zeros (or the clamped/folded pixel) where a tap falls outside. Each tap is a
-- gather from the flattened planes.

-- v folded back into [lo, hi] at its borders, as often as it takes
local function reflect(v, lo, hi)
  local range = hi - lo
  if range <= 0 then return v:zeros_like() + lo end
  local below, above = v:lt(lo), v:gt(hi)
  local past = below:where(-v + lo, v - hi) -- the distance beyond the nearer border
  local k = (past / range):trunc()
  local r = past - k * range
  local even = (k - (k / 2):floor() * 2):eq(0)
  local up, down = r + lo, -r + hi -- r measured from lo, or from hi
  local folded = below:where(even:where(up, down), even:where(down, up))
  return below:bitwise_or(above):where(folded, v)
end
-- Keys' cubic weights of the 4 pixels around a position t past the first-but-one (0 <= t < 1)
local function cubic_weights(t, a)
  local function near(u) return ((u * (a + 2) - (a + 3)) * u * u) + 1 end
  local function far(u) return ((u * a - 5 * a) * u + 8 * a) * u - 4 * a end
  return { far(t + 1), near(t), near(-t + 1), far(-t + 2) }
end
op("GridSample", 16, function(_, x, at)
  local d, grid = x[1], x[2]
  if d.ndim ~= 4 then error(("onnx: GridSample on a %d-d input is not supported (4-d only)"):format(d.ndim), 0) end
  local mode = ({ bilinear = "linear", linear = "linear", bicubic = "cubic", cubic = "cubic",
    nearest = "nearest" })[at.mode or "bilinear"]
  if not mode then error("onnx: GridSample mode " .. tostring(at.mode) .. " is not supported", 0) end
  local padding = at.padding_mode or "zeros"
  if padding ~= "zeros" and padding ~= "border" and padding ~= "reflection" then
    error("onnx: GridSample padding_mode " .. padding .. " is not supported", 0)
  end
  local ac = at.align_corners == 1
  local n, c, h, w = table.unpack(d.shape)
  local m = grid.shape[2] * grid.shape[3]
  local ft = d.dtype == "float64" and "float64" or "float32"
  local g = grid:cast(ft):reshape(n, m, 2)
  -- per axis: the tap positions (float, whole numbers) and their weights, for a plane of size
  -- `size` along it; the taps' indices made valid per padding mode, with a 0/1 mask for zeros
  local function taps(coord, size)
    local p = ac and (coord + 1) / 2 * (size - 1) or ((coord + 1) * size - 1) / 2
    local lo, hi = ac and 0 or -0.5, ac and size - 1 or size - 0.5
    if mode == "nearest" then p = p:round() end
    -- (as ONNX's reference: border clamps only the positions beyond [lo, hi])
    if padding == "border" then p = p:lt(lo):bitwise_or(p:gt(hi)):where(p:clamp(0, size - 1), p)
    elseif padding == "reflection" then p = reflect(p, lo, hi) end
    local pos, wts
    if mode == "nearest" then pos, wts = { p }, { nil }
    else
      local f = p:floor()
      local t = p - f
      if mode == "linear" then pos, wts = { f, f + 1 }, { -t + 1, t }
      else pos, wts = { f - 1, f, f + 1, f + 2 }, cubic_weights(t, -0.75) end
    end
    local r = {}
    for k, i in ipairs(pos) do
      local wt = wts[k]
      if padding == "zeros" then
        local inside = i:ge(0):bitwise_and(i:lt(size)):cast(ft)
        wt = wt and wt * inside or inside
      elseif padding == "reflection" then
        i = reflect(i, lo, hi):trunc()
      end
      r[k] = { i:clamp(0, size - 1):cast("int64"), wt }
    end
    return r
  end
  local shrink = function(k) return g:shrink({ { 0, n }, { 0, m }, { k, k + 1 } }):reshape(n, m) end
  local xs, ys = taps(shrink(0), w), taps(shrink(1), h)
  local planes = d:cast(ft):reshape(n, c, h * w)
  local out
  for _, ty in ipairs(ys) do
    for _, tx in ipairs(xs) do
      local at_yx = (ty[1] * w + tx[1]):reshape(n, 1, m):expand(n, c, m)
      local v = planes:gather(2, at_yx)
      local wt = ty[2] and tx[2] and ty[2] * tx[2] or ty[2] or tx[2]
      if wt then v = v * wt:reshape(n, 1, m) end
      out = out and out + v or v
    end
  end
  return out:reshape(n, c, grid.shape[2], grid.shape[3]):cast(d.dtype)
end)

-- RoiAlign: each region of interest (x1, y1, x2, y2, times spatial_scale) of its batch's planes
-- cut into output_height x output_width bins; each bin the average (or max) of a grid of
-- bilinear samples (sampling_ratio per side, or as many as the bin is pixels wide). The regions
-- are read back and each bin's sample weights over the plane's pixels built here, as a dense
-- (regions, bins, pixels) matrix, which one batched matmul applies to all channels.
op("RoiAlign", 10, function(_, x, at, opset)
  local d, rois, batch = x[1], x[2]:cast("float64"):tolist(), x[3]
  local n, c, h, w = table.unpack(d.shape)
  local ph, pw = at.output_height or 1, at.output_width or 1
  local ratio, scale = at.sampling_ratio or 0, at.spatial_scale or 1.0
  local mode = at.mode or "avg"
  if mode ~= "avg" and mode ~= "max" then error("onnx: RoiAlign mode " .. mode .. " is not supported", 0) end
  local ct = at.coordinate_transformation_mode or (opset >= 16 and "half_pixel" or "output_half_pixel")
  if ct ~= "half_pixel" and ct ~= "output_half_pixel" then
    error("onnx: RoiAlign coordinate_transformation_mode " .. ct .. " is not supported", 0)
  end
  local offset = ct == "half_pixel" and 0.5 or 0
  -- the corners and weights of the bilinear sample at (y, x): none outside the plane's border
  local function sample(y, xx)
    if y < -1 or y > h or xx < -1 or xx > w then return {} end
    y, xx = math.max(y, 0), math.max(xx, 0)
    local y0, x0 = math.floor(y), math.floor(xx)
    local y1, x1 = y0 + 1, x0 + 1
    if y0 >= h - 1 then y0, y1, y = h - 1, h - 1, h - 1 end
    if x0 >= w - 1 then x0, x1, xx = w - 1, w - 1, w - 1 end
    local ly, lx = y - y0, xx - x0
    return { { y0 * w + x0, (1 - ly) * (1 - lx) }, { y0 * w + x1, (1 - ly) * lx },
      { y1 * w + x0, ly * (1 - lx) }, { y1 * w + x1, ly * lx } }
  end
  -- per region: its bins' samples, each a list of (pixel, weight) corners
  local regions, most = {}, 1
  for r, roi in ipairs(rois) do
    local x1, y1 = roi[1] * scale - offset, roi[2] * scale - offset
    local rw, rh = roi[3] * scale - offset - x1, roi[4] * scale - offset - y1
    if offset == 0 then rw, rh = math.max(rw, 1), math.max(rh, 1) end -- malformed regions 1x1
    local bh, bw = rh / ph, rw / pw
    local gh = ratio > 0 and ratio or math.ceil(rh / ph)
    local gw = ratio > 0 and ratio or math.ceil(rw / pw)
    local bins = {}
    for i = 0, ph - 1 do
      for j = 0, pw - 1 do
        local samples = {}
        for iy = 0, gh - 1 do
          for ix = 0, gw - 1 do
            samples[#samples + 1] = sample(y1 + i * bh + (iy + 0.5) * bh / gh, x1 + j * bw + (ix + 0.5) * bw / gw)
          end
        end
        bins[#bins + 1] = samples
      end
    end
    regions[r] = bins
    most = math.max(most, gh * gw)
  end
  local nr, np, hw = #rois, ph * pw, h * w
  local planes = U.ops.Gather.fn(nil, { d, batch }, { axis = 0 }):reshape(nr, c, hw)
  local wts = {}
  if mode == "avg" then
    -- row (r, bin): the samples' corner weights summed, over the number of samples
    for r, bins in ipairs(regions) do
      for b, samples in ipairs(bins) do
        local base = ((r - 1) * np + (b - 1)) * hw
        for k = base + 1, base + hw do wts[k] = 0 end
        for _, corners in ipairs(samples) do
          for _, cw in ipairs(corners) do
            wts[base + cw[1] + 1] = wts[base + cw[1] + 1] + cw[2] / math.max(#samples, 1)
          end
        end
      end
    end
    local m = Tensor(wts, "float32"):reshape(nr, np, hw):cast(d.dtype)
    return planes:matmul(m:transpose(1, 2)):reshape(nr, c, ph, pw)
  end
  -- max: row (r, bin, sample, corner) holds one corner's weight; a sample's value is the
  -- largest weighted corner (ONNX's reference), the bin's the largest sample; rows past a
  -- region's sample count are masked out
  local slots, valid = most * 4, {}
  for r, bins in ipairs(regions) do
    for b, samples in ipairs(bins) do
      for s = 1, most do
        for k = 1, 4 do
          local row = (((r - 1) * np + (b - 1)) * most + (s - 1)) * 4 + (k - 1)
          for p = row * hw + 1, row * hw + hw do wts[p] = 0 end
          valid[row + 1] = samples[s] ~= nil
          local cw = samples[s] and samples[s][k]
          if cw then wts[row * hw + cw[1] + 1] = cw[2] end
        end
      end
    end
  end
  local m = Tensor(wts, "float32"):reshape(nr, np * slots, hw):cast(d.dtype)
  local v = planes:matmul(m:transpose(1, 2)):reshape(nr, c, np, slots)
  local ok = Tensor(valid, "bool"):reshape(nr, 1, np, slots)
  return ok:where(v, -math.huge):max(-1):reshape(nr, c, ph, pw):cast(d.dtype)
end)
end
