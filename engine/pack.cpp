#include "engine/pack.h"

#include <algorithm>
#include <optional>

#include "engine/codegen/heuristic.h"
#include "engine/device.h"
#include "engine/machine.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"

namespace mg {

namespace {

// Below these a pack costs more than it saves. Measured on Zen 5 (AVX-512 and the AVX2 profile),
// 1 thread: a 128^3 matmul gains nothing; from 256^3 the packed one ran 1.2-1.5x faster (AVX2
// profile: 1.5x at 256 and 512, 2.2x at 1024, 4x at 2048). B must be read again by enough rows
// to repay its copy: 32 where its row is a gather (attention's q @ k.T over 64 queries: 0.8 ->
// 0.12 ms), 128 where its rows are contiguous (a conv's weight gradient, 64 output channels by
// 36864 x 288 windows: the 42 MiB copy cost more than the packed matmul saved).
constexpr int64_t kMinProducts = int64_t(1) << 22;
constexpr int64_t kMinReuseGather = 32, kMinReuseRows = 128;
constexpr int64_t kMinColumnsReadingRows = 64;

// The strides of x as its movement chain reads its base (laid out contiguously, as a buffer or a
// node realized into one is); nullopt where the chain is not one view without a mask.
std::optional<std::vector<int64_t>> strides_of(const UOp* x) {
  std::vector<const UOp*> chain;
  for (; is_movement(x->op); x = x->src[0].get())
    chain.push_back(x);
  if (!x->has_shape || is_symbolic(x->shape)) return std::nullopt;
  ShapeTracker st = ShapeTracker::contiguous(x->shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    st = st.apply((*it)->op, (*it)->arg);
  if (st.views.size() != 1 || st.views[0].mask) return std::nullopt;
  return st.views[0].strides;
}

// Whether x is the epilogue of a reduce: math that reads a reduce's result through elementwise
// ops and reshapes only (through any other movement op, the scheduler realizes the reduce on its
// own). Realized with it, it would be fused after the reduce's tile of accumulators, where it ran
// one scalar at a time (GELU's gradient after a matmul: 5.6 ms against 1.0 + 0.2 apart).
bool epilogue(const UOp* x) {
  return reaches(
      x, [](const UOp* u) { return u->op == Ops::REDUCE_AXIS; },
      [](const UOp* u) { return is_elementwise(u->op) || u->op == Ops::RESHAPE; });
}

// An operand as the packed matmul reads it. Its base is realized first where it is elementwise
// math, not an epilogue, that the matmul would otherwise compute again for every tile that reads
// it (a concatenation's masked loads: the gradient of q, k and v split from one qkv ran at a
// quarter of the speed). Where its view is still not one plain view (attention's heads
// transposed back and merged, a reshape of a permute), its own elements are copied out
// contiguously, as PyTorch users write y.transpose(1, 2).contiguous(), and broadcast from there.
UOpRef computed_once(const UOpRef& x) {
  if (is_movement(x->op)) {
    UOpRef below = computed_once(x->src[0]);
    return below == x->src[0] ? x : x->replace_src({below});
  }
  if (!is_elementwise(x->op) || epilogue(x.get())) return x;
  return UOp::make(Ops::CONTIGUOUS, x->dtype, {x}, std::string("operand"));
}

UOpRef plain_operand(const UOpRef& x) {
  UOpRef y = computed_once(x);
  if (strides_of(y.get()) || y->op != Ops::EXPAND) return y;
  const UOpRef& own = y->src[0];
  return y->replace_src({UOp::make(Ops::CONTIGUOUS, own->dtype, {own}, std::string("operand"))});
}

// The device the kernel will run on: that of a buffer it reads (the first one a short walk from
// x finds), else the default device.
bool on_gpu(const UOp* x) {
  std::vector<const UOp*> todo{x};
  for (int seen = 0; !todo.empty() && seen < 64; seen++) {
    const UOp* u = todo.back();
    todo.pop_back();
    if (u->op == Ops::BUFFER) return get_device(u->buffer()->device).target().gpu;
    for (auto& s : u->src)
      todo.push_back(s.get());
  }
  return get_device(default_device()).target().gpu;
}

// The width of the row the CPU heuristic will tile an n-long dim with, where it is a vector's
// worth or more (else 0: no panels). A panel's row is its whole width, so a packed B is seen as
// packed.
int64_t row_width(int64_t n) {
  for (int64_t w : row_widths(n))
    if (n % w == 0) return 2 * w > machine().simd.float_lanes ? w : 0;
  return 0;
}

// A's own elements with the reduce dims innermost, where A is read across its rows: contiguous
// along a dim over outputs and jumping along the innermost reduce dim k (a weight gradient's
// dY^T: its rows are dY's columns). Each reduce step of a tile then read a few floats of another
// line, every line read again by each of the tile's row groups, from L2 at best. Copied once,
// each row of the tile is one stream. Measured on a Zen 3, 1 thread, show.try_opts: the GPT's
// MLP weight gradient (dY 12x64x512 by x 12x64x128) 2.4-2.8 ms (36-42 GFLOPS) -> 1.13 (89) plus
// the copy. Only where each element of A is read by 64 columns or more, so the copy is small
// beside the products (Winograd's dU, dM^T @ V^T over 32 input channels, has 32: its dM is 75
// MiB in the MNIST CNN, as long to copy as the matmul takes).
UOpRef rows_streamed(const UOpRef& a, const std::vector<int64_t>& st, const Shape& s, size_t k, size_t n,
                     const std::vector<int64_t>& axes) {
  auto reduced = [&](size_t d) { return std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end(); };
  bool across = false;
  for (size_t d = 0; d < s.size(); d++)
    across |= !reduced(d) && st[d] == 1 && s[d] > 1;
  if (!across || st[k] == 1 || s[n].value() < kMinColumnsReadingRows) return a;
  Shape keep;
  std::vector<int64_t> order, back(s.size());
  for (size_t d = 0; d < s.size(); d++) {
    keep.push_back(0);
    keep.push_back(st[d] == 0 ? sint(1) : s[d]);
    if (!reduced(d)) order.push_back(static_cast<int64_t>(d));
  }
  order.insert(order.end(), axes.begin(), axes.end());
  for (size_t i = 0; i < order.size(); i++)
    back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  const DType dt = a->dtype;
  UOpRef own = UOp::make(Ops::PERMUTE, dt, {UOp::make(Ops::SHRINK, dt, {a}, keep)}, order);
  UOpRef rows = UOp::make(Ops::CONTIGUOUS, dt, {own}, std::string("rows"));
  return UOp::make(Ops::EXPAND, dt, {UOp::make(Ops::PERMUTE, dt, {rows}, back)}, s);
}

UOpRef pack(const Match& m) {
  const UOpRef& r = m["r"];
  const UOpRef& x = r->src[0];
  const std::vector<int64_t>& axes = r->rarg().axes; // sorted
  if (settings().noopt || is_symbolic(x->shape) || x->numel() < kMinProducts) return nullptr;
  const Shape& s = x->shape;
  const size_t dims = s.size(), k = static_cast<size_t>(axes.back()); // the innermost reduce dim
  auto reduced = [&](size_t d) { return std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end(); };
  const UOpRef ops[2] = {plain_operand(x->src[0]), plain_operand(x->src[1])};
  auto sa = strides_of(ops[0].get()), sb = strides_of(ops[1].get());
  if (!sa || !sb) return nullptr;
  // the row: the innermost dim over outputs where one operand is broadcast; the other is B
  size_t n = dims;
  for (size_t d = dims; d-- > 0;)
    if (!reduced(d) && s[d] > 1 && ((*sa)[d] == 0 || (*sb)[d] == 0)) {
      n = d;
      break;
    }
  if (n == dims || ((*sa)[n] == 0) == ((*sb)[n] == 0)) return nullptr;
  const int bi = (*sb)[n] != 0 ? 1 : 0;
  const std::vector<int64_t>& st = bi == 1 ? *sb : *sa;
  const int64_t width = row_width(s[n].value());
  if (width == 0 || st[k] == 0 || (st[n] == 1 && st[k] == width)) return nullptr; // already panels
  int64_t reuse = 1;
  for (size_t d = 0; d < dims; d++)
    if (!reduced(d) && st[d] == 0) reuse *= s[d].value();
  if (reuse < (st[n] == 1 ? kMinReuseRows : kMinReuseGather) || on_gpu(x.get())) return nullptr;
  const UOpRef a_op = rows_streamed(ops[1 - bi], bi == 1 ? *sa : *sb, s, k, n, axes);
  // A B with contiguous rows and one reduce dim that fills at most a quarter of one core's L2
  // is read from there by every tile anyway. Measured, whole matmuls in turns, packed against
  // not: on the Xeon (2 MiB L2), matmul 256 (B 256 KiB) 115 against 140 GFLOPS at 2 threads; on
  // a Zen 3 (512 KiB L2), matmul 256 54 against 30 GFLOPS at 1 thread and 88 against 65 at 2,
  // and matmul 128 (64 KiB) 37 against 38-52. (A reduce over several dims, a weight gradient
  // over batch and tokens, gains at any size: its panel is one stream where B's own layout jumps
  // between batches.)
  int64_t b_bytes = 4;
  for (size_t d = 0; d < dims; d++)
    if (st[d] != 0) b_bytes *= s[d].value();
  if (st[n] == 1 && axes.size() == 1 && 4 * b_bytes <= machine().l2.bytes) {
    // B stays as it is; A is still computed once where it is masked or merged math
    if (a_op == x->src[1 - bi]) return nullptr;
    std::vector<UOpRef> src = {x->src[0], x->src[1]};
    src[1 - bi] = a_op;
    return r->replace_src({x->replace_src(std::move(src))});
  }

  // The loops with n split into (n / width, width); the dims past n move one place up.
  auto at = [&](size_t d) { return static_cast<int64_t>(d > n ? d + 1 : d); };
  Shape split;
  for (size_t d = 0; d < dims; d++) {
    if (d == n) {
      split.push_back(s[n].value() / width);
      split.push_back(width);
    } else
      split.push_back(s[d]);
  }
  std::vector<int64_t> axes2;
  for (int64_t a : axes)
    axes2.push_back(at(static_cast<size_t>(a)));
  const DType dt = x->dtype;
  // (B's own math, if any, goes into the pack kernel: it is computed once there)
  const UOpRef& braw = x->src[bi];
  UOpRef b = UOp::make(Ops::RESHAPE, dt, {strides_of(braw.get()) ? braw : ops[bi]}, split);
  // B's own elements (its broadcast dims cut to 1), then its panels: every other dim, then
  // (n / width, the reduce dims, width), so one panel's reduce steps follow each other, `width`
  // values each
  Shape keep;
  std::vector<int64_t> order;
  for (size_t d = 0; d < dims; d++) {
    bool bcast = !reduced(d) && d != n && st[d] == 0;
    for (int64_t e = at(d); e <= at(d) + (d == n ? 1 : 0); e++) {
      keep.push_back(0);
      keep.push_back(bcast ? sint(1) : split[e]);
    }
    if (!reduced(d) && d != n) order.push_back(at(d));
  }
  order.push_back(at(n));
  order.insert(order.end(), axes2.begin(), axes2.end());
  order.push_back(at(n) + 1);
  b = UOp::make(Ops::SHRINK, dt, {b}, keep);
  UOpRef panels =
      UOp::make(Ops::CONTIGUOUS, dt, {UOp::make(Ops::PERMUTE, dt, {b}, order)}, std::string("pack"));
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); i++)
    back[order[i]] = static_cast<int64_t>(i);
  b = UOp::make(Ops::EXPAND, dt, {UOp::make(Ops::PERMUTE, dt, {panels}, back)}, split);
  // A is broadcast along n: cut that dim to 1 and widen it again as (n / width, width), so its
  // view stays one that shows the broadcast (a reshape of A's masked view would add a view whose
  // strides hide it from the heuristic)
  Shape a_keep, a_ones = split;
  for (size_t d = 0; d < dims; d++) {
    a_keep.push_back(0);
    a_keep.push_back(d == n ? sint(1) : s[d]);
  }
  a_ones[at(n)] = a_ones[at(n) + 1] = 1;
  UOpRef a = UOp::make(Ops::SHRINK, dt, {a_op}, a_keep);
  a = UOp::make(Ops::EXPAND, dt, {UOp::make(Ops::RESHAPE, dt, {a}, a_ones)}, split);
  UOpRef prod = UOp::make(Ops::MUL, dt, bi == 1 ? std::vector<UOpRef>{a, b} : std::vector<UOpRef>{b, a});
  UOpRef red = UOp::make(Ops::REDUCE_AXIS, r->dtype, {prod}, ReduceArg{Ops::ADD, axes2});
  return UOp::make(Ops::RESHAPE, r->dtype, {red}, r->shape);
}

} // namespace

bool may_pack(const UOp* u) {
  return u->op == Ops::REDUCE_AXIS && u->rarg().op == Ops::ADD && u->dtype == DType::Float32 &&
         u->src[0]->op == Ops::MUL;
}

const PatternMatcher& pack_operand_rules() {
  static const PatternMatcher pm{
      {UPat::op(Ops::REDUCE_AXIS).named("r").where([](const UOp& u) { return may_pack(&u); }), pack}};
  return pm;
}

} // namespace mg
