-- safetensors and IDX: files made by an independent writer (tests/data/make_fixtures.py, numpy
-- and Python's json), round trips, and damaged files, which must be errors, never wild reads.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
local here = arg[0]:match("^(.*/)") or "./"
local data = here .. "../data/"

local function tmpfile() return os.tmpname() end
local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

test("a safetensors file written by numpy loads with the right values and dtypes", function()
  local sd = state.safe_load(data .. "numpy_fixture.safetensors")
  H.same(sd.a:tolist(), { { 0.0, 0.5, 1.0 }, { 1.5, 2.0, 2.5 } })
  assert(sd.a.dtype == "float32")
  H.same(sd.b:tolist(), { -3, 1 << 40, 7 })
  assert(sd.b.dtype == "int64")
  H.same(sd.c:tolist(), { 0, 255, 17 })
  assert(sd.c.dtype == "uint8")
  H.same(sd.d:tolist(), { 1.5, -2.25, 65504.0 })
  assert(sd.d.dtype == "float16")
  H.same(sd.e:tolist(), { true, false, true })
  assert(#sd.f.shape == 0 and sd.f:item() == 3.25 and sd.f.dtype == "float64")
end)

test("round trip of every dtype safetensors has, and a model", function()
  local sd = {}
  for _, dt in ipairs({ "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint64", "uint32",
    "uint16", "uint8", "bool" }) do
    sd["t_" .. dt] = (Tensor.arange(0, 6):reshape(2, 3) * (dt == "bool" and 1 or 3)):cast(dt)
  end
  sd["view"] = Tensor.arange(0, 12):reshape(3, 4).T -- a non-contiguous view is written row-major
  local path = tmpfile()
  state.safe_save(sd, path, { note = "test" })
  local back = state.safe_load(path)
  for k, t in pairs(sd) do
    assert(back[k], "missing " .. k)
    assert(back[k].dtype == t.dtype, k .. " dtype " .. back[k].dtype)
    H.same(back[k]:tolist(), t:tolist(), nil, k)
  end
  -- the layout follows the spec: 8-byte little-endian header size, then JSON
  local raw = read(path)
  local n = string.unpack("<I8", raw)
  assert(raw:sub(9, 9) == "{" and n % 8 == 0, "header should be JSON padded to 8 bytes")
  assert(raw:sub(9, 8 + n):find('"__metadata__":{"note":"test"}', 1, true))
  os.remove(path)
  -- a model through the file
  local m = { l = nn.Linear(4, 3) }
  state.save(m, path)
  local m2 = { l = nn.Linear(4, 3) }
  state.load(m2, path)
  H.same(m2.l.weight:tolist(), m.l.weight:tolist())
  os.remove(path)
end)

test("damaged safetensors files are rejected with a message", function()
  local good = read(data .. "numpy_fixture.safetensors")
  local n = string.unpack("<I8", good)
  local header = good:sub(9, 8 + n)
  local body = good:sub(9 + n)
  local function st(h, rest) return string.pack("<I8", #h) .. h .. (rest or "") end
  local cases = {
    { "empty file", "", "not a safetensors file" },
    { "truncated in the size", good:sub(1, 5), "not a safetensors file" },
    { "header longer than the file", string.pack("<I8", 1 << 40) .. header, "does not fit" },
    { "truncated in the data", good:sub(1, #good - 10), "data_offsets outside" },
    { "not JSON", string.pack("<I8", 4) .. "abcd", "not a JSON object" },
    { "broken JSON", string.pack("<I8", 6) .. "{\"a\":}", "bad JSON" },
    { "JSON but not an object", string.pack("<I8", 2) .. "[]", "not a JSON object" },
    { "unknown dtype", st('{"x":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}', "abcd"),
      "unknown dtype" },
    { "bytes do not match the shape",
      st('{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "abcd"), "4 bytes for 2 elements" },
    { "negative offsets",
      st('{"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}', "abcd"), "data_offsets outside" },
    { "a shape whose byte count wraps around",
      st('{"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}'), "bad shape" },
    { "unterminated string", st('{"abc:'), "unterminated string" },
  }
  for _, c in ipairs(cases) do
    local path = tmpfile()
    write(path, c[2])
    local ok, err = pcall(state.safe_load, path)
    os.remove(path)
    assert(not ok, c[1] .. ": loaded without an error")
    assert(tostring(err):find(c[3], 1, true), ("%s: message %q lacks %q"):format(c[1], tostring(err), c[3]))
  end
  assert(body) -- (kept for the cases above)
  H.errors(function() state.safe_load("/no/such/file.safetensors") end, "safe_load", "No such file")
end)

test("safe_save writes a temporary file and renames it: failures leave nothing behind", function()
  H.errors(function() state.safe_save({ x = Tensor { 1 } }, "/no/such/dir/model.safetensors") end, "safe_save")
  local path = tmpfile()
  state.safe_save({ x = Tensor { 1.0, 2.0 } }, path)
  local before = read(path)
  H.errors(function() state.safe_save({ x = "not a tensor" }, path) end, "'x' is not a Tensor")
  assert(read(path) == before, "a failed save must not touch the existing file")
  local dir = path:match("^(.*)/")
  local p = io.popen("ls " .. dir .. " | grep -c " .. path:match("([^/]*)$") .. "%.tmp || true")
  local leftovers = tonumber(p:read("a")) or 0
  p:close()
  assert(leftovers == 0, "temporary files left behind")
  os.remove(path)
end)

test("IDX: gzipped and plain, and damaged files", function()
  local x = datasets.read_idx(data .. "tiny-images-idx3-ubyte.gz")
  assert(x.dtype == "uint8")
  H.same(x.shape, { 3, 2, 2 })
  H.same(x:tolist(), { { { 0, 20 }, { 40, 60 } }, { { 80, 100 }, { 120, 140 } }, { { 160, 180 }, { 200, 220 } } })
  H.same(datasets.read_idx(data .. "tiny-labels-idx1-ubyte"):tolist(), { 7, 0, 9 })
  local good = read(data .. "tiny-labels-idx1-ubyte")
  local cases = {
    { good:sub(1, 9), "data bytes for shape" },
    { "\1\0" .. good:sub(3), "not an IDX file" },
    { good:sub(1, 2) .. "\x42" .. good:sub(4), "unknown IDX data type" },
    { good:sub(1, 6), "header cut short" },
  }
  for _, c in ipairs(cases) do
    local path = tmpfile()
    write(path, c[1])
    local ok, err = pcall(datasets.read_idx, path)
    os.remove(path)
    assert(not ok and tostring(err):find(c[2], 1, true), ("expected %q, got %s"):format(c[2], tostring(err)))
  end
  local path = tmpfile() .. ".gz"
  write(path, "\31\139\8\0garbage that is not deflate")
  H.errors(function() datasets.read_idx(path) end, "gzip")
  os.remove(path)
end)

test("a missing data set names the set-up command", function()
  local old = os.getenv("MG_FASHION_DIR")
  -- run in a child so the environment variable applies
  local i = -1
  while arg[i - 1] do i = i - 1 end
  local p = io.popen("MG_DATA_DIR=/nonexistent " .. arg[i] .. " -e 'datasets.mnist_digits()' 2>&1")
  local out = p:read("a")
  p:close()
  assert(out:find("./setup.sh", 1, true) and out:find("MNIST digits", 1, true), out)
  assert(old == old)
end)

H.done()
