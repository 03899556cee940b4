-- nn layers against plain-Lua reference loops, and optimizers against updates computed by
-- hand from their published formulas.
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
Tensor.manual_seed(3)

local function zeros(...)
  local dims = { ... }
  local function make(d)
    if d > #dims then return 0 end
    local t = {}
    for i = 1, dims[d] do t[i] = make(d + 1) end
    return t
  end
  return make(1)
end

-- ---------------------------------------------------------------- layers

test("Linear: x @ W.T + b", function()
  local l = nn.Linear(3, 2)
  local x = Tensor.randn(4, 3)
  local W, b, xl = l.weight:tolist(), l.bias:tolist(), x:tolist()
  local want = zeros(4, 2)
  for i = 1, 4 do
    for o = 1, 2 do
      local s = b[o]
      for k = 1, 3 do s = s + xl[i][k] * W[o][k] end
      want[i][o] = s
    end
  end
  H.same(l(x):tolist(), want, 1e-5)
  local bound = 1 / math.sqrt(3)
  for _, row in ipairs(W) do for _, v in ipairs(row) do assert(math.abs(v) <= bound, "init outside +-1/sqrt(fan_in)") end end
end)

-- out[n][o][y][x] = b[o] + sum over c, ky, kx of in[n][g*cin+c][y*s - p + ky*d][x*s - p + kx*d] * w[o][c][ky][kx]
local function conv_ref(xl, wl, bl, s, p, d, groups)
  local N, C, Hh, W = #xl, #xl[1], #xl[1][1], #xl[1][1][1]
  local O, cin, K1, K2 = #wl, #wl[1], #wl[1][1], #wl[1][1][1]
  local oh = (Hh + 2 * p - d * (K1 - 1) - 1) // s + 1
  local ow = (W + 2 * p - d * (K2 - 1) - 1) // s + 1
  local out = zeros(N, O, oh, ow)
  local per = O // groups
  for n = 1, N do
    for o = 1, O do
      local g = (o - 1) // per
      for y = 1, oh do
        for x = 1, ow do
          local acc = bl and bl[o] or 0
          for c = 1, cin do
            for ky = 1, K1 do
              for kx = 1, K2 do
                local iy, ix = (y - 1) * s - p + (ky - 1) * d + 1, (x - 1) * s - p + (kx - 1) * d + 1
                if iy >= 1 and iy <= Hh and ix >= 1 and ix <= W then
                  acc = acc + xl[n][g * cin + c][iy][ix] * wl[o][c][ky][kx]
                end
              end
            end
          end
          out[n][o][y][x] = acc
        end
      end
    end
  end
  return out
end

test("Conv2d: stride 2, padding 1, bias", function()
  local c = nn.Conv2d(3, 4, 3, { stride = 2, padding = 1 })
  local x = Tensor.randn(2, 3, 7, 6)
  H.same(c(x):tolist(), conv_ref(x:tolist(), c.weight:tolist(), c.bias:tolist(), 2, 1, 1, 1), 1e-4)
end)

test("Conv2d: groups 2, dilation 2, no bias", function()
  local c = nn.Conv2d(4, 6, 3, { groups = 2, dilation = 2, bias = false })
  local x = Tensor.randn(1, 4, 7, 7)
  assert(c.bias == nil)
  H.same(c(x):tolist(), conv_ref(x:tolist(), c.weight:tolist(), nil, 1, 0, 2, 2), 1e-4)
end)

test("ConvTranspose2d: stride 2, padding 1, output_padding 1", function()
  local c = nn.ConvTranspose2d(2, 3, 3, { stride = 2, padding = 1, output_padding = 1 })
  local x = Tensor.randn(1, 2, 4, 3)
  local xl, wl, bl = x:tolist(), c.weight:tolist(), c.bias:tolist()
  local s, p = 2, 1
  local oh, ow = (4 - 1) * s - 2 * p + 3 + 1, (3 - 1) * s - 2 * p + 3 + 1
  local want = zeros(1, 3, oh, ow)
  for o = 1, 3 do for y = 1, oh do for xx = 1, ow do want[1][o][y][xx] = bl[o] end end end
  -- scatter: in[ci][y][x] * w[ci][o][ky][kx] lands on out[o][y*s - p + ky][x*s - p + kx]
  for ci = 1, 2 do
    for y = 1, 4 do
      for xx = 1, 3 do
        for o = 1, 3 do
          for ky = 1, 3 do
            for kx = 1, 3 do
              local oy, ox = (y - 1) * s - p + ky, (xx - 1) * s - p + kx
              if oy >= 1 and oy <= oh and ox >= 1 and ox <= ow then
                want[1][o][oy][ox] = want[1][o][oy][ox] + xl[1][ci][y][xx] * wl[ci][o][ky][kx]
              end
            end
          end
        end
      end
    end
  end
  H.same(c(x):tolist(), want, 1e-4)
end)

test("max_pool2d and avg_pool2d", function()
  local x = Tensor.randn(1, 2, 5, 5)
  local xl = x:tolist()
  local mx, av = zeros(1, 2, 2, 2), zeros(1, 2, 4, 4)
  for c = 1, 2 do
    for y = 1, 2 do for xx = 1, 2 do
      local m = -math.huge
      for a = 0, 1 do for b = 0, 1 do m = math.max(m, xl[1][c][2 * y - 1 + a][2 * xx - 1 + b]) end end
      mx[1][c][y][xx] = m
    end end
    for y = 1, 4 do for xx = 1, 4 do
      local s = 0
      for a = 0, 1 do for b = 0, 1 do s = s + xl[1][c][y + a][xx + b] end end
      av[1][c][y][xx] = s / 4
    end end
  end
  H.same(x:max_pool2d(2):tolist(), mx, 1e-6)
  H.same(x:avg_pool2d(2, { stride = 1 }):tolist(), av, 1e-5)
end)

test("BatchNorm: batch statistics in training, running statistics in eval", function()
  local bn = nn.BatchNorm(2, { momentum = 0.1 })
  local x = Tensor.randn(3, 2, 2, 2) * 2 + 1
  local xl = x:tolist()
  local mean, var = {}, {}
  for c = 1, 2 do
    local s, n = 0, 0
    for i = 1, 3 do for y = 1, 2 do for xx = 1, 2 do s, n = s + xl[i][c][y][xx], n + 1 end end end
    mean[c] = s / n
    local v = 0
    for i = 1, 3 do for y = 1, 2 do for xx = 1, 2 do v = v + (xl[i][c][y][xx] - mean[c]) ^ 2 end end end
    var[c] = v / n -- biased, for normalizing
  end
  Tensor.training = true
  local y = bn(x)
  local want = zeros(3, 2, 2, 2)
  for i = 1, 3 do for c = 1, 2 do for a = 1, 2 do for b = 1, 2 do
    want[i][c][a][b] = (xl[i][c][a][b] - mean[c]) / math.sqrt(var[c] + 1e-5)
  end end end end
  H.same(y:tolist(), want, 1e-4)
  Tensor.realize_all(nn.take_pending())
  local n = 12
  H.same(bn.running_mean:tolist(), { 0.1 * mean[1], 0.1 * mean[2] }, 1e-5)
  H.same(bn.running_var:tolist(), { 0.9 + 0.1 * var[1] * n / (n - 1), 0.9 + 0.1 * var[2] * n / (n - 1) }, 1e-5)
  Tensor.training = false
  local rm, rv = bn.running_mean:tolist(), bn.running_var:tolist()
  local ye = bn(x):tolist()
  for i = 1, 3 do for c = 1, 2 do
    local got, w = ye[i][c][1][1], (xl[i][c][1][1] - rm[c]) / math.sqrt(rv[c] + 1e-5)
    assert(math.abs(got - w) < 1e-4, ("eval batchnorm %g, expected %g"):format(got, w))
  end end
end)

test("LayerNorm, GroupNorm, RMSNorm, Embedding", function()
  local x = Tensor.randn(2, 4)
  local xl = x:tolist()
  local ln, rms = {}, {}
  for i = 1, 2 do
    local m, v, q = 0, 0, 0
    for j = 1, 4 do m = m + xl[i][j] / 4 end
    for j = 1, 4 do v = v + (xl[i][j] - m) ^ 2 / 4; q = q + xl[i][j] ^ 2 / 4 end
    ln[i], rms[i] = {}, {}
    for j = 1, 4 do
      ln[i][j] = (xl[i][j] - m) / math.sqrt(v + 1e-5)
      rms[i][j] = xl[i][j] / math.sqrt(q + 1e-6)
    end
  end
  H.same(nn.LayerNorm(4)(x):tolist(), ln, 1e-4)
  H.same(nn.RMSNorm(4)(x):tolist(), rms, 1e-4)
  -- GroupNorm with 2 groups of 2 channels on (2, 4) == LayerNorm over each pair
  local g = nn.GroupNorm(2, 4)(x):tolist()
  for i = 1, 2 do
    for grp = 0, 1 do
      local a, b = xl[i][2 * grp + 1], xl[i][2 * grp + 2]
      local m = (a + b) / 2
      local sd = math.sqrt(((a - m) ^ 2 + (b - m) ^ 2) / 2 + 1e-5)
      assert(math.abs(g[i][2 * grp + 1] - (a - m) / sd) < 1e-4)
    end
  end
  local e = nn.Embedding(5, 3)
  local W = e.weight:tolist()
  H.same(e(Tensor { { 4, 0 }, { 2, 2 } }):tolist(), { { W[5], W[1] }, { W[3], W[3] } }, 1e-6)
end)

test("state dicts: names, shapes, mismatches are clear errors", function()
  local m = { fc = nn.Linear(3, 2), blocks = { nn.Linear(2, 2) } }
  local sd = state.get_state_dict(m)
  local names = {}
  for k in pairs(sd) do names[#names + 1] = k end
  table.sort(names)
  H.same(names, { "blocks.1.bias", "blocks.1.weight", "fc.bias", "fc.weight" })
  assert(#state.get_parameters(m) == 4)
  local other = { fc = nn.Linear(3, 2), blocks = { nn.Linear(2, 2) } }
  state.load_state_dict(other, sd)
  H.same(other.fc.weight:tolist(), m.fc.weight:tolist())
  H.errors(function() state.load_state_dict({ fc = nn.Linear(4, 2), blocks = m.blocks }, sd) end,
    "fc.weight", "shape (2, 4)", "(2, 3)")
  H.errors(function() state.load_state_dict({ fc = m.fc }, sd) end, "'blocks.1.", "which the model does not")
  H.errors(function() state.load_state_dict(m, { ["fc.weight"] = Tensor.zeros(2, 3, { dtype = "float16" }) }, false) end,
    "float32 in the model but float16")
end)

test("dropout: identity in eval, zeroes about p and rescales in training", function()
  local x = Tensor.ones(20000)
  Tensor.training = false
  H.same(x:dropout(0.3):sum():item(), 20000.0)
  Tensor.training = true
  local d = x:dropout(0.3):tolist()
  Tensor.training = false
  local zeros, kept = 0, 0
  for _, v in ipairs(d) do
    if v == 0 then zeros = zeros + 1 else kept = kept + 1; assert(math.abs(v - 1 / 0.7) < 1e-5, "kept values scale by 1/(1-p)") end
  end
  assert(math.abs(zeros / 20000 - 0.3) < 0.02, ("dropped %.3f, expected about 0.3"):format(zeros / 20000))
end)

-- ---------------------------------------------------------------- optimizers

-- One parameter p with a fixed gradient g each step (loss = sum(p * g)).
local function run_opt(make, steps)
  local p = Tensor { 1.0, -2.0, 0.5 }
  p.requires_grad = true
  local g = Tensor { 0.3, -0.1, 2.0 }
  local opt = make({ p })
  local out = {}
  for s = 1, steps do
    (p * g):sum():backward()
    opt:step()
    out[s] = p:tolist()
  end
  return out
end

local P0, G = { 1.0, -2.0, 0.5 }, { 0.3, -0.1, 2.0 }

test("SGD with momentum, nesterov and weight decay", function()
  local lr, mom, wd = 0.1, 0.9, 0.01
  local got = run_opt(function(ps) return optim.SGD(ps, { lr = lr, momentum = mom, nesterov = true, weight_decay = wd }) end, 3)
  local p, b = { table.unpack(P0) }, { 0, 0, 0 }
  for s = 1, 3 do
    for i = 1, 3 do
      local g = G[i] + wd * p[i]
      b[i] = mom * b[i] + g
      p[i] = p[i] - lr * (g + mom * b[i])
    end
    H.same(got[s], p, 1e-5, "step " .. s)
  end
  local plain = run_opt(function(ps) return optim.SGD(ps, { lr = 0.5 }) end, 1)
  H.same(plain[1], { 1.0 - 0.15, -2.0 + 0.05, 0.5 - 1.0 }, 1e-6)
end)

local function adam_ref(lr, b1, b2, eps, wd, steps, lamb)
  local p, m, v = { table.unpack(P0) }, { 0, 0, 0 }, { 0, 0, 0 }
  local out = {}
  for t = 1, steps do
    local up = {}
    for i = 1, 3 do
      m[i] = b1 * m[i] + (1 - b1) * G[i]
      v[i] = b2 * v[i] + (1 - b2) * G[i] ^ 2
      local mh, vh = m[i] / (1 - b1 ^ t), v[i] / (1 - b2 ^ t)
      up[i] = mh / (math.sqrt(vh) + eps) + wd * p[i]
    end
    local r = 1
    if lamb then
      local r1, r2 = 0, 0
      for i = 1, 3 do r1, r2 = r1 + p[i] ^ 2, r2 + up[i] ^ 2 end
      r1, r2 = math.sqrt(r1), math.sqrt(r2)
      r = (r1 > 0 and r2 > 0) and r1 / r2 or 1
    end
    for i = 1, 3 do p[i] = p[i] - lr * r * up[i] end
    out[t] = { table.unpack(p) }
  end
  return out
end

test("Adam, AdamW and LAMB: three steps", function()
  local cases = {
    { "Adam", function(ps) return optim.Adam(ps, { lr = 0.01 }) end, adam_ref(0.01, 0.9, 0.999, 1e-8, 0, 3) },
    { "AdamW", function(ps) return optim.AdamW(ps, { lr = 0.01, weight_decay = 0.1 }) end, adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, 3) },
    { "LAMB", function(ps) return optim.LAMB(ps, { lr = 0.01, weight_decay = 0.05 }) end, adam_ref(0.01, 0.9, 0.999, 1e-6, 0.05, 3, true) },
  }
  for _, c in ipairs(cases) do
    local got = run_opt(c[2], 3)
    for s = 1, 3 do H.same(got[s], c[3][s], 1e-5, c[1] .. " step " .. s) end
  end
end)

test("OptimizerGroup: each member's own update (AdamW with and without decay), one step", function()
  local p, q = Tensor { 1.0, -2.0, 0.5 }, Tensor { 1.0, -2.0, 0.5 }
  p.requires_grad, q.requires_grad = true, true
  local g = Tensor { 0.3, -0.1, 2.0 }
  local opt = optim.OptimizerGroup(optim.AdamW({ p }, { lr = 0.01, weight_decay = 0.1 }),
    optim.AdamW({ q }, { lr = 0.01, weight_decay = 0 }))
  assert(opt[1].wd == 0.1 and opt[2].wd == 0 and #opt.params == 2)
  local wp, wq = adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, 3), adam_ref(0.01, 0.9, 0.999, 1e-8, 0, 3)
  for s = 1, 3 do
    ((p * g):sum() + (q * g):sum()):backward()
    opt:step()
    H.same(p:tolist(), wp[s], 1e-5, "decayed, step " .. s)
    H.same(q:tolist(), wq[s], 1e-5, "not decayed, step " .. s)
  end
  opt:set_lr(0.003)
  assert(math.abs(opt[1]:get_lr() - 0.003) < 1e-9 and math.abs(opt[2]:get_lr() - 0.003) < 1e-9)
  H.errors(function() opt:step() end, "no parameter has a gradient")
end)

test("clip_grad_norm: every gradient scaled by max_norm / the global norm, none when below", function()
  local a, b = Tensor { { 3.0, 0.0 }, { 0.0, 4.0 } }, Tensor { 12.0 }
  a.requires_grad, b.requires_grad = true, true
  ((a * a):sum() / 2 + (b * b):sum() / 2):backward() -- grads = the values: norm sqrt(9+16+144) = 13
  local norm = optim.clip_grad_norm({ a, b }, 1.0)
  H.same(norm:item(), 13.0, 1e-5)
  local s = 1 / (13 + 1e-6)
  H.same(a.grad:tolist(), { { 3 * s, 0 }, { 0, 4 * s } }, 1e-6)
  H.same(b.grad:tolist(), { 12 * s }, 1e-6)
  a.grad, b.grad = nil, nil;
  ((a * a):sum() / 2 + (b * b):sum() / 2):backward()
  optim.clip_grad_norm({ a, b }, 100.0)
  H.same(b.grad:tolist(), { 12.0 }, 1e-6)
  H.errors(function() optim.clip_grad_norm({ Tensor { 1.0 } }, 1.0) end, "no parameter has a gradient")
end)

test("the learning rate is a tensor: changing it compiles no new kernels", function()
  local p = Tensor { 1.0, 2.0 }
  p.requires_grad = true
  local opt = optim.SGD({ p }, { lr = 0.1 });
  (p * p):sum():backward()
  opt:step()
  local c0 = GlobalCounters.kernels_compiled
  opt:set_lr(0.05);
  (p * p):sum():backward()
  opt:step()
  assert(GlobalCounters.kernels_compiled == c0, "a new learning rate compiled kernels")
  assert(math.abs(opt:get_lr() - 0.05) < 1e-7)
  H.errors(function() optim.SGD({ p }):step() end, "no parameter has a gradient")
end)

test("OneCycle: warm up to max_lr, anneal to max_lr / final_div", function()
  local p = Tensor { 1.0 }
  local s = optim.OneCycle(optim.Adam({ p }), 0.01, 100, { pct_start = 0.25, div = 25, final_div = 1e4 })
  assert(math.abs(s.lr_at(0) - 0.01 / 25) < 1e-12)
  assert(math.abs(s.lr_at(25) - 0.01) < 1e-12)
  assert(math.abs(s.lr_at(100) - 0.01 / 1e4) < 1e-12)
  assert(s.lr_at(10) < s.lr_at(20) and s.lr_at(60) > s.lr_at(90))
end)

H.done()
