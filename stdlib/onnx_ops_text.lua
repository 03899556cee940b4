-- The ONNX ops on string tensors (onnx.Strings: Lua lists of strings with a shape), which
-- moongrad's dtypes lack: Cast to and from strings, StringNormalizer. Registered into onnx.ops by
-- stdlib/onnx.lua through `op`.
return function(op, U)
local onnx, dtype_of = U.onnx, U.dtype_of
local STRING = 8 -- TensorProto.DataType

local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- A number as ONNX's reference writes it (NumPy's repr): the shortest decimal that reads back as
-- the same float32 (or float64), "NaN", "INF", "-INF"; a whole float keeps its ".0"
local function to_text(v, dtype)
  if math.type(v) == "integer" then return tostring(v) end
  if v ~= v then return "NaN" end
  if v == math.huge then return "INF" end
  if v == -math.huge then return "-INF" end
  local exact = dtype == "float64" and function(b) return b == v end or function(b) return f32(b) == f32(v) end
  for digits = 1, 17 do
    local s = ("%." .. digits .. "g"):format(v)
    if exact(tonumber(s)) then
      if not s:find("[%.e]") then s = s .. ".0" end
      return s
    end
  end
end

local SPECIAL = { nan = 0 / 0, inf = math.huge, ["+inf"] = math.huge, ["-inf"] = -math.huge }

-- Cast and CastLike where a side is strings; to is a TensorProto type code or a dtype name
function U.cast_strings(x, to, node)
  if to == STRING then
    if onnx.is_strings(x) then return x end
    if x.dtype == "bool" then error(("onnx: %s: bool to string is not supported"):format(node.op), 0) end
    local out = {}
    for i, v in ipairs(x:reshape(-1):tolist()) do out[i] = to_text(v, x.dtype) end
    return onnx.strings(out, { table.unpack(x.shape) })
  end
  local dtype = type(to) == "string" and to or dtype_of(to, node.name)
  local vals = {}
  for i, s in ipairs(x) do
    vals[i] = tonumber(s) or SPECIAL[s:lower()]
      or error(("onnx: %s: '%s' is not a number"):format(node.op, s), 0)
  end
  return Tensor(vals, dtype):reshape(x.shape)
end

-- StringNormalizer: a row ([C] or [1, C]) of strings without the stopwords (compared ignoring
-- case unless is_case_sensitive), changed to LOWER or UPPER case or left as they are (NONE);
-- nothing left is one empty string. Case changes are ASCII's (Lua's string.lower and upper).
op("StringNormalizer", 10, function(node, x, at)
  local s = x[1]
  if not onnx.is_strings(s) then error("onnx: StringNormalizer takes strings", 0) end
  local shape = s.shape
  if not (#shape == 1 or (#shape == 2 and shape[1] == 1)) then
    error(("onnx: StringNormalizer takes [C] or [1, C] strings, not [%s]"):format(table.concat(shape, ", ")), 0)
  end
  local action, sensitive = at.case_change_action or "NONE", (at.is_case_sensitive or 0) == 1
  local change = ({ LOWER = string.lower, UPPER = string.upper, NONE = function(w) return w end })[action]
  if not change then error("onnx: StringNormalizer case_change_action " .. tostring(action) .. " is not supported", 0) end
  local stop = {}
  for _, w in ipairs(at.stopwords or {}) do stop[sensitive and w or w:lower()] = true end
  local out = {}
  for _, w in ipairs(s) do
    if not stop[sensitive and w or w:lower()] then out[#out + 1] = change(w) end
  end
  if #out == 0 then out[1] = "" end
  return onnx.strings(out, #shape == 1 and { #out } or { 1, #out })
end)
end
