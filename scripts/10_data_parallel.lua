-- 10_data_parallel.lua: Project 10. One model trained by several processes, each on its share
-- of every batch, their gradients averaged over MPI before each step (data parallelism, as
-- PyTorch's DistributedDataParallel).
--   mpirun --allow-run-as-root --oversubscribe -np 2 -x MG_THREADS=1 build/moongrad scripts/10_data_parallel.lua
--   build/moongrad scripts/10_data_parallel.lua        one process: the same run, unsplit
-- Options: --steps N (200), --bs N (the whole batch, split over the ranks; 128), --lr, --opt adam|sgd,
--   --dtype float32|float64 (the model's),
--   --seed, --save PATH (rank 0 writes the final weights),
--   --checkpoint PATH --every N: rank 0 saves the weights, the optimizer, the step and the random
--   state every N steps (written beside PATH and renamed: a kill leaves the last good one)
--   --resume: continue from PATH
--   --check-steps K (float32: 50, float64: every step; 0: none): rank 0 also trains the same model
--   in one process on the whole batches for K steps and checks its weights agree within 1e-5 with
--   the ranks' at step K. In float32 not at the end of a long run: rounding differs between the two
--   (a sum over 64 + 64 images is not one over 128), and training amplifies it once a ReLU or a
--   max-pool decides the other way (measured: 7.6e-7 after 50 steps, 1.8e-5 after 100, 0.06 after
--   200). --dtype float64 trains in float64, where the two agree to the end.
-- At the end the ranks compare their weights: they must be equal.
local lesson = require "lesson"
dist.init()
local rank, world = dist.rank, dist.world_size
local function say(...) if rank == 0 then print(...) end end
local function section(s) if rank == 0 then lesson.section(s) end end

local opts = { steps = 200, bs = 128, lr = 1e-3, opt = "adam", seed = 1, checkpoint = false, every = 50, resume = false,
  check_steps = false, save = false, dtype = "float32" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    k = k and k:gsub("-", "_")
    if k == "resume" then
      opts.resume, i = true, i + 1
    elseif k and opts[k] ~= nil and arg[i + 1] then
      opts[k], i = tonumber(arg[i + 1]) or arg[i + 1], i + 2
    else
      error("unknown argument " .. arg[i] ..
        " (--steps, --bs, --lr, --opt, --dtype, --seed, --save PATH, --checkpoint PATH, --every N, --resume, --check-steps K)")
    end
  end
end
if opts.dtype ~= "float32" and opts.dtype ~= "float64" then error("--dtype is float32 or float64") end
-- float32 drifts from one process after ~100 steps (above); float64 stays within 1e-5 to the end
opts.check_steps = opts.check_steps or (opts.dtype == "float64" and opts.steps or 50)
if opts.bs % world ~= 0 then error(("--bs %d does not split into %d ranks"):format(opts.bs, world)) end
if opts.resume and not opts.checkpoint then error("--resume needs --checkpoint PATH") end

section(("1. %d process%s, rank 0 of them speaking"):format(world, world == 1 and "" or "es"))
say(("each rank trains on %d of every %d images"):format(opts.bs // world, opts.bs))
local X, Y, Xt, Yt = datasets.mnist_digits()

section("2. The model: convolutions without batch norm")
-- no BatchNorm: its statistics over half a batch are not those over the whole one, so the ranks
-- would train another model than one process does (PyTorch needs SyncBatchNorm for that)
local function make_model()
  Tensor.manual_seed(opts.seed)
  local model = nn.Sequential {
    nn.Conv2d(1, 16, 5), Tensor.relu, Tensor.max_pool2d, -- 28 -> 24 -> 12
    nn.Conv2d(16, 32, 5), Tensor.relu, Tensor.max_pool2d, -- 12 -> 8 -> 4
    function(x) return x:flatten(1) end,
    nn.Linear(32 * 4 * 4, 10),
  }
  if opts.dtype == "float64" then
    for _, layer in ipairs(model) do
      if type(layer) == "table" then
        for _, k in ipairs({ "weight", "bias" }) do
          if layer[k] then layer[k] = layer[k]:cast("float64"):realize():requires_grad_() end
        end
      end
    end
  end
  return model
end

-- In float32 the convolutions go the direct way (WINO=0), not as Winograd (stdlib/winograd.lua):
-- its transforms round a sum over 64 + 64 images otherwise than one over 128, and Adam's first
-- step divides each gradient by its own size, so a near-zero gradient's rounding made a step of
-- 4e-5 (the check below failed after one step). float64 keeps Winograd and agrees to the end.
local wino = opts.dtype == "float64" and 1 or 0

-- steps first..last of training on share `part` of `parts` of each batch; sync() between the
-- backward pass and the step. Returns the last loss (averaged over the ranks by the caller).
local function train(model, opt, part, parts, sync, sample, first, last, on_step)
  local lo, hi = part * opts.bs // parts, (part + 1) * opts.bs // parts
  local loss
  for step = first, last do
    local xb, yb = sample(opts.bs)
    xb = xb[{ { lo, hi } }]
    if opts.dtype == "float64" then xb = xb:cast("float64") end
    loss = Context({ WINO = wino }, function() return model(xb) end):sparse_categorical_crossentropy(yb[{ { lo, hi } }])
    loss:backward()
    sync()
    opt:step(loss)
    if on_step then on_step(step, loss) end
  end
  return loss
end

-- A sampler that has drawn `n` batches already (the draws depend only on the seed and the count).
local function sampler_after(n)
  local sample = datasets.sampler(X, Y, opts.seed)
  for _ = 1, n do sample(opts.bs) end
  return sample
end

local model = make_model()
local ddp = dist.DataParallel(model)
local function make_opt(params)
  if opts.opt == "sgd" then return optim.SGD(params, { lr = opts.lr, momentum = 0.9 }) end
  return optim.Adam(params, { lr = opts.lr })
end
local opt = make_opt(ddp.params)
local start = 0
if opts.resume then
  local sd, meta = state.safe_load(opts.checkpoint)
  state.load_state_dict({ model = model, optimizer = opt }, sd)
  start = tonumber(meta.step)
  Tensor.set_rng_state(tonumber(meta.rng_seed), tonumber(meta.rng_counter))
  say(("resumed from %s at step %d"):format(opts.checkpoint, start))
end

local function save_checkpoint(step)
  if rank ~= 0 then return end
  local seed, counter = Tensor.get_rng_state()
  state.safe_save(state.get_state_dict({ model = model, optimizer = opt }), opts.checkpoint,
    { step = step, rng_seed = seed, rng_counter = counter })
end

section(("3. Training: steps %d to %d, Adam (lr %g), gradients averaged over the ranks"):format(start + 1, opts.steps, opts.lr))
local check_at = math.min(opts.check_steps, opts.steps)
local snapshot -- rank 0's weights after step check_at, for the single-process check
local bar = rank == 0 and datasets.progress(opts.steps - start, "train") or nil
local t0, avg = show.clock(), nil
local losses = {} -- the smoothed loss of each step, plotted by rank 0 below
train(model, opt, rank, world, ddp.sync, sampler_after(start), start + 1, opts.steps, function(step, loss)
  local l = dist.all_reduce(loss, { op = "mean" }):item()
  avg = avg and 0.9 * avg + 0.1 * l or l
  losses[#losses + 1] = avg
  if bar then bar:update(step - start, { loss = avg }) end
  if opts.checkpoint and step % opts.every == 0 then save_checkpoint(step) end
  if step == check_at and rank == 0 then
    snapshot = {}
    for k, t in pairs(state.get_state_dict(model)) do snapshot[k] = Tensor.frombytes(t:tobytes(), t.shape, t.dtype) end
  end
end)
if bar then bar:done() end
if rank == 0 then
  lesson.plot("line", nil, losses, { title = ("training loss (smoothed), %d process%s"):format(world, world == 1 and "" or "es"),
    xlabel = "step", ylabel = "loss" })
end
say(("%.1f s, %.1f ms a step; smoothed loss %.4f"):format(show.clock() - t0, (show.clock() - t0) * 1e3 / math.max(1, opts.steps - start), avg or 0))

section("4. Checks")
local worst = 0 -- the largest difference of a weight between two ranks
for _, p in ipairs(ddp.params) do
  local spread = dist.all_reduce(p, { op = "max" }) - dist.all_reduce(p, { op = "min" })
  worst = math.max(worst, spread:abs():max():item())
end
say(("weights on the %d ranks differ by at most %g"):format(world, worst))
assert(worst == 0, "the ranks' weights differ")

if check_at > 0 and rank == 0 then
  if not snapshot then
    print(("(no single-process check: this run resumed after step %d)"):format(check_at))
  else
    -- the same training in this one process, on whole batches, from the same start
    local ref = make_model()
    local ref_opt = make_opt(state.get_parameters(ref))
    train(ref, ref_opt, 0, 1, function() end, sampler_after(0), 1, check_at)
    local theirs, diff = state.get_state_dict(ref), 0
    for k, t in pairs(snapshot) do diff = math.max(diff, (t - theirs[k]):abs():max():item()) end
    print(("after %d steps, against one process trained on the whole batches: the weights differ by at most %.3g")
      :format(check_at, diff))
    assert(diff <= 1e-5, ("the data-parallel weights differ from one process's by %g (over 1e-5)"):format(diff))
  end
end
if opts.save and rank == 0 then state.safe_save(state.get_state_dict(model), opts.save) end
dist.barrier()

section("5. Test accuracy")
local correct = 0
for i = 0, Xt.shape[1] - 1, 1000 do
  local j = math.min(i + 1000, Xt.shape[1])
  correct = correct + model(Xt[{ { i, j } }]:cast(opts.dtype)):argmax(-1):eq(Yt[{ { i, j } }]):cast("int32"):sum():item()
end
say(("test accuracy: %.2f%%"):format(100 * correct / Xt.shape[1]))
say("\nAll checks passed.")
