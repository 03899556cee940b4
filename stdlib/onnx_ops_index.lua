-- The ONNX indexing ops: ScatterElements (and its old name Scatter), ScatterND, GatherND.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)
local axis_of = U.axis_of

-- negative indices count from the end of a dim of size n
local function wrap(idx, n)
  idx = idx:cast("int64")
  return idx:lt(0):where(idx + n, idx)
end

-- ONNX reduction names -> Tensor.scatter_reduce's (a repeated index combines in order)
local REDUCE = { add = "sum", mul = "prod", max = "amax", min = "amin" }

-- out = data, with updates[i] written (or combined) at index[i] along the axis
local function scatter_elements(node, x, at)
  local d = x[1]
  local axis = axis_of(at.axis or 0, d.ndim)
  local idx = wrap(x[2], d.shape[axis + 1])
  local red = at.reduction or "none"
  if red == "none" then return d:scatter(axis, idx, x[3]) end
  if not REDUCE[red] then error(("onnx: %s reduction '%s' is not supported"):format(node.op, red), 0) end
  return d:scatter_reduce(axis, idx, x[3], REDUCE[red])
end
op("ScatterElements", 11, scatter_elements)
op("Scatter", 9, scatter_elements) -- the name before opset 11, no reduction

-- The row number of each index tuple (the last dim of idx, k long) in data's first k dims
-- flattened, as an int64 tensor of idx.shape[:-1]
local function row_of(idx, shape, k)
  local strides, s = {}, 1
  for j = k, 1, -1 do strides[j] = s; s = s * shape[j] end
  local dims = Tensor(shape, "int64"):shrink({ { 0, k } })
  idx = idx:cast("int64")
  idx = idx:lt(0):where(idx + dims, idx)
  return (idx * Tensor(strides, "int64")):sum(-1), s
end

-- ScatterND: updates (idx.shape[:-1] + data.shape[k:]) written at the index tuples; data's first
-- k dims are flattened into rows, then each update is a scatter of one row
op("ScatterND", 11, function(node, x, at)
  local d, idx, upd = x[1], x[2], x[3]
  local k = idx.shape[idx.ndim]
  local rows, n = row_of(idx, d.shape, k)
  local rest = { table.unpack(d.shape, k + 1) }
  local m = rows:numel()
  local flat = d:reshape(n, table.unpack(rest))
  upd = upd:reshape(m, table.unpack(rest))
  local ishape, eshape = { m }, { m }
  for i, s in ipairs(rest) do ishape[i + 1] = 1; eshape[i + 1] = s end
  local where = rows:reshape(ishape):expand(eshape)
  local red = at.reduction or "none"
  local r
  if red == "none" then r = flat:scatter(0, where, upd)
  elseif REDUCE[red] then r = flat:scatter_reduce(0, where, upd, REDUCE[red])
  else error(("onnx: ScatterND reduction '%s' is not supported"):format(red), 0) end
  return r:reshape(d.shape)
end)

-- GatherND: the slices of data (after batch_dims) that the index tuples name; per batch, data's
-- k indexed dims are flattened into rows and the rows gathered
op("GatherND", 11, function(_, x, at)
  local d, idx = x[1], x[2]
  local b = at.batch_dims or 0
  local k = idx.shape[idx.ndim]
  local nb = 1
  for i = 1, b do nb = nb * d.shape[i] end
  local inner = { table.unpack(d.shape, b + 1) }
  local rows, n = row_of(idx, inner, k)
  local rest, r = { table.unpack(inner, k + 1) }, 1
  for _, s in ipairs(rest) do r = r * s end
  rows = rows:reshape(nb, -1, 1)
  local m = rows.shape[2]
  local g = d:reshape(nb, n, r):gather(1, rows:expand(nb, m, r))
  local out = { table.unpack(idx.shape, 1, idx.ndim - 1) }
  for _, s in ipairs(rest) do out[#out + 1] = s end
  return g:reshape(out)
end)
end
