-- require "moongrad": the globals as one table, for code that prefers not to use globals
-- (local mg = require "moongrad"; local x = mg.Tensor{1, 2, 3}).
return {
  Tensor = Tensor,
  dtypes = dtypes,
  Context = Context,
  Device = Device,
  GlobalCounters = GlobalCounters,
  ShapeTracker = ShapeTracker,
  show = show,
  nn = nn,
  optim = optim,
  state = state,
  datasets = datasets,
  TinyJit = TinyJit,
}
