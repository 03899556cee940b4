-- The ONNX vision ops: NonMaxSuppression, GridSample, RoiAlign, MaxUnpool, TfIdfVectorizer.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local ints, axis_of = U.ints, U.axis_of
end
