-- require "moongrad": the globals as one table, for code that prefers not to use globals
-- (local mg = require "moongrad"; local x = mg.Tensor{1, 2, 3}).
local M = {}
for _, name in ipairs({ "Tensor", "dtypes", "Context", "Device", "GlobalCounters", "ShapeTracker", "show", "nn",
  "optim", "state", "datasets", "TinyJit" }) do
  M[name] = _G[name]
end
return M
