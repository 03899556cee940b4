-- Memory held by tensors comes back without the user calling collectgarbage(): a plain loop that
-- realizes a new tensor every time keeps its device memory flat (interp/lua_state.cpp's
-- allocation hook collects dropped tensors when fresh memory is taken).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

H.test("10,000 realizes of a new 1 MiB tensor keep device memory flat", function()
  local n = 256 * 1024
  local a, b = Tensor.rand(n):realize(), Tensor.rand(n):realize()
  local function step() return (((a + 1) * 2):relu() - b * 0.5):realize() end
  for _ = 1, 1000 do step() end
  local after_1000 = GlobalCounters.mem_used
  local last
  for _ = 1, 9000 do last = step() end
  local after_10000 = GlobalCounters.mem_used
  -- the result is still right (against a plain-Lua computation of a few elements)
  local av, bv, rv = a:tolist(), b:tolist(), last:tolist()
  for i = 1, n, 4099 do
    local want = math.max((av[i] + 1) * 2, 0) - bv[i] * 0.5
    assert(math.abs(rv[i] - want) < 1e-5, ("element %d: %g, expected %g"):format(i, rv[i], want))
  end
  -- flat: the last 9,000 iterations (9 GiB of results) took at most a few buffers more
  assert(after_10000 - after_1000 <= 32 * 1024 * 1024,
    ("device memory grew by %d MiB over 9,000 iterations"):format((after_10000 - after_1000) >> 20))
  assert(after_10000 < 128 * 1024 * 1024, ("device memory is %d MiB"):format(after_10000 >> 20))
end)

H.test("a training loop that reads its loss every step keeps device memory flat", function()
  -- each loss keeps its graph for backward (REALIZED) until it is dropped: the graphs, the
  -- batches they read and the activations cached on them must come back as losses are replaced
  Tensor.manual_seed(1)
  local w1, w2 = Tensor.randn(256, 256):realize(), Tensor.randn(256, 1):realize()
  local opt = optim.SGD({ w1, w2 }, { lr = 1e-4 })
  local function step()
    local x = Tensor.rand(64, 256):realize()
    local loss = ((x:matmul(w1):relu():matmul(w2)) ^ 2):mean()
    assert(loss:item() == loss:item())
    loss:backward()
    opt:step()
    return loss
  end
  for _ = 1, 50 do step() end
  local after_50 = GlobalCounters.mem_used
  for _ = 1, 450 do step() end
  local after_500 = GlobalCounters.mem_used
  assert(after_500 - after_50 <= 8 * 1024 * 1024,
    ("device memory grew by %.1f MiB over 450 steps"):format((after_500 - after_50) / 2 ^ 20))
end)

H.done()
