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
    { "unterminated string", st('{"abc:'), "missing closing quote" },
    { "a trailing comma", st('{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},}', "abcd"),
      "bad JSON header: parse error at line 1, column 55" },
    { "a number too large for a double", st('{"x":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}}', "abcd"),
      "bad JSON header: number overflow" },
    { "bytes that are not UTF-8 in a name", st('{"\255":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "abcd"),
      "bad JSON header: parse error" },
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

test("a corrupt header names the file, the place and what was wrong", function()
  local path = tmpfile()
  write(path, string.pack("<I8", 8) .. '{"x":[1,')
  local msg = H.errors(function() state.safe_load(path) end, "safe_load: " .. path .. ": bad JSON header: ",
    "line 1, column 9", "unexpected end of input")
  assert(not msg:find("json.exception", 1, true), msg)
  os.remove(path)
end)

local json = require "mgjson"

test("JSON: unicode escapes, nested objects, null and the other literals decode", function()
  local v = json.decode('{"a":{"b":{"c":[1,2.5,"x\\u00e9\\ud83d\\ude00\\n\\"\\\\",true,false,null]}},"e":{}}')
  local c = v.a.b.c
  H.same({ c[1], c[2], c[3], c[4], c[5] }, { 1, 2.5, "x\u{e9}\u{1F600}\n\"\\", true, false })
  assert(c[6] == json.null and tostring(json.null) == "mgjson.null" and #c == 6)
  assert(type(v.e) == "table" and next(v.e) == nil)
  -- a name with escapes in a safetensors header
  local h = '{"caf\\u00e9":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}'
  local path = tmpfile()
  write(path, string.pack("<I8", #h) .. h .. string.pack("<i4", -7))
  local sd = state.safe_load(path)
  os.remove(path)
  assert(sd["caf\u{e9}"] and sd["caf\u{e9}"]:item() == -7)
  H.errors(function() json.decode("[1,", "mine.json") end, "mine.json: bad JSON: ", "unexpected end of input")
  H.errors(function() json.decode(("["):rep(300) .. ("]"):rep(300)) end, "nested deeper than 200")
end)

test("JSON: 64-bit integers beyond 2^53 round-trip exactly", function()
  local text = "[9007199254740993,-9223372036854775808,9223372036854775807,0]"
  local v = json.decode(text)
  assert(math.type(v[1]) == "integer" and v[1] == (1 << 53) + 1, tostring(v[1]))
  assert(v[2] == math.mininteger and v[3] == math.maxinteger and math.type(v[4]) == "integer")
  assert(json.encode(v) == text, json.encode(v))
  assert(json.encode({ data_offsets = json.array { (1 << 53) + 1, (1 << 62) + 3 } }) ==
    '{"data_offsets":[9007199254740993,4611686018427387907]}')
  -- past int64 a number is a float, as Lua's tonumber makes it
  assert(math.type(json.decode("18446744073709551615")) == "float")
end)

test("JSON: encode escapes keys, writes [] for an empty marked list, and refuses what JSON lacks", function()
  assert(json.encode({ ['a"b\n\\'] = "\1", list = json.array {}, obj = {}, n = json.null, f = 0.5 }) ==
    '{"a\\"b\\n\\\\":"\\u0001","f":0.5,"list":[],"n":null,"obj":{}}')
  local back = json.decode(json.encode({ x = json.array {} }))
  assert(json.encode(back) == '{"x":[]}', "a decoded empty array encodes as []")
  H.errors(function() json.encode({ a = { print } }) end, ".a[1] is a function")
  H.errors(function() json.encode({ [1] = 1, [3] = 3 }) end, "key of type number")
  H.errors(function() json.encode({ x = 0 / 0 }) end, ".x is", "JSON cannot hold")
  H.errors(function() json.encode("\255") end, "UTF-8")
  local t = {}
  t.self = t
  H.errors(function() json.encode(t) end, "nested deeper than 200")
  -- tensor names with quotes and newlines survive a save and a load
  local path = tmpfile()
  state.safe_save({ ['we"ird\nname'] = Tensor { 1, 2 }, ["\u{e9}t\u{e9}"] = Tensor { 3 } }, path, { ["k\t"] = 'v"' })
  local sd = state.safe_load(path)
  H.same(sd['we"ird\nname']:tolist(), { 1, 2 })
  H.same(sd["\u{e9}t\u{e9}"]:tolist(), { 3 })
  local raw = read(path)
  local hdr = json.decode(raw:sub(9, 8 + string.unpack("<I8", raw)))
  assert(hdr.__metadata__["k\t"] == 'v"')
  H.same(hdr["\u{e9}t\u{e9}"].shape, { 1 })
  os.remove(path)
  H.errors(function() state.safe_save({ ["\255"] = Tensor { 1 } }, path) end, "safe_save: ", "UTF-8")
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
  local p = io.popen("MG_DATA_DIR=/nonexistent " .. H.exe .. " -e 'datasets.mnist_digits()' 2>&1")
  local out = p:read("a")
  p:close()
  assert(out:find("./setup.sh", 1, true) and out:find("MNIST digits", 1, true), out)
  assert(old == old)
end)

test("safe_load returns the metadata; the random state set back repeats the same draws", function()
  local path = tmpfile()
  state.safe_save({ w = Tensor({ 1.5, 2 }) }, path, { step = 42, note = "x" })
  local sd, meta = state.safe_load(path)
  os.remove(path)
  assert(meta.step == "42" and meta.note == "x", "metadata")
  H.same(sd.w:tolist(), { 1.5, 2.0 })
  Tensor.manual_seed(7)
  Tensor.rand(3):realize()
  local seed, counter = Tensor.get_rng_state()
  assert(seed == 7 and counter == 3, ("state %d %d"):format(seed, counter))
  local a = Tensor.rand(5):tolist()
  Tensor.set_rng_state(seed, counter)
  H.same(Tensor.rand(5):tolist(), a, 0)
  Tensor.manual_seed(8)
  assert(Tensor.rand(5):tolist()[1] ~= a[1], "another seed gives other draws")
end)

H.done()
