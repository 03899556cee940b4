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
end
