#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/codegen/linearize.h"
#include "engine/codegen/opts.h"
#include "engine/codegen/semantics.h"
#include "engine/errors.h"
#include "engine/pattern.h"

namespace mg {

namespace {

struct Acc {
  UOpRef value;
  Ops op;
  std::vector<UOpRef> ranges;
};

struct Linearizer {
  std::unordered_map<const UOp*, uint64_t> bit; // RANGE -> its bit
  std::unordered_map<const UOp*, Acc> accs;     // DEFINE_ACC -> what it accumulates
  std::vector<UOpRef> acc_order;                // accumulators in creation order
  std::unordered_map<const UOp*, uint64_t> masks;
  std::unordered_set<const UOp*> emitted;
  std::vector<UOpRef> out;

  uint64_t mask(const UOp* u) {
    if (auto it = masks.find(u); it != masks.end()) return it->second;
    uint64_t m = 0;
    if (u->op == Ops::RANGE)
      m = bit.at(u);
    else if (u->op == Ops::DEFINE_ACC) {
      const Acc& a = accs.at(u);
      m = mask(a.value.get());
      for (auto& r : a.ranges)
        m &= ~bit.at(r.get());
      m |= mask(u->src[0].get()); // its first value
    } else
      for (auto& s : u->src)
        m |= mask(s.get());
    masks[u] = m;
    return m;
  }

  void push(const UOpRef& u) {
    out.push_back(u);
    emitted.insert(u.get());
  }

  void emit(const UOpRef& u, uint64_t allowed) {
    if (emitted.count(u.get())) return;
    if (u->op == Ops::RANGE) internal_error("linearize reached a loop that is not open");
    if (u->op == Ops::DEFINE_ACC) return emit_acc(u, allowed);
    for (auto& s : u->src)
      emit(s, allowed);
    push(u);
  }

  // Accumulators over the same loops share one loop nest (an UPCAST makes several).
  void emit_acc(const UOpRef& first, uint64_t allowed) {
    std::vector<UOpRef> group;
    for (auto& acc : acc_order)
      if (!emitted.count(acc.get()) && accs.at(acc.get()).ranges == accs.at(first.get()).ranges &&
          (mask(acc.get()) & ~allowed) == 0)
        group.push_back(acc);
    const auto& ranges = accs.at(first.get()).ranges;
    // work inside the reduce that does not depend on its loops runs once, before them
    for (auto& acc : group)
      for (const UOp* d : toposort(accs.at(acc.get()).value.get()))
        if (!emitted.count(d) && d->op != Ops::RANGE && (mask(d) & ~allowed) == 0) emit(refs.at(d), allowed);
    for (auto& acc : group)
      emit(acc->src[0], allowed), push(acc);
    size_t first_inside = out.size();
    uint64_t inner = allowed;
    for (auto& r : ranges)
      push(r), inner |= bit.at(r.get());
    for (auto& acc : group)
      emit(accs.at(acc.get()).value, inner);
    for (auto& acc : group) {
      const Acc& a = accs.at(acc.get());
      UOpRef upd = alu(a.op, {acc, a.value});
      if (UOpRef safe = pm_semantics().rewrite(upd)) upd = safe; // a float max keeps NaN
      emit(upd, inner);
      push(UOp::make(Ops::ASSIGN, acc->dtype, {acc, upd}));
    }
    for (auto it = ranges.rbegin(); it != ranges.rend(); ++it)
      push(UOp::make(Ops::ENDRANGE, DType::Void, {*it}));
    // values computed inside the closed loops are out of scope now: another loop nest over the
    // same ranges (an accumulator at another level) must compute them again
    uint64_t closed = 0;
    for (auto& r : ranges)
      closed |= bit.at(r.get());
    std::erase_if(emitted, [&](const UOp* u) { return (mask(u) & closed) != 0; });
    // so are values read from an accumulator inside its loop (acc != acc in a NaN-aware max):
    // after the loop the accumulator holds another value
    std::unordered_set<const UOp*> reads_acc;
    for (auto& acc : group)
      reads_acc.insert(acc.get());
    for (size_t k = first_inside; k < out.size(); k++) {
      const UOp* u = out[k].get();
      if (u->op == Ops::DEFINE_ACC) continue;
      for (auto& s : u->src)
        if (reads_acc.count(s.get())) {
          reads_acc.insert(u), emitted.erase(u);
          break;
        }
    }
  }

  // toposort hands out raw pointers; emit needs the owning reference
  std::unordered_map<const UOp*, UOpRef> refs;
  void add_refs(const UOpRef& root) {
    refs[root.get()] = root;
    for (const UOp* u : toposort(root.get()))
      for (auto& s : u->src)
        refs.emplace(s.get(), s);
  }
};

} // namespace

std::vector<UOpRef> linearize(const UOpRef& sink0) {
  Linearizer L;
  // Replace each REDUCE by an accumulator; its loops hang off it as sources.
  int nacc = 0;
  bool folded = false; // an accumulator starts from a partial result
  PatternMatcher to_acc{
      {UPat::op(Ops::REDUCE),
       [&](const Match& m) {
         auto& r = m.root();
         Ops op = r->rarg().op;
         std::vector<UOpRef> src{UOp::cconst(r->dtype, reduce_identity(op, r->dtype))};
         std::vector<UOpRef> rngs(r->src.begin() + 1, r->src.end());
         src.insert(src.end(), rngs.begin(), rngs.end());
         UOpRef acc = UOp::make(Ops::DEFINE_ACC, r->dtype, src, static_cast<int64_t>(nacc++));
         L.accs[acc.get()] = Acc{r->src[0], op, rngs};
         L.acc_order.push_back(acc);
         return acc;
       }},
      // A blocked reduce (BLOCK) combined with the partial result of the blocks before,
      // op(acc, WHERE(first, identity, LOAD gated on a later block)), starts its accumulator from
      // that value instead: the sum runs in the unblocked kernel's order, and no combine follows
      // the loop (clang's SLP pass vectorized those 100 loads and adds of the conv1 weight
      // gradient and spilled the loop's accumulators for it: 169 stack accesses against 60).
      {UPat::any(), [&](const Match& m) -> UOpRef {
         auto& u = m.root();
         if (u->src.size() != 2 || !is_elementwise(u->op)) return nullptr;
         for (int k = 0; k < 2; k++) {
           const UOpRef &acc = u->src[k], &w = u->src[1 - k];
           auto a = L.accs.find(acc.get());
           if (acc->op != Ops::DEFINE_ACC || a == L.accs.end() || a->second.op != u->op ||
               acc->src[0]->op != Ops::CONST || w->op != Ops::WHERE || w->src[1] != acc->src[0] ||
               w->src[2]->op != Ops::LOAD || w->src[2]->src[0]->src.size() < 3) // gated: lowerer.cpp's choice
             continue;
           std::vector<UOpRef> src(acc->src);
           src[0] = w;
           UOpRef from = UOp::make(Ops::DEFINE_ACC, acc->dtype, src, static_cast<int64_t>(nacc++));
           L.accs[from.get()] = a->second;
           auto at = std::find(L.acc_order.begin(), L.acc_order.end(), acc);
           L.acc_order.insert(at + 1, from); // the old one goes below if unused
           folded = true;
           return from;
         }
         return nullptr;
       }}};
  UOpRef sink = graph_rewrite(sink0, to_acc);
  if (folded) { // accumulators that nothing reads any more (replaced by ones that start from it)
    std::unordered_set<const UOp*> live;
    std::vector<const UOp*> todo{sink.get()};
    while (!todo.empty()) {
      const UOp* root = todo.back();
      todo.pop_back();
      for (const UOp* u : toposort(root))
        if (u->op == Ops::DEFINE_ACC && live.insert(u).second) todo.push_back(L.accs.at(u).value.get());
    }
    std::erase_if(L.acc_order, [&](const UOpRef& a) { return !live.count(a.get()); });
    std::erase_if(L.accs, [&](const auto& kv) { return !live.count(kv.first); });
  }
  // Loop order: loops over outputs outermost (local dims come after every global one), then
  // reduce dims, each by axis.
  std::vector<UOpRef> globals, reduces;
  std::unordered_set<const UOp*> seen;
  auto collect = [&](const UOpRef& root) {
    for (const UOp* u : toposort(root.get()))
      for (auto& s : u->src)
        if (s->op == Ops::RANGE && seen.insert(s.get()).second)
          (s->varg()[1] == kReduce || s->varg()[1] == kGroup ? reduces : globals).push_back(s); // by axis
  };
  collect(sink);
  L.add_refs(sink);
  for (auto& a : L.acc_order)
    collect(L.accs.at(a.get()).value), L.add_refs(L.accs.at(a.get()).value);
  auto by_axis = [](const UOpRef& a, const UOpRef& b) { return a->varg()[0] < b->varg()[0]; };
  std::sort(globals.begin(), globals.end(), by_axis);
  std::sort(reduces.begin(), reduces.end(), by_axis);
  if (globals.size() + reduces.size() > 64) throw std::runtime_error("kernel has more than 64 loops");
  uint64_t b = 1;
  for (auto& r : globals)
    L.bit[r.get()] = b, b <<= 1;
  for (auto& r : reduces)
    L.bit[r.get()] = b, b <<= 1;

  // Program order: sources first, and an accumulator's loop body before the accumulator, so
  // body work that needs only outer loops is emitted (hoisted) at that outer level.
  std::vector<const UOp*> topo;
  {
    std::unordered_set<const UOp*> seen{sink.get()};
    std::vector<std::pair<const UOp*, size_t>> st{{sink.get(), 0}};
    auto deps = [&](const UOp* u) {
      std::vector<const UOp*> d;
      if (u->op == Ops::DEFINE_ACC) d.push_back(L.accs.at(u).value.get());
      for (auto& s : u->src)
        d.push_back(s.get());
      return d;
    };
    while (!st.empty()) {
      auto [u, i] = st.back();
      auto d = deps(u);
      if (i < d.size()) {
        st.back().second++;
        if (seen.insert(d[i]).second) st.push_back({d[i], 0});
      } else {
        topo.push_back(u);
        st.pop_back();
      }
    }
  }
  auto emit_ready = [&](uint64_t allowed) {
    for (const UOp* u : topo)
      if (!L.emitted.count(u) && u->op != Ops::RANGE && u->op != Ops::SINK && (L.mask(u) & ~allowed) == 0)
        L.emit(L.refs.at(u), allowed);
  };
  uint64_t allowed = 0;
  emit_ready(0);
  for (auto& g : globals) {
    L.push(g);
    allowed |= L.bit.at(g.get());
    emit_ready(allowed);
  }
  for (auto it = globals.rbegin(); it != globals.rend(); ++it)
    L.push(UOp::make(Ops::ENDRANGE, DType::Void, {*it}));
  return L.out;
}

const UOp* parallel_loop(const std::vector<UOpRef>& linear) {
  // The outermost loop over outputs, alone at its level; block loops (BLOCK) around it are
  // allowed: each core then runs every block over its own share of the outputs, so no core
  // writes what another reads.
  const UOp* outer = nullptr;
  int depth = 0, level = 0; // level: the depth the candidate loop lives at
  for (auto& u : linear) {
    if (u->op == Ops::RANGE) {
      int at = depth++;
      if (at < level) return nullptr; // a loop beside the block loops
      if (at > level) continue;       // inside the candidate
      if (outer) return nullptr;      // a second loop at that level
      if (u->varg()[1] == kBlock) {
        level++;
        continue;
      }
      if (u->varg()[1] != kGlobal) return nullptr; // a reduce loop: not over outputs
      outer = u.get();
    } else if (u->op == Ops::ENDRANGE) {
      depth--;
    } else if ((u->op == Ops::STORE || u->op == Ops::DEFINE_ACC) && depth <= level)
      return nullptr; // work outside the loop
  }
  return outer;
}

// The optimizer unrolled these loops' bodies already. Unrolled once more, by clang, a 1024
// matmul's 4x16 tile loop (8 of K an iteration) spilled 48 vector registers an iteration, against
// 8 when left as written: 32 -> 28 ms at 1 thread on a Zen 3 (AVX2), where OpenBLAS takes 32. A
// plain sum (one accumulator, or a vector of them) gains from clang's unrolling and keeps it.
std::unordered_set<const UOp*> tile_loops(const std::vector<UOpRef>& linear) {
  std::unordered_set<const UOp*> tiles;
  std::vector<std::pair<const UOp*, int>> open; // loops open here, with their updates so far
  for (auto& u : linear) {
    if (u->op == Ops::RANGE) open.push_back({u.get(), 0});
    if (u->op == Ops::ASSIGN && !open.empty()) open.back().second++;
    if (u->op != Ops::ENDRANGE || open.empty()) continue;
    auto [loop, updates] = open.back();
    open.pop_back();
    const UOp& n = *loop->src[0];
    if (loop->varg()[1] == kReduce && updates >= 16 && n.op == Ops::CONST && n.const_value() >= 16)
      tiles.insert(loop);
  }
  return tiles;
}

namespace {
// How far an index moves for one step of loop r: its coefficient of r where the index is a sum
// of constant multiples of loops (nullopt where it is not, a division or a remainder of r); memo
// holds the terms seen.
std::optional<int64_t> step_along(const UOp* e, const UOp* r,
                                  std::unordered_map<const UOp*, std::optional<int64_t>>& memo) {
  if (e == r) return 1;
  if (auto it = memo.find(e); it != memo.end()) return it->second;
  std::optional<int64_t> out;
  auto arg = [&](size_t i) { return step_along(e->src[i].get(), r, memo); };
  auto independent = [&] { // a term none of whose sources moves with r moves by 0
    for (size_t i = 0; i < e->src.size(); i++)
      if (arg(i) != std::optional<int64_t>(0)) return std::optional<int64_t>();
    return std::optional<int64_t>(0);
  };
  switch (e->op) {
  case Ops::CONST:
  case Ops::RANGE:
  case Ops::SPECIAL:
  case Ops::DEFINE_VAR:
    out = 0;
    break;
  case Ops::ADD:
  case Ops::SUB:
    if (auto a = arg(0), b = arg(1); a && b) out = e->op == Ops::ADD ? *a + *b : *a - *b;
    break;
  case Ops::NEG:
    if (auto a = arg(0)) out = -*a;
    break;
  case Ops::MUL:
    for (size_t i = 0; i < 2; i++) {
      const UOp& c = *e->src[i];
      if (c.op != Ops::CONST) continue;
      if (auto a = arg(1 - i)) out = *a * static_cast<int64_t>(c.const_value());
      break;
    }
    if (!out) out = independent(); // a loop times a Variable
    break;
  default:
    out = independent();
  }
  return memo[e] = out;
}
} // namespace

// Clang vectorizes a loop whose loads stride across lines with a gather per load. Measured on an
// Intel Xeon (family 6 model 85, AVX-512), 1 thread, each kernel alone in a C harness: the MNIST
// CNN's pack of U (36 transposes of 32 x 16 per image, read 16 floats apart) 32 ms gathered, 11 ms
// scalar, 7.6 for a plain copy of the same bytes.
std::unordered_set<const UOp*> gather_loops(const std::vector<UOpRef>& linear) {
  struct Open {
    const UOp* loop;
    bool inner = false, gathers = false; // a loop opened inside; a load strides far along it
    std::unordered_map<const UOp*, std::optional<int64_t>> memo;
  };
  std::unordered_set<const UOp*> found;
  std::vector<Open> open;
  for (auto& u : linear) {
    if (u->op == Ops::RANGE) {
      if (!open.empty()) open.back().inner = true;
      open.push_back(Open{u.get(), false, false, {}});
    } else if (u->op == Ops::ENDRANGE && !open.empty()) {
      Open& o = open.back();
      int64_t kind = o.loop->varg()[1];
      if (o.gathers && !o.inner && (kind == kGlobal || kind == kLocal)) found.insert(o.loop);
      open.pop_back();
    } else if (u->op == Ops::LOAD && !open.empty() && !open.back().gathers) {
      Open& o = open.back();
      const UOp& idx = *u->src[0];
      if (idx.op != Ops::INDEX || idx.src.size() < 2) continue;
      auto step = step_along(idx.src[1].get(), o.loop, o.memo);
      o.gathers = !step || *step > 8 || *step < -8;
    }
  }
  return found;
}

} // namespace mg
