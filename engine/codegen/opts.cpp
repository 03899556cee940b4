#include "engine/codegen/opts.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace mg {

std::vector<int64_t> launch_arg(LaunchDim d) { return {d.local ? 1 : 0, d.axis}; }
LaunchDim launch_dim(const UOp& special) {
  const auto& a = special.varg();
  return {a.at(0) != 0, static_cast<int>(a.at(1))};
}

namespace {

// Which views may take a second view where the new shape fits no single one: none, masked ones
// (after PADTO: a mask over 32 split 2x16 fits no single view), or any (MERGE).
enum class Stack { kNone, kMasked, kAny };

// Moves every view to the new shapes (full-shaped views to next.full, the others to next.out)
// if each stays a single view, or may stack; otherwise changes nothing.
bool reshape_all(KernelShape& ks, ViewList& sts, KernelShape next, Stack may_stack = Stack::kNone) {
  std::vector<ShapeTracker> out;
  for (auto& [u, st] : sts) {
    const Shape& to = st.shape() == ks.full ? next.full : next.out;
    auto v = st.views.back().reshape(to);
    if (!v && (may_stack == Stack::kAny || (may_stack == Stack::kMasked && st.views.back().mask))) {
      out.push_back(st.reshape(to));
      continue;
    }
    if (!v) return false;
    out.push_back(st);
    out.back().views.back() = *v;
  }
  for (size_t k = 0; k < sts.size(); k++)
    sts[k].second = out[k];
  ks = std::move(next);
  return true;
}

bool acts_on(OptOp op, int kind) {
  bool on_reduce = op == OptOp::UNROLL || op == OptOp::GROUP || op == OptOp::GROUPTOP || op == OptOp::BLOCK;
  return on_reduce ? kind == kReduce : kind == kGlobal;
}

// The names, in the order of enum OptOp.
constexpr const char* kNames[] = {"UPCAST", "UNROLL",   "SWAP",  "LOCAL",     "NOLOCALS", "PADTO",
                                  "GROUP",  "GROUPTOP", "BLOCK", "VECTORIZE", "MERGE"};
static_assert(std::size(kNames) == static_cast<size_t>(OptOp::MERGE) + 1, "a name for every OptOp");

// The loops and every view in a new order of dims.
void permute_all(KernelShape& ks, ViewList& sts, const std::vector<int64_t>& order) {
  KernelShape n = ks;
  for (size_t j = 0; j < order.size(); j++) {
    n.full[j] = ks.full[order[j]];
    n.out[j] = ks.out[order[j]];
    n.kind[j] = ks.kind[order[j]];
  }
  for (auto& [u, st] : sts)
    st.views.back() = st.views.back().permute(order);
  ks = std::move(n);
}

// The views and loops with dim `from` moved to position `to` (the dims between shift by one).
void move_dim(KernelShape& ks, ViewList& sts, size_t from, size_t to) {
  std::vector<int64_t> order;
  for (size_t j = 0; j < ks.full.size(); j++)
    if (j != from) order.push_back(static_cast<int64_t>(j));
  order.insert(order.begin() + static_cast<long>(to), static_cast<int64_t>(from));
  permute_all(ks, sts, order);
}

} // namespace

const char* name(OptOp op) { return kNames[static_cast<size_t>(op)]; }

OptOp opt_op(const std::string& n) {
  std::string known;
  for (size_t i = 0; i < std::size(kNames); i++) {
    if (n == kNames[i]) return static_cast<OptOp>(i);
    known += (known.empty() ? "" : ", ") + std::string(kNames[i]);
  }
  throw std::invalid_argument("unknown opt '" + n + "' (known: " + known + ")");
}

std::string Opt::to_string() const {
  if (op == OptOp::NOLOCALS) return name(op);
  return std::string(name(op)) + "(" + std::to_string(axis) + ", " + std::to_string(amount) + ")";
}

namespace {
// The loops with dims i and i+1 as one.
KernelShape merged(const KernelShape& ks, size_t i) {
  KernelShape n = ks;
  for (Shape* s : {&n.full, &n.out}) {
    (*s)[i] = (*s)[i] * (*s)[i + 1];
    s->erase(s->begin() + i + 1);
  }
  n.kind.erase(n.kind.begin() + i + 1);
  return n;
}
} // namespace

bool try_merge(KernelShape& ks, ViewList& sts, size_t i) {
  if (ks.kind[i] != ks.kind[i + 1]) return false;
  if (!ks.full[i].is_const() || !ks.full[i + 1].is_const()) return false; // a symbolic dim stays whole
  // A view stacked on another (a pool's gradient: 12x12 values spread over 24x24) reads through
  // div/mod of its dims: merged, 24x24 became 576 and `x / 48 * 12 + x / 2 % 12` per element;
  // kept apart, `y / 2 * 12 + x / 2`. The MNIST step's pool and norm gradients: 425 -> 400 ms.
  for (auto& e : sts)
    if (e.second.views.size() > 1) return false;
  return reshape_all(ks, sts, merged(ks, i));
}

namespace {
// The loop dim of the `axis`-th dim `op` acts on; `what` names the opt in the error.
size_t dim_of(const KernelShape& ks, OptOp op, int64_t axis, const Opt& what) {
  int64_t seen = 0;
  for (size_t d = 0; d < ks.full.size(); d++)
    if (acts_on(op, ks.kind[d]) && seen++ == axis) return d;
  throw IllegalOpt(what.to_string() + ": axis " + std::to_string(axis) + " does not exist; the kernel has " +
                   std::to_string(seen) + (acts_on(op, kReduce) ? " reduce dims" : " dims over outputs") +
                   (op == OptOp::SWAP ? "" : " left to split"));
}
} // namespace

size_t opt_dim(const KernelShape& ks, const Opt& o) { return dim_of(ks, o.op, o.axis, o); }

Opt opt_at(const KernelShape& ks, OptOp op, size_t d, int64_t amount) {
  int64_t axis = 0;
  for (size_t j = 0; j < d; j++)
    axis += acts_on(op, ks.kind[j]);
  return {op, axis, amount};
}

std::vector<std::pair<int64_t, int64_t>> stack_ranges(const KernelShape& ks, const ViewList& sts, size_t d) {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (auto& e : sts) {
    const std::optional<Mask>& mask = e.second.views.back().mask;
    if (!mask || d >= mask->size()) continue;
    std::pair<int64_t, int64_t> r = (*mask)[d];
    if ((r.first != 0 || r.second != ks.full[d]) &&
        std::find(pieces.begin(), pieces.end(), r) == pieces.end())
      pieces.push_back(r);
  }
  return pieces;
}

int64_t stack_pieces(const KernelShape& ks, const ViewList& sts, size_t d) {
  return static_cast<int64_t>(stack_ranges(ks, sts, d).size());
}

// The loads the kernel's body holds after `copies` copies, once the masks fold: each view in each
// copy, less where a stacked dim (2 pieces or more) is upcast whole (dim `whole` too, being upcast now),
// whose copies each keep only their own piece's loads. A fused Winograd transform (200-530 views) upcast
// along its channels instead held 27,000 in 128 copies: 164 s to lower, and BEAM's search of it ran the
// machine out of memory.
int64_t body_loads(const KernelShape& ks, const ViewList& sts, int64_t copies, size_t whole) {
  int64_t loads = static_cast<int64_t>(sts.size()) * copies;
  for (size_t j = 0; j < ks.full.size(); j++)
    if ((j == whole || ks.kind[j] == kUpcast) && ks.full[j].is_const() && stack_pieces(ks, sts, j) >= 2)
      loads /= ks.full[j].value();
  return loads;
}

void apply_opt(KernelShape& ks, ViewList& sts, const Opt& o) {
  auto fail = [&](const std::string& why) { throw IllegalOpt(o.to_string() + ": " + why); };
  if (o.op == OptOp::NOLOCALS) {
    if (o.axis != 0 || o.amount != 0) fail("takes no axis and no amount");
    if (std::count(ks.kind.begin(), ks.kind.end(), kLocal) ||
        std::count(ks.kind.begin(), ks.kind.end(), kGroup))
      fail("the kernel has local or group dims already");
    ks.no_locals = true;
    return;
  }
  bool group = o.op == OptOp::GROUP || o.op == OptOp::GROUPTOP;
  if ((o.op == OptOp::LOCAL || group) && ks.no_locals) fail("the kernel was given NOLOCALS");
  if (o.axis < 0) fail("the axis must be 0 or more");
  size_t d = opt_dim(ks, o);
  if (!ks.full[d].is_const()) fail("dim " + std::to_string(d) + " has the symbolic size " + ks.full[d].str());
  if (o.op == OptOp::PADTO) {
    int64_t size = ks.full[d];
    if (o.amount < 2) fail("the amount must be 2 or more");
    if (o.amount > 4 * size) // checked first: the rounding below cannot overflow then
      fail("padding " + std::to_string(size) + " iterations to " + std::to_string(o.amount) +
           " would do more than 4x the work");
    int64_t padded = (size + o.amount - 1) / o.amount * o.amount;
    if (padded == size)
      fail("the dim has " + std::to_string(size) + " iterations, a multiple of " + std::to_string(o.amount) +
           " already: nothing to pad");
    std::vector<std::pair<int64_t, int64_t>> arg(ks.full.size(), {0, 0});
    arg[d] = {0, padded - size};
    for (auto& [u, st] : sts) // full- and output-shaped views alike: a dim over outputs is in both
      st = st.pad(arg);
    ks.full[d] = ks.out[d] = padded;
    return;
  }
  if (o.op == OptOp::MERGE) {
    if (o.amount != 0) fail("takes no amount (0): the dim joins the next one whole");
    if (d + 1 >= ks.full.size() || ks.kind[d + 1] != kGlobal)
      fail("the next loop (dim " + std::to_string(d + 1) + ") is not a dim over outputs to join");
    if (!ks.full[d + 1].is_const()) fail("dim " + std::to_string(d + 1) + " has a symbolic size");
    reshape_all(ks, sts, merged(ks, d), Stack::kAny);
    return;
  }
  if (o.op == OptOp::VECTORIZE) {
    if (o.amount != 0) fail("takes no amount (0): the whole loop runs as vector lanes");
    if (std::count(ks.kind.begin(), ks.kind.end(), kVector)) fail("the kernel has a VECTORIZE already");
    if (ks.full[d] == 1) fail("dim " + std::to_string(d) + " has one iteration: no loop to vectorize");
    for (size_t j = d + 1; j < ks.full.size(); j++)
      if (ks.kind[j] != kUpcast && ks.kind[j] != kUnroll && ks.full[j] > 1)
        fail("the loop over dim " + std::to_string(j) +
             " runs inside it: only the innermost loop vectorizes");
    ks.kind[d] = kVector;
    return;
  }
  if (o.op == OptOp::SWAP) {
    if (o.amount == o.axis) fail("an axis cannot be swapped with itself");
    if (o.amount < 0) fail("the other axis must be 0 or more");
    size_t e = dim_of(ks, o.op, o.amount, o);
    std::vector<int64_t> order(ks.full.size());
    for (size_t j = 0; j < order.size(); j++)
      order[j] = static_cast<int64_t>(j);
    std::swap(order[d], order[e]);
    permute_all(ks, sts, order);
    return;
  }
  int64_t size = ks.full[d], amount = o.amount == 0 ? size : o.amount;
  if (amount < 2) fail("the amount must be 2 or more (0: the whole dim)");
  if (size % amount != 0)
    fail("the dim has " + std::to_string(size) + " iterations, not a multiple of " + std::to_string(amount));
  if (o.op == OptOp::BLOCK) {
    if (!ks.stores_reduce)
      fail("the kernel does not store its reduce as is (the output could not hold a partial result)");
    if (std::count(ks.kind.begin(), ks.kind.end(), kBlock)) fail("the kernel has a BLOCK already");
    if (amount == size) fail("one block of the whole dim blocks nothing");
  }
  // local, group and block dims are loops, not copies
  int64_t copies = o.op == OptOp::LOCAL || group || o.op == OptOp::BLOCK ? 1 : amount;
  for (size_t j = 0; j < ks.full.size(); j++)
    if (ks.kind[j] == kUpcast || ks.kind[j] == kUnroll) copies *= ks.full[j];
  if (copies > kMaxExpansion)
    fail(std::to_string(copies) + " copies of the kernel body (at most " + std::to_string(kMaxExpansion) +
         ")");
  if (int64_t loads =
          body_loads(ks, sts, copies, o.op == OptOp::UPCAST && amount == size ? d : ks.full.size());
      loads > kMaxBodyLoads)
    fail("the kernel body would hold " + std::to_string(loads) + " loads (at most " +
         std::to_string(kMaxBodyLoads) + "; upcast its stacked dims whole first)");
  if (group) {
    int64_t partials = amount;
    for (size_t j = 0; j < ks.full.size(); j++)
      if (ks.kind[j] == kUpcast || ks.kind[j] == kGroup) partials *= ks.full[j];
    if (partials > kMaxGroupPartials)
      fail(std::to_string(partials) + " partial results in a group (at most " +
           std::to_string(kMaxGroupPartials) + ")");
  }
  KernelShape n = ks;
  n.full[d] = n.full[d].value() / amount;
  n.full.insert(n.full.begin() + d + 1, amount);
  int64_t out = ks.reduces(d) ? 1 : amount;
  n.out[d] = n.out[d].value() / out;
  n.out.insert(n.out.begin() + d + 1, out);
  n.kind.insert(n.kind.begin() + d + 1, o.op == OptOp::LOCAL ? kLocal
                                        : group              ? kGroup
                                        : ks.reduces(d)      ? kUnroll
                                                             : kUpcast);
  if (o.op == OptOp::GROUPTOP) { // the outer part is the group: (amount, size / amount)
    n.full[d] = amount, n.full[d + 1] = size / amount;
    n.kind[d] = kGroup, n.kind[d + 1] = kReduce;
  }
  if (o.op == OptOp::BLOCK) // the outer part: the blocks; the inner part stays the reduce
    n.kind[d] = kBlock, n.kind[d + 1] = kReduce;
  if (!reshape_all(ks, sts, std::move(n), Stack::kMasked))
    fail("a view of the kernel cannot be split there and stay one view");
  if (o.op == OptOp::BLOCK && d != 0) // outermost: every output loop runs inside each block
    move_dim(ks, sts, d, 0);
  if (o.op == OptOp::LOCAL) { // after every global and earlier local dim: the innermost loop over outputs
    size_t last = d + 1;
    for (size_t j = 0; j < ks.kind.size(); j++)
      if (ks.kind[j] == kGlobal || ks.kind[j] == kLocal) last = std::max(last, j);
    if (last != d + 1) move_dim(ks, sts, d + 1, last);
  }
}

} // namespace mg
