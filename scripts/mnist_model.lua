-- The CNN of 04_mnist.lua and its training step, shared with bench/mnist_step.lua so the
-- benchmark times exactly what the script trains.
local M = {}

-- Two conv blocks then a linear classifier, in the spirit of tinygrad's beautiful_mnist.
function M.model()
  return nn.Sequential {
    nn.Conv2d(1, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d, -- 28 -> 24 -> 12
    nn.Conv2d(32, 64, 5), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d, -- 12 -> 8 -> 4
    function(x) return x:flatten(1) end,
    nn.Linear(64 * 4 * 4, 10),
  }
end

-- One step: forward, loss, backward, optimizer update. Under TinyJit, after two ordinary
-- calls it replays the captured kernels (no graph building, no scheduling).
function M.train_step(model, opt)
  return TinyJit(function(x, y)
    local loss = model(x):sparse_categorical_crossentropy(y)
    loss:backward()
    opt:step(loss)
    return loss
  end)
end

return M
