-- Run by tests/dist_test.sh under `mpirun -np 2`: dist's collectives against values each rank
-- computes itself from the ranks' known inputs (rank r holds r + 1 + i at element i).
local H = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local test = H.test
dist.init()
local r, n = dist.rank, dist.world_size
assert(n >= 2, "run under mpirun -np 2 or more (world_size " .. n .. ")")

local function mine(len, dtype) return (Tensor.arange(len) + (r + 1)):cast(dtype or "float32") end
local function each_rank(len, f) -- f(rank, i) summed or combined over ranks by the caller
  local rows = {}
  for q = 0, n - 1 do
    rows[q + 1] = {}
    for i = 0, len - 1 do rows[q + 1][i + 1] = f(q, i) end
  end
  return rows
end

test("all_reduce: sum, mean, max and min of float32 and int32 over the ranks", function()
  local rows = each_rank(1000, function(q, i) return q + 1 + i end)
  local want = { sum = {}, max = {}, min = {} }
  for i = 1, 1000 do
    local s, mx, mn = 0, -math.huge, math.huge
    for q = 1, n do s, mx, mn = s + rows[q][i], math.max(mx, rows[q][i]), math.min(mn, rows[q][i]) end
    want.sum[i], want.max[i], want.min[i] = s, mx, mn
  end
  for _, dtype in ipairs({ "float32", "int32" }) do
    for _, op in ipairs({ "sum", "max", "min" }) do
      local got = dist.all_reduce(mine(1000, dtype), { op = op })
      assert(got.dtype == dtype and got.shape[1] == 1000, op .. " " .. dtype .. ": " .. got.dtype)
      H.same(got:tolist(), want[op], 0, op .. " " .. dtype)
    end
  end
  local mean = dist.all_reduce(mine(1000):reshape(10, 100), { op = "mean" })
  assert(mean.shape[1] == 10 and mean.shape[2] == 100)
  local flat = mean:flatten():tolist()
  for i = 1, 1000 do assert(math.abs(flat[i] - want.sum[i] / n) < 1e-4, "mean at " .. i) end
  -- the input is not changed, and a lazy input is realized first
  local t = mine(8)
  dist.all_reduce(t)
  H.same(t:tolist(), mine(8):tolist(), 0, "input after all_reduce")
  H.same(dist.all_reduce((mine(4) * 2):relu()):tolist(), dist.all_reduce(mine(4)):mul(2):tolist(), 1e-6, "lazy")
end)

test("broadcast: root's tensor on every rank, from rank 0 and from the last rank", function()
  for _, root in ipairs({ 0, n - 1 }) do
    local got = dist.broadcast(mine(16):reshape(4, 4), { root = root })
    local want = {}
    for i = 0, 15 do want[i + 1] = root + 1 + i end
    H.same(got:flatten():tolist(), want, 0, "root " .. root)
  end
  H.errors(function() dist.broadcast(mine(4), { root = n }) end, "root " .. n .. " is not a rank")
end)

test("a shape or dtype that differs between ranks is an error on every rank, naming each", function()
  local shape = r == 0 and { 3, 4 } or { 4, 4 }
  local msg = H.errors(function() dist.all_reduce(Tensor.ones(shape)) end, "rank 0 (3, 4) float32", "rank 1 (4, 4) float32")
  H.errors(function() dist.all_reduce(Tensor.ones(4, { dtype = r == 0 and "float32" or "int32" })) end, "differ")
  -- and the ranks go on working afterwards
  H.same(dist.all_reduce(Tensor.ones(2)):tolist(), { n, n }, 0, "after the error")
  assert(msg)
end)

test("average_gradients: each gradient becomes the mean over the ranks, in one bucket", function()
  local a, b = Tensor.zeros(3, 2), Tensor.zeros(5)
  a.grad, b.grad = mine(6):reshape(3, 2), mine(5) * 10
  dist.average_gradients({ a, b })
  local ga, gb = a.grad:flatten():tolist(), b.grad:tolist()
  for i = 0, 5 do assert(math.abs(ga[i + 1] - (i + (n + 1) / 2)) < 1e-5, "a at " .. i) end
  for i = 0, 4 do assert(math.abs(gb[i + 1] - 10 * (i + (n + 1) / 2)) < 1e-4, "b at " .. i) end
  assert(a.grad.shape[1] == 3 and a.grad.shape[2] == 2)
end)

test("DataParallel starts every rank from rank 0's parameters", function()
  Tensor.manual_seed(100 + r) -- a different initialization on each rank
  local model = nn.Linear(4, 3)
  local ddp = dist.DataParallel(model)
  local w = model.weight:flatten()
  local biggest = dist.all_reduce(w, { op = "max" }) - dist.all_reduce(w, { op = "min" })
  assert(biggest:abs():max():item() == 0, "parameters differ between ranks")
  assert(ddp(Tensor.ones(2, 4)).shape[2] == 3)
end)

test("TinyJit replays a data-parallel step, all-reduce included", function()
  -- rank r's data differ, so each step's weights follow only if every replay all-reduces anew
  local function run(jit)
    Tensor.manual_seed(7)
    local model = nn.Linear(3, 2)
    local ddp = dist.DataParallel(model)
    local opt = optim.SGD(ddp.params, { lr = 0.1 })
    local function step(x)
      local loss = (ddp(x) ^ 2):mean()
      loss:backward()
      ddp:sync()
      opt:step(loss)
      return loss
    end
    local f = jit and TinyJit(step) or step
    local losses = {}
    for i = 1, 5 do
      local x = (Tensor.arange(12):reshape(4, 3):cast("float32") * 0.1 + (r + 1) * i):realize()
      losses[i] = f(x):item()
    end
    return losses, model.weight:flatten():tolist(), f
  end
  local plain_loss, plain_w = run(false)
  local jit_loss, jit_w, f = run(true)
  H.same(jit_loss, plain_loss, 1e-5, "losses")
  H.same(jit_w, plain_w, 1e-6, "weights")
  local w = Tensor(jit_w)
  assert((dist.all_reduce(w, { op = "max" }) - dist.all_reduce(w, { op = "min" })):abs():max():item() == 0,
    "weights differ between ranks")
  -- the capture holds the all-reduce as a step of its own among the kernels
  local log = show.kernel_log(function() f((Tensor.ones(4, 3) * (r + 1)):realize()) end)
  local names = {}
  for _, k in ipairs(log) do if k.device == "host" then names[#names + 1] = k.name end end
  assert(#names == 1 and names[1] == "MPI_Allreduce sum", "host steps in the replay: " .. table.concat(names, ", "))
end)

dist.barrier()
H.done()
