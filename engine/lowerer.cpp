#include "engine/lowerer.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/pattern.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"
#include "engine/symbolic.h"

namespace mg {

namespace {

// What a loop dim becomes: a loop over outputs, a reduce loop, or a dim expanded into copies
// of the code (UPCAST for outputs: several accumulators; UNROLL for a reduce: several terms).
enum Kind { kGlobal = 0, kReduce = 1, kUpcast = 2, kUnroll = 3 };

struct KernelShape {
  Shape full, out;
  std::vector<int> kind; // per dim
  bool reduces(size_t d) const { return kind[d] == kReduce || kind[d] == kUnroll; }
};

using ViewList = std::vector<std::pair<const UOp*, ShapeTracker>>;

std::vector<const UOp*> views_of(const UOpRef& ast) {
  std::vector<const UOp*> r;
  for (const UOp* u : toposort(ast.get()))
    if (u->op == Ops::VIEW) r.push_back(u);
  return r;
}

// Moves every view to the new shapes (full-shaped views to next.full, the others to next.out)
// if each stays a single view; otherwise changes nothing.
bool reshape_all(KernelShape& ks, ViewList& sts, KernelShape next) {
  std::vector<ShapeTracker> out;
  for (auto& [u, st] : sts) {
    auto v = st.views.back().reshape(st.shape() == ks.full ? next.full : next.out);
    if (!v) return false;
    out.push_back(st);
    out.back().views.back() = *v;
  }
  for (size_t k = 0; k < sts.size(); k++)
    sts[k].second = out[k];
  ks = std::move(next);
  return true;
}

bool try_merge(KernelShape& ks, ViewList& sts, size_t i) {
  if (ks.kind[i] != ks.kind[i + 1]) return false;
  KernelShape n = ks;
  for (Shape* s : {&n.full, &n.out}) {
    (*s)[i] *= (*s)[i + 1];
    s->erase(s->begin() + i + 1);
  }
  n.kind.erase(n.kind.begin() + i + 1);
  return reshape_all(ks, sts, std::move(n));
}

// Splits dim d into (size/amount, amount); the inner part is expanded into `amount` copies.
bool try_split(KernelShape& ks, ViewList& sts, size_t d, int64_t amount) {
  if (ks.full[d] % amount != 0) return false;
  KernelShape n = ks;
  n.full[d] /= amount;
  n.full.insert(n.full.begin() + d + 1, amount);
  int64_t o = ks.reduces(d) ? 1 : amount;
  n.out[d] /= o;
  n.out.insert(n.out.begin() + d + 1, o);
  n.kind.insert(n.kind.begin() + d + 1, ks.reduces(d) ? kUnroll : kUpcast);
  return reshape_all(ks, sts, std::move(n));
}

// tinygrad-style hand-coded optimisations for a CPU: in a reduction, compute a tile of outputs
// per loop iteration along dims where an input is broadcast (each loaded value is reused
// across the tile, kept in registers), and unroll the innermost reduce loop.
std::vector<std::string> hand_coded_opts(KernelShape& ks, ViewList& sts,
                                         const std::unordered_set<const UOp*>& loaded, Ops reduce_op) {
  std::vector<std::string> applied;
  bool has_reduce = false;
  for (size_t d = 0; d < ks.full.size(); d++)
    has_reduce |= ks.reduces(d);
  if (!has_reduce) return applied;
  auto broadcast_in_some_view = [&](size_t d) {
    for (auto& [u, st] : sts)
      if (loaded.count(u) && st.shape() == ks.full && st.views.back().strides[d] == 0) return true;
    return false;
  };
  // The output tile: up to 16 wide on the innermost broadcast dim (one AVX-512 vector of
  // float32), up to 8 on the next; the reduce loop unrolled by up to 8. Smaller where the
  // sizes do not divide.
  // 5 and 3 fit the kernel windows of convolutions (their weight gradients reduce over the
  // whole batch for a 5x5 or 3x3 output: a tile over the window reuses each gradient load).
  // Failing those, the largest divisor that fits (13 of a 26-wide image).
  const std::vector<int64_t> tile[2] = {{16, 8, 5, 4, 3}, {8, 5, 4, 3, 2}};
  int upcasts = 0;
  int64_t tile_size = 1, row = 1; // row: the innermost upcast
  for (size_t d = ks.full.size(); d-- > 0 && upcasts < 2;) {
    if (ks.kind[d] != kGlobal || !broadcast_in_some_view(d)) continue;
    std::vector<int64_t> amts = tile[upcasts];
    for (int64_t a = amts.front(); a > 2; a--)
      if (ks.full[d] % a == 0) {
        amts.push_back(a);
        break;
      }
    for (int64_t amt : amts)
      if (try_split(ks, sts, d, amt)) {
        applied.push_back("UPCAST(" + std::to_string(d) + ", " + std::to_string(amt) + ")");
        if (upcasts++ == 0) row = amt;
        tile_size *= amt;
        break;
      }
  }
  // A small tile (a 3x3 window, or 4x4 of a 12-wide image) reuses each load a few times only:
  // widen it along one more broadcast dim, as a weight gradient's output channels. Measured:
  // 4x4 -> 4x4x4 halved a transposed 5x5 conv; 13x2 -> 13x2x2 made one 60% slower.
  auto small = [&] { return tile_size < 16 || (tile_size < 32 && row < 8); };
  for (size_t d = ks.full.size(); d-- > 0 && small();) {
    if (ks.kind[d] != kGlobal || ks.full[d] == 1 || !broadcast_in_some_view(d)) continue;
    for (int64_t amt : {8, 4, 2})
      if (tile_size * amt <= 72 && try_split(ks, sts, d, amt)) {
        applied.push_back("UPCAST(" + std::to_string(d) + ", " + std::to_string(amt) + ")");
        tile_size *= amt;
        break;
      }
  }
  bool loads_in_reduce = false; // a reduce over constants (arange) folds away: nothing to unroll
  for (auto& [u, st] : sts)
    loads_in_reduce |= loaded.count(u) && st.shape() == ks.full;
  // A sum with no tile stays one plain loop: the renderer lets its additions be reordered and
  // clang vectorizes it whole, which it fails to do for unrolled copies of a long term.
  if (reduce_op == Ops::ADD && tile_size == 1) loads_in_reduce = false;
  for (size_t d = ks.full.size(); d-- > 0 && loads_in_reduce;)
    if (ks.kind[d] == kReduce) {
      for (int64_t amt : {8, 4, 2})
        if (try_split(ks, sts, d, amt)) {
          applied.push_back("UNROLL(" + std::to_string(d) + ", " + std::to_string(amt) + ")");
          break;
        }
      break;
    }
  return applied;
}

// Copies of `u`, one per value of the expanded dim `ph`.
std::vector<UOpRef> expand_dim(const UOpRef& u, const UOpRef& ph, int64_t n) {
  std::vector<UOpRef> r;
  for (int64_t c = 0; c < n; c++)
    r.push_back(substitute(u, {{ph.get(), UOp::cconst(ph->dtype, double(c))}}));
  return r;
}

// x*(1/y), which is how Tensor divides, becomes a true division (x*(1/x) can be 0.99999994).
const PatternMatcher& pm_divide() {
  static const PatternMatcher pm{
      {UPat::var("x") * UPat::op(Ops::RECIP, {UPat::var("y")}), [](const Match& m) {
         return is_float(m["x"]->dtype) ? alu(Ops::FDIV, {m["x"], m["y"]}) : nullptr;
       }}};
  return pm;
}

struct Lowerer {
  Lowerer(KernelShape ks, DType it) : ks(std::move(ks)), it(it) {}
  KernelShape ks;
  DType it;                   // index dtype: int32 unless some view can reach past 2^31
  std::vector<UOpRef> ranges; // per dim: RANGE (a placeholder for expanded dims), CONST 0 for size 1
  std::unordered_map<const UOp*, UOpRef> memo;

  std::vector<UOpRef> idxs_for(const Shape& s) {
    std::vector<UOpRef> r;
    for (size_t d = 0; d < s.size(); d++)
      r.push_back(s[d] == 1 ? UOp::cconst(it, 0) : ranges[d]);
    return r;
  }

  // An unrolled dim gives copies of the reduced value. Folded into one term per iteration they
  // form a serial chain through the accumulator; so the copies of the innermost unrolled dim each
  // get their own accumulator (a vector of them, which clang keeps in one register), combined
  // once after the loop. Other unrolled dims are folded inside the loop. A kernel with an output
  // tile (UPCAST) has independent chains already, and copies of its tile would crowd registers.
  UOpRef lower_reduce(const UOpRef& u) {
    Ops op = u->rarg().op;
    UOpRef v = lower(u->src[0]);
    std::vector<UOpRef> loops{v};
    int64_t lanes_dim = -1;
    for (auto a : u->rarg().axes) {
      if (ks.full[a] == 1) continue;
      if (ks.kind[a] == kReduce) loops.push_back(ranges[a]);
      if (ks.kind[a] == kUnroll) lanes_dim = a;
    }
    if (std::count(ks.kind.begin(), ks.kind.end(), kUpcast)) lanes_dim = -1;
    auto fold = [&](const std::vector<UOpRef>& copies) {
      UOpRef r = copies[0];
      for (size_t i = 1; i < copies.size(); i++)
        r = alu(op, {r, copies[i]});
      return r;
    };
    for (auto a : u->rarg().axes)
      if (ks.full[a] != 1 && ks.kind[a] == kUnroll && (a != lanes_dim || loops.size() == 1))
        v = fold(expand_dim(v, ranges[a], ks.full[a]));
    if (loops.size() == 1) return v;
    std::vector<UOpRef> lanes{v};
    if (lanes_dim >= 0) lanes = expand_dim(v, ranges[lanes_dim], ks.full[lanes_dim]);
    for (auto& l : lanes) {
      loops[0] = l;
      l = UOp::make(Ops::REDUCE, u->dtype, loops, ReduceArg{op, {}});
    }
    return fold(lanes);
  }

  UOpRef lower(const UOpRef& u) {
    if (auto it = memo.find(u.get()); it != memo.end()) return it->second;
    UOpRef r;
    switch (u->op) {
    case Ops::LOAD:
    case Ops::STORE: {
      const ShapeTracker& st = u->src[1]->st();
      auto [idx, valid] = st.to_indexed(idxs_for(st.shape()), it);
      std::vector<UOpRef> isrc{u->src[0], idx};
      bool gated = !(valid->op == Ops::CONST && valid->const_value() != 0);
      if (gated) isrc.push_back(valid);
      UOpRef index = UOp::make(Ops::INDEX, u->src[0]->dtype, isrc);
      if (u->op == Ops::LOAD)
        r = UOp::make(Ops::LOAD, u->dtype, {index});
      else
        r = UOp::make(Ops::STORE, DType::Void, {index, lower(u->src[2])});
      break;
    }
    case Ops::CONST: {
      if (u->src.empty()) {
        r = u;
        break;
      }
      const ShapeTracker& st = u->src[0]->st();
      auto [idx, valid] = st.to_indexed(idxs_for(st.shape()), it);
      UOpRef c = UOp::make(Ops::CONST, u->dtype, {}, u->arg);
      r = alu(Ops::WHERE, {valid, c, UOp::cconst(u->dtype, 0)});
      break;
    }
    case Ops::REDUCE_AXIS:
      r = lower_reduce(u);
      break;
    default: {
      std::vector<UOpRef> src;
      for (auto& s : u->src)
        src.push_back(lower(s));
      r = UOp::make(u->op, u->dtype, src, u->arg);
    }
    }
    memo[u.get()] = r;
    return r;
  }
};

} // namespace

namespace {

// Loop dims from the AST: the store's shape, and the reduce's input shape if there is one.
KernelShape kernel_shape(const UOpRef& ast) {
  KernelShape ks;
  ks.out = ast->src.at(0)->src[1]->st().shape();
  ks.full = ks.out;
  std::vector<int64_t> axes;
  for (const UOp* u : toposort(ast.get()))
    if (u->op == Ops::REDUCE_AXIS) axes = u->rarg().axes;
  for (const UOp* v : views_of(ast)) // any view inside the reduce has the full shape
    if (v->st().shape() != ks.out) ks.full = v->st().shape();
  ks.kind.assign(ks.full.size(), kGlobal);
  for (auto a : axes)
    ks.kind[a] = kReduce;
  return ks;
}

// The AST again, with the reshaped views and the reduce axes renumbered.
UOpRef apply_views(const UOpRef& ast, const KernelShape& ks, const ViewList& sts) {
  std::vector<int64_t> axes;
  for (size_t d = 0; d < ks.full.size(); d++)
    if (ks.reduces(d)) axes.push_back(static_cast<int64_t>(d));
  std::unordered_map<const UOp*, UOpRef> vmap;
  for (auto& [u, st] : sts)
    vmap[u] = view_uop(st);
  PatternMatcher remap{{UPat::op(Ops::VIEW),
                        [&](const Match& m) {
                          auto it = vmap.find(m.root().get());
                          return it == vmap.end() ? UOpRef() : it->second;
                        }},
                       {UPat::op(Ops::REDUCE_AXIS), [&](const Match& m) {
                          auto& u = m.root();
                          if (u->rarg().axes == axes) return UOpRef();
                          return UOp::make(Ops::REDUCE_AXIS, u->dtype, u->src, ReduceArg{u->rarg().op, axes});
                        }}};
  return graph_rewrite(ast, remap);
}

// One RANGE per dim (a placeholder for expanded dims), the AST lowered through them, and the
// STORE copied once per value of each UPCAST dim.
UOpRef lower_to_loops(const UOpRef& ast, const KernelShape& ks, DType it) {
  Lowerer lw(ks, it);
  for (size_t d = 0; d < ks.full.size(); d++) {
    if (ks.full[d] == 1)
      lw.ranges.push_back(UOp::cconst(it, 0));
    else
      lw.ranges.push_back(UOp::make(Ops::RANGE, it, {UOp::cconst(it, static_cast<double>(ks.full[d]))},
                                    std::vector<int64_t>{static_cast<int64_t>(d), ks.kind[d]}));
  }
  std::vector<UOpRef> stores{lw.lower(ast->src[0])};
  for (size_t d = 0; d < ks.full.size(); d++) {
    if (ks.kind[d] != kUpcast) continue;
    std::vector<UOpRef> next;
    for (auto& st : stores)
      for (auto& c : expand_dim(st, lw.ranges[d], ks.full[d]))
        next.push_back(c);
    stores = std::move(next);
  }
  return UOp::make(Ops::SINK, DType::Void, stores);
}

} // namespace

LoweredKernel lower_kernel(const UOpRef& ast) {
  LoweredKernel k;
  KernelShape ks = kernel_shape(ast);
  k.out_shape = ks.out;
  ViewList sts;
  for (const UOp* v : views_of(ast))
    sts.push_back({v, v->st()});
  if (!settings().noopt) {
    // merge adjacent dims (right to left) wherever every view stays one view, then opts
    for (size_t i = ks.full.size(); i-- > 1;)
      try_merge(ks, sts, i - 1);
    std::unordered_set<const UOp*> loaded; // views of buffers (not of constants)
    Ops reduce_op = Ops::SINK;
    for (const UOp* u : toposort(ast.get())) {
      if (u->op == Ops::LOAD) loaded.insert(u->src[1].get());
      if (u->op == Ops::REDUCE_AXIS) reduce_op = u->rarg().op;
    }
    k.opts = hand_coded_opts(ks, sts, loaded, reduce_op);
  }
  k.ast = apply_views(ast, ks, sts);
  k.full_shape = ks.full;
  int64_t reach = 0; // index math is int32 unless some view can reach past 2^31
  for (auto& [u, st] : sts)
    reach = std::max(reach, st.max_index_value());
  k.lowered = lower_to_loops(k.ast, ks, reach > 2147483647 ? DType::Int64 : DType::Int32);
  // divisions first: constant folding would turn x*(1/41) into an inexact x*0.024390243
  k.simplified =
      graph_rewrite(graph_rewrite(k.lowered, pm_divide()), settings().noopt ? symbolic_simple() : symbolic());
  k.linear = linearize(k.simplified);
  bool reduces = false;
  for (size_t d = 0; d < ks.full.size(); d++)
    reduces |= ks.reduces(d);
  k.name = reduces ? "r" : "E";
  for (auto d : ks.full)
    k.name += "_" + std::to_string(d);
  return k;
}

} // namespace mg
