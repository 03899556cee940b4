-- ONNX op handlers: the optimizers of the ai.onnx.preview.training domain (Momentum, Adam,
-- Adagrad). Each node updates n tensors at once: its inputs are R (the learning rate), T (the
-- step count), then the n Xs, the n Gs and the optimizer's n-tensor states; its outputs are the n
-- new Xs, then the new states. A gradient is regularized by norm_coefficient * x first.
-- Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op)

-- x[1], x[2] = R, T; the rest split into `groups` lists of n tensors each
local function groups_of(x, groups)
  local n = (#x - 2) // groups
  local r = {}
  for k = 1, groups do
    r[k] = {}
    for i = 1, n do r[k][i] = x[2 + (k - 1) * n + i] end
  end
  return n, table.unpack(r)
end

-- the outputs: each group's list in turn
local function flat(...)
  local r = {}
  for _, list in ipairs({ ... }) do for _, t in ipairs(list) do r[#r + 1] = t end end
  return table.unpack(r)
end

op("ai.onnx.preview.training:Momentum", 1, function(_, x, at)
  local r, t = x[1], x[2]:item()
  local n, xs, gs, vs = groups_of(x, 3)
  local alpha, beta, lambda = at.alpha, at.beta, at.norm_coefficient
  local mode = at.mode or "standard"
  if mode ~= "standard" and mode ~= "nesterov" then error("onnx: Momentum mode " .. mode .. " is not supported", 0) end
  local beta_t = t > 0 and beta or 1 -- the first step takes the whole gradient
  local new_x, new_v = {}, {}
  for i = 1, n do
    local g = xs[i] * lambda + gs[i]
    new_v[i] = vs[i] * alpha + g * beta_t
    new_x[i] = xs[i] - r * (mode == "nesterov" and g + new_v[i] * alpha or new_v[i])
  end
  return flat(new_x, new_v)
end)

op("ai.onnx.preview.training:Adam", 1, function(_, x, at)
  local r, t = x[1], x[2]:item()
  local n, xs, gs, vs, hs = groups_of(x, 4)
  local alpha, beta = at.alpha or 0.9, at.beta or 0.999
  local lambda, lambda_post, eps = at.norm_coefficient or 0, at.norm_coefficient_post or 0, at.epsilon or 1e-6
  -- the bias correction of both moments, from the second step on
  local rate = t > 0 and r * (math.sqrt(1 - beta ^ t) / (1 - alpha ^ t)) or r
  local new_x, new_v, new_h = {}, {}, {}
  for i = 1, n do
    local g = xs[i] * lambda + gs[i]
    new_v[i] = vs[i] * alpha + g * (1 - alpha)
    new_h[i] = hs[i] * beta + g * g * (1 - beta)
    new_x[i] = (xs[i] - rate * new_v[i] / (new_h[i]:sqrt() + eps)) * (1 - lambda_post)
  end
  return flat(new_x, new_v, new_h)
end)

op("ai.onnx.preview.training:Adagrad", 1, function(_, x, at)
  local r, t = x[1], x[2]:item()
  local n, xs, gs, hs = groups_of(x, 3)
  local lambda, eps, decay = at.norm_coefficient or 0, at.epsilon or 0, at.decay_factor or 0
  local rate = r / (1 + t * decay)
  local new_x, new_h = {}, {}
  for i = 1, n do
    local g = xs[i] * lambda + gs[i]
    new_h[i] = hs[i] + g * g
    new_x[i] = xs[i] - rate * g / (new_h[i]:sqrt() + eps)
  end
  return flat(new_x, new_h)
end)
end
