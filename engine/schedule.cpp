#include "engine/schedule.h"
#include "engine/errors.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "engine/device.h"
#include "engine/pack.h"
#include "engine/pattern.h"
#include "engine/schedule_cache.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"
#include "engine/stack_guard.h"

namespace mg {

namespace {
// Whether any node below root holds a realized value (the walk stops at those it finds).
bool any_cached(const UOp* root) {
  return reaches(
      root, [](const UOp* s) { return s->op == Ops::REALIZED || s->cached() != nullptr; },
      [](const UOp*) { return true; });
}
} // namespace

UOpRef resolve_realized(const UOpRef& root, std::vector<std::pair<UOpRef, UOpRef>>* rebuilt) {
  if (auto r = root->cached()) return r;
  if (!any_cached(root.get())) return root; // the usual case: nothing to replace, nothing rebuilt
  // A walk that stops at each realized node: what lies below it (a REALIZED node's graph, kept
  // for gradients) is never visited. Iterative: graphs can be 100k nodes deep.
  std::unordered_map<const UOp*, UOpRef> done; // keys stay alive: they are all below root
  std::vector<std::pair<UOpRef, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [u, i] = stack.back();
    if (i == 0 && done.count(u.get())) { // finished through another path
      stack.pop_back();
      continue;
    }
    if (i < u->src.size()) {
      const UOpRef& s = u->src[i++];
      if (done.count(s.get())) continue;
      if (auto r = s->cached())
        done.emplace(s.get(), r);
      else
        stack.push_back({s, 0});
      continue;
    }
    UOpRef x = with_sources(u, done);
    if (auto r = x->cached())
      x = r; // rebuilt into a node an earlier realize computed
    else if (rebuilt && x != u)
      rebuilt->push_back({u, x});
    done.emplace(u.get(), std::move(x));
    stack.pop_back();
  }
  return done.at(root.get());
}

namespace {

// tinygrad's split_reduceop: a reduce that folds many inputs into few outputs (a sum of
// everything) would be one long loop on one core. Split one reduced dim into (d, n/d) and reduce
// the n/d part first: d partial results, each over a contiguous run (the kernel splits them
// across cores), then a short second reduce over the d. (tinygrad moves d last, which suits a
// GPU's coalesced loads; on a CPU it makes every partial stride through memory.) The tensor
// graph (what x.uop shows, what autograd sees) is unchanged: this rewrites the graph being
// scheduled.
// tinygrad splits from 32,768 inputs per output. On a CPU a split pays only when the loop is long
// enough to be worth waking another core for: from 2^22 (a 16 MiB float32 sum; a 1M sum stays the
// one fused kernel the lessons show).
bool long_reduce(const UOp* r) {
  return r->op == Ops::REDUCE_AXIS && r->max_numel() > 0 &&
         r->src[0]->max_numel() / r->max_numel() >= (int64_t(1) << 22);
}

// A reduce whose outputs lie between the dims it reduces (a batch norm's sums over N and H x W of
// (N, C, H, W)): each output's loop jumps through the input a run of H x W at a time, C runs
// apart, and the prefetcher starts again at every run. Reduced first over the dims inside the
// innermost output dim and then over the outer ones, the first kernel reads the input in its
// order (partials (N, C), at most a 64th of the input), and the second reads the few partials.
// From 2^20 inputs, the inner run 64 or more. Measured on a Zen 3, 1 thread, the MNIST CNN's step,
// each kernel's best of 12 steps: its six sums over 512 x 32 x 24 x 24, 38.0 -> 24.3 ms; those over
// 512 x 64 x 8 x 8, 10.4 -> 5.1 ms (14 kernels more, of 0.02-0.04 ms each); the step's kernels
// 250 -> 236 ms.
struct StridedSplit {
  std::vector<int64_t> inner, outer; // the reduced dims inside, and outside, the last output dim
};
std::optional<StridedSplit> strided_reduce(const UOp* r) {
  if (r->op != Ops::REDUCE_AXIS || is_symbolic(r->src[0]->shape) ||
      r->src[0]->max_numel() < (int64_t(1) << 20))
    return std::nullopt;
  const Shape& s = r->src[0]->shape;
  const std::vector<int64_t>& axes = r->rarg().axes;
  auto reduced = [&](size_t d) { return std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end(); };
  size_t last = s.size();
  for (size_t d = 0; d < s.size(); d++)
    if (!reduced(d) && s[d].value() > 1) last = d;
  if (last == s.size()) return std::nullopt;
  StridedSplit sp;
  int64_t run = 1;
  for (int64_t a : axes)
    if (s[static_cast<size_t>(a)].value() > 1) {
      (static_cast<size_t>(a) < last ? sp.outer : sp.inner).push_back(a);
      if (static_cast<size_t>(a) > last) run *= s[static_cast<size_t>(a)].value();
    }
  if (sp.outer.empty() || run < 64) return std::nullopt;
  return sp;
}

// A reduce of constants only (arange's cumsum) folds to a closed form: neither rule splits it.
bool loads_a_buffer(const UOpRef& x) {
  for (const UOp* n : toposort(x.get()))
    if (n->op == Ops::BUFFER) return true;
  return false;
}

const PatternMatcher& split_reduce_rules() {
  static const PatternMatcher pm{
      {UPat::op(Ops::REDUCE_AXIS).named("r"),
       [](const Match& m) -> UOpRef {
         const UOpRef& r = m["r"];
         const UOpRef& x = r->src[0];
         int64_t out = r->max_numel();
         if (!long_reduce(r.get()) || !loads_a_buffer(x)) return nullptr;
         const ReduceArg& ra = r->rarg();
         for (int64_t i : ra.axes)
           for (int64_t d = x->shape[i].is_const() ? std::min<int64_t>(256, (int64_t(1) << 22) / out) : 0;
                d >= 8; d--) { // <= 2^22 partials (a symbolic axis is not split)
             if (x->shape[i] % d) continue;
             Shape split = x->shape;
             split[i] = d;
             split.insert(split.begin() + i + 1, x->shape[i] / d);
             std::vector<int64_t> axes; // the original axes, with i now the inner part (i + 1)
             for (int64_t a : ra.axes)
               axes.push_back(a < i ? a : a + 1);
             UOpRef y = UOp::make(Ops::RESHAPE, x->dtype, {x}, split);
             UOpRef partial = UOp::make(Ops::REDUCE_AXIS, r->dtype, {y}, ReduceArg{ra.op, axes});
             UOpRef total = UOp::make(Ops::REDUCE_AXIS, r->dtype, {partial}, ReduceArg{ra.op, {i}});
             return UOp::make(Ops::RESHAPE, r->dtype, {total}, r->shape);
           }
         return nullptr;
       }},
      {UPat::op(Ops::REDUCE_AXIS).named("r"), [](const Match& m) -> UOpRef {
         const UOpRef& r = m["r"];
         auto sp = strided_reduce(r.get());
         if (!sp || !loads_a_buffer(r->src[0])) return nullptr;
         const ReduceArg& ra = r->rarg();
         UOpRef partial = UOp::make(Ops::REDUCE_AXIS, r->dtype, {r->src[0]}, ReduceArg{ra.op, sp->inner});
         return UOp::make(Ops::REDUCE_AXIS, r->dtype, {partial}, ReduceArg{ra.op, sp->outer});
       }}};
  return pm;
}

// A custom gradient matters to backward only: its value is its first source.
const PatternMatcher& drop_custom_grads() {
  static const PatternMatcher pm{
      {UPat::op(Ops::CUSTOM_GRAD), [](const Match& m) { return m.root()->src[0]; }}};
  return pm;
}

// Ops whose value at 0 is not 0 (or that trap there): under a pad, their result is masked.
bool unsafe_under_pad(Ops op) {
  return op == Ops::EXP2 || op == Ops::LOG2 || op == Ops::RECIP || op == Ops::IDIV || op == Ops::MOD ||
         op == Ops::POW;
}

// Why a CONTIGUOUS that is not an assign is a kernel: the user asked, or engine/pack.h's rule
// made it (its arg names which).
const char* contiguous_reason(const UOp& u) {
  const std::string* made_by = std::get_if<std::string>(&u.arg);
  if (!made_by) return boundary::contiguous;
  if (*made_by == "pack") return boundary::pack;
  return *made_by == "rows" ? boundary::rows : boundary::operand;
}

// A movement chain from the kernel's root down to a node, outermost first.
using Path = std::vector<const UOp*>;

// Movement ops over a buffer, or over a REALIZED node (which holds one).
bool is_buffer_view(const UOp* u) {
  while (is_movement(u->op) || u->op == Ops::REALIZED)
    u = u->src[0].get();
  return u->op == Ops::BUFFER;
}

UOpRef buffer_view(const std::shared_ptr<Buffer>& b, const UOpRef& like) {
  UOpRef bv = UOp::make(Ops::BUFFER, like->dtype, {}, b);
  if (bv->shape != like->shape) bv = UOp::make(Ops::RESHAPE, like->dtype, {bv}, like->shape);
  return bv;
}

// The buffer an assign node (CONTIGUOUS with a buffer arg, made by Tensor::assign) writes.
std::shared_ptr<Buffer> assign_target(const UOp* u) {
  if (u->op != Ops::CONTIGUOUS || !std::holds_alternative<std::shared_ptr<Buffer>>(u->arg)) return nullptr;
  return u->buffer();
}

// A kernel's AST: `value` stored into buffer 0 through `view`.
UOpRef store_ast(DType dt, const UOpRef& view, const UOpRef& value) {
  UOpRef store =
      UOp::make(Ops::STORE, DType::Void, {UOp::make(Ops::DEFINE_GLOBAL, dt, {}, int64_t(0)), view, value});
  return UOp::make(Ops::SINK, DType::Void, {store});
}

// A kernel that copies `from` into `to` (same dtype and size).
ScheduleItem copy_item(const std::shared_ptr<Buffer>& to, const std::shared_ptr<Buffer>& from) {
  UOpRef view = view_uop(ShapeTracker::contiguous({static_cast<int64_t>(to->size)}));
  UOpRef load =
      UOp::make(Ops::LOAD, to->dtype, {UOp::make(Ops::DEFINE_GLOBAL, to->dtype, {}, int64_t(1)), view});
  return {store_ast(to->dtype, view, load), {to, from}, boundary::assign_copy, {}, {}};
}

// `ast` with DEFINE_GLOBAL `from` made 0 (loads from the output buffer) and those above it
// numbered one lower.
UOpRef merge_into_output(const UOpRef& u, int64_t from, std::unordered_map<const UOp*, UOpRef>& memo) {
  if (auto it = memo.find(u.get()); it != memo.end()) return it->second;
  UOpRef r = u;
  if (u->op == Ops::DEFINE_GLOBAL) {
    int64_t i = std::get<int64_t>(u->arg);
    if (i >= from) r = UOp::make(Ops::DEFINE_GLOBAL, u->dtype, {}, i == from ? int64_t(0) : i - 1);
  } else {
    for (auto& s : u->src)
      merge_into_output(s, from, memo);
    r = with_sources(u, memo);
  }
  memo[u.get()] = r;
  return r;
}

// An assign's value is computed into a fresh buffer and copied into the target after every
// kernel (copy_item), so that all readers of the old contents run first. Where the assign's own
// kernel reads the target only at the element it writes (an optimizer's m = b1*m + (1-b1)*g) and
// no later kernel reads the target, the kernel writes the target directly instead, as tinygrad
// does: no copy, no second buffer. Returns whether it did (items rewritten).
bool write_in_place(std::vector<ScheduleItem>& items, const std::shared_ptr<Buffer>& target,
                    const std::shared_ptr<Buffer>& fresh) {
  size_t k = items.size();
  for (size_t i = 0; i < items.size(); i++)
    if (items[i].bufs[0] == fresh) k = i;
  if (k == items.size()) return false;
  for (size_t i = 0; i < items.size(); i++) {
    if (i == k) continue;
    auto& b = items[i].bufs;
    if (b[0] == target || (i > k && std::find(b.begin() + 1, b.end(), target) != b.end())) return false;
  }
  ScheduleItem& item = items[k];
  int64_t gi = -1;
  for (size_t i = 1; i < item.bufs.size(); i++)
    if (item.bufs[i] == target) {
      if (gi >= 0) return false;
      gi = static_cast<int64_t>(i);
    }
  const UOp* store = item.ast->src.size() == 1 ? item.ast->src[0].get() : nullptr;
  if (!store || store->op != Ops::STORE) return false;
  if (gi >= 0) {
    const UOp* view = store->src[1].get();
    bool same_place = true;
    for (const UOp* n : toposort(item.ast.get()))
      if (n->op == Ops::LOAD && n->src[0]->op == Ops::DEFINE_GLOBAL &&
          std::get<int64_t>(n->src[0]->arg) == gi)
        same_place &=
            n->src[1].get() == view || (n->src[1]->op == view->op && arg_equal(n->src[1]->arg, view->arg));
    if (!same_place) return false;
    std::unordered_map<const UOp*, UOpRef> memo;
    item.ast = merge_into_output(item.ast, gi, memo);
    item.bufs.erase(item.bufs.begin() + gi);
  }
  item.reason = boundary::assign_in_place;
  for (auto& it : items)
    for (auto& b : it.bufs)
      if (b == fresh) b = target;
  return true;
}

// An expression with each bound Variable replaced by the Variable itself, its value recorded in
// `vals` (by name).
UOpRef unbind_expr(const UOpRef& e, std::map<std::string, std::pair<UOpRef, int64_t>>& vals) {
  if (e->op == Ops::BIND) {
    const UOpRef& var = e->src[0];
    int64_t v = e->src[1]->const_bits();
    auto [it, fresh] = vals.try_emplace(var->var().name, var, v);
    if (!fresh && it->second.second != v)
      throw std::invalid_argument("Variable " + var->var().name + " is bound to " +
                                  std::to_string(it->second.second) + " and to " + std::to_string(v) +
                                  " in one kernel");
    return var;
  }
  std::vector<UOpRef> src;
  bool changed = false;
  for (auto& x : e->src) {
    src.push_back(unbind_expr(x, vals));
    changed |= src.back() != x;
  }
  return changed ? e->replace_src(std::move(src)) : e;
}
sint unbind(const sint& s, std::map<std::string, std::pair<UOpRef, int64_t>>& vals) {
  return s.is_const() ? s : sint(unbind_expr(s.expr(), vals));
}

// The kernel AST with its views' Variables unbound (one compiled kernel serves every value), and
// the values, for the kernel's launch.
std::pair<UOpRef, std::vector<std::pair<UOpRef, int64_t>>> unbind(const UOpRef& ast) {
  std::map<std::string, std::pair<UOpRef, int64_t>> vals;
  PatternMatcher pm{{UPat::op(Ops::VIEW), [&](const Match& m) -> UOpRef {
                       const ShapeTracker& st = m.root()->st();
                       ShapeTracker r = st;
                       for (View& v : r.views) {
                         for (auto& d : v.shape)
                           d = unbind(d, vals);
                         v.offset = unbind(v.offset, vals);
                       }
                       return r == st ? UOpRef() : view_uop(r);
                     }}};
  UOpRef r = graph_rewrite(ast, pm);
  std::vector<std::pair<UOpRef, int64_t>> out;
  for (auto& [_, p] : vals)
    out.push_back(p);
  return {r, out};
}

struct Scheduler {
  explicit Scheduler(bool commit) : commit(commit) {}
  bool commit; // set `realized` on graph nodes (false: preview only)
  std::vector<ScheduleItem> items;
  std::unordered_map<const UOp*, UOpRef> done; // node -> realized buffer view
  // reduces that feed several kernels, computed once, and why
  std::unordered_map<const UOp*, const char*> own_kernel;
  // In-place assigns: the value is computed into a fresh buffer like any other, and copied into
  // the target after every kernel, so all readers of the old contents ran first.
  std::vector<std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>> copies; // target, fresh
  std::vector<std::shared_ptr<Buffer>> written_in_place; // by assigns to a region of them
  // Buffers of kernels that read no buffer (a constant, an arange, or only other such buffers):
  // they have no home of their own yet, and run where their first reader runs. Each maps to the
  // floating buffers its kernel reads, which move with it.
  std::unordered_map<const Buffer*, std::vector<Buffer*>> floating;
  // Those buffers, settled or not: one such node is one kernel per schedule (hash-consing makes equal
  // constants one node), so where graphs of several host-memory devices share it (a gradient's
  // constant seed after copies between devices), the kernels of the others read it in place.
  std::unordered_set<const Buffer*> constant_bufs;
  void settle(Buffer* b, const std::string& device);
  // Nodes realized by a kernel that reads no buffer (a constant): not cached on the node, which
  // every equal constant shares (hash-consing). Their buffer lives on one device, and the same
  // constant in another device's graph read it there; and the tensor realized may be assigned in
  // place later: cached, Tensor.zeros(2) made afterwards was a view of Tensor.zeros(1):realize()'s
  // buffer, and a second batch norm's bias read the first one's num_batches_tracked.
  std::unordered_set<const UOp*> constants;

  // Schedules `u` as a kernel (after its dependencies) and returns its buffer view; `why` is
  // one of boundary::*.
  UOpRef realize(const UOpRef& u, const char* why);
  // Schedules a COPY: its source into a buffer on its own device, then a copy kernel on the
  // destination's. Returns the destination's buffer view.
  UOpRef transfer(const UOpRef& u);
};

struct KernelBuilder {
  KernelBuilder(Scheduler& s, const UOp* root) : s(s), root(root) {}
  Scheduler& s;
  const UOp* root;
  // The reduce this kernel fuses: its input shape and axes (empty if none).
  Shape red_in, red_out;
  std::vector<int64_t> red_axes;
  Ops red_op = Ops::SINK;
  std::vector<std::shared_ptr<Buffer>> bufs;
  std::map<std::pair<const UOp*, Path>, UOpRef> memo[2];
  std::unordered_map<const UOp*, UOpRef> memo_plain[2]; // no movement ops above: most nodes

  UOpRef global(const std::shared_ptr<Buffer>& b) {
    size_t i = 0;
    while (i < bufs.size() && bufs[i] != b)
      i++;
    if (i == bufs.size()) bufs.push_back(b);
    return UOp::make(Ops::DEFINE_GLOBAL, b->dtype, {}, static_cast<int64_t>(i));
  }

  bool symbolic = false; // some view has a symbolic size or offset: the AST has Variables to unbind

  ShapeTracker view_through(const Shape& base, const Path& path, bool in_reduce) {
    ShapeTracker st = ShapeTracker::contiguous(base);
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      st = st.apply((*it)->op, (*it)->arg);
    // Above the reduce the kernel iterates the reduce's output shape (reduced dims kept as 1).
    if (!in_reduce && !red_out.empty() && st.shape() != red_out) st = st.reshape(red_out);
    for (auto& v : st.views)
      symbolic |= is_symbolic(v.shape) || !v.offset.is_const();
    return st;
  }

  // The view of `u` (movement ops over a BUFFER) seen through `path`; `base` gets the BUFFER.
  ShapeTracker buffer_st(const UOp* u, Path path, bool in_reduce, const UOp*& base) {
    while (is_movement(u->op))
      path.push_back(u), u = u->src[0].get();
    base = u;
    return view_through(u->shape, path, in_reduce);
  }

  // The first reduce reachable from the root through elementwise ops and reshapes.
  std::unordered_set<const UOp*> red_visited;
  void find_reduce(const UOp* u) {
    check_stack("schedule"); // recurses once per op of a chain, like walk
    // each node once: without this a graph that reuses its nodes (x = x + x, 30 times) was walked
    // once per path, 2^30 times
    if (!red_axes.empty() || !red_visited.insert(u).second || s.done.count(u) || u->cached()) return;
    if (u->op == Ops::REDUCE_AXIS && !(s.own_kernel.count(u) && u != root)) {
      red_in = u->src[0]->shape, red_out = u->shape, red_axes = u->rarg().axes, red_op = u->rarg().op;
      return;
    }
    if (is_elementwise(u->op) || u->op == Ops::RESHAPE || u->op == Ops::DETACH ||
        (u == root && u->op == Ops::CONTIGUOUS))
      for (auto& x : u->src)
        find_reduce(x.get());
  }

  UOpRef leaf(const UOpRef& view, const Path& path, bool in_reduce) {
    const UOp* u = nullptr;
    ShapeTracker st = buffer_st(view.get(), path, in_reduce, u);
    return UOp::make(Ops::LOAD, u->dtype, {global(u->buffer()), view_uop(st)});
  }

  // Outside walk, so that its recursive frame stays small: a chain of thousands of ops
  // recurses once per op.
  [[gnu::noinline]] const UOpRef* memo_find(const UOp* u, const Path& path, bool in_reduce) {
    if (path.empty()) {
      auto it = memo_plain[in_reduce].find(u);
      return it == memo_plain[in_reduce].end() ? nullptr : &it->second;
    }
    auto it = memo[in_reduce].find(std::make_pair(u, path));
    return it == memo[in_reduce].end() ? nullptr : &it->second;
  }
  [[gnu::noinline]] void memo_put(const UOp* u, const Path& path, bool in_reduce, const UOpRef& r) {
    if (path.empty())
      memo_plain[in_reduce].emplace(u, r);
    else
      memo[in_reduce].emplace(std::make_pair(u, path), r);
  }

  UOpRef walk(const UOpRef& u, const Path& path, bool in_reduce) {
    check_stack("schedule"); // walk recurses once per op of a chain: a clear error, not a stack overflow
    if (const UOpRef* hit = memo_find(u.get(), path, in_reduce)) return *hit;
    UOpRef r = walk_uncached(u, path, in_reduce);
    memo_put(u.get(), path, in_reduce, r);
    return r;
  }

  // How many times the kernel reads each element of a value reached through `p`: the growth of
  // its EXPANDs (a matmul's input is read once per output column, a conv's once per output channel).
  static int64_t broadcast_factor(const Path& p) {
    int64_t f = 1;
    for (const UOp* x : p)
      if (x->op == Ops::EXPAND && x->src[0]->max_numel() > 0) f *= x->max_numel() / x->src[0]->max_numel();
    return f;
  }

  // The work of computing one element of u inside this kernel: its elementwise ops down to the
  // buffers, constants and other kernels' results, a transcendental or a division counting as
  // several; capped, as only "more than a few" matters.
  int64_t elementwise_cost(const UOp* root_op) const {
    std::unordered_set<const UOp*> seen;
    std::vector<const UOp*> todo{root_op};
    int64_t cost = 0;
    while (!todo.empty() && cost < kRecomputeCost) {
      const UOp* u = todo.back();
      todo.pop_back();
      if (!seen.insert(u).second || s.done.count(u) || u->cached()) continue;
      if (is_movement(u->op) || u->op == Ops::DETACH) {
        todo.push_back(u->src[0].get());
        continue;
      }
      if (!is_elementwise(u->op)) continue;
      bool costly = u->op == Ops::EXP2 || u->op == Ops::LOG2 || u->op == Ops::SIN || u->op == Ops::SQRT ||
                    u->op == Ops::RECIP || u->op == Ops::FDIV || u->op == Ops::IDIV || u->op == Ops::POW;
      cost += costly ? 4 : 1;
      for (auto& x : u->src)
        todo.push_back(x.get());
    }
    return cost;
  }
  // Recomputing costs more than a store and a load once an element is read this many times and
  // takes this much work (a few adds and multiplies, or one transcendental).
  static constexpr int64_t kRecomputeFactor = 8, kRecomputeCost = 6;

  bool path_has_pad(const Path& p) const {
    return std::any_of(p.begin(), p.end(), [](const UOp* x) { return x->op == Ops::PAD; });
  }

  UOpRef walk_uncached(const UOpRef& u, const Path& path, bool in_reduce) {
    if (auto it = s.done.find(u.get()); it != s.done.end()) return leaf(it->second, path, in_reduce);
    if (auto r = u->cached()) return leaf(r, path, in_reduce);
    switch (u->op) {
    case Ops::BUFFER:
      return leaf(u, path, in_reduce);
    case Ops::CONST:
      return UOp::make(Ops::CONST, u->dtype, {view_uop(view_through({}, path, in_reduce))}, u->arg);
    case Ops::DETACH:
      return walk(u->src[0], path, in_reduce);
    case Ops::COPY:
      return leaf(s.transfer(u), path, in_reduce);
    case Ops::CONTIGUOUS:
      if (u.get() == root) return walk(u->src[0], path, in_reduce);
      return leaf(s.realize(u, assign_target(u.get()) ? boundary::assign : contiguous_reason(*u)), path,
                  in_reduce);
    case Ops::REDUCE_AXIS: {
      if (auto own = s.own_kernel.find(u.get()); own != s.own_kernel.end() && u.get() != root)
        return leaf(s.realize(u, own->second), path, in_reduce);
      bool plain = std::all_of(path.begin(), path.end(), [](const UOp* x) { return x->op == Ops::RESHAPE; });
      bool same = u->src[0]->shape == red_in && u->rarg().axes == red_axes;
      if (plain && same && !in_reduce)
        return UOp::make(Ops::REDUCE_AXIS, u->dtype, {walk(u->src[0], {}, true)}, u->arg);
      bool expand = std::any_of(path.begin(), path.end(), [](const UOp* x) { return x->op == Ops::EXPAND; });
      const char* why = in_reduce ? boundary::reduce_into_reduce
                        : expand  ? boundary::broadcast_back
                        : !plain  ? boundary::reduce_view
                                  : boundary::other_reduce;
      return leaf(s.realize(u, why), path, in_reduce);
    }
    default:
      break;
    }
    if (is_movement(u->op)) {
      Path p = path;
      p.push_back(u.get());
      return walk(u->src[0], p, in_reduce);
    }
    if (is_elementwise(u->op)) {
      if (unsafe_under_pad(u->op) && path_has_pad(path)) {
        // Computed everywhere, its result masked to where the pad keeps values: in the padded
        // region its sources read 0 and give inf or NaN, which the select drops (it was a kernel
        // of its own). An integer division's divisor is 1 there, so nothing divides by 0.
        std::vector<UOpRef> src;
        for (auto& x : u->src)
          src.push_back(walk(x, path, in_reduce));
        UOpRef valid =
            UOp::make(Ops::CONST, DType::Bool, {view_uop(view_through(u->shape, path, in_reduce))}, 1.0);
        if (u->op == Ops::IDIV || u->op == Ops::MOD)
          src[1] = alu(Ops::WHERE, {valid, src[1], UOp::cconst(src[1]->dtype, 1)});
        return alu(Ops::WHERE,
                   {valid, UOp::make(u->op, u->dtype, std::move(src), u->arg), UOp::cconst(u->dtype, 0)});
      }
      if (broadcast_factor(path) >= kRecomputeFactor && elementwise_cost(u.get()) >= kRecomputeCost)
        return leaf(s.realize(u, boundary::recompute), path, in_reduce);
      std::vector<UOpRef> src;
      for (auto& x : u->src)
        src.push_back(walk(x, path, in_reduce));
      return UOp::make(u->op, u->dtype, std::move(src), u->arg);
    }
    internal_error(std::string("cannot schedule ") + name(u->op));
  }
};

UOpRef Scheduler::realize(const UOpRef& u, const char* why) {
  if (auto it = done.find(u.get()); it != done.end()) return it->second;
  KernelBuilder kb(*this, u.get());
  kb.find_reduce(u.get());
  auto target = assign_target(u.get());
  // an assign to a region of a buffer (src[2], movement ops over it) stores there directly
  const UOp* region = target && u->src.size() == 3 ? u->src[2].get() : nullptr;
  auto out = region
                 ? target
                 : std::make_shared<Buffer>(default_device(), u->dtype, static_cast<size_t>(u->max_numel()));
  kb.bufs.push_back(out);
  UOpRef value = kb.walk(u, {}, false);
  // A kernel runs where its inputs live; one with none (a constant, arange) on the default device,
  // or where the tensor it assigns to lives.
  bool homed = target != nullptr;
  if (target && !region) out->device = target->device;
  std::vector<Buffer*> floats, constants_read;
  auto mismatch = [&](const Buffer* b) {
    return std::invalid_argument(
        std::string(target ? "an assign to a tensor on " : "a kernel reads tensors on ") + out->device +
        (target ? " reads one on " : " and on ") + b->device + ": move one with :to(\"" + out->device +
        "\") first");
  };
  for (size_t i = 1; i < kb.bufs.size(); i++) {
    Buffer* b = kb.bufs[i].get();
    if (floating.count(b)) {
      floats.push_back(b);
      continue;
    }
    if (constant_bufs.count(b)) { // settled by another reader: the kernel's home comes from the rest
      constants_read.push_back(b);
      continue;
    }
    if (!homed) out->device = b->device, homed = true;
    if (b->device != out->device) throw mismatch(b);
  }
  if (!homed && !constants_read.empty()) out->device = constants_read[0]->device, homed = true;
  for (const Buffer* b : constants_read)
    if (b->device != out->device &&
        !(get_device(b->device).host_memory() && get_device(out->device).host_memory()))
      throw mismatch(b);
  if (homed)
    for (Buffer* b : floats)
      settle(b, out->device);
  else {
    floating[out.get()] = std::move(floats);
    constant_bufs.insert(out.get());
  }
  const UOp* base = nullptr;
  ShapeTracker store_st = region ? kb.buffer_st(region, {}, true, base) : kb.view_through(u->shape, {}, true);
  if (!kb.red_out.empty()) store_st = store_st.reshape(kb.red_out);
  UOpRef ast = store_ast(u->dtype, view_uop(store_st), value);
  std::vector<std::pair<UOpRef, int64_t>> vars;
  if (kb.symbolic) std::tie(ast, vars) = unbind(ast);
  items.push_back({ast, kb.bufs, why, std::move(vars), {}});
  if (region) { // written in place: from now on the node is that region
    // A buffer never allocated holds nothing a cached value could have read (Tensor.empty that
    // a layout is assigned into, winograd.lua's store_padded): its first write is no mutation.
    if (target->allocated()) written_in_place.push_back(target);
    done[u.get()] = u->src[2];
    if (commit) u->pin_cached(u->src[2]);
    return u->src[2];
  }
  UOpRef bv = buffer_view(out, u);
  done[u.get()] = bv;
  if (target) {
    copies.push_back({target, out});
    // done: from now on the node is the target buffer (another realize must not redo it)
    if (commit) u->pin_cached(buffer_view(target, u));
  } else if (commit && homed) {
    u->set_cached(bv);
  } else if (commit) {
    constants.insert(u.get());
  }
  return bv;
}

// The copy kernel runs on the destination device and reads the source's buffer in place (both are
// host memory: Tensor::copy_to checks), through the source's movement ops (a slice of a partial
// sum, a transpose): only the value under them is computed into a buffer on its own device first.
UOpRef Scheduler::transfer(const UOpRef& u) {
  if (auto it = done.find(u.get()); it != done.end()) return it->second;
  if (is_symbolic(u->shape)) user_error("a copy to another device needs a shape without Variables");
  const UOpRef* base = &u->src[0];
  while (is_movement((*base)->op) && !(*base)->cached())
    base = &(*base)->src[0];
  if ((*base)->op == Ops::COPY)
    transfer(*base);
  else if ((*base)->op != Ops::BUFFER && !(*base)->cached())
    realize(*base, boundary::copy_source);
  auto out =
      std::make_shared<Buffer>(std::get<std::string>(u->arg), u->dtype, static_cast<size_t>(u->max_numel()));
  KernelBuilder kb(*this, u.get());
  kb.bufs.push_back(out);
  UOpRef value = kb.walk(u->src[0], {}, false);
  UOpRef ast = store_ast(u->dtype, view_uop(kb.view_through(u->shape, {}, true)), value);
  items.push_back({ast, kb.bufs, boundary::copy, {}, {}});
  UOpRef bv = buffer_view(out, u);
  done[u.get()] = bv;
  if (commit) u->set_cached(bv);
  return bv;
}

// A floating buffer and those its kernel reads go to device, and are floating no more.
void Scheduler::settle(Buffer* b, const std::string& device) {
  auto it = floating.find(b);
  if (it == floating.end()) return;
  std::vector<Buffer*> reads = std::move(it->second);
  floating.erase(it);
  b->device = device;
  for (Buffer* r : reads)
    settle(r, device);
}

// Whether a reduce's value flows (through elementwise and movement ops) into another reduce's
// input. That reduce's kernel cannot fuse it (a reduce inside a reduce), so it is stored in a
// buffer in any case; its other consumers must load that buffer, not recompute it (softmax of a
// matmul: the max, the sum and the output all read the one stored product). Returns the
// boundary reason, or nullptr.
static const char* feeds_another_reduce(const UOp* red,
                                        std::unordered_map<const UOp*, std::vector<const UOp*>>& parents) {
  std::unordered_set<const UOp*> visited{red};
  std::vector<std::pair<const UOp*, bool>> todo{{red, false}}; // node, seen through an EXPAND
  while (!todo.empty()) {
    auto [u, expanded] = todo.back();
    todo.pop_back();
    for (const UOp* p : parents[u]) {
      if (p->op == Ops::REDUCE_AXIS)
        return expanded ? boundary::broadcast_back : boundary::reduce_into_reduce;
      if ((is_elementwise(p->op) || is_movement(p->op) || p->op == Ops::DETACH) && visited.insert(p).second)
        todo.push_back({p, expanded || p->op == Ops::EXPAND});
    }
  }
  return nullptr;
}

// A reduce whose value flows through elementwise ops and views into more than one output would
// be recomputed by each output's kernel: give it a kernel of its own (tinygrad's rule).
std::unordered_map<const UOp*, const char*> reduces_feeding_several_outputs(const std::vector<UOpRef>& outs) {
  std::unordered_map<const UOp*, std::vector<const UOp*>> parents;
  std::unordered_set<const UOp*> is_out, seen;
  std::vector<const UOp*> reduces;
  for (auto& o : outs) {
    is_out.insert(o.get());
    for (const UOp* u : toposort(o.get())) {
      if (!seen.insert(u).second) continue;
      if (u->op == Ops::REDUCE_AXIS) reduces.push_back(u);
      for (auto& x : u->src)
        parents[x.get()].push_back(u);
    }
  }
  std::unordered_map<const UOp*, const char*> r;
  for (const UOp* red : reduces) {
    std::unordered_set<const UOp*> outs_reached, visited{red};
    std::vector<const UOp*> todo{red};
    while (!todo.empty()) {
      const UOp* u = todo.back();
      todo.pop_back();
      if (is_out.count(u)) outs_reached.insert(u);
      for (const UOp* p : parents[u]) {
        if (p->op == Ops::CONTIGUOUS) { // realized on its own (an assign, a contiguous): a kernel of its own
          outs_reached.insert(p);
          continue;
        }
        // through any view too: a consumer that reads the reduce through a pad, permute or expand
        // realizes it on its own (KernelBuilder::walk_uncached), and one that reads it plainly then
        // fused it a second time (U5: conv1 computed again in its gradient's kernel, after the
        // Winograd transform of relu(conv1) had stored it)
        if ((is_elementwise(p->op) || is_movement(p->op) || p->op == Ops::DETACH) && visited.insert(p).second)
          todo.push_back(p);
      }
    }
    if (const char* why = feeds_another_reduce(red, parents))
      r[red] = why;
    else if (outs_reached.size() > 1)
      r[red] = boundary::two_consumers;
  }
  return r;
}

// resolved0: outs0 already resolved (create_schedule did it for the cache's key), or null.
std::vector<ScheduleItem> schedule(const std::vector<UOpRef>& outs0, bool commit, std::vector<UOpRef>* views,
                                   const char* why, const std::vector<UOpRef>* resolved0 = nullptr) {
  Scheduler s(commit);
  struct Final {
    UOpRef out, resolved, view; // an output, its graph as scheduled, the view it holds afterwards
  };
  std::vector<Final> finals;
  std::vector<UOpRef> resolved;
  // Each node the whole-graph rewrites below replaced, and its replacement: the scheduler realizes
  // the replacements, and a later graph that shares the originals (a loss realized after its
  // gradients) must find their values too, not compute its forward again.
  std::unordered_map<const UOp*, std::pair<UOpRef, UOpRef>> renamed;
  std::vector<std::pair<UOpRef, UOpRef>> changed;
  auto rewrite = [&](const UOpRef& r, const PatternMatcher& pm) {
    changed.clear();
    UOpRef out = graph_rewrite(r, pm, nullptr, commit ? &changed : nullptr);
    for (auto& [from, to] : changed)
      renamed.emplace(from.get(), std::pair{from, to});
    return out;
  };
  for (size_t i = 0; i < outs0.size(); i++) {
    const UOpRef& o = outs0[i];
    UOpRef x = o;
    // A graph whose value an earlier realize made may be a buffer another tensor holds: copy
    // it, so that an in-place write to one tensor never changes the other.
    if (commit && !is_buffer_view(o.get()) && !assign_target(o.get()) && o->cached())
      x = UOp::make(Ops::CONTIGUOUS, o->dtype, {o, UOp::unique_tag()});
    UOpRef r = resolved0 ? (*resolved0)[i] : resolve_realized(x);
    // rewrites of the whole graph only where they have work to do (decided before either runs:
    // a rewrite may free the nodes listed)
    auto nodes = toposort(r.get());
    bool custom =
        std::any_of(nodes.begin(), nodes.end(), [](const UOp* u) { return u->op == Ops::CUSTOM_GRAD; });
    bool split = std::any_of(nodes.begin(), nodes.end(),
                             [](const UOp* u) { return long_reduce(u) || strided_reduce(u); });
    bool pack = std::any_of(nodes.begin(), nodes.end(), may_pack);
    if (custom) r = rewrite(r, drop_custom_grads());
    if (split) r = rewrite(r, split_reduce_rules());
    if (pack) r = rewrite(r, pack_operand_rules());
    resolved.push_back(r);
  }
  s.own_kernel = reduces_feeding_several_outputs(resolved);
  if (views) views->assign(outs0.size(), nullptr);
  for (size_t i = 0; i < outs0.size(); i++) {
    const UOpRef& o = outs0[i];
    const UOpRef& u = resolved[i];
    UOpRef bv = u;                                         // movement ops alone make no kernel
    if (u->max_numel() == 0 && !is_buffer_view(u.get())) { // an empty tensor needs no work
      auto b = std::make_shared<Buffer>(default_device(), u->dtype, 0);
      bv = UOp::make(Ops::RESHAPE, u->dtype, {UOp::make(Ops::BUFFER, u->dtype, {}, b)}, u->shape);
    } else if (u->op == Ops::COPY) { // the copy's own buffer is the output
      bv = s.transfer(u);
    } else if (!is_buffer_view(u.get())) {
      bv = s.realize(u, assign_target(u.get()) ? boundary::assign : why);
      if (auto target = assign_target(u.get()); target && u->src.size() != 3) bv = buffer_view(target, u);
    }
    if (views) (*views)[i] = bv;
    if (commit && !assign_target(u.get()) && !assign_target(o.get())) {
      finals.push_back({o, u, bv});
    }
  }
  for (auto& [to, from] : s.copies)
    if (!write_in_place(s.items, to, from)) s.items.push_back(copy_item(to, from));
  if (commit) {
    // After an in-place write, values cached earlier may be stale: start a new epoch. The
    // outputs of this schedule stay cached, except those that read a buffer written here: they
    // were computed before the write, and their graph now stands for a new value (a loss
    // realized with the optimizer step that updates its weights).
    std::unordered_set<const Buffer*> written;
    for (auto& [to, from] : s.copies)
      written.insert(to.get());
    for (auto& b : s.written_in_place)
      written.insert(b.get());
    if (!written.empty()) UOp::mutation_epoch()++;
    for (auto& f : finals) {
      if (!written.empty()) {
        auto nodes = toposort(f.resolved.get());
        if (std::any_of(nodes.begin(), nodes.end(), [&](const UOp* n) {
              return n->op == Ops::BUFFER && written.count(n->buffer().get());
            }))
          continue;
      }
      if (s.constants.count(f.resolved.get())) continue;
      if (f.out != f.view) f.out->set_cached(f.view);
      if (f.resolved != f.view) f.resolved->set_cached(f.view);
    }
    for (auto& [key, pair] : renamed) {
      if (pair.first->cached()) continue;
      const UOp* at = pair.second.get(); // through each rewrite that replaced it in turn
      for (auto it = renamed.find(at); it != renamed.end() && it->second.second.get() != at;
           it = renamed.find(at))
        at = it->second.second.get();
      if (auto v = at->cached(); v && !s.constants.count(at)) pair.first->set_cached(v);
    }
  }
  return std::move(s.items);
}

} // namespace

std::vector<ScheduleItem> create_schedule(const std::vector<UOpRef>& outs, std::vector<UOpRef>* views,
                                          const char* why) {
  // the graphs as schedule() resolves them; an output realized before is copied there (a fresh
  // node each time), which the cache leaves to it
  std::vector<UOpRef> resolved;
  std::vector<std::pair<UOpRef, UOpRef>> rebuilt;
  for (const UOpRef& o : outs) {
    if (!is_buffer_view(o.get()) && !assign_target(o.get()) && o->cached()) {
      resolved.clear();
      break;
    }
    resolved.push_back(resolve_realized(o, &rebuilt));
  }
  // The values land on the rebuilt nodes, which live only as long as this graph: the nodes they
  // were rebuilt from keep them for the next graph that shares those (a loss realized after its
  // gradients, above a Winograd transform assigned into a padded buffer).
  auto keep_on_originals = [&] {
    for (auto& [from, to] : rebuilt)
      if (auto v = to->cached(); v && !from->cached()) from->set_cached(v);
  };
  GraphKey key = settings().scache && resolved.size() == outs.size() ? graph_key(resolved, why) : GraphKey{};
  std::vector<ScheduleItem> items;
  if (key.cacheable && replay_schedule(key, outs, views, items)) {
    keep_on_originals();
    return items;
  }
  std::vector<UOpRef> own_views;
  if (!views) views = &own_views; // the cache keeps them
  uint64_t epoch = UOp::mutation_epoch();
  items = schedule(outs, true, views, why, resolved.size() == outs.size() ? &resolved : nullptr);
  if (key.cacheable) remember_schedule(key, outs, views, items, UOp::mutation_epoch() != epoch);
  keep_on_originals();
  return items;
}
std::vector<ScheduleItem> preview_schedule(const std::vector<UOpRef>& outs) {
  return schedule(outs, false, nullptr, boundary::output);
}

std::string ScheduleItem::to_string() const {
  std::ostringstream os;
  os << "ScheduleItem(" << bufs.size() << " buffers:";
  for (auto& b : bufs)
    os << " " << buffer_string(*b);
  os << "; why a kernel: " << reason << ")\n" << print_tree(ast);
  return os.str();
}

} // namespace mg
