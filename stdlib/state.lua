-- state: finding a model's tensors, state dicts, and the safetensors file format
-- (8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
-- then the raw little-endian data), readable by other safetensors implementations.
local state = {}
local json = require "mgjson" -- nlohmann-json, bound in interp/bind_json.cpp

-- ---------------------------------------------------------------- state dicts

local is_tensor = require("args").is_tensor -- a sharded tensor too: saved whole, loaded cut

-- {"layer1.weight" = t, ...} for every tensor reachable through fields and list entries.
function state.get_state_dict(obj, prefix, out, seen)
  out, seen, prefix = out or {}, seen or {}, prefix or ""
  if is_tensor(obj) then
    out[prefix:sub(1, -2)] = obj
    return out
  end
  if type(obj) ~= "table" or seen[obj] then return out end
  seen[obj] = true
  local keys = {}
  for k in pairs(obj) do
    if type(k) == "string" or math.type(k) == "integer" then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  for _, k in ipairs(keys) do state.get_state_dict(obj[k], prefix .. tostring(k) .. ".", out, seen) end
  return out
end

-- The tensors of a model, each once, in state-dict order.
function state.get_parameters(obj)
  local sd = state.get_state_dict(obj)
  local names = {}
  for k in pairs(sd) do names[#names + 1] = k end
  table.sort(names)
  local out, seen = {}, {}
  for _, k in ipairs(names) do
    if not seen[sd[k]] then
      seen[sd[k]] = true
      out[#out + 1] = sd[k]
    end
  end
  return out
end

-- Copies the values of sd into the model's tensors (in place, keeping the objects the
-- optimizer holds). Shapes and dtypes must match; with strict (default), so must the names.
function state.load_state_dict(obj, sd, strict)
  local mine = state.get_state_dict(obj)
  if strict ~= false then
    for k in pairs(sd) do
      if not mine[k] then error(("load_state_dict: the file has '%s', which the model does not"):format(k), 2) end
    end
  end
  local names = {}
  for k in pairs(mine) do names[#names + 1] = k end
  table.sort(names)
  local done = {}
  for _, k in ipairs(names) do
    local t, v = mine[k], sd[k]
    if v == nil then
      if strict ~= false then error(("load_state_dict: '%s' is missing from the state dict"):format(k), 2) end
    else
      local ts, vs = table.concat(t.shape, ", "), table.concat(v.shape, ", ")
      if ts ~= vs then error(("load_state_dict: '%s' has shape (%s) in the model but (%s) in the state dict"):format(k, ts, vs), 2) end
      if t.dtype ~= v.dtype then
        error(("load_state_dict: '%s' is %s in the model but %s in the state dict"):format(k, t.dtype, v.dtype), 2)
      end
      t:assign(v)
      done[#done + 1] = t
    end
  end
  if #done > 0 then Tensor.realize_all(done) end
end

-- ---------------------------------------------------------------- safetensors

local to_st = { float64 = "F64", float32 = "F32", float16 = "F16", bfloat16 = "BF16", int64 = "I64", int32 = "I32",
  int16 = "I16", int8 = "I8", uint64 = "U64", uint32 = "U32", uint16 = "U16", uint8 = "U8", bool = "BOOL" }
local from_st = {}
for k, v in pairs(to_st) do from_st[v] = k end

-- Writes {name = tensor} to path. The file is written next to path and renamed over it, so a
-- crash never leaves a half-written file where a good one was.
function state.safe_save(sd, path, metadata)
  local names = {}
  for k, t in pairs(sd) do
    if type(k) ~= "string" then error("safe_save: names must be strings", 2) end
    if not is_tensor(t) then error(("safe_save: '%s' is not a Tensor"):format(k), 2) end
    if not to_st[t.dtype] then error(("safe_save: '%s' has dtype %s, which safetensors lacks"):format(k, t.dtype), 2) end
    names[#names + 1] = k
  end
  table.sort(names)
  local header, blobs, offset = {}, {}, 0
  for _, k in ipairs(names) do
    local t = sd[k]
    local bytes = t:tobytes()
    header[k] = { dtype = to_st[t.dtype], shape = json.array(table.move(t.shape, 1, #t.shape, 1, {})),
      data_offsets = json.array { offset, offset + #bytes } }
    blobs[#blobs + 1] = bytes
    offset = offset + #bytes
  end
  if metadata then
    local m = {}
    for k, v in pairs(metadata) do m[tostring(k)] = tostring(v) end
    header.__metadata__ = m
  end
  local ok, h = pcall(json.encode, header)
  if not ok then error("safe_save: " .. tostring(h), 2) end
  h = h .. (" "):rep((8 - #h % 8) % 8) -- pad the header to 8 bytes, as the reference writer does
  local tmp = path .. ".tmp" .. tostring(math.random(1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then error("safe_save: " .. tostring(err), 2) end
  local ok, werr = f:write(string.pack("<I8", #h), h, table.concat(blobs))
  local closed, cerr = f:close()
  if not ok or not closed then
    os.remove(tmp)
    error("safe_save: writing " .. path .. " failed: " .. tostring(werr or cerr), 2)
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    error("safe_save: " .. tostring(rerr), 2)
  end
end

-- Reads a safetensors file into {name = tensor}, and its __metadata__ strings as a second result.
-- Every offset and size is checked against the file before any tensor is made: a damaged file is
-- an error, never a wild read.
function state.safe_load(path)
  local f, err = io.open(path, "rb")
  if not f then error("safe_load: " .. tostring(err), 2) end
  local data = f:read("a")
  f:close()
  local function bad(msg) error(("safe_load: %s: %s"):format(path, msg), 3) end
  if #data < 8 then bad(("only %d bytes: not a safetensors file"):format(#data)) end
  local n = string.unpack("<I8", data)
  if n < 2 or n > #data - 8 then bad(("header length %d does not fit in %d bytes"):format(n, #data)) end
  if not data:sub(9, 8 + n):match("^%s*{") then bad("the header is not a JSON object") end
  local ok, header = pcall(json.decode, data:sub(9, 8 + n))
  if not ok then bad("bad JSON header: " .. (tostring(header):match("bad JSON: (.*)") or tostring(header))) end
  if type(header) ~= "table" then bad("the header is not a JSON object") end
  local base, size = 8 + n, #data - 8 - n
  local out = {}
  for name, e in pairs(header) do
    if name ~= "__metadata__" then
      if type(e) ~= "table" then bad(("entry '%s' is not an object"):format(name)) end
      local dt = from_st[e.dtype]
      if not dt then bad(("'%s' has unknown dtype %s"):format(name, tostring(e.dtype))) end
      if type(e.shape) ~= "table" then bad(("'%s' has no shape"):format(name)) end
      local count = 1
      for _, d in ipairs(e.shape) do
        if math.type(d) ~= "integer" or d < 0 or (d > 0 and count > (1 << 48) // d) then
          bad(("'%s' has a bad shape"):format(name))
        end
        count = count * d
      end
      local o = e.data_offsets
      if type(o) ~= "table" or math.type(o[1]) ~= "integer" or math.type(o[2]) ~= "integer" or o[1] < 0 or o[2] < o[1] or
          o[2] > size then
        bad(("'%s' has data_offsets outside the %d data bytes"):format(name, size))
      end
      if o[2] - o[1] ~= count * dtypes.itemsize(dt) then
        bad(("'%s': %d bytes for %d elements of %s"):format(name, o[2] - o[1], count, dt))
      end
      out[name] = Tensor.frombytes(data, e.shape, dt, base + o[1], o[2] - o[1])
    end
  end
  local meta = {}
  if type(header.__metadata__) == "table" then
    for k, v in pairs(header.__metadata__) do meta[k] = tostring(v) end
  end
  return out, meta
end

-- Save and load a model directly.
function state.save(model, path) state.safe_save(state.get_state_dict(model), path) end
function state.load(model, path) state.load_state_dict(model, state.safe_load(path)) end

return state
