// Tensor operations: the primitives build UOps; everything else is composed from them.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "engine/device.h"
#include "engine/errors.h"
#include "engine/tensor.h"

namespace mg {

namespace {
std::string axes_str(const std::vector<int64_t>& a) { return shape_str(a); }
constexpr double kLog2E = 1.4426950408889634, kLn2 = 0.6931471805599453;
} // namespace

Shape broadcast_shape(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; i++) {
    sint x = i < n - a.size() ? sint(1) : a[i - (n - a.size())];
    sint y = i < n - b.size() ? sint(1) : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      user_error("cannot broadcast shapes " + shape_str(a) + " and " + shape_str(b) + ": dim " +
                 std::to_string(i) + " is " + x.str() + " vs " + y.str());
    out[i] = x == 1 ? y : x;
  }
  return out;
}

static Tensor broadcast_to(const Tensor& t, const Shape& s) {
  if (t.shape() == s) return t;
  Shape padded(s.size() - t.shape().size(), 1);
  padded.insert(padded.end(), t.shape().begin(), t.shape().end());
  return t.reshape(padded).expand(s);
}

std::pair<Tensor, Tensor> broadcasted(const Tensor& a, const Tensor& b) {
  Shape s = broadcast_shape(a.shape(), b.shape());
  DType d = promote(a.dtype(), b.dtype());
  return {broadcast_to(a.cast(d), s), broadcast_to(b.cast(d), s)};
}

Tensor Tensor::from_scalar(Scalar s, const Tensor& like) {
  DType d = s.kind;
  DType td = like.dtype();
  if (is_float(td) || (is_int(td) && s.kind == DType::Int32)) d = td;
  return Tensor(UOp::cconst(d, s.v));
}

int64_t Tensor::resolve_axis(int64_t axis) const {
  int64_t n = ndim();
  if (axis < -std::max<int64_t>(n, 1) || axis >= std::max<int64_t>(n, 1))
    user_error("axis " + std::to_string(axis) + " is out of range for shape " + shape_str(shape()));
  return axis < 0 ? std::max<int64_t>(axis + n, 0) : axis; // a 0-d tensor takes axis 0 or -1, as in tinygrad
}

// ---------------------------------------------------------------- elementwise

Tensor Tensor::unop(Ops op) const { return Tensor(UOp::make(op, dtype(), {uop})); }

Tensor Tensor::binop(Ops op, const Tensor& b, bool to_float) const {
  auto [x, y] = broadcasted(*this, b);
  if (to_float && !is_float(x.dtype())) x = x.cast(default_float), y = y.cast(default_float);
  return Tensor(alu(op, {x.uop, y.uop}));
}

Tensor Tensor::cast(DType d) const {
  if (d == DType::Void) user_error("cannot cast a tensor to void");
  if (d == dtype()) return *this;
  return Tensor(UOp::make(Ops::CAST, d, {uop}));
}

Tensor Tensor::neg() const {
  if (dtype() == DType::Bool) return logical_not();
  return unop(Ops::NEG);
}
Tensor Tensor::add(const Tensor& b) const { return binop(Ops::ADD, b); }
Tensor Tensor::sub(const Tensor& b) const { return binop(Ops::SUB, b); }
Tensor Tensor::mul(const Tensor& b) const { return binop(Ops::MUL, b); }
Tensor Tensor::div(const Tensor& b) const {
  auto [x, y] = broadcasted(*this, b);
  if (!is_float(x.dtype())) x = x.cast(default_float), y = y.cast(default_float);
  return x.mul(y.reciprocal());
}
Tensor Tensor::idiv(const Tensor& b) const {
  auto [x, y] = broadcasted(*this, b);
  if (!is_float(x.dtype())) {
    // floor division, as Lua's and Python's //: C's truncation, minus 1 where signs differ
    Tensor q(alu(Ops::IDIV, {x.uop, y.uop}));
    if (is_unsigned(x.dtype()) || x.dtype() == DType::Bool) return q;
    Tensor r(alu(Ops::MOD, {x.uop, y.uop})), zero = from_scalar({0, DType::Int32}, x);
    Tensor fix = r.ne(zero).mul(r.lt(zero).ne(y.lt(zero)));
    return q.sub(fix.cast(q.dtype()));
  }
  // floor(x/y) for floats: truncate through int64, then step down where truncation rounded up
  Tensor q = x.div(y), t = q.cast(DType::Int64).cast(q.dtype());
  return t.gt(q).where(t.sub(Tensor::from_scalar({1, DType::Int32}, t)), t);
}
Tensor Tensor::pow(const Tensor& b) const {
  auto [x, y] = broadcasted(*this, b);
  DType out = x.dtype();
  DType f = is_float(out) ? out : DType::Float64; // float64 holds integer powers exactly up to 2^53
  Tensor r(alu(Ops::POW, {x.cast(f).uop, y.cast(f).uop}));
  return r.cast(out);
}
Tensor Tensor::maximum(const Tensor& b) const { return binop(Ops::MAX, b); }
// min(x, y) = -max(-x, -y) for floats (a NaN wins, as in max); for ints the same with the
// bitwise not, which, unlike negation, maps the lowest value into range.
Tensor Tensor::minimum(const Tensor& b) const {
  auto [x, y] = broadcasted(*this, b);
  if (x.dtype() == DType::Bool) return x.bitwise_and(y);
  if (!is_float(x.dtype())) return x.bitwise_not().maximum(y.bitwise_not()).bitwise_not();
  return x.neg().maximum(y.neg()).neg();
}
Tensor Tensor::bitwise_not() const {
  if (dtype() == DType::Bool) return logical_not();
  if (is_float(dtype())) user_error("bitwise not of a " + std::string(name(dtype())) + " tensor");
  // x ^ -1 (every bit set); for uint64, whose all-ones no double holds, (0 - x) - 1 (wrapping)
  if (dtype() == DType::UInt64) return neg().sub(from_scalar({1, DType::Int32}, *this));
  return binop(Ops::XOR, from_scalar({-1, DType::Int32}, *this));
}
Tensor Tensor::bitwise_and(const Tensor& b) const { return binop(Ops::AND, b); }
Tensor Tensor::lt(const Tensor& b) const { return binop(Ops::CMPLT, b); }
Tensor Tensor::gt(const Tensor& b) const { return b.lt(*this); }
Tensor Tensor::ne(const Tensor& b) const { return binop(Ops::CMPNE, b); }
Tensor Tensor::eq(const Tensor& b) const { return ne(b).logical_not(); }
Tensor Tensor::le(const Tensor& b) const { return gt(b).logical_not(); }
Tensor Tensor::ge(const Tensor& b) const { return lt(b).logical_not(); }
Tensor Tensor::logical_not() const {
  Tensor t = dtype() == DType::Bool ? *this : ne(from_scalar({0, DType::Int32}, *this));
  return t.ne(Tensor(UOp::cconst(DType::Bool, 1)));
}
Tensor Tensor::where(const Tensor& a, const Tensor& b) const {
  auto [x, y] = broadcasted(a, b);
  Shape s = broadcast_shape(shape(), x.shape());
  Tensor c = broadcast_to(cast(DType::Bool), s);
  return Tensor(alu(Ops::WHERE, {c.uop, broadcast_to(x, s).uop, broadcast_to(y, s).uop}));
}

static Tensor as_float(const Tensor& t) { return is_float(t.dtype()) ? t : t.cast(default_float); }
static Tensor scalar(const Tensor& like, double v) { return Tensor::from_scalar({v, DType::Float32}, like); }

Tensor Tensor::exp2() const { return as_float(*this).unop(Ops::EXP2); }
Tensor Tensor::log2() const { return as_float(*this).unop(Ops::LOG2); }
Tensor Tensor::exp() const { return as_float(*this).mul(scalar(as_float(*this), kLog2E)).exp2(); }
Tensor Tensor::log() const { return log2().mul(scalar(as_float(*this), kLn2)); }
Tensor Tensor::sqrt() const { return as_float(*this).unop(Ops::SQRT); }
Tensor Tensor::reciprocal() const { return as_float(*this).unop(Ops::RECIP); }
Tensor Tensor::rsqrt() const { return sqrt().reciprocal(); }
Tensor Tensor::sin() const { return as_float(*this).unop(Ops::SIN); }
Tensor Tensor::cos() const {
  Tensor f = as_float(*this);
  return scalar(f, M_PI / 2).sub(f).sin();
}
Tensor Tensor::relu() const {
  return gt(from_scalar({0, DType::Int32}, *this)).where(*this, from_scalar({0, DType::Int32}, *this));
}
Tensor Tensor::sigmoid() const {
  Tensor f = as_float(*this);
  return scalar(f, 1).add(f.mul(scalar(f, -kLog2E)).exp2()).reciprocal();
}
Tensor Tensor::tanh() const {
  Tensor f = as_float(*this);
  return scalar(f, 2).mul(f.mul(scalar(f, 2)).sigmoid()).sub(scalar(f, 1));
}
Tensor Tensor::abs() const { return lt(from_scalar({0, DType::Int32}, *this)).where(neg(), *this); }

// ---------------------------------------------------------------- reductions

Tensor Tensor::reduce(Ops op, Axes axes, bool keepdim) const {
  std::vector<int64_t> ax;
  if (!axes)
    for (int64_t i = 0; i < ndim(); i++)
      ax.push_back(i);
  else
    for (auto a : *axes)
      ax.push_back(resolve_axis(a));
  if (ndim() == 0) ax.clear(); // a 0-d tensor accepts axis 0/-1 and has nothing to reduce
  std::sort(ax.begin(), ax.end());
  if (std::adjacent_find(ax.begin(), ax.end()) != ax.end())
    user_error("repeated axis in reduce: " + axes_str(*axes));
  Shape kept = shape();
  bool empty = false;
  for (auto a : ax)
    empty |= kept[a] == 0, kept[a] = 1;
  Tensor r = *this;
  if (empty)
    r = Tensor::full(kept, reduce_identity(op, dtype()), dtype()); // as in tinygrad
  else if (!ax.empty())
    r = Tensor(UOp::make(Ops::REDUCE_AXIS, dtype(), {uop}, ReduceArg{op, ax}));
  if (keepdim) return r;
  Shape s;
  for (int64_t i = 0; i < ndim(); i++)
    if (std::find(ax.begin(), ax.end(), i) == ax.end()) s.push_back(shape()[i]);
  return r.reshape(s);
}

Tensor Tensor::sum(Axes axes, bool keepdim) const {
  Tensor r = cast(sum_acc_dtype(dtype())).reduce(Ops::ADD, axes, keepdim);
  // half-precision sums accumulate in float32 and come back in their own dtype, as in tinygrad
  return dtype() == DType::Float16 || dtype() == DType::BFloat16 ? r.cast(dtype()) : r;
}
Tensor Tensor::max(Axes axes, bool keepdim) const { return reduce(Ops::MAX, axes, keepdim); }
// As minimum: the max of the negated values (floats) or of the bitwise not (ints and bools).
Tensor Tensor::min(Axes axes, bool keepdim) const {
  if (!is_float(dtype())) return bitwise_not().max(axes, keepdim).bitwise_not();
  return neg().max(axes, keepdim).neg();
}
Tensor Tensor::mean(Axes axes, bool keepdim) const {
  Tensor s = cast(sum_acc_dtype(dtype())).reduce(Ops::ADD, axes, keepdim);
  int64_t n = s.numel() ? numel() / s.numel() : 0;
  return s.div(scalar(s, static_cast<double>(n))).cast(is_float(dtype()) ? dtype() : default_float);
}
Tensor Tensor::argmax(std::optional<int64_t> axis, bool keepdim) const {
  if (!axis) return flatten().argmax(0, false);
  int64_t a = resolve_axis(*axis);
  if (ndim() == 0) return Tensor::full({}, 0, DType::Int32);
  int64_t n = shape()[a];
  Tensor m = eq(max(std::vector<int64_t>{a}, true));
  Shape rs(ndim() - a, 1);
  rs[0] = n;
  Tensor idx =
      m.cast(DType::Int32).mul(Tensor::arange(static_cast<double>(n), 0, -1, DType::Int32).reshape(rs));
  Tensor top = idx.max(std::vector<int64_t>{a}, keepdim);
  return Tensor::from_scalar({static_cast<double>(n), DType::Int32}, top).sub(top);
}

// Inclusive prefix sum along the last axis without a scan primitive: pad with n-1 zeros in
// front, view the row as n overlapping windows of n (expand + reshape + shrink), sum each.
static Tensor cumsum_last(const Tensor& x) {
  int64_t n = x.shape().back(), L = 2 * n - 1, nd = x.ndim();
  std::vector<std::pair<int64_t, int64_t>> p(nd, {0, 0});
  p.back() = {n - 1, 0};
  Tensor y = x.pad(p).unsqueeze(-2); // (..., 1, L)
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  auto with = [&](std::initializer_list<int64_t> tail) {
    Shape s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  y = y.expand(with({n + 1, L})).reshape(with({(n + 1) * L}));
  std::vector<std::pair<sint, sint>> sh(nd, {0, 0});
  for (int64_t i = 0; i < nd - 1; i++)
    sh[i] = {0, lead[i]};
  sh.back() = {0, n * (L + 1)};
  y = y.shrink(sh).reshape(with({n, L + 1}));
  std::vector<std::pair<sint, sint>> sh2(nd + 1, {0, 0});
  for (int64_t i = 0; i < nd - 1; i++)
    sh2[i] = {0, lead[i]};
  sh2[nd - 1] = {0, n};
  sh2[nd] = {0, n};
  return y.shrink(sh2).sum(std::vector<int64_t>{-1});
}

Tensor Tensor::cumsum(int64_t axis) const {
  int64_t a = resolve_axis(axis);
  if (ndim() == 0 || shape()[a] <= 1) return cast(sum_acc_dtype(dtype()));
  return cumsum_last(transpose(a, -1)).transpose(a, -1);
}

// ---------------------------------------------------------------- movement

Tensor& Tensor::assign(const Tensor& v0) {
  if (v0.shape() != shape())
    user_error("cannot assign a tensor of shape " + shape_str(v0.shape()) + " to one of shape " +
               shape_str(shape()));
  Tensor v = v0.cast(dtype());
  // In place only on this tensor's own buffer: its graph is the buffer, or a pending assign to
  // it. A graph that merely equals a realized one may share another tensor's buffer.
  std::shared_ptr<Buffer> target;
  const UOp* b = uop->op == Ops::REALIZED ? uop->src[0].get() : uop.get(); // its graph is dropped
  if (b->op == Ops::RESHAPE) b = b->src[0].get();
  if (b->op == Ops::BUFFER ||
      (b->op == Ops::CONTIGUOUS && std::holds_alternative<std::shared_ptr<Buffer>>(b->arg)))
    target = b->buffer();
  if (target && static_cast<int64_t>(target->size) == max_numel() && v.uop != uop) {
    uop =
        UOp::make(Ops::CONTIGUOUS, dtype(), {v.uop, UOp::unique_tag()}, target); // two equal assigns stay two
    return *this;
  }
  // A slice (shrink, reshape, permute) of a buffer: the kernel stores into that region of the
  // buffer itself, and nothing else is copied (a KV cache written at a Variable's position).
  std::vector<const UOp*> moves; // from the top down
  UOpRef x = uop;
  while (x->op == Ops::SHRINK || x->op == Ops::RESHAPE || x->op == Ops::PERMUTE)
    moves.push_back(x.get()), x = x->src[0];
  if (x->op == Ops::REALIZED) x = x->src[0];
  while (x->op == Ops::RESHAPE)
    moves.push_back(x.get()), x = x->src[0];
  if (!moves.empty() && x->op == Ops::BUFFER) {
    UOpRef view = x; // the region, as movement ops over the buffer itself
    for (auto it = moves.rbegin(); it != moves.rend(); ++it)
      view = UOp::make((*it)->op, dtype(), {view}, (*it)->arg);
    // a value read from the same buffer (x[1:] = x[:-1]) is computed into a buffer of its own
    // first: stored in place as it is read, a shifted copy would read what it just wrote
    auto nodes = toposort(v.uop.get());
    if (std::any_of(nodes.begin(), nodes.end(), [&](const UOp* n) { return n == x.get(); }))
      v = v.contiguous();
    uop = UOp::make(Ops::CONTIGUOUS, dtype(), {v.uop, UOp::unique_tag(), view}, x->buffer());
    note_region_assign(uop, x->buffer());
    return *this;
  }
  uop = v.uop;
  return *this;
}

// A realized value detached is its buffer: the graph kept for gradients is dropped.
Tensor Tensor::detach() const {
  return Tensor(UOp::make(Ops::DETACH, dtype(), {uop->op == Ops::REALIZED ? uop->src[0] : uop}));
}

std::optional<Tensor> Tensor::copy_to(const std::string& to) const {
  std::string from = home().value_or(default_device()), dest = canonical_device(to);
  if (from == dest) return *this;
  if (!get_device(from).host_memory() || !get_device(dest).host_memory()) return std::nullopt;
  return Tensor(UOp::make(Ops::COPY, dtype(), {uop}, dest));
}

Tensor Tensor::movement(Ops op, Arg arg) const {
  Tensor r(UOp::make(op, dtype(), {uop}, std::move(arg)));
  checked_numel(r.shape()); // expand and pad can name more elements than int64 counts
  return r;
}

Tensor Tensor::reshape(const Shape& s0) const {
  if (is_symbolic(s0) || is_symbolic(shape())) { // no -1 to infer: the sizes must agree as expressions
    if (!(sprod(s0) == sprod(shape())))
      user_error("cannot reshape " + shape_str(shape()) + " to " + shape_str(s0) + ": " +
                 sprod(shape()).str() + " elements vs " + sprod(s0).str());
    if (s0 == shape()) return *this;
    return movement(Ops::RESHAPE, s0);
  }
  Shape s = s0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == -1) {
      if (infer >= 0) user_error("reshape " + shape_str(s0) + ": only one dimension can be -1");
      infer = static_cast<int64_t>(i);
    } else if (s[i] < 0)
      user_error("reshape " + shape_str(s0) + ": negative dimension");
    else if (__builtin_mul_overflow(known, s[i].value(), &known))
      user_error("reshape " + shape_str(s0) + ": too many elements");
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known)
      user_error("cannot reshape " + shape_str(shape()) + " to " + shape_str(s0));
    s[infer] = numel() / known;
  }
  if (known * (infer >= 0 ? s[infer].value() : 1) != numel())
    user_error("cannot reshape " + shape_str(shape()) + " (" + std::to_string(numel()) + " elements) to " +
               shape_str(s0) + " (" + std::to_string(known) + " elements)");
  if (s == shape()) return *this;
  return movement(Ops::RESHAPE, s);
}

Tensor Tensor::permute(const std::vector<int64_t>& order0) const {
  std::vector<int64_t> order;
  for (auto o : order0)
    order.push_back(o < 0 ? o + ndim() : o);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(order.size()) == ndim();
  for (size_t i = 0; ok && i < sorted.size(); i++)
    ok = sorted[i] == static_cast<int64_t>(i);
  if (!ok)
    user_error("permute order " + axes_str(order0) + " is not a permutation of the axes of shape " +
               shape_str(shape()));
  bool identity = true;
  for (size_t i = 0; i < order.size(); i++)
    identity &= order[i] == static_cast<int64_t>(i);
  if (identity) return *this;
  return movement(Ops::PERMUTE, order);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  a = resolve_axis(a), b = resolve_axis(b);
  if (ndim() == 0) return *this;
  std::vector<int64_t> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[a], order[b]);
  return permute(order);
}

Tensor Tensor::expand(const Shape& s0) const {
  if (s0.size() < shape().size())
    user_error("cannot expand shape " + shape_str(shape()) + " to " + shape_str(s0) + ": fewer dimensions");
  Tensor t = *this;
  if (s0.size() > shape().size()) {
    Shape p(s0.size() - shape().size(), 1);
    p.insert(p.end(), shape().begin(), shape().end());
    t = reshape(p);
  }
  Shape s = s0;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i].vmin() < -1) user_error("cannot expand to " + shape_str(s0) + ": negative dimension");
    if (s[i] == -1) s[i] = t.shape()[i];
    if (t.shape()[i] != s[i] && t.shape()[i] != 1)
      user_error("cannot expand shape " + shape_str(shape()) + " to " + shape_str(s0) + ": dim " +
                 std::to_string(i) + " has size " + t.shape()[i].str() + ", not 1");
  }
  if (s == t.shape()) return t;
  return t.movement(Ops::EXPAND, s);
}

Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& p, double value) const {
  if (static_cast<int64_t>(p.size()) != ndim())
    user_error("pad needs one (before, after) pair per dim: got " + std::to_string(p.size()) + " for shape " +
               shape_str(shape()));
  Shape flat;
  bool any = false;
  for (auto [b, a] : p) {
    if (b < 0 || a < 0) user_error("pad amounts must be >= 0 (shape " + shape_str(shape()) + ")");
    flat.push_back(b), flat.push_back(a);
    any |= b || a;
  }
  if (!any) return *this;
  Tensor r = movement(Ops::PAD, flat);
  if (value == 0) return r;
  Tensor inside = Tensor::full(shape(), 1, DType::Bool).pad(p);
  return inside.where(r, from_scalar({value, std::floor(value) == value ? DType::Int32 : DType::Float32}, r));
}

Tensor Tensor::shrink(const std::vector<std::pair<sint, sint>>& s) const {
  if (static_cast<int64_t>(s.size()) != ndim())
    user_error("shrink needs one (start, end) pair per dim: got " + std::to_string(s.size()) + " for shape " +
               shape_str(shape()));
  Shape flat;
  bool same = true;
  for (size_t i = 0; i < s.size(); i++) {
    auto& [b, e] = s[i];
    // a variable's whole range must fit, so one kernel serves every value it can be bound to
    if (b.vmin() < 0 || e.vmax() > shape()[i].vmax() || (e - b).vmin() < 0 ||
        (!shape()[i].is_const() && !(e == shape()[i]) && !e.is_const() && e.vmax() > shape()[i].vmin()))
      user_error("shrink (" + b.str() + ", " + e.str() + ") is out of range for dim " + std::to_string(i) +
                 " of shape " + shape_str(shape()) +
                 (b.is_const() && e.is_const() ? "" : " for some value of its variables"));
    flat.push_back(b), flat.push_back(e);
    same &= b == 0 && e == shape()[i];
  }
  if (same) return *this;
  return movement(Ops::SHRINK, flat);
}

Tensor Tensor::flip(const std::vector<int64_t>& axes) const {
  std::vector<int64_t> f(ndim(), 0);
  for (auto a : axes) {
    int64_t r = resolve_axis(a);
    if (ndim() == 0) continue;
    if (f[r]) user_error("flip: axis " + std::to_string(a) + " given twice");
    f[r] = 1;
  }
  if (std::all_of(f.begin(), f.end(), [](int64_t v) { return v == 0; })) return *this;
  return movement(Ops::FLIP, std::move(f));
}

Tensor Tensor::squeeze(std::optional<int64_t> axis) const {
  Shape s;
  if (!axis) {
    for (auto d : shape())
      if (d != 1) s.push_back(d);
    return reshape(s);
  }
  int64_t a = resolve_axis(*axis);
  if (ndim() == 0 || shape()[a] != 1) return *this;
  s = shape();
  s.erase(s.begin() + a);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  int64_t n = ndim() + 1;
  if (axis < -n || axis >= n)
    user_error("unsqueeze axis " + std::to_string(axis) + " is out of range for shape " + shape_str(shape()));
  if (axis < 0) axis += n;
  Shape s = shape();
  s.insert(s.begin() + axis, 1);
  return reshape(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (ndim() == 0) return reshape({1});
  start = resolve_axis(start), end = resolve_axis(end);
  if (start > end)
    user_error("flatten: start axis " + std::to_string(start) + " is after end axis " + std::to_string(end) +
               " for shape " + shape_str(shape()));
  Shape s(shape().begin(), shape().begin() + start);
  int64_t p = 1;
  for (int64_t i = start; i <= end; i++)
    p *= shape()[i];
  s.push_back(p);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::slice(const std::vector<Slice>& idx) const {
  if (static_cast<int64_t>(idx.size()) > ndim())
    user_error("too many indices (" + std::to_string(idx.size()) + ") for shape " + shape_str(shape()));
  Tensor t = *this;
  std::vector<std::pair<sint, sint>> sh;
  std::vector<int64_t> flips, steps(ndim(), 1);
  Shape final_shape;
  for (int64_t d = 0; d < ndim(); d++) {
    int64_t n = shape()[d];
    Slice s = d < static_cast<int64_t>(idx.size()) ? idx[d] : Slice{};
    if (s.is_index) {
      int64_t i = s.index < 0 ? s.index + n : s.index;
      if (i < 0 || i >= n)
        user_error("index " + std::to_string(s.index) + " is out of bounds for axis " + std::to_string(d) +
                   " with size " + std::to_string(n));
      sh.push_back({i, i + 1});
      continue;
    }
    int64_t step = s.step.value_or(1);
    if (step == 0) user_error("slice step cannot be 0 (axis " + std::to_string(d) + ")");
    int64_t lo, hi;
    if (step > 0) {
      int64_t b = s.start.value_or(0), e = s.stop.value_or(n);
      if (b < 0) b += n;
      if (e < 0) e += n;
      lo = std::clamp<int64_t>(b, 0, n), hi = std::clamp<int64_t>(e, 0, n);
    } else {
      int64_t b = s.start ? (*s.start < 0 ? *s.start + n : *s.start) : n - 1;
      int64_t e = s.stop ? (*s.stop < 0 ? *s.stop + n : *s.stop) : -1;
      b = std::clamp<int64_t>(b, -1, n - 1), e = std::clamp<int64_t>(e, -1, n - 1);
      lo = e + 1, hi = b + 1;
      flips.push_back(d);
    }
    if (hi < lo) hi = lo;
    sh.push_back({lo, hi});
    steps[d] = step < 0 ? -step : step;
    final_shape.push_back((hi - lo + steps[d] - 1) / steps[d]);
  }
  t = t.shrink(sh).flip(flips);
  // strides > 1: pad each such dim to a multiple of the step, split it, keep index 0 of the split
  for (int64_t d = 0; d < ndim(); d++) {
    if (steps[d] == 1 || (idx.size() > static_cast<size_t>(d) && idx[d].is_index)) continue;
    int64_t n = t.shape()[d], k = steps[d], m = (n + k - 1) / k;
    std::vector<std::pair<int64_t, int64_t>> p(t.ndim(), {0, 0});
    p[d] = {0, m * k - n};
    t = t.pad(p);
    Shape s = t.shape();
    s[d] = m;
    s.insert(s.begin() + d + 1, k);
    std::vector<std::pair<sint, sint>> keep;
    for (size_t i = 0; i < s.size(); i++)
      keep.push_back({0, s[i]});
    keep[d + 1] = {0, 1};
    Shape back = t.shape();
    back[d] = m;
    t = t.reshape(s).shrink(keep).reshape(back);
  }
  return t.reshape(final_shape);
}

// ---------------------------------------------------------------- composed

Tensor Tensor::matmul(const Tensor& w) const {
  int64_t n1 = ndim(), n2 = w.ndim();
  if (n1 == 0 || n2 == 0)
    user_error("matmul needs at least 1-D tensors: got shapes " + shape_str(shape()) + " and " +
               shape_str(w.shape()));
  sint k1 = shape().back(), k2 = w.shape()[n2 >= 2 ? n2 - 2 : 0];
  if (!(k1 == k2))
    user_error("matmul shape mismatch: " + shape_str(shape()) + " @ " + shape_str(w.shape()) + " (" +
               k1.str() + " != " + k2.str() + ")");
  // x: (..., n, 1, k); w: (..., 1, m, k); multiply and sum the last axis.
  int64_t ones = std::min({n1 - 1, n2 - 1, int64_t(1)});
  Shape xs(shape().begin(), shape().end() - 1);
  xs.insert(xs.end(), ones, 1);
  xs.push_back(k1);
  Shape ws(w.shape().begin(), w.shape().end() - std::min<int64_t>(n2, 2));
  ws.insert(ws.end(), ones, 1);
  ws.insert(ws.end(), w.shape().end() - std::min<int64_t>(n2, 2), w.shape().end());
  Tensor x = reshape(xs);
  Tensor wt = w.reshape(ws).transpose(-1, -std::min<int64_t>(n2, 2));
  return x.mul(wt).sum(std::vector<int64_t>{-1});
}

Tensor Tensor::softmax(int64_t axis) const {
  Tensor f = as_float(*this);
  Tensor m = f.sub(f.max(std::vector<int64_t>{axis}, true));
  Tensor e = m.exp();
  return e.div(e.sum(std::vector<int64_t>{axis}, true));
}

Tensor Tensor::log_softmax(int64_t axis) const {
  Tensor f = as_float(*this);
  Tensor m = f.sub(f.max(std::vector<int64_t>{axis}, true));
  return m.sub(m.exp().sum(std::vector<int64_t>{axis}, true).log());
}

} // namespace mg
