-- dist: several processes training one model, over MPI (Debian's Open MPI), as PyTorch's
-- torch.distributed does over its backends. Started by `mpirun -np 2 build/moongrad script.lua`,
-- each process is a rank; collectives take a tensor on every rank and return the combined one.
-- Without mpirun there is one rank and every collective returns its input: a script runs the same
-- either way. The MPI half is a C module (interp/mgdist.cpp, mgdist.so beside the executable),
-- loaded only under mpirun.
--
--   dist.init()                          -> dist (rank, world_size set); idempotent
--   dist.all_reduce(t, {op = "sum"})     -> sum (or "mean", "max", "min") over the ranks
--   dist.broadcast(t, {root = 0})        -> root's t on every rank
--   dist.barrier()
--   dist.DataParallel(model)             -> the model, its parameters made rank 0's, with
--                                           :sync() to average the gradients before a step
--   dist.average_gradients(params)       -> what :sync() does: few large all-reduces (buckets)
local dist = { rank = 0, world_size = 1 }
local mpi -- the C module, once init() found mpirun

-- The environment Open MPI's launcher (and PMIx) gives each process it starts.
local function under_mpirun()
  return os.getenv("OMPI_COMM_WORLD_SIZE") ~= nil or os.getenv("PMIX_RANK") ~= nil
end

function dist.init()
  if mpi or not under_mpirun() then return dist end
  local ok, m = pcall(require, "mgdist")
  if not ok then
    error("dist.init: started by mpirun, but the MPI module (mgdist.so beside moongrad) did not load: " .. tostring(m), 2)
  end
  mpi = m
  dist.rank, dist.world_size = mpi.init()
  return dist
end

-- "(3, 4) float32": what every rank's tensor must match
local function signature(t) return ("(%s) %s"):format(table.concat(t.shape, ", "), t.dtype) end

local function need_tensor(t, what)
  if show.typeof(t) ~= "Tensor" then error(("dist.%s: expected a Tensor, got a %s"):format(what, show.typeof(t)), 3) end
end

-- The tensor's values in a contiguous CPU buffer, realized.
local function on_host(t) return t:to("CPU"):contiguous():realize() end

function dist.all_reduce(t, opts)
  need_tensor(t, "all_reduce")
  local op = opts and opts.op or "sum"
  if op ~= "sum" and op ~= "mean" and op ~= "max" and op ~= "min" then
    error(("dist.all_reduce: op must be sum, mean, max or min, got %s"):format(tostring(op)), 2)
  end
  if not mpi or dist.world_size == 1 then return t end
  local src = on_host(t)
  local dst = Tensor.empty(t.shape, { dtype = t.dtype, device = "CPU" })
  mpi.allreduce(src, dst, op == "mean" and "sum" or op, t.dtype, signature(t))
  if op == "mean" then dst = dst / dist.world_size end
  return t.device == "CPU" and dst or dst:to(t.device)
end

function dist.broadcast(t, opts)
  need_tensor(t, "broadcast")
  local root = opts and opts.root or 0
  if not mpi or dist.world_size == 1 then
    if root ~= 0 then error(("dist.broadcast: root %s is not a rank (one process: 0)"):format(tostring(root)), 2) end
    return t
  end
  local buf = dist.rank == root and on_host(t) or Tensor.empty(t.shape, { dtype = t.dtype, device = "CPU" })
  mpi.bcast(buf, root, signature(t))
  return t.device == "CPU" and buf or buf:to(t.device)
end

function dist.barrier()
  if mpi then mpi.barrier() end
end

-- Averages each parameter's gradient over the ranks: the gradients are laid end to end in
-- buckets of up to 16M elements per dtype and each bucket is all-reduced at once (one MPI call
-- for a small model, where one per tensor would pay MPI's latency dozens of times).
function dist.average_gradients(params)
  if not mpi or dist.world_size == 1 then return end
  local buckets, open = {}, {}
  for _, p in ipairs(params) do
    local g = p.grad
    if g then
      local b = open[g.dtype]
      if not b or b.numel + g:numel() > (1 << 24) then
        b = { numel = 0, params = {} }
        open[g.dtype] = b
        buckets[#buckets + 1] = b
      end
      b.params[#b.params + 1] = p
      b.numel = b.numel + g:numel()
    end
  end
  for _, b in ipairs(buckets) do
    local flat = {}
    for i, p in ipairs(b.params) do flat[i] = p.grad:flatten() end
    local sum = dist.all_reduce(#flat == 1 and flat[1] or flat[1]:cat(table.unpack(flat, 2)), { op = "mean" })
    local at = 0
    for _, p in ipairs(b.params) do
      local n = p.grad:numel()
      p.grad = sum:shrink({ { at, at + n } }):reshape(p.grad.shape)
      at = at + n
    end
  end
end

-- The model with rank 0's parameters on every rank (as DistributedDataParallel starts), and
-- :sync(), which averages the gradients: call it between backward() and the optimizer's step.
function dist.DataParallel(model)
  local params = state.get_parameters(model)
  if mpi and dist.world_size > 1 then
    for _, p in ipairs(params) do p:assign(dist.broadcast(p, { root = 0 })):realize() end
  end
  return setmetatable({ module = model, params = params, sync = function() dist.average_gradients(params) end }, {
    __call = function(self, ...) return self.module(...) end,
  })
end

return dist
