-- ONNX op handlers: signal processing. The windows (Hann, Hamming, Blackman) and MelWeightMatrix
-- are small tables computed on the host from their scalar inputs; DFT and STFT are matmuls with
-- cos and sin matrices. Complex tensors are ONNX's: a last dim of 2 (real, imaginary), or of 1
-- for a real input. Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local axis_of, dtype_of = U.axis_of, U.dtype_of

-- a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N = size (periodic) or size - 1 (symmetric)
local function window(a0, a1, a2)
  return function(node, x, at)
    local size = x[1]:item()
    local n = at.periodic == 0 and size - 1 or size
    local w = {}
    for k = 0, size - 1 do
      local t = 2 * math.pi * k / n
      w[k + 1] = a0 - a1 * math.cos(t) + a2 * math.cos(2 * t)
    end
    local dtype = dtype_of(at.output_datatype or 1, node.op)
    if size == 0 then return Tensor.zeros({ 0 }, { dtype = dtype }) end
    return Tensor(w, dtype)
  end
end
op("HannWindow", 17, window(0.5, 0.5, 0))
op("HammingWindow", 17, window(25 / 46, 21 / 46, 0))
op("BlackmanWindow", 17, window(0.42, 0.5, 0.08))

-- MelWeightMatrix: (dft_length // 2 + 1) x num_mel_bins triangular filters, their edges
-- num_mel_bins + 2 points spaced evenly on the mel scale between the two edge frequencies,
-- each snapped down to a DFT bin
op("MelWeightMatrix", 17, function(node, x, at)
  local bins, dft_len, rate = x[1]:item(), x[2]:item(), x[3]:item()
  local lo, hi = x[4]:item(), x[5]:item()
  local function mel(hz) return 2595 * math.log(1 + hz / 700, 10) end
  local mlo = mel(lo)
  local step = (mel(hi) - mlo) / (bins + 2)
  local edge = {}
  for i = 0, bins + 1 do
    local hz = 700 * (10 ^ ((i * step + mlo) / 2595) - 1)
    edge[i] = math.floor((dft_len + 1) * hz / rate)
  end
  local rows = dft_len // 2 + 1
  local m = {}
  for j = 1, rows do m[j] = {}; for i = 1, bins do m[j][i] = 0 end end
  for i = 0, bins - 1 do
    local left, center, right = edge[i], edge[i + 1], edge[i + 2]
    if center == left then m[center + 1][i + 1] = 1
    else for j = left, center do m[j + 1][i + 1] = (j - left) / (center - left) end end
    for j = center, right - 1 do m[j + 1][i + 1] = (right - j) / (right - center) end
  end
  return Tensor(m, dtype_of(at.output_datatype or 1, node.op))
end)

-- cos and sin of 2 pi j k / n as n x m matrices, from one period computed on the host in double
-- (exact at the quarter turns, where a float32 angle would leave sin(pi) ~ -8.7e-8)
local function twiddles(n, m, dtype)
  local c, s = {}, {}
  for r = 0, n - 1 do
    if (4 * r) % n == 0 then
      local q = 4 * r // n
      c[r], s[r] = ({ 1, 0, -1, 0 })[q + 1], ({ 0, 1, 0, -1 })[q + 1]
    else
      c[r], s[r] = math.cos(2 * math.pi * r / n), math.sin(2 * math.pi * r / n)
    end
  end
  local cm, sm = {}, {}
  for j = 0, n - 1 do
    local cr, sr = {}, {}
    for k = 0, m - 1 do cr[k + 1], sr[k + 1] = c[j * k % n], s[j * k % n] end
    cm[j + 1], sm[j + 1] = cr, sr
  end
  return Tensor(cm, dtype), Tensor(sm, dtype)
end

-- the first m bins of the DFT (or the inverse DFT) of the signal along the last dim of re (and
-- im, nil for a real signal): the real and imaginary parts, (..., m) each
local function dft(re, im, m, inverse)
  local n = re.shape[re.ndim]
  local c, s = twiddles(n, m, re.dtype)
  local rc, rs = re:matmul(c), re:matmul(s)
  if inverse then -- e^{+i theta}, scaled by 1/n
    local yr, yi = im and rc - im:matmul(s) or rc, im and im:matmul(c) + rs or rs
    return yr / n, yi / n
  end
  -- e^{-i theta}
  return im and rc + im:matmul(s) or rc, im and im:matmul(c) - rs or -rs
end

-- the signal dim cut or zero-padded to n
local function fit(t, n)
  local have = t.shape[t.ndim]
  if have == n then return t end
  local p = {}
  for i = 1, t.ndim - 1 do p[i] = { 0, 0 } end
  p[t.ndim] = { 0, n - have }
  return t:pad(p)
end

-- DFT along one axis of x (..., 1 or 2); dft_length pads or cuts the signal; onesided keeps the
-- n // 2 + 1 bins that a real signal's spectrum does not repeat
op("DFT", 17, function(_, x, at, opset)
  local d = x[1]
  local nd = d.ndim
  local axis = opset >= 20 and (x[3] and x[3]:item() or -2) or (at.axis or 1)
  axis = axis_of(axis, nd)
  if axis == nd - 1 then error("onnx: DFT axis " .. axis .. " is the complex dim", 0) end
  local inverse, onesided = at.inverse == 1, at.onesided == 1
  if onesided and inverse then error("onnx: DFT onesided=1 with inverse=1 is not supported", 0) end
  local perm, back = {}, {}
  for i = 0, nd - 2 do if i ~= axis then perm[#perm + 1] = i end end
  perm[#perm + 1] = axis
  perm[#perm + 1] = nd - 1
  for j, i in ipairs(perm) do back[i + 1] = j - 1 end
  d = d:permute(perm) -- (others..., signal, 1 or 2)
  local n = x[2] and x[2]:item() or d.shape[nd - 1]
  local re = fit(d[{ "...", 0 }], n)
  local im = d.shape[nd] == 2 and fit(d[{ "...", 1 }], n) or nil
  local yr, yi = dft(re, im, onesided and n // 2 + 1 or n, inverse)
  return Tensor.stack({ yr, yi }, -1):permute(back)
end)

-- STFT: the DFT of each frame (frame_length samples every frame_step) of the signal
-- (batch, length, 1 or 2), times the window; out (batch, frames, bins, 2)
op("STFT", 17, function(_, x, at)
  local sig, step, win = x[1], x[2]:item(), x[3]
  local len = x[4] and x[4]:item() or (win and win.shape[1]) or sig.shape[2]
  local frames = Tensor._pool(sig:permute(0, 2, 1), { len }, step)      -- (batch, 1 or 2, frames, len)
  if win then frames = frames * win:cast(sig.dtype) end
  local re = frames[{ { nil }, 0 }]
  local im = sig.shape[3] == 2 and frames[{ { nil }, 1 }] or nil
  local onesided = at.onesided ~= 0
  local yr, yi = dft(re, im, onesided and len // 2 + 1 or len, false)
  return Tensor.stack({ yr, yi }, -1)
end)
end
