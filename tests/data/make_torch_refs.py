#!/usr/bin/python3
"""Writes tests/data/torch_refs.lua: inputs, float64 reference outputs and gradients for every
Tensor op, computed with PyTorch (Debian's python3-torch) on fixed seeds.

    /usr/bin/python3 tests/data/make_torch_refs.py

tests/lua/test_torch_refs.lua evaluates each case's Lua expression on the same inputs and
compares with tinygrad's tolerances (tinygrad v0.10.3 test/test_ops.py: atol 1e-6 / rtol 1e-3
forward, 1e-4 / 1e-3 for gradients; looser only where tinygrad's own test is looser).

A case is: a name, a Lua expression over the inputs a, b, c, d (tinygrad's Python API in moongrad's
Lua spelling), the same computation in torch (float64, or int64 / bool), and input specs. Float
inputs are float32 values (rounded through float32 here) but the reference is computed in float64
from those values. Where the output is float, the gradient reference is d/dinput of
sum(out * w) for a fixed random weight w stored in the case (so gradients are not trivial).

Where tinygrad v0.10.3 and torch differ in semantics, the torch side is composed to match
tinygrad's definition; each such place has a comment saying why.
"""
import math
import os
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_refs.lua")
INF, NAN = math.inf, math.nan


# ---------------------------------------------------------------- input specs

class Spec:
  """One input: shape, dtype ("float32", "int32", "bool"), how its values are made, and whether
  it gets a gradient (float inputs do unless grad=False)."""
  def __init__(self, shape, dtype="float32", kind="randn", lo=-2.0, hi=2.0, vals=None, grad=None):
    self.shape, self.dtype, self.kind, self.lo, self.hi, self.vals = tuple(shape), dtype, kind, lo, hi, vals
    self.grad = (dtype == "float32") if grad is None else grad

  def make(self, rng):
    n = int(np.prod(self.shape)) if self.shape else 1
    if self.vals is not None:
      v = np.array(self.vals, dtype=np.float64).reshape(-1)
      assert v.size == n, (self.vals, self.shape)
    elif self.kind == "randn": v = rng.standard_normal(n)
    elif self.kind == "unif": v = rng.uniform(self.lo, self.hi, n)
    elif self.kind == "nz":  # away from 0: |v| in [lo, hi], random sign
      v = rng.uniform(self.lo, self.hi, n) * rng.choice([-1.0, 1.0], n)
    elif self.kind == "int": v = rng.randint(int(self.lo), int(self.hi), n).astype(np.float64)
    elif self.kind == "bool": v = (rng.uniform(0, 1, n) < 0.5).astype(np.float64)
    else: raise ValueError(self.kind)
    if self.dtype == "float32": v = v.astype(np.float32).astype(np.float64)  # float32 values, held in float64
    return v.reshape(self.shape)


def R(*shape, **kw): return Spec(shape, "float32", "randn", **kw)                    # normal(0, 1)
def U(lo, hi, *shape, **kw): return Spec(shape, "float32", "unif", lo=lo, hi=hi, **kw)  # uniform(lo, hi)
def NZ(*shape, lo=0.3, hi=2.0, **kw): return Spec(shape, "float32", "nz", lo=lo, hi=hi, **kw)
def I(lo, hi, *shape): return Spec(shape, "int32", "int", lo=lo, hi=hi)              # ints in [lo, hi)
def B(*shape): return Spec(shape, "bool", "bool")
def V(vals, shape=None, dtype="float32", grad=False):                                 # explicit values
  shape = (len(vals),) if shape is None else shape
  return Spec(shape, dtype, "vals", vals=vals, grad=grad)


# ---------------------------------------------------------------- cases

CASES = []
DEFAULT_TOL = dict(atol=1e-6, rtol=1e-3, gatol=1e-4, grtol=1e-3)


def case(name, expr, fn, ins, fwd_only=False, signed_zero=False, odtype=None, **tol):
  """fn takes torch tensors (float64 / int64 / bool) for the inputs and returns a tensor or a
  tuple of tensors. odtype overrides the tinygrad dtype of the outputs (a string or a list)."""
  assert not any(c["name"] == name for c in CASES), name
  t = dict(DEFAULT_TOL); t.update(tol)
  CASES.append(dict(name=name, expr=expr, fn=fn, ins=ins, fwd_only=fwd_only, signed_zero=signed_zero,
                    odtype=odtype, tol=t))


# tinygrad-definition helpers (torch, float64) -------------------------------------------------

def tg_copysign(a, b):
  # tinygrad: (other < 0).where(-self.abs(), self.abs()) + other*0, so -0.0 counts as positive and
  # the result follows broadcasting; torch.copysign looks at the sign bit (-0.0 is negative).
  a, b = torch.broadcast_tensors(a, b)
  return torch.where(b < 0, -a.abs(), a.abs())

def tg_idiv(a, b):
  # tinygrad v0.10.3's idiv (and so //) truncates toward zero. moongrad deliberately floors, as
  # Lua's own // does (and Python's and torch's //); README says so. The reference floors too.
  return torch.div(a, b, rounding_mode="floor")

def tg_selu(x):
  # tinygrad's selu uses alpha=1.67326, gamma=1.0507 (torch uses the exact constants)
  return 1.0507 * torch.where(x >= 0, x, 1.67326 * (torch.exp(x) - 1))

def tg_softplus(x, beta=1.0):
  # tinygrad: (1/beta) * log(1 + exp(x*beta)), no threshold (torch switches to x above 20)
  return (1 / beta) * torch.log1p(torch.exp(x * beta))

def tg_var(x, axis, keepdim=False, correction=1):
  # tinygrad divides by max(0, n - correction) (torch 1.13 var(correction=) exists but keep it explicit)
  axis = tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
  n = 1
  for d in axis: n *= x.shape[d]
  m = x.mean(dim=axis, keepdim=True)
  return ((x - m) ** 2).sum(dim=axis, keepdim=keepdim) / max(0, n - correction)

def tg_logsumexp(x, axis, keepdim=False):
  return torch.logsumexp(x, dim=axis, keepdim=keepdim)

def tg_layernorm(x, axis, eps=1e-5):
  y = x - x.mean(dim=axis, keepdim=True)
  return y * torch.rsqrt((y * y).mean(dim=axis, keepdim=True) + eps)

def tg_sparse_ce(x, y, ignore_index=-1, ls=0.0, reduction="mean"):
  # tinygrad's own definition (ignore_index defaults to -1, not torch's -100; the smoothing term
  # is masked by ignore_index too)
  logp = torch.log_softmax(x, -1)
  mask = (y != ignore_index) if ignore_index != -1 else torch.ones_like(y, dtype=torch.bool)
  yc = torch.where(mask, y, torch.zeros_like(y))
  onehot = F.one_hot(yc, x.shape[-1]).to(x.dtype) * mask.unsqueeze(-1)
  smoothing = ls * (logp.mean(-1) * mask)
  unreduced = (1 - ls) * (logp * onehot).sum(-1) + smoothing
  if reduction == "mean": return -(unreduced.sum() / mask.sum())
  if reduction == "sum": return -unreduced.sum()
  return -unreduced

def tg_cross_entropy(x, y, reduction="mean", ls=0.0):
  if y.ndim < 2: y = F.one_hot(y, x.shape[1]).to(x.dtype)
  y = (1 - ls) * y + ls / y.shape[1]
  ret = -(torch.log_softmax(x, 1) * y).sum(1)
  return {"mean": ret.mean, "sum": ret.sum, "none": lambda: ret}[reduction]()

def tg_sdpa(q, k, v, mask=None, causal=False):
  # torch 1.13 has no F.scaled_dot_product_attention: composed as tinygrad defines it
  qk = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
  if causal: mask = torch.ones(qk.shape, dtype=torch.bool).tril()
  if mask is not None:
    if mask.dtype == torch.bool: mask = torch.where(mask, 0.0, -INF)
    qk = qk + mask
  return torch.softmax(qk, -1) @ v

def pt_sdpa(q, k, v, attn_mask=None, is_causal=False):
  # torch 1.13 has no F.scaled_dot_product_attention: the reference implementation PyTorch 2's
  # documentation gives for it (a bias of shape (L, S); is_causal is ones(L, S).tril(diagonal=0);
  # a bool mask keeps the true pairs, a float mask is added), written without in-place ops so a
  # mask may broadcast over batch and heads
  L, S = q.size(-2), k.size(-2)
  attn_bias = torch.zeros(L, S, dtype=q.dtype)
  if is_causal:
    assert attn_mask is None
    attn_bias = attn_bias.masked_fill(torch.ones(L, S, dtype=torch.bool).tril(diagonal=0).logical_not(), -INF)
  if attn_mask is not None:
    if attn_mask.dtype == torch.bool: attn_bias = torch.where(attn_mask, attn_bias, torch.tensor(-INF))
    else: attn_bias = attn_mask + attn_bias
  attn_weight = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1))) + attn_bias
  return torch.softmax(attn_weight, dim=-1) @ v

def pad2d(x, pads, mode):
  # torch 1.13 reflect/replicate/circular pads want (N, C, H, W) for 2-d padding
  return F.pad(x[None, None], pads, mode=mode)[0, 0]


def add_cases():
  # ------------------------------------------------------------ unary elementwise
  x34 = lambda: R(3, 4)
  un = [
    ("neg", "-a", lambda a: -a, x34()),
    ("neg_method", "a:neg()", lambda a: -a, x34()),
    ("log", "a:log()", torch.log, U(0.1, 3, 3, 4)),
    ("log2", "a:log2()", torch.log2, U(0.1, 3, 3, 4)),
    ("exp", "a:exp()", torch.exp, x34()),
    ("exp2", "a:exp2()", torch.exp2, x34()),
    ("relu", "a:relu()", torch.relu, x34()),
    ("sigmoid", "a:sigmoid()", torch.sigmoid, x34()),
    ("hardsigmoid", "a:hardsigmoid()", F.hardsigmoid, U(-5, 5, 3, 4)),
    ("sqrt", "a:sqrt()", torch.sqrt, U(0.1, 3, 3, 4)),
    ("rsqrt", "a:rsqrt()", torch.rsqrt, U(0.1, 3, 3, 4)),
    ("sin", "a:sin()", torch.sin, U(-4, 4, 3, 4)),
    ("cos", "a:cos()", torch.cos, U(-4, 4, 3, 4)),
    ("tan", "a:tan()", torch.tan, U(-1.2, 1.2, 3, 4)),
    ("asin", "a:asin()", torch.asin, U(-0.95, 0.95, 3, 4)),
    ("acos", "a:acos()", torch.acos, U(-0.95, 0.95, 3, 4)),
    ("atan", "a:atan()", torch.atan, U(-3, 3, 3, 4)),
    ("square", "a:square()", torch.square, x34()),
    ("sign", "a:sign()", torch.sign, x34()),
    ("abs", "a:abs()", torch.abs, x34()),
    ("reciprocal", "a:reciprocal()", torch.reciprocal, NZ(3, 4)),
    ("elu", "a:elu()", F.elu, x34()),
    ("elu_alpha", "a:elu(0.5)", lambda a: F.elu(a, 0.5), x34()),
    ("celu", "a:celu()", F.celu, x34()),
    ("celu_alpha", "a:celu{alpha=2.0}", lambda a: F.celu(a, 2.0), x34()),
    ("selu", "a:selu()", tg_selu, x34()),
    ("swish", "a:swish()", F.silu, x34()),
    ("silu", "a:silu()", F.silu, x34()),
    ("relu6", "a:relu6()", F.relu6, U(-3, 9, 3, 4)),
    ("hardswish", "a:hardswish()", F.hardswish, U(-5, 5, 3, 4)),
    ("tanh", "a:tanh()", torch.tanh, x34()),
    ("sinh", "a:sinh()", torch.sinh, x34()),
    ("cosh", "a:cosh()", torch.cosh, x34()),
    ("atanh", "a:atanh()", torch.atanh, U(-0.9, 0.9, 3, 4)),
    ("asinh", "a:asinh()", torch.asinh, U(-3, 3, 3, 4)),
    ("acosh", "a:acosh()", torch.acosh, U(1.1, 4, 3, 4)),
    ("hardtanh", "a:hardtanh()", F.hardtanh, U(-3, 3, 3, 4)),
    ("hardtanh_range", "a:hardtanh(-0.5, 1.5)", lambda a: F.hardtanh(a, -0.5, 1.5), U(-3, 3, 3, 4)),
    ("erf", "a:erf()", torch.erf, x34()),
    # tinygrad's gelu is the tanh approximation
    ("gelu", "a:gelu()", lambda a: F.gelu(a, approximate="tanh"), x34()),
    # approximate= as PyTorch's: "none" is the exact erf form (torch's default), "tanh" as above
    ("gelu_tanh", "a:gelu{approximate='tanh'}", lambda a: F.gelu(a, approximate="tanh"), U(-6, 6, 3, 4)),
    ("gelu_none", "a:gelu{approximate='none'}", lambda a: F.gelu(a, approximate="none"), x34()),
    ("gelu_none_positional", "a:gelu('none')", F.gelu, x34()),
    ("gelu_none_tails", "a:gelu('none')", F.gelu, U(-9, 9, 4, 5)),
    ("quick_gelu", "a:quick_gelu()", lambda a: a * torch.sigmoid(1.702 * a), x34()),
    ("leaky_relu", "a:leaky_relu()", F.leaky_relu, x34()),
    ("leaky_relu_slope", "a:leaky_relu(0.2)", lambda a: F.leaky_relu(a, 0.2), x34()),
    ("mish", "a:mish()", F.mish, x34()),
    ("softplus", "a:softplus()", tg_softplus, x34(), dict(gatol=1e-6)),
    ("softplus_beta", "a:softplus(3)", lambda a: tg_softplus(a, 3.0), x34(), dict(gatol=1e-6)),
    ("softsign", "a:softsign()", F.softsign, x34()),
  ]
  for entry in un:
    name, expr, fn, spec = entry[:4]
    case(name, expr, fn, [spec], **(entry[4] if len(entry) > 4 else {}))
  # not differentiable in tinygrad's test (forward_only there)
  case("trunc", "a:trunc()", torch.trunc, [U(-4, 4, 3, 4)], fwd_only=True)
  case("ceil", "a:ceil()", torch.ceil, [U(-4, 4, 3, 4)], fwd_only=True)
  case("floor", "a:floor()", torch.floor, [U(-4, 4, 3, 4)], fwd_only=True)
  case("round", "a:round()", torch.round, [U(-4, 4, 3, 4)], fwd_only=True)
  case("round_halves_to_even", "a:round()", torch.round, [V([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49, -0.51, 2.0])], fwd_only=True)
  case("floor_ceil_trunc_exact", "a:floor() + a:ceil() * 10 + a:trunc() * 100", lambda a: a.floor() + a.ceil() * 10 + a.trunc() * 100,
       [V([-2.0, -1.5, -0.5, 0.0, 0.5, 1.0, 1.5, 7.0])], fwd_only=True)
  case("logical_not", "a:logical_not()", torch.logical_not, [B(3, 4)])
  case("isinf", "a:isinf()", torch.isinf, [V([-INF, 0., INF, NAN, 1.1])])
  case("isinf_positive_only", "a:isinf{detect_negative=false}", lambda a: torch.isposinf(a), [V([-INF, 0., INF, NAN, 1.1])])
  case("isinf_negative_only", "a:isinf(false, true)", lambda a: torch.isneginf(a), [V([-INF, 0., INF, NAN, 1.1])])
  case("isnan", "a:isnan()", torch.isnan, [V([-INF, 0., INF, NAN, 1.1])])
  case("isfinite", "a:isfinite()", torch.isfinite, [V([-INF, 0., INF, NAN, 1.1])])

  # non-contiguous inputs through unary ops
  case("relu_permuted", "a:permute(1, 0):relu()", lambda a: a.permute(1, 0).relu(), [R(3, 4)])
  case("exp_T", "a.T:exp()", lambda a: a.T.exp(), [R(3, 4)])
  case("sigmoid_flipped", "a:flip(0):sigmoid()", lambda a: a.flip(0).sigmoid(), [R(3, 4)])
  case("tanh_expanded", "a:expand(3, 4):tanh()", lambda a: a.expand(3, 4).tanh(), [R(1, 4)])
  case("sqrt_shrunk", "a:shrink{{1, 3}, {0, 2}}:sqrt()", lambda a: a[1:3, 0:2].sqrt(), [U(0.1, 3, 3, 4)])
  case("log_padded", "(a:pad{{1, 0}, {0, 1}} + 1):log()", lambda a: (F.pad(a, (0, 1, 1, 0)) + 1).log(), [U(0.1, 3, 3, 4)])
  case("sin_strided", "a[{{nil, nil, 2}, {nil, nil, -1}}]:sin()", lambda a: a[::2].flip(1).sin(), [R(4, 3)])

  # 0-d and 0-size
  case("exp_0d", "a:exp()", torch.exp, [R()])
  case("gelu_0d", "a:gelu()", lambda a: F.gelu(a, approximate="tanh"), [R()])
  case("gelu_none_0d", "a:gelu('none')", F.gelu, [R()])
  case("softplus_0d", "a:softplus()", tg_softplus, [R()], gatol=1e-6)
  case("exp_0size", "a:exp()", torch.exp, [R(0, 3)])
  case("relu_0size", "a:relu()", torch.relu, [R(3, 0)])

  # special values (forward only; torch defines them, tinygrad's own test_ops checks most of them)
  sp = [INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0]
  case("exp_special", "a:exp()", torch.exp, [V([INF, -INF, NAN, 0.0, -0.0])], fwd_only=True)
  case("exp2_special", "a:exp2()", torch.exp2, [V([INF, -INF, NAN, 0.0, -0.0])], fwd_only=True)
  case("log_special", "a:log()", torch.log, [V(sp)], fwd_only=True)
  case("log2_special", "a:log2()", torch.log2, [V(sp)], fwd_only=True)
  case("sqrt_special", "a:sqrt()", torch.sqrt, [V([INF, NAN, 0.0, -0.0, -1.0, 4.0])], fwd_only=True, signed_zero=True)
  case("sin_special", "a:sin()", torch.sin, [V([NAN, INF, -INF, 0.0])], fwd_only=True)
  case("reciprocal_special", "a:reciprocal()", torch.reciprocal, [V([0.0, -0.0, INF, -INF, NAN, 2.0])], fwd_only=True, signed_zero=True)
  case("neg_signed_zero", "-a", lambda a: -a, [V([0.0, -0.0, INF, -INF, NAN, 1.5])], fwd_only=True, signed_zero=True)
  case("relu_special", "a:relu()", torch.relu, [V([INF, -INF, 0.0, -0.0, 2.0, -2.0])], fwd_only=True)
  case("sigmoid_special", "a:sigmoid()", torch.sigmoid, [V([INF, -INF, NAN, 0.0])], fwd_only=True)
  case("tanh_special", "a:tanh()", torch.tanh, [V([INF, -INF, NAN, 0.0])], fwd_only=True)
  # tinygrad's sign is x.ne(0).where(...) + x*0, and abs is x*sign(x): -0.0 maps to 0 (sign of the zero
  # is not checked); inf/nan are left out because tinygrad's x*0 folding makes them backend-dependent
  case("sign_zeros", "a:sign()", torch.sign, [V([0.0, -0.0, 3.0, -2.0, 1e-30, -1e-30])], fwd_only=True)
  case("abs_zeros", "a:abs()", torch.abs, [V([0.0, -0.0, 3.0, -2.0])], fwd_only=True)
  case("mul_inf", "a * (1/0)", lambda a: a * INF, [NZ(3, 4)], fwd_only=True)
  case("mul_neg_inf", "a * (-1/0)", lambda a: a * -INF, [NZ(3, 4)], fwd_only=True)
  case("mul_nan", "a * (0/0)", lambda a: a * NAN, [R(3, 4)], fwd_only=True)
  case("mul_signed_zero", "a * b", lambda a, b: a * b, [V([0.0, -0.0, 0.0, -0.0, 2.0]), V([1.0, 1.0, -1.0, -1.0, -0.0])],
       fwd_only=True, signed_zero=True)
  case("div_by_inf", "a / (1/0)", lambda a: a / INF, [NZ(3, 4)], fwd_only=True)
  case("inf_div", "(1/0) / a", lambda a: INF / a, [NZ(3, 4)], fwd_only=True)
  case("nan_div", "(0/0) / a", lambda a: NAN / a, [NZ(3, 4)], fwd_only=True)
  case("div_by_signed_zero", "a / b", lambda a, b: a / b, [V([1.0, 1.0, -1.0, -1.0, 0.0]), V([0.0, -0.0, 0.0, -0.0, 0.0])],
       fwd_only=True)
  case("cmp_special_lt", "a:lt(b)", torch.lt, [V([INF, -INF, NAN, 0.0, 1.0, NAN]), V([1.0, 1.0, 1.0, -0.0, NAN, NAN])])
  case("cmp_special_eq", "a:eq(b)", torch.eq, [V([INF, -INF, NAN, 0.0, 1.0, NAN]), V([INF, 1.0, 1.0, -0.0, NAN, NAN])])
  case("cmp_special_ne", "a:ne(b)", torch.ne, [V([INF, -INF, NAN, 0.0, 1.0, NAN]), V([INF, 1.0, 1.0, -0.0, NAN, NAN])])
  case("max_with_nan", "a:max()", torch.max, [V([1.0, NAN, 3.0])], fwd_only=True)
  case("sum_with_inf", "a:sum(1)", lambda a: a.sum(1), [V([INF, 1.0, INF, -INF, NAN, 2.0], (3, 2))], fwd_only=True)
  case("softmax_neg_inf", "a:softmax(-1)", lambda a: torch.softmax(a, -1), [V([1.0, -INF, 2.0, -INF, 0.5, 0.25], (2, 3))], fwd_only=True)
  case("logsumexp_neg_inf", "a:logsumexp(1)", lambda a: torch.logsumexp(a, 1), [V([1.0, -INF, 2.0, -INF, 0.5, 0.25], (2, 3))], fwd_only=True)
  case("where_nan_unselected", "a:where(b, c)", torch.where,
       [V([1, 0, 1, 0], dtype="bool"), V([1.0, NAN, 2.0, INF]), V([NAN, 5.0, -INF, 6.0])], fwd_only=True)
  case("maximum_special", "a:maximum(b)", torch.maximum, [V([INF, -INF, 1.0, 0.0]), V([1.0, 1.0, INF, -1.0])], fwd_only=True)
  case("pad_value_inf", "a:pad({{1, 1}, {0, 2}}, {value=1/0})", lambda a: F.pad(a, (0, 2, 1, 1), value=INF), [R(2, 3)], fwd_only=True)
  case("pad_value_neg_inf_negative_pads", "a:pad({-1, 2, -1, 1}, {value=-1/0})", lambda a: F.pad(a, (-1, 2, -1, 1), value=-INF),
       [R(3, 3)], fwd_only=True)

  # ------------------------------------------------------------ binary elementwise
  bcast = [("same", (3, 4), (3, 4)), ("bcast_row", (3, 4), (4,)), ("bcast_outer", (3, 1), (1, 4)),
           ("bcast_0d", (3, 4), ()), ("bcast_3d", (2, 1, 4), (3, 1))]
  for suffix, sa, sb in bcast:
    case("add_" + suffix, "a + b", torch.add, [R(*sa), R(*sb)])
    case("sub_" + suffix, "a - b", torch.sub, [R(*sa), R(*sb)])
    case("mul_" + suffix, "a * b", torch.mul, [R(*sa), R(*sb)])
    case("div_" + suffix, "a / b", torch.div, [R(*sa), NZ(*sb)])
  case("add_scalar", "a + 2.5", lambda a: a + 2.5, [R(3, 4)])
  case("scalar_sub", "2.5 - a", lambda a: 2.5 - a, [R(3, 4)])
  case("scalar_div", "2 / a", lambda a: 2 / a, [NZ(3, 4)])
  case("mul_scalar_int", "a * 3", lambda a: a * 3, [R(3, 4)])
  case("add_method", "a:add(b)", torch.add, [R(3, 4), R(4)])
  case("sub_method_reverse", "a:sub(b, true)", lambda a, b: b - a, [R(3, 4), R(4)])
  case("mul_method", "a:mul(b)", torch.mul, [R(3, 4), R(3, 1)])
  case("div_method", "a:div(b)", torch.div, [R(3, 4), NZ(3, 1)])
  case("add_0d_0d", "a + b", torch.add, [R(), R()])
  case("mul_0size", "a * b", torch.mul, [R(0, 3), R(3)])
  case("add_permuted", "a:permute(1, 0) + b", lambda a, b: a.permute(1, 0) + b, [R(4, 3), R(3, 4)])
  case("mul_flipped_expanded", "a:flip(1) * b:expand(3, 4)", lambda a, b: a.flip(1) * b.expand(3, 4), [R(3, 4), R(1, 4)])
  case("pow", "a ^ b", torch.pow, [U(0.2, 3, 3, 4), R(3, 4)])
  case("pow_bcast", "a ^ b", torch.pow, [U(0.2, 3, 3, 4), R(4)])
  case("pow_scalar_exp", "a ^ 2", lambda a: a ** 2, [R(3, 4)])
  case("pow_scalar_exp_3_neg_base", "a ^ 3", lambda a: a ** 3, [R(3, 4)])
  case("pow_scalar_exp_frac", "a ^ 0.5", lambda a: a ** 0.5, [U(0.2, 3, 3, 4)])
  case("pow_scalar_base", "2 ^ a", lambda a: 2 ** a, [R(3, 4)])
  case("pow_method", "a:pow(b)", torch.pow, [U(0.2, 3, 3, 4), U(-2, 2, 3, 4)])
  case("pow_zero_zero", "a ^ b", torch.pow, [V([0.0, 0.0, 2.0]), V([0.0, 2.0, 0.0])], fwd_only=True)
  case("maximum", "a:maximum(b)", torch.maximum, [R(3, 4), R(3, 4)])
  case("maximum_bcast", "a:maximum(b)", torch.maximum, [R(3, 4), R(4)])
  case("maximum_scalar", "a:maximum(0.5)", lambda a: torch.clamp(a, min=0.5), [R(3, 4)])
  case("minimum", "a:minimum(b)", torch.minimum, [R(3, 4), R(3, 4)])
  case("minimum_bcast", "a:minimum(b)", torch.minimum, [R(3, 1), R(1, 4)])
  case("maximum_int", "a:maximum(b)", torch.maximum, [I(-5, 5, 3, 4), I(-5, 5, 3, 4)])
  case("minimum_int", "a:minimum(b)", torch.minimum, [I(-5, 5, 3, 4), I(-5, 5, 4)])
  case("copysign", "a:copysign(b)", tg_copysign, [R(3, 4), R(3, 4)])
  case("copysign_zeros", "a:copysign(b)", tg_copysign, [V([1.0, 2.0, -3.0, 4.0]), V([0.0, -0.0, 0.0, -2.0])], fwd_only=True)
  case("lerp_scalar", "a:lerp(b, 0.3)", lambda a, b: torch.lerp(a, b, 0.3), [R(3, 4), R(3, 4)])
  case("lerp_tensor", "a:lerp(b, c)", torch.lerp, [R(3, 4), R(4), U(0, 1, 3, 4)])
  case("where", "a:where(b, c)", torch.where, [B(3, 4), R(3, 4), R(3, 4)])
  case("where_bcast", "a:where(b, c)", torch.where, [B(3, 1), R(4), R(3, 4)])
  case("where_scalars", "a:where(1.5, b)", lambda a, b: torch.where(a, 1.5, b), [B(3, 4), R(3, 4)])
  case("where_float_cond", "a:where(b, c)", lambda a, b, c: torch.where(a != 0, b, c),
       [V([0.0, 1.0, -2.0, 0.5]), R(4), R(4)])
  case("masked_fill", "a:masked_fill(b, 2.0)", lambda a, b: a.masked_fill(b, 2.0), [R(3, 4), B(3, 4)])
  case("masked_fill_bcast", "a:masked_fill(b, -1/0)", lambda a, b: a.masked_fill(b, -INF), [R(3, 4), B(4)], fwd_only=True)
  # comparisons
  for op, tf in [("lt", torch.lt), ("le", torch.le), ("gt", torch.gt), ("ge", torch.ge), ("eq", torch.eq), ("ne", torch.ne)]:
    case("cmp_" + op, "a:%s(b)" % op, tf, [Spec((3, 4), "float32", "int", lo=-2, hi=2), Spec((4,), "float32", "int", lo=-2, hi=2)])
    case("cmp_%s_int" % op, "a:%s(b)" % op, tf, [I(-3, 3, 3, 4), I(-3, 3, 3, 4)])
  case("cmp_lt_scalar", "a:lt(0.5)", lambda a: a < 0.5, [R(3, 4)])
  case("cmp_eq_bool", "a:eq(b)", torch.eq, [B(3, 4), B(3, 4)])
  case("cmp_lt_0d", "a:lt(b)", torch.lt, [R(), R(5)])

  # integer ops (tinygrad: idiv truncates; mod floors)
  case("idiv_int", "a // b", tg_idiv, [I(-20, 20, 3, 4), Spec((3, 4), "int32", "nz", lo=1, hi=6)])
  case("idiv_method_int", "a:idiv(b)", tg_idiv, [I(-20, 20, 3, 4), Spec((4,), "int32", "nz", lo=1, hi=6)])
  case("idiv_int_positive", "a // b", tg_idiv, [I(0, 40, 3, 4), I(1, 7, 3, 4)])
  case("mod_int", "a % b", torch.remainder, [I(-20, 20, 3, 4), Spec((3, 4), "int32", "nz", lo=1, hi=6)])
  case("mod_float", "a % b", torch.remainder, [U(-5, 5, 3, 4), NZ(3, 4, lo=0.5, hi=2)], fwd_only=True)
  case("div_int_gives_float", "a / b", lambda a, b: a / b, [I(-20, 20, 3, 4), I(1, 6, 3, 4)])
  case("div_trunc", "a:div(b, {rounding_mode='trunc'})", lambda a, b: torch.div(a, b, rounding_mode="trunc"),
       [U(-5, 5, 3, 4), NZ(3, 4, lo=0.5, hi=2)], fwd_only=True)
  case("div_floor", "a:div(b, {rounding_mode='floor'})", lambda a, b: torch.div(a, b, rounding_mode="floor"),
       [U(-5, 5, 3, 4), NZ(3, 4, lo=0.5, hi=2)], fwd_only=True)
  case("bitwise_and", "a & b", torch.bitwise_and, [I(-50, 50, 3, 4), I(-50, 50, 3, 4)])
  case("bitwise_or", "a | b", torch.bitwise_or, [I(-50, 50, 3, 4), I(-50, 50, 4)])
  case("bitwise_xor", "a ~ b", torch.bitwise_xor, [I(-50, 50, 3, 4), I(-50, 50, 3, 4)])
  case("bitwise_not", "~a", torch.bitwise_not, [I(-50, 50, 3, 4)])
  case("bitwise_and_method", "a:bitwise_and(b)", torch.bitwise_and, [I(0, 50, 3, 4), I(0, 50, 3, 4)])
  case("bitwise_xor_scalar", "a ~ 5", lambda a: a ^ 5, [I(0, 50, 3, 4)])
  case("bitwise_and_bool", "a & b", torch.logical_and, [B(3, 4), B(3, 4)])
  case("bitwise_or_bool", "a | b", torch.logical_or, [B(3, 4), B(3, 4)])
  case("bitwise_not_bool", "~a", torch.logical_not, [B(3, 4)])
  # tinygrad: lshift is mul(2**x), rshift is idiv(2**x) (truncating): non-negative inputs only here
  case("lshift", "a << 2", lambda a: a << 2, [I(0, 100, 3, 4)])
  case("rshift", "a >> 1", lambda a: a >> 1, [I(0, 100, 3, 4)])
  case("neg_int", "-a", lambda a: -a, [I(-9, 9, 3, 4)])
  case("add_int_float_promotes", "a + b", lambda a, b: a + b, [I(-5, 5, 3, 4), R(3, 4, grad=False)])
  case("add_int_scalar", "a + 3", lambda a: a + 3, [I(-5, 5, 3, 4)])
  case("mul_int_float_scalar", "a * 1.5", lambda a: a * 1.5, [I(-5, 5, 3, 4)])

  # clamp
  case("clamp", "a:clamp(-0.5, 0.8)", lambda a: a.clamp(-0.5, 0.8), [R(3, 4)])
  case("clamp_min_only", "a:clamp(-0.5)", lambda a: a.clamp(min=-0.5), [R(3, 4)])
  case("clamp_max_only", "a:clamp{max_=0.3}", lambda a: a.clamp(max=0.3), [R(3, 4)])
  case("clip", "a:clip(-1, 1)", lambda a: a.clip(-1, 1), [R(3, 4)])
  case("clamp_int", "a:clamp(-2, 3)", lambda a: a.clamp(-2, 3), [I(-6, 6, 3, 4)])

  # casts
  case("cast_float_to_int", "a:cast('int32')", lambda a: a.trunc().to(torch.int32), [U(-5, 5, 3, 4)])
  case("cast_int_to_float", "a:cast('float32')", lambda a: a.double(), [I(-5, 5, 3, 4)])
  case("cast_float_to_bool", "a:cast('bool')", lambda a: a != 0, [V([0.0, -0.0, 1.5, -2.0, NAN, INF])])
  case("float_int_bool_methods", "a:int():float() + a:bool():float()", lambda a: a.trunc() + (a != 0).double(), [U(-3, 3, 3, 4)],
       fwd_only=True)

  # ------------------------------------------------------------ reductions
  r234 = lambda: R(2, 3, 4)
  red = [
    ("sum_all", "a:sum()", lambda a: a.sum(), r234()),
    ("sum_axis1", "a:sum(1)", lambda a: a.sum(1), r234()),
    ("sum_axis_neg_keepdim", "a:sum(-1, true)", lambda a: a.sum(-1, keepdim=True), r234()),
    ("sum_axis_list", "a:sum{axis={0, 2}}", lambda a: a.sum((0, 2)), r234()),
    ("sum_axis_list_keepdim", "a:sum{axis={0, 2}, keepdim=true}", lambda a: a.sum((0, 2), keepdim=True), r234()),
    ("sum_permuted", "a:permute(2, 0, 1):sum(1)", lambda a: a.permute(2, 0, 1).sum(1), r234()),
    ("sum_expanded", "a:expand(3, 4):sum(0)", lambda a: a.expand(3, 4).sum(0), R(1, 4)),
    ("sum_0d", "a:sum()", lambda a: a.sum(), R()),
    ("sum_0size_axis0", "a:sum(0)", lambda a: a.sum(0), R(0, 3)),
    ("sum_0size_axis1", "a:sum(1)", lambda a: a.sum(1), R(0, 3)),
    ("sum_0size_all", "a:sum()", lambda a: a.sum(), R(0, 3)),
    ("prod_all", "a:prod()", lambda a: a.prod(), U(0.5, 1.5, 2, 3)),
    ("prod_axis", "a:prod(1)", lambda a: a.prod(1), NZ(3, 4, lo=0.5, hi=1.5)),
    ("max_all", "a:max()", lambda a: a.amax(), r234()),
    ("max_axis", "a:max(1)", lambda a: a.amax(1), r234()),
    ("max_axis_keepdim", "a:max{axis=-1, keepdim=true}", lambda a: a.amax(-1, keepdim=True), r234()),
    ("max_axis_list", "a:max{axis={0, 1}}", lambda a: a.amax((0, 1)), r234()),
    ("min_all", "a:min()", lambda a: a.amin(), r234()),
    ("min_axis", "a:min(0)", lambda a: a.amin(0), r234()),
    ("min_axis_list_keepdim", "a:min({1, 2}, true)", lambda a: a.amin((1, 2), keepdim=True), r234()),
    ("max_0d", "a:max()", lambda a: a.amax(), R()),
    ("mean_all", "a:mean()", lambda a: a.mean(), r234()),
    ("mean_axis", "a:mean(1)", lambda a: a.mean(1), r234()),
    ("mean_axis_list_keepdim", "a:mean({0, 2}, true)", lambda a: a.mean((0, 2), keepdim=True), r234()),
    ("var_all", "a:var()", lambda a: tg_var(a, None), r234()),
    ("var_axis", "a:var(1)", lambda a: tg_var(a, 1), r234()),
    ("var_correction0", "a:var{axis=1, correction=0}", lambda a: tg_var(a, 1, correction=0), r234()),
    ("var_axis_list_keepdim", "a:var({0, 2}, true)", lambda a: tg_var(a, (0, 2), keepdim=True), r234()),
    ("var_correction2", "a:var{axis=-1, correction=2}", lambda a: tg_var(a, 2, correction=2), r234()),
    ("std_all", "a:std()", lambda a: tg_var(a, None).sqrt(), r234()),
    ("std_axis", "a:std(0)", lambda a: tg_var(a, 0).sqrt(), r234()),
    ("std_correction0_keepdim", "a:std{axis=2, keepdim=true, correction=0}", lambda a: tg_var(a, 2, True, 0).sqrt(), r234()),
    ("var_mean", "a:var_mean(1)", lambda a: (tg_var(a, 1), a.mean(1)), r234()),
    ("std_mean", "a:std_mean{axis={0, 1}, correction=0}", lambda a: (tg_var(a, (0, 1), correction=0).sqrt(), a.mean((0, 1))), r234()),
    ("softmax", "a:softmax()", lambda a: torch.softmax(a, -1), R(3, 5)),
    ("softmax_axis0", "a:softmax(0)", lambda a: torch.softmax(a, 0), r234()),
    ("softmax_axis1", "a:softmax(1)", lambda a: torch.softmax(a, 1), r234()),
    ("softmax_T", "a.T:softmax(0)", lambda a: torch.softmax(a.T, 0), R(3, 5)),
    ("softmax_0d", "a:softmax(0)", lambda a: torch.softmax(a, 0), R()),
    ("log_softmax", "a:log_softmax()", lambda a: torch.log_softmax(a, -1), R(3, 5)),
    ("log_softmax_axis0", "a:log_softmax(0)", lambda a: torch.log_softmax(a, 0), r234()),
    ("log_softmax_0d", "a:log_softmax(-1)", lambda a: torch.log_softmax(a, -1), R()),
    ("logsumexp_all", "a:logsumexp()", lambda a: torch.logsumexp(a, (0, 1, 2)), r234()),
    ("logsumexp_axis", "a:logsumexp(1)", lambda a: torch.logsumexp(a, 1), r234()),
    ("logsumexp_keepdim", "a:logsumexp(0, true)", lambda a: torch.logsumexp(a, 0, keepdim=True), R(3, 5)),
    ("logsumexp_0d", "a:logsumexp(0)", lambda a: torch.logsumexp(a, 0), R()),
    ("logsumexp_large", "a:logsumexp(1)", lambda a: torch.logsumexp(a, 1), U(80, 120, 3, 5)),
    ("logcumsumexp", "a:logcumsumexp(1)", lambda a: torch.logcumsumexp(a, 1), R(3, 5)),
    ("logcumsumexp_default", "a:logcumsumexp()", lambda a: torch.logcumsumexp(a, 0), R(4, 3)),
    ("logcumsumexp_0d", "a:logcumsumexp()", lambda a: torch.logcumsumexp(a, 0), R()),
    ("cumsum", "a:cumsum(1)", lambda a: a.cumsum(1), R(3, 5)),
    ("cumsum_default", "a:cumsum()", lambda a: a.cumsum(0), R(4, 3)),
    ("cumsum_neg_axis_3d", "a:cumsum(-1)", lambda a: a.cumsum(-1), r234()),
    ("cumsum_0d", "a:cumsum()", lambda a: a.cumsum(0), R()),
    ("cumsum_permuted", "a.T:cumsum(0)", lambda a: a.T.cumsum(0), R(3, 5)),
    ("cumprod", "a:cumprod(1)", lambda a: a.cumprod(1), NZ(3, 5, lo=0.5, hi=1.5)),
    ("cumprod_axis0", "a:cumprod(0)", lambda a: a.cumprod(0), NZ(4, 3, lo=0.5, hi=1.5)),
    # tinygrad's cummax returns the values only
    ("cummax", "a:cummax(1)", lambda a: torch.cummax(a, 1).values, R(3, 5)),
    ("cummax_default", "a:cummax()", lambda a: torch.cummax(a, 0).values, R(4, 3)),
  ]
  for name, expr, fn, spec in red: case(name, expr, fn, [spec])
  case("mean_0size", "a:mean(0)", lambda a: a.mean(0), [R(0, 3)], fwd_only=True)
  case("cumsum_int", "a:cumsum(0)", lambda a: a.cumsum(0), [I(-5, 5, 4, 3)])
  case("sum_int", "a:sum(1)", lambda a: a.sum(1), [I(-5, 5, 3, 4)])
  case("sum_bool", "a:sum()", lambda a: a.sum(), [B(3, 4)])
  case("mean_int", "a:mean(1)", lambda a: a.double().mean(1), [I(-5, 5, 3, 4)])
  case("max_int", "a:max(1)", lambda a: a.amax(1), [I(-50, 50, 3, 4)])
  case("min_int", "a:min(0)", lambda a: a.amin(0), [I(-50, 50, 3, 4)])
  case("prod_int", "a:prod(1)", lambda a: a.prod(1), [I(-3, 4, 3, 4)])
  case("max_bool", "a:max(1)", lambda a: a.amax(1), [B(3, 4)])
  case("any", "a:any()", lambda a: a.any(), [B(3, 4)])
  case("any_axis", "a:any(1)", lambda a: a.any(1), [V([0, 0, 0, 1, 0, 0, 1, 1, 1], (3, 3), "bool")])
  case("all", "a:all()", lambda a: a.all(), [B(3, 4)])
  case("all_axis_keepdim", "a:all(0, true)", lambda a: a.all(0, keepdim=True), [V([1, 1, 0, 1, 0, 1], (2, 3), "bool")])
  case("any_float", "a:any(1)", lambda a: (a != 0).any(1), [V([0.0, 0.0, 1.5, 0.0, -0.0, 0.0], (2, 3))])
  case("all_0size", "a:all()", lambda a: a.all(), [Spec((0, 3), "bool", "bool")])
  case("any_0size", "a:any()", lambda a: a.any(), [Spec((0, 3), "bool", "bool")])
  # argmax/argmin: int32; ties pick the first index in both
  case("argmax_all", "a:argmax()", lambda a: a.argmax(), [R(3, 4)])
  case("argmax_axis", "a:argmax(1)", lambda a: a.argmax(1), [R(3, 4)])
  case("argmax_axis0_keepdim", "a:argmax(0, true)", lambda a: a.argmax(0, keepdim=True), [R(3, 4)])
  case("argmax_ties", "a:argmax(1)", lambda a: a.argmax(1), [V([1.0, 3.0, 3.0, 0.0, 2.0, 2.0, 2.0, 2.0], (2, 4))])
  case("argmin_all", "a:argmin()", lambda a: a.argmin(), [R(3, 4)])
  case("argmin_axis", "a:argmin(-1)", lambda a: a.argmin(-1), [R(3, 4)])
  case("argmin_ties", "a:argmin(0)", lambda a: a.argmin(0), [V([1.0, 0.0, 0.0, 1.0, 0.0, 5.0], (3, 2))])
  case("argmax_int", "a:argmax(1)", lambda a: a.argmax(1), [I(-9, 9, 3, 5)])
  case("argmax_permuted", "a.T:argmax(1)", lambda a: a.T.argmax(1), [R(3, 4)])

  # ------------------------------------------------------------ movement
  mv = [
    ("reshape", "a:reshape(4, 3)", lambda a: a.reshape(4, 3), R(3, 4)),
    ("reshape_table", "a:reshape({2, -1})", lambda a: a.reshape(2, -1), R(3, 4)),
    ("reshape_to_0d", "a:reshape({})", lambda a: a.reshape(()), R(1, 1)),
    ("reshape_0d_to_1", "a:reshape(1, 1)", lambda a: a.reshape(1, 1), R()),
    ("reshape_permuted", "a:permute(1, 0):reshape(-1)", lambda a: a.permute(1, 0).reshape(-1), R(3, 4)),
    ("view", "a:view(2, 6)", lambda a: a.view(2, 6), R(3, 4)),
    ("expand", "a:expand(3, 4)", lambda a: a.expand(3, 4), R(3, 1)),
    ("expand_minus1", "a:expand(2, -1, 4)", lambda a: a.expand(2, -1, 4), R(3, 1)),
    ("expand_new_dims", "a:expand({2, 3, 4})", lambda a: a.expand(2, 3, 4), R(4)),
    ("permute", "a:permute(2, 0, 1)", lambda a: a.permute(2, 0, 1), R(2, 3, 4)),
    ("permute_table_neg", "a:permute{-1, 0, 1}", lambda a: a.permute(2, 0, 1), R(2, 3, 4)),
    ("flip", "a:flip(0)", lambda a: a.flip(0), R(3, 4)),
    ("flip_multi", "a:flip(0, -1)", lambda a: a.flip((0, 2)), R(2, 3, 4)),
    ("flip_table", "a:flip{1}", lambda a: a.flip(1), R(3, 4)),
    ("shrink", "a:shrink{{1, 3}, {0, 2}}", lambda a: a[1:3, 0:2], R(3, 4)),
    ("shrink_full_dim", "a:shrink{{0, 3}, {1, 3}}", lambda a: a[:, 1:3], R(3, 4)),
    ("pad_pairs", "a:pad{{1, 1}, {0, 2}}", lambda a: F.pad(a, (0, 2, 1, 1)), R(2, 3)),
    ("pad_flat", "a:pad{1, 2, 0, 1}", lambda a: F.pad(a, (1, 2, 0, 1)), R(2, 3)),
    ("pad_flat_last_dim_only", "a:pad{2, 1}", lambda a: F.pad(a, (2, 1)), R(2, 3)),
    ("pad_value", "a:pad({{1, 0}, {1, 1}}, {value=1.5})", lambda a: F.pad(a, (1, 1, 1, 0), value=1.5), R(2, 3)),
    ("pad_negative", "a:pad{{-1, 1}, {0, -1}}", lambda a: F.pad(a, (0, -1, -1, 1)), R(3, 4)),
    ("pad_negative_flat", "a:pad{-1, 2, 1, -1}", lambda a: F.pad(a, (-1, 2, 1, -1)), R(3, 4)),
    ("pad_reflect", "a:pad({{1, 2}, {2, 1}}, {mode='reflect'})", lambda a: pad2d(a, (2, 1, 1, 2), "reflect"), R(3, 4)),
    ("pad_reflect_flat", "a:pad({2, 0, 1, 1}, 'reflect')", lambda a: pad2d(a, (2, 0, 1, 1), "reflect"), R(3, 4)),
    ("pad_replicate", "a:pad({{1, 2}, {3, 1}}, {mode='replicate'})", lambda a: pad2d(a, (3, 1, 1, 2), "replicate"), R(3, 4)),
    ("pad_circular", "a:pad({{1, 2}, {2, 1}}, {mode='circular'})", lambda a: pad2d(a, (2, 1, 1, 2), "circular"), R(3, 4)),
    ("pad_0size", "a:pad{{1, 1}, {0, 0}}", lambda a: F.pad(a, (0, 0, 1, 1)), R(0, 3)),
    ("pad_then_shrink", "a:pad{{2, 2}, {1, 1}}:shrink{{1, 5}, {0, 3}}", lambda a: F.pad(a, (1, 1, 2, 2))[1:5, 0:3], R(3, 4)),
    ("squeeze", "a:squeeze()", lambda a: a.squeeze(), R(1, 3, 1, 4)),
    ("squeeze_dim", "a:squeeze(2)", lambda a: a.squeeze(2), R(1, 3, 1, 4)),
    ("squeeze_dim_not_one", "a:squeeze(1)", lambda a: a.squeeze(1), R(1, 3, 1, 4)),
    ("unsqueeze", "a:unsqueeze(1)", lambda a: a.unsqueeze(1), R(3, 4)),
    ("unsqueeze_neg", "a:unsqueeze(-1)", lambda a: a.unsqueeze(-1), R(3, 4)),
    ("unsqueeze_0d", "a:unsqueeze(0)", lambda a: a.unsqueeze(0), R()),
    ("transpose_default", "a:transpose()", lambda a: a.transpose(1, 0), R(3, 4)),
    ("transpose_dims", "a:transpose(0, 2)", lambda a: a.transpose(0, 2), R(2, 3, 4)),
    ("T", "a.T", lambda a: a.T, R(3, 4)),
    ("flatten", "a:flatten()", lambda a: a.flatten(), R(2, 3, 4)),
    ("flatten_start", "a:flatten(1)", lambda a: a.flatten(1), R(2, 3, 4)),
    ("flatten_range", "a:flatten{start_dim=0, end_dim=1}", lambda a: a.flatten(0, 1), R(2, 3, 4)),
    ("unflatten", "a:unflatten(1, {2, 2})", lambda a: a.unflatten(1, (2, 2)), R(3, 4)),
    ("unflatten_minus1", "a:unflatten(-1, {3, -1})", lambda a: a.unflatten(-1, (3, -1)), R(2, 6)),
    # `repeat` is a Lua keyword: x:repeat_(...) or x["repeat"](x, ...)
    ("repeat", "a:repeat_(2, 3)", lambda a: a.repeat(2, 3), R(2, 3)),
    ("repeat_more_dims", "a['repeat'](a, {2, 1, 2})", lambda a: a.repeat(2, 1, 2), R(2, 3)),
    ("repeat_interleave", "a:repeat_interleave(2)", lambda a: a.repeat_interleave(2), R(2, 3)),
    ("repeat_interleave_dim", "a:repeat_interleave(3, 1)", lambda a: a.repeat_interleave(3, 1), R(2, 3)),
    ("roll", "a:roll(1, 0)", lambda a: a.roll(1, 0), R(3, 4)),
    ("roll_negative", "a:roll(-2, 1)", lambda a: a.roll(-2, 1), R(3, 4)),
    ("roll_multi", "a:roll({1, 3}, {0, 1})", lambda a: a.roll((1, 3), (0, 1)), R(3, 4)),
    ("tril", "a:tril()", lambda a: a.tril(), R(4, 5)),
    ("tril_diag", "a:tril(1)", lambda a: a.tril(1), R(4, 5)),
    ("tril_diag_neg", "a:tril(-1)", lambda a: a.tril(-1), R(2, 4, 3)),
    ("triu", "a:triu()", lambda a: a.triu(), R(4, 5)),
    ("triu_diag", "a:triu(2)", lambda a: a.triu(2), R(4, 5)),
    ("triu_diag_neg", "a:triu{diagonal=-1}", lambda a: a.triu(-1), R(4, 3)),
  ]
  for name, expr, fn, spec in mv: case(name, expr, fn, [spec])
  case("tril_int", "a:tril()", lambda a: a.tril(), [I(1, 9, 3, 3)])
  case("contiguous", "a.T:contiguous()", lambda a: a.T.contiguous(), [R(3, 4)])
  case("detach", "a:detach() * 2 + a", lambda a: a.detach() * 2 + a, [R(3, 4)])

  # cat / stack / split / chunk / meshgrid
  case("cat_dim0", "a:cat(b)", lambda a, b: torch.cat([a, b], 0), [R(2, 3), R(1, 3)])
  case("cat_dim1", "a:cat(b, {dim=1})", lambda a, b: torch.cat([a, b], 1), [R(2, 3), R(2, 2)])
  case("cat_static_three", "Tensor.cat(a, b, c, {dim=-1})", lambda a, b, c: torch.cat([a, b, c], -1), [R(2, 3), R(2, 1), R(2, 2)])
  case("cat_0size", "a:cat(b, {dim=0})", lambda a, b: torch.cat([a, b], 0), [R(0, 3), R(2, 3)])
  case("cat_int", "a:cat(b)", lambda a, b: torch.cat([a, b], 0), [I(0, 9, 2, 3), I(0, 9, 1, 3)])
  case("cat_permuted", "a.T:cat(b, {dim=1})", lambda a, b: torch.cat([a.T, b], 1), [R(2, 3), R(3, 2)])
  case("stack", "Tensor.stack(a, b)", lambda a, b: torch.stack([a, b], 0), [R(2, 3), R(2, 3)])
  case("stack_dim", "a:stack(b, c, {dim=1})", lambda a, b, c: torch.stack([a, b, c], 1), [R(2, 3), R(2, 3), R(2, 3)])
  case("stack_neg_dim", "a:stack(b, {dim=-1})", lambda a, b: torch.stack([a, b], -1), [R(2, 3), R(2, 3)])
  case("stack_0d", "a:stack(b)", lambda a, b: torch.stack([a, b], 0), [R(), R()])
  case("split_int", "a:split(2)", lambda a: a.split(2), [R(5, 2)])
  case("split_sizes", "a:split({1, 3}, 1)", lambda a: a.split([1, 3], 1), [R(2, 4)])
  case("chunk", "a:chunk(3)", lambda a: a.chunk(3), [R(7, 2)])
  case("chunk_dim", "a:chunk(2, 1)", lambda a: a.chunk(2, 1), [R(2, 4)])
  case("meshgrid", "a:meshgrid(b)", lambda a, b: torch.meshgrid(a, b, indexing="ij"), [R(3), R(4)])
  case("meshgrid_xy", "Tensor.meshgrid(a, b, {indexing='xy'})", lambda a, b: torch.meshgrid(a, b, indexing="xy"), [R(3), R(4)])

  # gather / masked_select / indexing
  case("gather", "a:gather(1, b)", lambda a, b: torch.gather(a, 1, b), [R(3, 4), I(0, 4, 3, 5)])
  case("gather_dim0", "a:gather(0, b)", lambda a, b: torch.gather(a, 0, b), [R(3, 4), I(0, 3, 2, 4)])
  case("gather_smaller", "a:gather(-1, b)", lambda a, b: torch.gather(a, -1, b), [R(3, 4), I(0, 4, 2, 2)])
  case("masked_select", "a:masked_select(b)", lambda a, b: torch.masked_select(a, b), [R(3, 4), B(3, 4)], fwd_only=True)
  case("masked_select_bcast", "a:masked_select(b)", lambda a, b: torch.masked_select(a, b), [R(3, 4), B(4)], fwd_only=True)
  case("index_int", "a[1]", lambda a: a[1], [R(3, 4)])
  case("index_neg_int", "a[-1]", lambda a: a[-1], [R(3, 4)])
  case("index_int_int", "a[{1, 2}]", lambda a: a[1, 2], [R(3, 4)])
  case("index_slices", "a[{1, {0, 2}, {nil, nil, 2}}]", lambda a: a[1, 0:2, ::2], [R(2, 3, 4)])
  case("index_slice_negative", "a[{{-2}, {nil, -1}}]", lambda a: a[-2:, :-1], [R(3, 4)])
  case("index_step_negative", "a[{{nil, nil, -1}, {3, 0, -2}}]", lambda a: a.flip(0)[:, [3, 1]], [R(3, 4)])
  case("index_newaxis", "a[{Tensor.newaxis, 1}]", lambda a: a[None, 1], [R(3, 4)])
  case("index_ellipsis", "a[{'...', 1}]", lambda a: a[..., 1], [R(2, 3, 4)])
  case("index_ellipsis_newaxis", "a[{1, '...', Tensor.newaxis}]", lambda a: a[1, ..., None], [R(2, 3, 4)])
  case("index_fancy", "a[b]", lambda a, b: a[b], [R(4, 3), I(0, 4, 5)])
  case("index_fancy_2d_idx", "a[b]", lambda a, b: a[b], [R(4, 3), I(-4, 4, 2, 3)])
  case("index_fancy_two", "a[{b, c}]", lambda a, b, c: a[b, c], [R(4, 3), I(0, 4, 5), I(0, 3, 5)])
  case("index_fancy_slice_then_idx", "a[{{nil}, b}]", lambda a, b: a[:, b], [R(4, 3), I(0, 3, 2)])
  case("index_fancy_int_and_idx", "a[{1, b}]", lambda a, b: a[1, b], [R(2, 4, 3), I(0, 4, 2)])
  case("index_on_permuted", "a.T[{{1, 3}, 0}]", lambda a: a.T[1:3, 0], [R(3, 4)])

  # ------------------------------------------------------------ matmul / linear / einsum
  case("matmul", "a:matmul(b)", torch.matmul, [R(3, 4), R(4, 2)])
  case("dot", "a:dot(b)", torch.matmul, [R(3, 4), R(4, 2)])
  case("matmul_batched", "a:matmul(b)", torch.matmul, [R(2, 3, 4), R(2, 4, 2)], atol=1e-5)
  case("matmul_batched_bcast", "a:matmul(b)", torch.matmul, [R(2, 3, 4), R(4, 5)], atol=1e-5)
  case("matmul_vec_mat", "a:matmul(b)", torch.matmul, [R(4), R(4, 3)])
  case("matmul_mat_vec", "a:matmul(b)", torch.matmul, [R(3, 4), R(4)])
  case("matmul_vec_vec", "a:dot(b)", torch.matmul, [R(4), R(4)])
  case("matmul_T", "a.T:matmul(b.T)", lambda a, b: a.T @ b.T, [R(4, 3), R(2, 4)])
  case("matmul_int", "a:matmul(b)", torch.matmul, [I(-5, 5, 3, 4), I(-5, 5, 4, 2)])
  case("matmul_0size_out", "a:matmul(b)", torch.matmul, [R(0, 3), R(3, 2)], atol=1e-7)
  case("matmul_0size_inner", "a:matmul(b)", torch.matmul, [R(2, 0), R(0, 3)], atol=1e-7)
  case("einsum_matmul", "Tensor.einsum('ij,jk->ik', a, b)", lambda a, b: torch.einsum("ij,jk->ik", a, b), [R(3, 4), R(4, 2)], atol=1e-5)
  case("einsum_transpose", "Tensor.einsum('ij->ji', a)", lambda a: torch.einsum("ij->ji", a), [R(3, 4)])
  case("einsum_sum", "Tensor.einsum('ijk->', a)", lambda a: torch.einsum("ijk->", a), [R(2, 3, 4)], atol=1e-5)
  case("einsum_rowsum", "Tensor.einsum('ij->i', a)", lambda a: torch.einsum("ij->i", a), [R(3, 4)])
  case("einsum_outer", "Tensor.einsum('i,j->ij', a, b)", lambda a, b: torch.einsum("i,j->ij", a, b), [R(3), R(4)])
  case("einsum_batched", "Tensor.einsum('bij,bjk->bik', a, b)", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [R(2, 3, 4), R(2, 4, 2)], atol=1e-5)
  case("rearrange_merge", "a:rearrange('b c h -> b (c h)')", lambda a: a.reshape(2, 12), [R(2, 3, 4)])
  case("rearrange_split_permute", "a:rearrange('b (c1 c2) h -> c1 b h c2', {c1=2})",
       lambda a: a.reshape(2, 2, 3, 4).permute(1, 0, 3, 2), [R(2, 6, 4)])
  case("rearrange_ellipsis_newdim", "a:rearrange('... h -> h 1 ...')",
       lambda a: a.permute(2, 0, 1).unsqueeze(1), [R(2, 3, 4)])
  case("einsum_implicit", "Tensor.einsum('ij,jk', a, b)", lambda a, b: torch.einsum("ij,jk", a, b), [R(3, 4), R(4, 2)], atol=1e-5)
  case("einsum_list_operands", "Tensor.einsum('i,i->i', {a, b})", lambda a, b: torch.einsum("i,i->i", a, b), [R(5), R(5)])
  case("einsum_ellipsis", "Tensor.einsum('...ij,...jk->...ik', a, b)", lambda a, b: torch.einsum("...ij,...jk->...ik", a, b),
       [R(2, 3, 4), R(2, 4, 2)], atol=1e-5)
  # tinygrad's linear weight is (in, out): x @ w + b
  case("linear", "a:linear(b, c)", lambda a, b, c: a @ b + c, [R(3, 4), R(4, 2), R(2)])
  case("linear_no_bias", "a:linear(b)", lambda a, b: a @ b, [R(2, 3, 4), R(4, 5)], atol=1e-5)
  case("linear_1d_weight", "a:linear(b, c)", lambda a, b, c: a * b + c, [R(3, 4), R(4), R(4)])

  # ------------------------------------------------------------ conv / pool / interpolate
  case("conv2d", "a:conv2d(b)", lambda x, w: F.conv2d(x, w), [R(1, 2, 5, 5), R(3, 2, 3, 3)], atol=1e-5)
  case("conv2d_bias", "a:conv2d(b, c)", lambda x, w, b: F.conv2d(x, w, b), [R(2, 2, 4, 5), R(3, 2, 2, 3), R(3)], atol=1e-5)
  case("conv2d_stride_padding", "a:conv2d(b, nil, {stride=2, padding=1})", lambda x, w: F.conv2d(x, w, stride=2, padding=1),
       [R(1, 2, 5, 6), R(2, 2, 3, 3)], atol=1e-5)
  case("conv2d_dilation", "a:conv2d(b, c, {dilation=2})", lambda x, w, b: F.conv2d(x, w, b, dilation=2),
       [R(1, 2, 6, 6), R(2, 2, 2, 2), R(2)], atol=1e-5)
  case("conv2d_groups", "a:conv2d(b, nil, {groups=2})", lambda x, w: F.conv2d(x, w, groups=2), [R(1, 4, 4, 4), R(4, 2, 3, 3)], atol=1e-5)
  case("conv2d_padding_tuple", "a:conv2d(b, nil, {padding={1, 0}})", lambda x, w: F.conv2d(x, w, padding=(1, 0)),
       [R(1, 1, 4, 4), R(2, 1, 3, 3)], atol=1e-5)
  # tinygrad's flat padding is (left, right, top, bottom) like F.pad; torch conv2d only takes symmetric
  case("conv2d_padding_flat_asym", "a:conv2d(b, nil, {padding={1, 0, 2, 1}})", lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w),
       [R(1, 1, 4, 4), R(2, 1, 3, 3)], atol=1e-5)
  # negative padding crops the input (torch's conv2d refuses it: crop, then convolve)
  case("conv2d_negative_padding", "a:conv2d(b, nil, {padding=-1})", lambda x, w: F.conv2d(x[:, :, 1:-1, 1:-1], w),
       [R(1, 2, 6, 6), R(2, 2, 2, 2)], atol=1e-5)
  case("conv2d_1d_input", "a:conv2d(b, c, {padding=1})", lambda x, w, b: F.conv1d(x, w, b, padding=1),
       [R(2, 2, 7), R(3, 2, 3), R(3)], atol=1e-5)
  case("conv2d_1d_stride", "a:conv2d(b, nil, {stride=2})", lambda x, w: F.conv1d(x, w, stride=2), [R(1, 2, 9), R(2, 2, 3)], atol=1e-5)
  case("conv2d_3x3_winograd_shape", "a:conv2d(b, c, {padding=1})", lambda x, w, b: F.conv2d(x, w, b, padding=1),
       [R(1, 2, 6, 6), R(2, 2, 3, 3), R(2)], atol=1e-5)
  # 32+ input values per output (cin * window): the weight gradient is a matmul of the windows
  case("conv2d_wide_stride_padding", "a:conv2d(b, c, {stride=2, padding=1})",
       lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [R(2, 4, 7, 7), R(3, 4, 3, 3), R(3)], atol=1e-5)
  case("conv2d_wide_dilation_asym", "a:conv2d(b, nil, {dilation=2, padding={1, 0, 2, 1}})",
       lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w, dilation=2), [R(1, 8, 6, 7), R(2, 8, 2, 2)], atol=1e-5)
  case("conv2d_wide_1d", "a:conv2d(b, nil, {padding=1})", lambda x, w: F.conv1d(x, w, padding=1),
       [R(2, 16, 9), R(3, 16, 3)], atol=1e-5)
  case("conv2d_relu_nchw_permuted", "a:permute(0, 3, 1, 2):conv2d(b):relu()", lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w).relu(),
       [R(1, 5, 5, 2), R(2, 2, 2, 2)], atol=1e-5)
  # at least 16 channels in and out: Winograd's F(4x4, 3x3) (stdlib/winograd.lua), its values and
  # both gradients; outputs that are no multiple of the 4x4 tile, padding on every side, none, or
  # uneven. tinygrad's own conv tests allow atol 1e-4.
  case("conv2d_winograd_pad_bias", "a:conv2d(b, c, {padding=1})", lambda x, w, b: F.conv2d(x, w, b, padding=1),
       [R(1, 16, 9, 11), R(16, 16, 3, 3), R(16)], atol=1e-4)
  case("conv2d_winograd_no_pad", "a:conv2d(b)", lambda x, w: F.conv2d(x, w),
       [R(1, 16, 8, 8), R(17, 16, 3, 3)], atol=1e-4)
  case("conv2d_winograd_asym_pad", "a:conv2d(b, nil, {padding={1, 0, 2, 1}})", lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w),
       [R(1, 16, 6, 7), R(20, 16, 3, 3)], atol=1e-4)
  # two in a row: the input's gradient went through both transforms twice, with a float32 error
  # of about 1e-6 of the largest value (the direct convolution's: 1e-7); values here reach the hundreds
  case("conv2d_winograd_relu_chain", "a:conv2d(b, nil, {padding=1}):relu():conv2d(c)",
       lambda x, w, v: F.conv2d(F.conv2d(x, w, padding=1).relu(), v),
       [R(1, 16, 8, 8), R(16, 16, 3, 3), R(16, 16, 3, 3)], atol=1e-3, gatol=1e-3)
  # 5x5 windows: F(2x2, 5x5), the MNIST CNN's conv2 (32 -> 64 channels, 12x12 -> 8x8) scaled down
  case("conv2d_winograd_5x5", "a:conv2d(b)", lambda x, w: F.conv2d(x, w), [R(2, 32, 12, 12), R(16, 32, 5, 5)], atol=1e-4)
  case("conv2d_winograd_5x5_pad_bias", "a:conv2d(b, c, {padding=2})", lambda x, w, b: F.conv2d(x, w, b, padding=2),
       [R(1, 16, 7, 9), R(16, 16, 5, 5), R(16)], atol=1e-4)
  case("conv_transpose2d", "a:conv_transpose2d(b)", lambda x, w: F.conv_transpose2d(x, w), [R(1, 2, 3, 3), R(2, 3, 2, 2)], atol=1e-5)
  case("conv_transpose2d_bias_stride", "a:conv_transpose2d(b, c, {stride=2})", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
       [R(1, 2, 3, 3), R(2, 2, 3, 3), R(2)], atol=1e-5)
  case("conv_transpose2d_padding_output_padding", "a:conv_transpose2d(b, nil, {stride=2, padding=1, output_padding=1})",
       lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [R(1, 2, 3, 3), R(2, 2, 3, 3)], atol=1e-5)
  case("conv_transpose2d_dilation", "a:conv_transpose2d(b, nil, {dilation=2})", lambda x, w: F.conv_transpose2d(x, w, dilation=2),
       [R(1, 1, 3, 3), R(1, 2, 2, 2)], atol=1e-5)
  case("conv_transpose2d_groups", "a:conv_transpose2d(b, nil, {groups=2})", lambda x, w: F.conv_transpose2d(x, w, groups=2),
       [R(1, 4, 3, 3), R(4, 1, 2, 2)], atol=1e-5)
  # kernel no larger than the stride: the windows do not overlap (moongrad's matmul-and-blocks path)
  case("conv_transpose2d_blocks_bias_groups", "a:conv_transpose2d(b, c, {stride=2, groups=2})",
       lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, groups=2), [R(2, 4, 3, 5), R(4, 3, 2, 2), R(6)], atol=1e-5)
  case("conv_transpose2d_blocks_padding_output_padding", "a:conv_transpose2d(b, nil, {stride={3, 2}, padding=1, output_padding=1})",
       lambda x, w: F.conv_transpose2d(x, w, stride=(3, 2), padding=1, output_padding=1), [R(1, 3, 4, 3), R(3, 2, 2, 2)], atol=1e-5)
  case("avg_pool2d", "a:avg_pool2d()", lambda x: F.avg_pool2d(x, 2), [R(1, 2, 4, 6)])
  case("avg_pool2d_kernel_stride", "a:avg_pool2d({3, 3}, 2)", lambda x: F.avg_pool2d(x, 3, 2), [R(1, 1, 7, 7)])
  case("avg_pool2d_padding", "a:avg_pool2d{kernel_size={3, 3}, stride=1, padding=1}", lambda x: F.avg_pool2d(x, 3, 1, 1), [R(1, 1, 4, 5)])
  case("avg_pool2d_no_count_pad", "a:avg_pool2d{kernel_size={3, 3}, stride=2, padding=1, count_include_pad=false}",
       lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [R(1, 1, 5, 6)])
  case("avg_pool2d_ceil_mode", "a:avg_pool2d{kernel_size={3, 3}, stride=2, ceil_mode=true}",
       lambda x: F.avg_pool2d(x, 3, 2, ceil_mode=True), [R(1, 1, 6, 6)])
  case("avg_pool2d_ceil_mode_padding", "a:avg_pool2d{kernel_size={3, 3}, stride=2, padding=1, ceil_mode=true}",
       lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [R(1, 1, 6, 6)])
  case("avg_pool2d_ceil_no_count_pad", "a:avg_pool2d{kernel_size={3, 3}, stride=2, padding=1, ceil_mode=true, count_include_pad=false}",
       lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [R(1, 1, 6, 6)])
  case("max_pool2d", "a:max_pool2d()", lambda x: F.max_pool2d(x, 2), [R(1, 2, 4, 6)])
  case("max_pool2d_kernel_stride", "a:max_pool2d({3, 3}, 2)", lambda x: F.max_pool2d(x, 3, 2), [R(1, 1, 7, 7)])
  case("max_pool2d_padding", "a:max_pool2d{kernel_size={3, 3}, stride=1, padding=1}", lambda x: F.max_pool2d(x, 3, 1, 1), [R(1, 1, 4, 5)])
  case("max_pool2d_dilation", "a:max_pool2d{kernel_size={2, 2}, stride=1, dilation=2}", lambda x: F.max_pool2d(x, 2, 1, dilation=2),
       [R(1, 1, 5, 5)])
  case("max_pool2d_ceil_mode", "a:max_pool2d{kernel_size={3, 3}, stride=2, ceil_mode=true}",
       lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), [R(1, 1, 6, 6)])
  case("max_pool2d_ceil_mode_padding", "a:max_pool2d{kernel_size={2, 2}, stride=2, padding=1, ceil_mode=true}",
       lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True), [R(1, 1, 5, 5)])
  case("max_pool2d_3d_input", "a:max_pool2d()", lambda x: F.max_pool2d(x, 2), [R(2, 4, 4)])
  case("interpolate_linear", "a:interpolate({3, 7})", lambda x: F.interpolate(x, size=(3, 7), mode="bilinear", align_corners=False),
       [R(1, 2, 4, 5)])
  case("interpolate_linear_align", "a:interpolate({6, 3}, 'linear', true)",
       lambda x: F.interpolate(x, size=(6, 3), mode="bilinear", align_corners=True), [R(1, 1, 4, 5)])
  case("interpolate_linear_1d", "a:interpolate{size={7}, mode='linear'}", lambda x: F.interpolate(x, size=7, mode="linear"),
       [R(1, 2, 4)])
  case("interpolate_nearest", "a:interpolate({5, 3}, 'nearest')", lambda x: F.interpolate(x, size=(5, 3), mode="nearest"),
       [R(1, 2, 3, 4)])

  # ------------------------------------------------------------ normalization / nn helpers
  case("layernorm", "a:layernorm()", lambda x: tg_layernorm(x, -1), [R(3, 5)])
  case("layernorm_axis_list", "a:layernorm{axis={1, 2}}", lambda x: tg_layernorm(x, (1, 2)), [R(2, 3, 4)])
  case("layernorm_eps", "a:layernorm(0, 0.1)", lambda x: tg_layernorm(x, 0, 0.1), [R(4, 3)])
  case("batchnorm", "a:batchnorm(b, c, a:mean{axis={0, 2, 3}}, a:var{axis={0, 2, 3}}:add(1e-5):rsqrt())",
       lambda x, w, b: (x - x.mean((0, 2, 3), keepdim=True)) * w.reshape(1, -1, 1, 1)
       * (tg_var(x, (0, 2, 3), keepdim=True) + 1e-5).rsqrt() + b.reshape(1, -1, 1, 1),
       [R(2, 3, 2, 2), R(3), R(3)])
  case("batchnorm_no_affine", "a:batchnorm(nil, nil, b, c)", lambda x, m, s: (x - m.reshape(1, -1, 1)) * s.reshape(1, -1, 1),
       [R(2, 3, 4), R(3), U(0.5, 2, 3)])
  case("one_hot", "a:one_hot(5)", lambda a: F.one_hot(a, 5), [I(0, 5, 6)])
  case("one_hot_2d", "a:one_hot(4)", lambda a: F.one_hot(a, 4), [I(0, 4, 2, 3)])
  case("one_hot_infer", "a:one_hot()", lambda a: F.one_hot(a), [V([0, 2, 3, 1], dtype="int32")])
  case("sdpa", "a:scaled_dot_product_attention(b, c)", tg_sdpa, [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3)])
  case("sdpa_bool_mask", "a:scaled_dot_product_attention(b, c, {attn_mask=d})",
       lambda q, k, v, m: tg_sdpa(q, k, v, mask=m), [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3), B(3, 5)])
  case("sdpa_float_mask", "a:scaled_dot_product_attention(b, c, {attn_mask=b:sum(-1):unsqueeze(1):detach()})",
       lambda q, k, v: tg_sdpa(q, k, v, mask=k.sum(-1).unsqueeze(1).detach()), [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3)])
  case("sdpa_causal", "a:scaled_dot_product_attention(b, c, {is_causal=true})", lambda q, k, v: tg_sdpa(q, k, v, causal=True),
       [R(2, 4, 4), R(2, 4, 4), R(2, 4, 3)])
  # PyTorch's conventions, against pt_sdpa: is_causal is ones(Lq, Lk).tril(0) also when Lq != Lk;
  # a bool mask (true = takes part) or a float mask (added, and given a gradient) broadcasts to
  # (..., Lq, Lk). Bool masks are explicit so that no row is all false (a NaN row in torch too).
  case("sdpa_causal_lq_lt_lk", "a:scaled_dot_product_attention(b, c, {is_causal=true})",
       lambda q, k, v: pt_sdpa(q, k, v, is_causal=True), [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3)])
  case("sdpa_causal_lq_gt_lk", "a:scaled_dot_product_attention(b, c, {is_causal=true})",
       lambda q, k, v: pt_sdpa(q, k, v, is_causal=True), [R(2, 5, 4), R(2, 3, 4), R(2, 3, 3)])
  case("sdpa_causal_heads_positional", "a:scaled_dot_product_attention(b, c, nil, 0, true)",
       lambda q, k, v: pt_sdpa(q, k, v, is_causal=True), [R(2, 2, 4, 3), R(2, 2, 4, 3), R(2, 2, 4, 5)])
  case("sdpa_bool_mask_2d", "a:scaled_dot_product_attention(b, c, {attn_mask=d})",
       lambda q, k, v, m: pt_sdpa(q, k, v, attn_mask=m),
       [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3), V([1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1], (3, 5), dtype="bool")])
  case("sdpa_bool_mask_key_padding", "a:scaled_dot_product_attention(b, c, {attn_mask=d})",
       lambda q, k, v, m: pt_sdpa(q, k, v, attn_mask=m),
       [R(2, 2, 3, 4), R(2, 2, 5, 4), R(2, 2, 5, 3), V([1, 1, 1, 0, 0, 1, 1, 1, 1, 1], (2, 1, 1, 5), dtype="bool")])
  case("sdpa_float_mask_grad", "a:scaled_dot_product_attention(b, c, {attn_mask=d})",
       lambda q, k, v, m: pt_sdpa(q, k, v, attn_mask=m), [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3), R(3, 5)])
  case("sdpa_float_mask_heads_inf", "a:scaled_dot_product_attention(b, c, {attn_mask=d})",
       lambda q, k, v, m: pt_sdpa(q, k, v, attn_mask=m),
       [R(2, 2, 3, 4), R(2, 2, 4, 4), R(2, 2, 4, 3),
        V([0, -INF, 0.5, -1, 2, 0, -INF, -INF, -3, 1, 0, 0.25, 0, 0, 0, 0, -INF, 1.5, 0, 0, 1, -INF, -INF, -INF], (2, 1, 3, 4))])

  # ------------------------------------------------------------ losses
  for red_ in ["mean", "sum", "none"]:
    rkw = "" if red_ == "mean" else ", {reduction='%s'}" % red_
    case("binary_crossentropy_" + red_, "a:binary_crossentropy(b%s)" % rkw,
         # composed: torch's F.binary_cross_entropy has no gradient for the target
         lambda x, y, r=red_: {"mean": torch.mean, "sum": torch.sum, "none": lambda t: t}[r](-(y * x.log() + (1 - y) * (1 - x).log())),
         [U(0.05, 0.95, 3, 4), U(0, 1, 3, 4)])
    case("binary_crossentropy_logits_" + red_, "a:binary_crossentropy_logits(b%s)" % rkw,
         lambda x, y, r=red_: {"mean": torch.mean, "sum": torch.sum, "none": lambda t: t}[r](
           x.clamp(min=0) - y * x + torch.log1p(torch.exp(-x.abs()))),
         [R(3, 4), U(0, 1, 3, 4)])
    case("sparse_categorical_crossentropy_" + red_, "a:sparse_categorical_crossentropy(b%s)" % rkw,
         lambda x, y, r=red_: tg_sparse_ce(x, y, reduction=r), [R(4, 5), I(0, 5, 4)])
    case("cross_entropy_" + red_, "a:cross_entropy(b%s)" % rkw, lambda x, y, r=red_: tg_cross_entropy(x, y, r), [R(4, 5), I(0, 5, 4)])
    case("nll_loss_" + red_, "a:nll_loss(b%s)" % rkw, lambda x, y, r=red_: F.nll_loss(x, y, reduction=r),
         [R(4, 5), I(0, 5, 4)])
  # pos_weight as PyTorch's binary_cross_entropy_with_logits (torch 1.13 has no gradient for pos_weight)
  case("binary_crossentropy_logits_pos_weight", "a:binary_crossentropy_logits(b, {pos_weight=c})",
       lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, pos_weight=p), [R(3, 4), U(0, 1, 3, 4), U(0.5, 3, 4, grad=False)])
  case("binary_crossentropy_logits_pos_weight_none_3d", "a:binary_crossentropy_logits(b, {pos_weight=c, reduction='none'})",
       lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, pos_weight=p, reduction="none"),
       [R(2, 3, 4), U(0, 1, 2, 3, 4), U(0.5, 3, 4, grad=False)])
  case("binary_crossentropy_logits_pos_weight_number_sum", "a:binary_crossentropy_logits(b, 'sum', 2.5)",
       lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=torch.tensor(2.5), reduction="sum"),
       [R(3, 4), U(0, 1, 3, 4)])
  case("binary_crossentropy_logits_pos_weight_large_logits", "a:binary_crossentropy_logits(b, {pos_weight=c, reduction='none'})",
       lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, pos_weight=p, reduction="none"),
       [U(-60, 60, 3, 4), V([0, 1, 0.5, 1, 0, 1, 0.2, 0, 1, 1, 0, 0.7], (3, 4)), U(0.5, 3, 4, grad=False)])
  case("sparse_categorical_crossentropy_ignore_index", "a:sparse_categorical_crossentropy(b, {ignore_index=2})",
       lambda x, y: tg_sparse_ce(x, y, ignore_index=2), [R(5, 4), V([2, 0, 2, 3, 1], dtype="int32")])
  case("sparse_categorical_crossentropy_label_smoothing", "a:sparse_categorical_crossentropy(b, {label_smoothing=0.1})",
       lambda x, y: tg_sparse_ce(x, y, ls=0.1), [R(4, 5), I(0, 5, 4)])
  case("sparse_categorical_crossentropy_ignore_smooth_sum",
       "a:sparse_categorical_crossentropy(b, {ignore_index=1, label_smoothing=0.2, reduction='sum'})",
       lambda x, y: tg_sparse_ce(x, y, ignore_index=1, ls=0.2, reduction="sum"), [R(5, 4), V([1, 0, 2, 1, 3], dtype="int32")])
  case("sparse_categorical_crossentropy_3d", "a:sparse_categorical_crossentropy(b)", lambda x, y: tg_sparse_ce(x, y),
       [R(2, 3, 4), I(0, 4, 2, 3)])
  case("cross_entropy_label_smoothing", "a:cross_entropy(b, {label_smoothing=0.1})", lambda x, y: tg_cross_entropy(x, y, ls=0.1),
       [R(4, 5), I(0, 5, 4)])
  case("cross_entropy_probs", "a:cross_entropy(b)", lambda x, y: tg_cross_entropy(x, y), [R(4, 5), U(0, 1, 4, 5)])
  case("nll_loss_weight", "a:nll_loss(b, c)", lambda x, y, w: F.nll_loss(x, y, w), [R(4, 5), I(0, 5, 4), U(0.5, 2, 5, grad=False)])
  case("nll_loss_ignore_index", "a:nll_loss(b, nil, 1)", lambda x, y: F.nll_loss(x, y, ignore_index=1),
       [R(5, 4), V([1, 0, 2, 1, 3], dtype="int32")])
  case("nll_loss_weight_ignore_sum", "a:nll_loss(b, c, {ignore_index=0, reduction='sum'})",
       lambda x, y, w: F.nll_loss(x, y, w, ignore_index=0, reduction="sum"), [R(5, 4), V([1, 0, 2, 1, 3], dtype="int32"), U(0.5, 2, 4, grad=False)])

  # ------------------------------------------------------------ sort / topk
  case("sort", "a:sort()", lambda a: tuple(torch.sort(a, -1)), [R(3, 5)], fwd_only=True)
  case("sort_dim0_descending", "a:sort(0, true)", lambda a: tuple(torch.sort(a, 0, descending=True)), [R(5, 3)], fwd_only=True)
  case("sort_grad", "a:sort{dim=1, descending=true}", lambda a: tuple(torch.sort(a, 1, descending=True)), [R(3, 5)])
  case("sort_ties_stable", "a:sort()", lambda a: tuple(torch.sort(a, stable=True)), [V([0.0, 1.0] * 5)], fwd_only=True)
  case("topk", "a:topk(3)", lambda a: tuple(torch.topk(a, 3)), [R(2, 6)], fwd_only=True)
  case("topk_grad", "a:topk(2, 1)", lambda a: tuple(torch.topk(a, 2, 1)), [R(3, 5)])
  case("topk_smallest_dim0", "a:topk(2, 0, false)", lambda a: tuple(torch.topk(a, 2, 0, largest=False)), [R(5, 3)], fwd_only=True)

  # ------------------------------------------------------------ factories (no inputs)
  case("arange", "Tensor.arange(5)", lambda: torch.arange(5), [])
  case("arange_start_stop_step", "Tensor.arange(2, 11, 3)", lambda: torch.arange(2, 11, 3), [])
  case("arange_negative_step", "Tensor.arange(5, -3, -2)", lambda: torch.arange(5, -3, -2), [])
  case("arange_float", "Tensor.arange(0.5, 3, 0.5)", lambda: torch.arange(0.5, 3, 0.5), [])
  case("arange_empty", "Tensor.arange(3, 3)", lambda: torch.arange(3, 3), [])
  case("linspace", "Tensor.linspace(0, 1, 5)", lambda: torch.linspace(0, 1, 5), [])
  case("linspace_negative", "Tensor.linspace(2, -3, 6)", lambda: torch.linspace(2, -3, 6), [])
  case("eye", "Tensor.eye(3)", lambda: torch.eye(3), [])
  case("eye_rect", "Tensor.eye(2, 4)", lambda: torch.eye(2, 4), [])
  case("zeros_like", "Tensor.zeros_like(a)", lambda a: torch.zeros_like(a), [R(2, 3, grad=False)])
  case("ones_like", "a:ones_like()", lambda a: torch.ones_like(a), [R(2, 3, grad=False)])
  case("full_like", "Tensor.full_like(a, 3)", lambda a: torch.full_like(a, 3), [R(2, 3, grad=False)])
  case("full_like_int", "a:full_like(7)", lambda a: torch.full_like(a, 7), [I(0, 3, 2, 3)])
  case("full", "Tensor.full({2, 3}, 1.5)", lambda: torch.full((2, 3), 1.5), [])
  case("zeros", "Tensor.zeros(2, 3)", lambda: torch.zeros(2, 3), [])
  case("ones_table", "Tensor.ones({3, 1})", lambda: torch.ones(3, 1), [])


# ---------------------------------------------------------------- run and write

def tg_dtype(t):
  # tinygrad's dtypes: the float reference (float64 here) stands for float32; int64 (torch's
  # default for indices, sums and argmax) stands for int32 (tinygrad's default int)
  return {torch.float64: "float32", torch.float32: "float32", torch.int64: "int32", torch.int32: "int32",
          torch.bool: "bool"}[t.dtype]


def to_torch(v, spec, grad):
  if spec.dtype == "float32":
    return torch.tensor(v, dtype=torch.float64, requires_grad=grad)
  if spec.dtype == "int32": return torch.tensor(v.astype(np.int64))
  return torch.tensor(v != 0)


def f32s(x):
  """A float32 value, shortest text that reads back as the same float32 (Lua reads it as a double;
  moongrad rounds it to float32)."""
  x = float(x)
  if math.isnan(x): return "0/0"
  if math.isinf(x): return "1/0" if x > 0 else "-1/0"
  s = repr(np.float32(x))
  if s.startswith("np.float32("): s = s[11:-1]
  if not any(ch in s for ch in ".en"): s += ".0"
  return s


def f64s(x):
  x = float(x)
  if math.isnan(x): return "0/0"
  if math.isinf(x): return "1/0" if x > 0 else "-1/0"
  s = "%.17g" % x
  if not any(ch in s for ch in ".en"): s += ".0"
  return s


def lua_data(values, dtype, exact64=False):
  flat = np.asarray(values).reshape(-1)
  if dtype == "bool": items = ["true" if v else "false" for v in flat]
  elif dtype == "int32": items = [str(int(v)) for v in flat]
  else: items = [(f64s if exact64 else f32s)(v) for v in flat]
  return "{" + ",".join(items) + "}"


def lua_shape(shape): return "{" + ",".join(str(int(s)) for s in shape) + "}"


def lua_str(s): return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_case(c, idx):
  rng = np.random.RandomState(zlib.crc32(c["name"].encode()) & 0x7fffffff)
  vals = [s.make(rng) for s in c["ins"]]
  ts = [to_torch(v, s, s.grad and not c["fwd_only"]) for v, s in zip(vals, c["ins"])]
  out = c["fn"](*ts)
  outs = list(out) if isinstance(out, (tuple, list)) else [out]
  odt = c["odtype"]
  odts = [tg_dtype(o) for o in outs] if odt is None else (odt if isinstance(odt, list) else [odt] * len(outs))
  # gradients: loss = sum(out_i * w_i) over the float outputs, w_i fixed random float32 values
  grads, ws = None, []
  float_outs = [i for i, d in enumerate(odts) if d == "float32"]
  want_grad = [s.grad and not c["fwd_only"] for s in c["ins"]]
  if float_outs and any(want_grad):
    loss = 0
    for i, o in enumerate(outs):
      if odts[i] != "float32": ws.append(None); continue
      w = rng.uniform(-1, 1, tuple(o.shape)).astype(np.float32).astype(np.float64)
      ws.append(w)
      loss = loss + (o * torch.tensor(w)).sum()
    targets = [t for t, g in zip(ts, want_grad) if g]
    if not torch.is_tensor(loss) or not loss.requires_grad:
      raise RuntimeError("case %s: no gradient path" % c["name"])
    gs = torch.autograd.grad(loss, targets, allow_unused=True)
    gi = iter(gs)
    grads = []
    for t, g in zip(ts, want_grad):
      if not g: grads.append(None); continue
      gv = next(gi)
      grads.append(torch.zeros_like(t) if gv is None else gv)
  lines = ["{name=%s, expr=%s," % (lua_str(c["name"]), lua_str(c["expr"]))]
  t = c["tol"]
  lines.append(" atol=%g, rtol=%g, grad_atol=%g, grad_rtol=%g,%s" % (t["atol"], t["rtol"], t["gatol"], t["grtol"],
               " signed_zero=true," if c["signed_zero"] else ""))
  ins = []
  for v, s, g in zip(vals, c["ins"], want_grad):
    ins.append("{shape=%s, dtype=%s, grad=%s, data=%s}" % (lua_shape(s.shape), lua_str(s.dtype), "true" if (g and grads is not None) else "false",
                                                         lua_data(v, s.dtype)))
  lines.append(" inputs={" + ",\n  ".join(ins) + "},")
  os_ = []
  for o, d in zip(outs, odts):
    o = o.detach()
    os_.append("{shape=%s, dtype=%s, data=%s}" % (lua_shape(o.shape), lua_str(d), lua_data(o.numpy(), d, exact64=True)))
  lines.append(" out={" + ",\n  ".join(os_) + "},")
  if grads is not None:
    lines.append(" w={" + ", ".join("false" if w is None else "{shape=%s, data=%s}" % (lua_shape(w.shape), lua_data(w, "float32"))
                                     for w in ws) + "},")
    gl = []
    for g in grads:
      gl.append("false" if g is None else "{shape=%s, data=%s}" % (lua_shape(g.shape), lua_data(g.detach().numpy(), "float32", exact64=True)))
    lines.append(" grads={" + ", ".join(gl) + "},")
  lines.append("}")
  return "\n".join(lines)


def main():
  add_cases()
  chunks = [run_case(c, i) for i, c in enumerate(CASES)]
  header = ("-- Generated by tests/data/make_torch_refs.py (torch %s, numpy %s); do not edit.\n"
            "-- Each case: name, expr (Lua over inputs a, b, c, d), inputs (float32 values), out (float64 reference;\n"
            "-- dtype is tinygrad's result dtype), w (weights of the loss sum(out * w)) and grads (float64 d loss / d input).\n"
            % (torch.__version__, np.__version__))
  text = header + "return {\n" + ",\n".join(chunks) + "\n}\n"
  with open(OUT, "w") as f: f.write(text)
  print("wrote %s: %d cases, %d bytes" % (OUT, len(CASES), len(text)))


if __name__ == "__main__":
  main()
