-- repl: the parts of the prompt that are plain Lua: colon commands, tab completion and how
-- values are printed. interp/repl.cpp owns the terminal and calls these.
local M = {}
-- the prompt keeps working if the user reassigns these globals
local print, tostring, select, type, pairs, ipairs = print, tostring, select, type, pairs, ipairs
local show = show

-- ---------------------------------------------------------------- colon commands

local function is_device(s)
  for _, n in ipairs(Device.names()) do if n == s:upper() then return true end end
  return false
end

local function is_stage(s)
  for _, v in ipairs(show.stages) do
    if v == s then return true end
  end
  return false
end

local command_names = {}
for _, c in ipairs(require("help").commands) do command_names[#command_names + 1] = c[1] end

local function fail(msg) error(msg, 0) end

-- The Lua source a colon-command line stands for (":src x + 1" -> "show.src(x + 1)").
-- Returns nil for lines that are not commands; raises an error for a bad command.
function M.translate(line)
  if line:match("^%s*::") then return nil end -- a goto label, not a command
  local cmd, rest = line:match("^%s*:(%S*)%s*(.-)%s*$")
  if not cmd then return nil end
  local function expr()
    if rest == "" then fail((":%s needs an expression, e.g. :%s Tensor.ones(2, 2) + 1"):format(cmd, cmd)) end
    return rest
  end
  if cmd == "debug" or cmd == "beam" or cmd == "noopt" then
    if rest ~= "" and not rest:match("^%d+$") then
      fail((":%s takes a whole number, got '%s'"):format(cmd, rest))
    end
    return ("show.%s(%s)"):format(cmd, rest == "" and "nil" or rest)
  elseif cmd == "device" then
    if rest ~= "" and not rest:match("^[%w_:]+$") then fail((":device takes a device name, got '%s'"):format(rest)) end
    return ("show.device(%s)"):format(rest == "" and "nil" or ("%q"):format(rest:upper()))
  elseif cmd == "src" then -- :src EXPR [all|DEVICE]
    local e, dev = expr():match("^(.-)%s+(%a+)$")
    if dev and (dev:lower() == "all" or is_device(dev)) then return ("show.src(%s, %q)"):format(e, dev) end
    return ("show.src(%s)"):format(expr())
  elseif cmd == "schedule" or cmd == "kernels" or cmd == "opts" then
    return ("show.%s(%s)"):format(cmd, expr())
  elseif cmd == "roofline" then -- :roofline alone prints the limits
    return ("show.roofline(%s)"):format(rest == "" and "nil" or rest)
  elseif cmd == "viz" then
    return ("show.viz(%s, %q)"):format(expr(), rest)
  elseif cmd == "ir" then
    local e, stage = expr():match("^(.-)%s+([%a_]+)$")
    if stage and is_stage(stage) then return ("show.ir(%s, %q)"):format(e, stage) end
    return ("show.ir(%s)"):format(rest)
  elseif cmd == "time" then
    return ("show.time(function() return %s end)"):format(expr())
  elseif cmd == "onnx" then -- :onnx PATH (a file name, not an expression)
    if rest == "" then fail(":onnx needs the path of a .onnx file, e.g. :onnx model.onnx") end
    return ("show.onnx(%q)"):format(rest)
  elseif cmd == "help" then
    return ("show.help(%q)"):format(rest)
  end
  fail(("unknown command ':%s' (commands: :%s; :help explains them)"):format(cmd, table.concat(command_names, " :")))
end

-- At the prompt every entry is its own chunk, so `local x = 1` would be gone on the next line.
-- The prompt drops a leading `local` so the name lives on, as it would in a notebook.
function M.prepare(chunk)
  local body = chunk:match("^%s*local%s+function%s+(.*)$")
  if body then return "function " .. body end
  body = chunk:match("^%s*local%s+([%a_][%w_]*%s*,?[%w_%s,]*=.*)$")
  if body then return body end
  return chunk
end

-- ---------------------------------------------------------------- completion

local keywords = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

local function is_ident(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil end

-- v[k] without running into errors (a Tensor's __index raises on unknown names).
local function get(v, k)
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
end

-- The names reachable from v with `.` (or `:` when methods_only).
local function names_of(v, methods_only)
  local out = {}
  local function add(k, val)
    if is_ident(k) and (not methods_only or type(val) == "function") then out[k] = true end
  end
  local kind = show.typeof(v)
  if kind == "Tensor" then
    for k, f in pairs(Tensor) do add(k, f) end
    if not methods_only then
      for _, k in ipairs(show.fields(v)) do out[k] = true end
    end
  elseif kind == "UOp" or kind == "ShapeTracker" or kind == "ScheduleItem" then
    for _, k in ipairs(show.fields(v)) do add(k, get(v, k)) end
  elseif type(v) == "table" then
    local seen, t = {}, v
    while type(t) == "table" and not seen[t] do -- the table, then its classes' __index tables
      seen[t] = true
      for k, val in pairs(t) do add(k, val) end
      local mt = getmetatable(t)
      t = type(mt) == "table" and rawget(mt, "__index") or nil
    end
  elseif type(v) == "string" then
    for k, f in pairs(string) do add(k, f) end
  end
  return out
end

local function sorted_matching(set, prefix)
  local out = {}
  for k in pairs(set) do
    if k:sub(1, #prefix) == prefix then out[#out + 1] = k end
  end
  table.sort(out)
  return out
end

-- Completion for the text left of the cursor: the candidate names and the partial word
-- they complete (each candidate starts with it). `x:re` -> {"realize", "relu", "reshape"}, "re".
function M.complete(text)
  local cmd = text:match("^%s*:(%a*)$")
  if cmd then
    return sorted_matching((function()
      local s = {}
      for _, n in ipairs(command_names) do s[n] = true end
      return s
    end)(), cmd), cmd
  end
  local word = text:match("[%w_%.:]*$")
  if word:match("^%d") then return {}, word end
  local path, sep, partial = word:match("^(.*)([%.:])([%w_]*)$")
  if not path then
    local set = {}
    for k in pairs(_G) do
      if is_ident(k) then set[k] = true end
    end
    for _, k in ipairs(keywords) do set[k] = true end
    return sorted_matching(set, word), word
  end
  -- walk the dotted path from the globals; give up on anything but plain names
  local v = _G
  for part in (path .. "."):gmatch("([^%.]*)%.") do
    if not is_ident(part) then return {}, partial end
    v = get(v, part)
    if v == nil then return {}, partial end
  end
  return sorted_matching(names_of(v, sep == ":"), partial), partial
end

-- ---------------------------------------------------------------- printing values

local function quote(s) return ("%q"):format(s):gsub("\\\n", "\\n") end

-- A table as Lua source, short and bounded: at most 3 levels and 30 entries per level.
local function pretty(v, depth, seen)
  if type(v) == "string" then return quote(v) end
  if type(v) ~= "table" then return tostring(v) end
  if seen[v] then return "<cycle>" end
  if depth > 3 then return "{...}" end
  seen[v] = true
  local parts, n, count = {}, #v, 0
  local multiline = false
  local function push(s)
    count = count + 1
    if count <= 30 then parts[#parts + 1] = s end
    multiline = multiline or s:find("\n") ~= nil
  end
  for i = 1, n do push(pretty(v[i], depth + 1, seen)) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local ks = is_ident(k) and k or "[" .. pretty(k, depth + 1, seen) .. "]"
    push(ks .. " = " .. pretty(v[k], depth + 1, seen))
  end
  seen[v] = nil
  if count > 30 then parts[#parts + 1] = ("... (%d more)"):format(count - 30) end
  if multiline then -- schedule items, tensors: one per paragraph
    for i = 1, math.min(n, 30) do parts[i] = "[" .. i .. "] " .. parts[i] end
    return "{\n" .. table.concat(parts, ",\n") .. "\n}"
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- How the prompt shows a result: tables as Lua source, everything else as print would.
function M.format(v)
  local mt = getmetatable(v)
  if type(v) == "table" and not (type(mt) == "table" and mt.__tostring) then return pretty(v, 1, {}) end
  return tostring(v)
end

-- Prints the values an entry returned, tab-separated like print.
function M.print_results(...)
  local n = select("#", ...)
  local out = {}
  for i = 1, n do out[i] = M.format((select(i, ...))) end
  print(table.concat(out, "\t"))
end

return M
