#include "engine/codegen/semantics.h"

#include <climits>
#include <cmath>
#include <unordered_map>

namespace mg {

namespace {

using P = UPat;

UOpRef cst(DType d, double v) { return UOp::cconst(d, v); }
UOpRef where(const UOpRef& c, const UOpRef& a, const UOpRef& b) { return alu(Ops::WHERE, {c, a, b}); }
UOpRef ne(const UOpRef& a, double v) { return alu(Ops::CMPNE, {a, cst(a->dtype, v)}); }

DType unsigned_of(DType d) {
  switch (itemsize(d)) {
  case 1:
    return DType::UInt8;
  case 2:
    return DType::UInt16;
  case 4:
    return DType::UInt32;
  default:
    return DType::UInt64;
  }
}

// x // d and x % d by an integer divisor that may be 0, or -1 where INT_MIN / -1 overflows.
UOpRef safe_division(const Match& m) {
  const UOpRef& u = m.root();
  const UOpRef &a = u->src[0], &d = u->src[1];
  bool sign = !is_unsigned(u->dtype);
  if (d->vmin() > 0 || (sign && d->vmax() < -1)) return nullptr; // never 0 nor -1
  UOpRef ok = sign ? uand(ne(d, 0), ne(d, -1)) : ne(d, 0);
  UOpRef q = UOp::make(u->op, u->dtype, {a, where(ok, d, cst(d->dtype, 1))});
  UOpRef other =
      u->op == Ops::IDIV && sign ? where(ne(d, 0), alu(Ops::NEG, {a}), cst(u->dtype, 0)) : cst(u->dtype, 0);
  return where(ok, q, other);
}

// numpy and torch: a NaN on either side wins. (b < a) is false for any NaN, so a NaN in b is
// picked by the else branch and one in a by a != a.
UOpRef nan_max(const Match& m) {
  const UOpRef &a = m["a"], &b = m["b"];
  return where(alu(Ops::OR, {alu(Ops::CMPLT, {b, a}), alu(Ops::CMPNE, {a, a})}), a, b);
}

// C, OpenCL and GLSL leave a shift by the width or more undefined, LLVM makes it poison: the
// amount is masked into range, and the result outside it chosen as an unbounded shift gives.
UOpRef safe_shift(const Match& m) {
  const UOpRef& u = m.root();
  const UOpRef &x = u->src[0], &n = u->src[1];
  int bits = itemsize(u->dtype) * 8;
  if (n->vmin() >= 0 && n->vmax() < bits) return nullptr;
  DType un = unsigned_of(n->dtype);
  UOpRef in_range = alu(Ops::CMPLT, {cast(n, un), cst(un, bits)});
  UOpRef shifted = UOp::make(u->op, u->dtype, {x, alu(Ops::AND, {n, cst(n->dtype, bits - 1)})});
  UOpRef past = u->op == Ops::SHR && !is_unsigned(u->dtype)
                    ? UOp::make(Ops::SHR, u->dtype, {x, cst(n->dtype, bits - 1)}) // the sign, everywhere
                    : cst(u->dtype, 0);
  return where(in_range, shifted, past);
}

// A float outside the integer's range (C: undefined) saturates; NaN gives 0. The bounds are
// compared in the float's own type: lo and hi are powers of two (exact), and where the float
// cannot hold them they become -inf/inf, which still orders correctly.
UOpRef saturating_cast(const Match& m) {
  const UOpRef& u = m.root();
  const UOpRef& x = u->src[0];
  DType f = x->dtype, i = u->dtype;
  int bits = itemsize(i) * 8;
  bool un = is_unsigned(i);
  double lo = un ? -1.0 : -std::ldexp(1.0, bits - 1), hi = std::ldexp(1.0, un ? bits : bits - 1); // exact
  int64_t min_bits = un ? 0 : INT64_MIN, max_bits = un ? -1 : INT64_MAX; // wrapped to the width below
  UOpRef above_lo = alu(Ops::CMPLT, {cst(f, lo), x});                    // unsigned: (-1, 0) truncates to 0
  UOpRef inside = alu(Ops::CMPLT, {x, cst(f, hi)});
  UOpRef top = UOp::cconst_bits(i, bits == 64 || un ? max_bits : (int64_t{1} << (bits - 1)) - 1);
  UOpRef bottom = UOp::cconst_bits(i, bits == 64 || un ? min_bits : -(int64_t{1} << (bits - 1)));
  UOpRef low = where(alu(Ops::CMPNE, {x, x}), cst(i, 0), bottom);
  return where(above_lo, where(inside, UOp::make(Ops::CAST, i, {x}), top), low);
}

} // namespace

const PatternMatcher& pm_semantics() {
  auto int_result = [](const UOp& u) { return is_int(u.dtype); };
  static const PatternMatcher pm{
      {P::op({Ops::IDIV, Ops::MOD}).where(int_result), safe_division},
      {P::op(Ops::MAX, {P::var("a"), P::var("b")}).where([](const UOp& u) { return is_float(u.dtype); }),
       nan_max},
      {P::op({Ops::SHL, Ops::SHR}).where(int_result), safe_shift},
      {P::op(Ops::CAST, {P::any()}).where([](const UOp& u) {
         return is_int(u.dtype) && is_float(u.src[0]->dtype);
       }),
       saturating_cast},
  };
  return pm;
}

UOpRef apply_semantics(const UOpRef& root) { return rewrite_once(root, pm_semantics()); }

} // namespace mg
