-- The ONNX recurrent nets: RNN, GRU, LSTM. Each is unrolled over the time steps (a Lua loop that
-- builds one step's Tensor ops after the other), so a sequence of T steps makes a graph T steps
-- long. Registered into onnx.ops by stdlib/onnx.lua through `op`.
return function(op, U)

-- The activations an RNN's `activations` attribute names (ONNX spells them in CamelCase; the
-- names are compared without case, as onnxruntime does), with how many of activation_alpha and
-- activation_beta each one takes and their defaults.
local ACTS = {
  relu = { 0, 0, function(x) return x:relu() end },
  tanh = { 0, 0, function(x) return x:tanh() end },
  sigmoid = { 0, 0, function(x) return x:sigmoid() end },
  softsign = { 0, 0, function(x) return x:softsign() end },
  softplus = { 0, 0, function(x) return (x:exp() + 1):log() end },
  affine = { 1, 1, function(x, a, b) return x * a + b end, 1.0, 0.0 },
  leakyrelu = { 1, 0, function(x, a) return x:leaky_relu(a) end, 0.01 },
  thresholdedrelu = { 1, 0, function(x, a) return x:gt(a):where(x, 0):cast(x.dtype) end, 1.0 },
  scaledtanh = { 1, 1, function(x, a, b) return (x * b):tanh() * a end, 1.0, 1.0 },
  hardsigmoid = { 1, 1, function(x, a, b) return (x * a + b):clamp(0, 1) end, 0.2, 0.5 },
  elu = { 1, 0, function(x, a) return x:elu(a) end, 1.0 },
}

-- The activation functions of each direction: `defaults` is the per-direction list when the
-- attribute is absent; alphas and betas are taken in order by the activations that use them.
local function activations(node, at, defaults, dirs)
  local names = at.activations
  if names == nil then
    names = {}
    for _ = 1, dirs do for _, n in ipairs(defaults) do names[#names + 1] = n end end
  end
  if #names ~= #defaults * dirs then
    error(("onnx: %s: %d activations given, %d wanted (%d per direction)"):format(node.op, #names,
      #defaults * dirs, #defaults), 0)
  end
  local alphas, betas, ai, bi = at.activation_alpha or {}, at.activation_beta or {}, 1, 1
  local per_dir = {}
  for k, name in ipairs(names) do
    local a = ACTS[name:lower()]
    if a == nil then error(("onnx: %s: activation %s is not supported"):format(node.op, name), 0) end
    local alpha, beta = a[4], a[5]
    if a[1] > 0 then alpha = alphas[ai] or alpha; ai = ai + 1 end
    if a[2] > 0 then beta = betas[bi] or beta; bi = bi + 1 end
    local d = (k - 1) // #defaults + 1
    per_dir[d] = per_dir[d] or {}
    local fn = a[3]
    per_dir[d][#per_dir[d] + 1] = function(x) return fn(x, alpha, beta) end
  end
  return per_dir
end

-- The shared frame of the three ops. `step(state, xw_t, d)` takes the state (a list: h, or h and
-- c) and the step's input already multiplied by W (plus W's bias), and returns the new state.
-- Inputs: X, W, R, B, sequence_lens, initial_h, and for LSTM initial_c, P.
-- Layout 0: X is (seq, batch, input), Y (seq, dirs, batch, hidden), Y_h (dirs, batch, hidden);
-- layout 1 puts batch first in all three.
local function recurrent(node, x, at, gates, default_acts, make_step)
  local X, W, R, B, lens = x[1], x[2], x[3], x[4], x[5]
  local inits = { x[6], x[7] }
  local layout = at.layout or 0
  if layout == 1 then
    X = X:transpose(0, 1)
    for i = 1, 2 do if inits[i] then inits[i] = inits[i]:transpose(0, 1) end end
  end
  local direction = at.direction or "forward"
  if direction ~= "forward" and direction ~= "reverse" and direction ~= "bidirectional" then
    error(("onnx: %s: direction %s is not supported"):format(node.op, direction), 0)
  end
  local dirs = direction == "bidirectional" and 2 or 1
  local T, batch = X.shape[1], X.shape[2]
  local H = at.hidden_size or R.shape[3]
  local acts = activations(node, at, default_acts, dirs)
  local clip = at.clip
  local nstate = node.op == "LSTM" and 2 or 1
  -- a row whose sequence has ended keeps its state and outputs zeros
  local lens_col = lens and lens:cast("int64"):reshape(batch, 1)

  local ys, finals = {}, {}
  for d = 1, dirs do
    local Wd, Rd = W[{ d - 1 }], R[{ d - 1 }]
    local Bd = B and B[{ d - 1 }] or Tensor.zeros({ 2 * gates * H }, { dtype = X.dtype })
    local wb, rb = Bd:split(gates * H, 0)[1], Bd:split(gates * H, 0)[2]
    local xw = X:matmul(Wd:transpose(0, 1)) + wb -- (T, batch, gates*H), all steps at once
    local state = {}
    for i = 1, nstate do
      state[i] = inits[i] and inits[i][{ d - 1 }] or Tensor.zeros({ batch, H }, { dtype = X.dtype })
    end
    local step = make_step(acts[d], Rd, rb, H, clip, x[8] and x[8][{ d - 1 }], at)
    local backward = direction == "reverse" or d == 2
    local out = {}
    for k = 0, T - 1 do
      local t = backward and T - 1 - k or k
      local new = step(state, xw[{ t }])
      if lens_col then
        local live = lens_col:gt(t)
        for i = 1, nstate do new[i] = live:where(new[i], state[i]):cast(X.dtype) end
        out[t + 1] = live:where(new[1], 0):cast(X.dtype)
      else
        out[t + 1] = new[1]
      end
      state = new
    end
    ys[d] = Tensor.stack(out, 0) -- (T, batch, H)
    finals[d] = state
  end
  local Y = Tensor.stack(ys, 1) -- (T, dirs, batch, H)
  local Y_h = Tensor.stack({ finals[1][1], finals[2] and finals[2][1] }, 0)
  local Y_c = nstate == 2 and Tensor.stack({ finals[1][2], finals[2] and finals[2][2] }, 0) or nil
  if layout == 1 then
    Y = Y:permute(2, 0, 1, 3)
    Y_h = Y_h:transpose(0, 1)
    if Y_c then Y_c = Y_c:transpose(0, 1) end
  end
  return Y, Y_h, Y_c
end

-- clip bounds an activation's input, when given
local function clipped(v, clip) return clip and v:clamp(-clip, clip) or v end

-- RNN: h = f(x W^T + h R^T + Wb + Rb)
op("RNN", 7, function(node, x, at)
  return recurrent(node, x, at, 1, { "Tanh" }, function(act, R, rb, _, clip)
    local f, RT = act[1], R:transpose(0, 1)
    return function(s, xw) return { f(clipped(xw + s[1]:matmul(RT) + rb, clip)) } end
  end)
end)

-- GRU, gates z (update), r (reset), h (hidden) in that order in W, R and B:
--   z = f(x Wz + h Rz + biases), r = f(x Wr + h Rr + biases)
--   n = g(x Wh + (r * h) Rh + Rbh), or with linear_before_reset g(x Wh + r * (h Rh + Rbh))
--   h' = (1 - z) * n + z * h
op("GRU", 7, function(node, x, at)
  return recurrent(node, x, at, 3, { "Sigmoid", "Tanh" }, function(act, R, rb, H, clip, _, at_)
    local f, g = act[1], act[2]
    local Rs, rbs = R:split(H, 0), rb:split(H, 0)
    local RzrT = Rs[1]:cat(Rs[2], { dim = 0 }):transpose(0, 1)
    local rb_zr = rbs[1]:cat(rbs[2], { dim = 0 })
    local RhT, rbh = Rs[3]:transpose(0, 1), rbs[3]
    local linear = at_.linear_before_reset == 1
    return function(s, xw)
      local h = s[1]
      local xs = xw:split(H, 1)
      local zr = (xw:split(2 * H, 1)[1] + h:matmul(RzrT) + rb_zr):split(H, 1)
      local z, r = f(clipped(zr[1], clip)), f(clipped(zr[2], clip))
      local n
      if linear then n = g(clipped(xs[3] + r * (h:matmul(RhT) + rbh), clip))
      else n = g(clipped(xs[3] + (r * h):matmul(RhT) + rbh, clip)) end
      return { (1 - z) * n + z * h }
    end
  end)
end)

-- LSTM, gates i (input), o (output), f (forget), c (cell) in that order in W, R and B; the
-- peepholes P hold i, o, f:
--   i = f(x Wi + h Ri + Pi * c + biases), f = f(x Wf + h Rf + Pf * c + biases)
--   c' = f * c + i * g(x Wc + h Rc + biases), o = f(x Wo + h Ro + Po * c' + biases)
--   h' = o * h(c')
-- input_forget = 1 couples the forget gate to the input gate: f = 1 - i.
op("LSTM", 7, function(node, x, at)
  return recurrent(node, x, at, 4, { "Sigmoid", "Tanh", "Tanh" }, function(act, R, rb, H, clip, P, at_)
    local f, g, hfn = act[1], act[2], act[3]
    local RT = R:transpose(0, 1)
    local Pi, Po, Pf
    if P then
      local ps = P:split(H, 0)
      Pi, Po, Pf = ps[1], ps[2], ps[3]
    end
    local couple = at_.input_forget == 1
    return function(s, xw)
      local h, c = s[1], s[2]
      local gs = (xw + h:matmul(RT) + rb):split(H, 1)
      local gi, go, gf, gc = gs[1], gs[2], gs[3], gs[4]
      if P then gi, gf = gi + Pi * c, gf + Pf * c end
      local i = f(clipped(gi, clip))
      local fg = couple and 1 - i or f(clipped(gf, clip))
      local c2 = fg * c + i * g(clipped(gc, clip))
      if P then go = go + Po * c2 end
      local o = f(clipped(go, clip))
      return { o * hfn(c2), c2 }
    end
  end)
end)
end
