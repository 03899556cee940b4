-- 04_mnist.lua: Project 4 of the guide. Train a CNN on real handwritten digits.
--   moongrad scripts/04_mnist.lua                  the 10,000 MNIST digits: 8,000 train / 2,000 test
--   moongrad scripts/04_mnist.lua --dataset fashion Fashion-MNIST (60,000 / 10,000)
--   moongrad scripts/04_mnist.lua --steps 200      a shorter run (CTest runs one, with a lower bar)
-- It prints the kernels one training step runs (what DEBUG=1 shows), trains with Adam and a
-- one-cycle learning rate, reports test accuracy, saves the model with state.safe_save,
-- reloads it into a fresh model, and checks the reloaded model scores the same.
local lesson = require "lesson"
local mnist = dofile((arg[0]:match("^(.*/)") or "") .. "mnist_model.lua")

local opts = { dataset = "digits", device = false, steps = 1000, bs = 128, lr = 3e-3, min_acc = false, max_loss = false, seed = 1 }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or opts[(k:gsub("-", "_"))] == nil then
      error("unknown argument " .. arg[i] .. " (--dataset digits|fashion, --device NAME, --steps, --bs, --lr, --min-acc, --max-loss, --seed)")
    end
    k = k:gsub("-", "_")
    opts[k] = tonumber(arg[i + 1]) or arg[i + 1]
    i = i + 2
  end
end
-- --device CL (or VULKAN, LLVM): the model, the data and the training run there
if opts.device then
  local names, why = Device.names()
  if why[opts.device:upper()] then
    print(("SKIPPED: %s cannot run here: %s"):format(opts.device, why[opts.device:upper()]))
    return
  end
  Device.DEFAULT = opts.device:upper()
end

Tensor.manual_seed(opts.seed)

lesson.section(("1. Data: %s"):format(opts.dataset == "fashion" and "Fashion-MNIST" or "MNIST digits"))
local X, Y, Xt, Yt
if opts.dataset == "fashion" then
  X, Y, Xt, Yt = datasets.fashion_mnist()
else
  X, Y, Xt, Yt = datasets.mnist_digits()
end
print(("train %s  test %s"):format(table.concat(X.shape, "x"), table.concat(Xt.shape, "x")))
lesson.plot("image", X[1], { title = ("the first training image (label %d)"):format(Y[1]:item()) })

lesson.section("2. The model: a small CNN (conv, relu, batchnorm, max-pool, linear)")
-- Two conv blocks then a linear classifier (scripts/mnist_model.lua)
local make_model = mnist.model
local model = make_model()
local params = state.get_parameters(model)
local count = 0
for _, p in ipairs(params) do count = count + p:numel() end
for i, layer in ipairs(model) do print(("  [%d] %s"):format(i, type(layer) == "function" and "function" or tostring(layer))) end
print(("%d parameter tensors, %d numbers"):format(#params, count))

-- Accuracy on a data set, in batches, with the running batchnorm statistics.
local function accuracy(m, Xs, Ys)
  local was = Tensor.training
  Tensor.training = false
  local correct, n = 0, Xs.shape[1]
  local bs = 1000
  for i = 0, n - 1, bs do
    local j = math.min(i + bs, n)
    local pred = m(Xs[{ { i, j } }]):argmax(-1)
    correct = correct + pred:eq(Ys[{ { i, j } }]):cast("int32"):sum():item()
  end
  Tensor.training = was
  return correct / n
end

lesson.section(("3. Training: %d steps of %d, Adam with a one-cycle learning rate (max %g)"):format(opts.steps, opts.bs,
  opts.lr))
local opt = optim.Adam(params, { lr = opts.lr })
local sched = optim.OneCycle(opt, opts.lr, opts.steps)
local sample = datasets.sampler(X, Y, opts.seed)

-- Jitted (scripts/mnist_model.lua). The learning-rate schedule runs outside it: it sets a
-- tensor the kernels read, and Lua code inside a jitted function runs only on the first calls.
local train_step = mnist.train_step(model, opt)

Tensor.training = true
local bar = datasets.progress(opts.steps, "train")
local t0, k_step = show.clock(), nil
local loss_first, loss_avg = nil, nil
local losses = {} -- the smoothed loss of each step, plotted below
for step = 1, opts.steps do
  sched.step()
  local xb, yb = sample(opts.bs)
  local k0 = GlobalCounters.kernel_count
  local loss = train_step(xb, yb):item()
  if step == 3 then k_step = GlobalCounters.kernel_count - k0 end -- a replayed step
  loss_first = loss_first or loss
  loss_avg = loss_avg and 0.95 * loss_avg + 0.05 * loss or loss
  losses[step] = loss_avg
  bar:update(step, { loss = loss_avg })
end
bar:done()
lesson.plot("line", nil, losses, { title = "MNIST training loss (smoothed)", xlabel = "step", ylabel = "loss", logy = true })
local train_s = show.clock() - t0
Tensor.training = false
print(("trained in %.1f s (%.3f s/step); loss %.4f -> %.4f (smoothed)"):format(train_s, train_s / opts.steps,
  loss_first, loss_avg))
if opts.max_loss then
  assert(loss_avg <= opts.max_loss, ("the smoothed training loss %.4f is above %.4f"):format(loss_avg, opts.max_loss))
  print(("(the smoothed loss is below %g, as this run requires)"):format(opts.max_loss))
end
if k_step then
  print(("one training step = %d kernels (forward, backward and the Adam update; DEBUG=1 prints the same count)")
    :format(k_step))
end

lesson.section("4. Test accuracy")
local acc = accuracy(model, Xt, Yt)
print(("test accuracy: %.2f%% on %d held-out images"):format(acc * 100, Xt.shape[1]))
local bar_acc = opts.min_acc or (opts.dataset == "digits" and opts.steps >= 1000 and 0.98 or nil)
if bar_acc then
  assert(acc >= bar_acc, ("test accuracy %.4f is below the %.4f this run must reach"):format(acc, bar_acc))
  print(("(at least %.1f%%, as this run requires)"):format(bar_acc * 100))
end

lesson.section("5. Save, reload into a fresh model, score again")
local path = os.tmpname() .. ".safetensors"
state.safe_save(state.get_state_dict(model), path)
local f = io.open(path, "rb")
local size = f:seek("end")
f:close()
print(("saved %d tensors to %s (%d bytes)"):format(#state.get_parameters(model), path, size))
local fresh = make_model()
state.load_state_dict(fresh, state.safe_load(path))
os.remove(path)
local acc2 = accuracy(fresh, Xt, Yt)
print(("reloaded model: %.2f%%"):format(acc2 * 100))
assert(acc2 == acc, ("the reloaded model scores %.4f, the trained one %.4f"):format(acc2, acc))
print("\nAll checks passed.")
