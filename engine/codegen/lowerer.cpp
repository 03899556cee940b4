#include "engine/codegen/lowerer.h"
#include "engine/codegen/semantics.h"

#include "engine/codegen/heuristic.h"
#include "engine/codegen/linearize.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/machine.h"
#include "engine/pattern.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"
#include "engine/symbolic.h"

namespace mg {

namespace {

std::vector<const UOp*> views_of(const UOpRef& ast) {
  std::vector<const UOp*> r;
  for (const UOp* u : toposort(ast.get()))
    if (u->op == Ops::VIEW) r.push_back(u);
  return r;
}

// x*(1/y), which is how Tensor divides, becomes a true division (x*(1/x) can be 0.99999994); also
// where a pad masks 1/y (the scheduler's select around an op that is not 0 at 0).
const PatternMatcher& pm_divide() {
  static const PatternMatcher pm{
      {UPat::var("x") * UPat::op(Ops::RECIP, {UPat::var("y")}),
       [](const Match& m) {
         return is_float(m["x"]->dtype) ? alu(Ops::FDIV, {m["x"], m["y"]}) : nullptr;
       }},
      {UPat::var("x") *
           UPat::op(Ops::WHERE, {UPat::var("v"), UPat::op(Ops::RECIP, {UPat::var("y")}), UPat::cnst(0)}),
       [](const Match& m) {
         if (!is_float(m["x"]->dtype)) return UOpRef();
         return alu(Ops::WHERE, {m["v"], alu(Ops::FDIV, {m["x"], m["y"]}), UOp::cconst(m["x"]->dtype, 0)});
       }}};
  return pm;
}

// Copies of `u`, one per value of the expanded dim `ph`, each simplified as it is made (only the
// value-preserving rules under NOOPT): a stack's pieces whose masks turn false vanish before the
// next dim copies them again. Simplified only at the end, a Winograd transform's 36 copies took a
// second to lower, and 5.7 s once BEAM upcast its channels by 16 as well.
struct ExpandCtx {
  const UOp* ph;
  UOpRef value;
};
std::vector<UOpRef> expand_dim(const UOpRef& u, const UOpRef& ph, int64_t n, bool noopt) {
  static const PatternMatcher place{{UPat::op(Ops::RANGE), [](const Match& m) {
                                       auto* c = static_cast<ExpandCtx*>(m.ctx);
                                       return m.root().get() == c->ph ? c->value : nullptr;
                                     }}};
  static const PatternMatcher full = place + symbolic(), simple = place + symbolic_simple();
  std::vector<UOpRef> r;
  for (int64_t c = 0; c < n; c++) {
    ExpandCtx ctx{ph.get(), UOp::cconst(ph->dtype, double(c))};
    r.push_back(graph_rewrite(u, noopt ? simple : full, &ctx));
  }
  return r;
}

struct Lowerer {
  Lowerer(KernelShape ks, DType it, const Target& target, bool noopt)
      : ks(std::move(ks)), it(it), target(target), noopt(noopt) {}
  KernelShape ks;
  DType it; // index dtype: int32 unless some view can reach past 2^31
  Target target;
  bool noopt;                    // NOOPT: copies are simplified by the value-preserving rules only
  int nlocal = 0;                // shared arrays made so far
  bool outer_loops = false;      // a GPU kernel runs some global dims as loops (too many work-groups)
  Shape global_size, local_size; // launch dims, set as each SPECIAL is made
  std::vector<UOpRef> ranges;    // per dim: RANGE (a placeholder for expanded dims), CONST 0 for size 1
  std::unordered_map<const UOp*, UOpRef> memo;

  // A launch dim's id, its size recorded as data for the launch.
  UOpRef special(LaunchDim ld, const UOpRef& size) {
    Shape& dims = ld.local ? local_size : global_size;
    if (dims.size() <= static_cast<size_t>(ld.axis)) dims.resize(static_cast<size_t>(ld.axis) + 1, 1);
    dims[static_cast<size_t>(ld.axis)] = sint(size);
    return UOp::make(Ops::SPECIAL, it, {size}, launch_arg(ld));
  }

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
    std::vector<UOpRef> loops{v}, groups;
    std::vector<size_t> group_dims;
    int64_t lanes_dim = -1;
    for (auto a : u->rarg().axes) {
      if (ks.full[a] == 1) continue;
      if (ks.kind[a] == kReduce) loops.push_back(ranges[a]);
      if (ks.kind[a] == kGroup) groups.push_back(ranges[a]), group_dims.push_back(static_cast<size_t>(a));
      if (ks.kind[a] == kUnroll) lanes_dim = a;
    }
    // A group's partial results (each a reduce over the other dims) are combined by a reduce
    // over the group dims around it; on a GPU, through shared memory.
    auto grouped = [&](const UOpRef& partial) {
      if (groups.empty()) return partial;
      if (target.gpu) return shared_combine(partial, group_dims, op);
      std::vector<UOpRef> src{partial};
      src.insert(src.end(), groups.begin(), groups.end());
      return UOp::make(Ops::REDUCE, u->dtype, src, ReduceArg{op, {}});
    };
    if (std::count(ks.kind.begin(), ks.kind.end(), kUpcast)) lanes_dim = -1;
    auto fold = [&](const std::vector<UOpRef>& copies) {
      UOpRef r = copies[0];
      for (size_t i = 1; i < copies.size(); i++)
        r = alu(op, {r, copies[i]});
      return r;
    };
    for (auto a : u->rarg().axes)
      if (ks.full[a] != 1 && ks.kind[a] == kUnroll && (a != lanes_dim || loops.size() == 1))
        v = fold(expand_dim(v, ranges[a], ks.full[a], noopt));
    if (loops.size() == 1) return grouped(v);
    std::vector<UOpRef> lanes{v};
    if (lanes_dim >= 0) lanes = expand_dim(v, ranges[lanes_dim], ks.full[lanes_dim], noopt);
    for (auto& l : lanes) {
      loops[0] = l;
      l = UOp::make(Ops::REDUCE, u->dtype, loops, ReduceArg{op, {}});
    }
    return grouped(fold(lanes));
  }

  // On a GPU the group dims are threads of one work-group. Each stores its partial result in a
  // shared array (one slot per thread and UPCAST copy), all wait at a barrier, then each combines
  // the group's partials: every thread gets the same value, and only the first stores it.
  UOpRef shared_combine(const UOpRef& partial, const std::vector<size_t>& group_dims, Ops op) {
    auto idx = [&](int64_t v) { return UOp::cconst(it, static_cast<double>(v)); };
    // slot: ((output thread * group threads) + group thread) * copies + copy, where the output
    // thread is the work-group's own output (LOCAL dims: each has its own partial results)
    UOpRef thread = idx(0), tile = idx(0), output = idx(0);
    int64_t threads = 1, copies = 1, outputs = 1;
    for (auto d = group_dims.rbegin(); d != group_dims.rend(); ++d)
      thread = alu(Ops::ADD, {thread, alu(Ops::MUL, {ranges[*d], idx(threads)})}), threads *= ks.full[*d];
    for (size_t d = ks.full.size(); d-- > 0;) {
      if (ks.kind[d] == kUpcast && ks.full[d] > 1)
        tile = alu(Ops::ADD, {tile, alu(Ops::MUL, {ranges[d], idx(copies)})}), copies *= ks.full[d];
      if (ks.kind[d] == kLocal && ks.full[d] > 1)
        output = alu(Ops::ADD, {output, alu(Ops::MUL, {ranges[d], idx(outputs)})}), outputs *= ks.full[d];
    }
    // The slots are written again on the next iteration of a loop around the combine, while slower
    // threads may still read them: no loop may enclose it.
    for (size_t d = 0; d < ks.full.size(); d++)
      if (ks.kind[d] == kBlock && ks.full[d] > 1) throw IllegalOpt("GROUP: not with BLOCK on a GPU");
    if (outer_loops) throw IllegalOpt("GROUP: not with global dims that stay loops on a GPU");
    DType dt = partial->dtype;
    int64_t slots = outputs * threads * copies,
            bytes = slots * std::max(itemsize(dt), 4); // half: kept in float
    if (bytes > target.max_shared)
      throw IllegalOpt("GROUP: " + std::to_string(slots) + " partial results need " + std::to_string(bytes) +
                       " bytes of shared memory; the device has " + std::to_string(target.max_shared));
    UOpRef buf = UOp::make(Ops::DEFINE_LOCAL, dt, {}, std::vector<int64_t>{nlocal++, slots});
    auto slot_of = [&](const UOpRef& t) {
      UOpRef row = alu(Ops::ADD, {alu(Ops::MUL, {output, idx(threads)}), t});
      return alu(Ops::ADD, {alu(Ops::MUL, {row, idx(copies)}), tile});
    };
    UOpRef store =
        UOp::make(Ops::STORE, DType::Void, {UOp::make(Ops::INDEX, dt, {buf, slot_of(thread)}), partial});
    UOpRef barrier = UOp::make(Ops::BARRIER, DType::Void, {store});
    UOpRef r = UOp::make(Ops::RANGE, it, {idx(threads)},
                         std::vector<int64_t>{static_cast<int64_t>(ks.full.size()) + nlocal, kReduce});
    UOpRef at = slot_of(r);
    UOpRef load = UOp::make(Ops::LOAD, dt, {UOp::make(Ops::INDEX, dt, {buf, at}), barrier});
    return UOp::make(Ops::REDUCE, dt, {load, r}, ReduceArg{op, {}});
  }

  // On a GPU with group dims, only the group's first thread stores.
  UOpRef first_in_group(UOpRef valid) {
    if (!target.gpu) return valid;
    for (size_t d = 0; d < ks.full.size(); d++)
      if (ks.kind[d] == kGroup && ks.full[d] > 1)
        valid = alu(Ops::AND, {valid, alu(Ops::CMPLT, {ranges[d], UOp::cconst(it, 1)})});
    return valid;
  }

  // The value stored: under BLOCK, the reduce over this block combined with the partial result
  // the output holds from the blocks before (the first block starts from the reduce's identity).
  UOpRef blocked(const UOpRef& index, const UOpRef& value) {
    UOpRef v = lower(value);
    for (size_t d = 0; d < ks.full.size(); d++) {
      if (ks.kind[d] != kBlock || ks.full[d] == 1) continue;
      Ops op = value->rarg().op;
      UOpRef identity = UOp::cconst(value->dtype, reduce_identity(op, value->dtype));
      UOpRef first = alu(Ops::CMPLT, {ranges[d], UOp::cconst(it, 1)});
      // Where the accumulators fill whole vectors (a matmul's rows of 32), the partial result
      // is loaded and added after the loop, in vectors. Otherwise the load is gated on a later
      // block, and the linearizer starts the accumulators from it (linearize.cpp): the conv1
      // weight gradient's 4 x 25 accumulators, combined after the loop, spilled (clang's SLP
      // pass), and started from an unconditional load they spilled too (180 stack accesses
      // against 60). The load's index depends on the loops over outputs, which run inside the
      // block loop; with none left (a full sum) the gate is what keeps the load inside it. On a
      // GPU the dims over outputs are thread ids, not loops: always gated.
      bool loops_inside = false;
      int64_t accumulators = 1;
      for (size_t e = 0; e < ks.full.size() && !target.gpu; e++) {
        loops_inside |=
            (ks.kind[e] == kGlobal || ks.kind[e] == kLocal || ks.kind[e] == kVector) && ks.full[e] > 1;
        if (ks.kind[e] == kUpcast) accumulators *= ks.full[e].value();
      }
      bool vectors = loops_inside && accumulators % std::max(1, machine().simd.float_lanes) == 0;
      UOpRef later = alu(Ops::CMPLT, {UOp::cconst(it, 0), ranges[d]});
      std::vector<UOpRef> isrc{index->src[0], index->src[1],
                               index->src.size() > 2 ? alu(Ops::AND, {index->src[2], later}) : later};
      UOpRef load =
          UOp::make(Ops::LOAD, value->dtype, {vectors ? index : UOp::make(Ops::INDEX, index->dtype, isrc)});
      v = alu(op, {v, alu(Ops::WHERE, {first, identity, load})}); // the reduce first: the load then
                                                                  // comes after its loop
    }
    return v;
  }

  UOpRef lower(const UOpRef& u) {
    if (auto it = memo.find(u.get()); it != memo.end()) return it->second;
    UOpRef r;
    switch (u->op) {
    case Ops::LOAD:
    case Ops::STORE: {
      const ShapeTracker& st = u->src[1]->st();
      auto [idx, valid] = st.to_indexed(idxs_for(st.shape()), it);
      if (u->op == Ops::STORE) valid = first_in_group(valid);
      std::vector<UOpRef> isrc{u->src[0], idx};
      bool gated = !(valid->op == Ops::CONST && valid->const_value() != 0);
      if (gated) isrc.push_back(valid);
      UOpRef index = UOp::make(Ops::INDEX, u->src[0]->dtype, isrc);
      if (u->op == Ops::LOAD)
        r = UOp::make(Ops::LOAD, u->dtype, {index});
      else
        r = UOp::make(Ops::STORE, DType::Void, {index, blocked(index, u->src[2])});
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
      // divisions as they are made: an expanded copy folds its constants, and 1/41 must not
      // become an inexact 0.024390243 first
      if (UOpRef d = pm_divide().rewrite(r)) r = d;
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
  int reduces = 0;
  for (const UOp* u : toposort(ast.get()))
    reduces += u->op == Ops::REDUCE_AXIS;
  const UOpRef& stored = ast->src.at(0)->src.at(2);
  ks.stores_reduce = reduces == 1 && stored->op == Ops::REDUCE_AXIS &&
                     (stored->rarg().op == Ops::ADD || stored->rarg().op == Ops::MAX);
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

// The loop nest: one RANGE per dim (a placeholder for expanded dims), except the first 3 global
// dims and the first 3 local dims, which are launch dims (SPECIAL gidx0..2, lidx0..2) as a GPU
// would run them: one thread per point, each computing its tile of UPCAST copies. Further dims
// over outputs stay loops. The
// AST is lowered through them, and the STORE copied once per value of each UPCAST dim.
// `launch` receives each SPECIAL with the RANGE a CPU runs in its place.
// A GPU target numbers the launch dims from the innermost (gidx0: adjacent threads touch adjacent
// memory), folds global dims beyond three into gidx2, and runs group dims as local threads.
void gpu_launch(Lowerer& lw, const KernelShape& ks, DType it,
                std::vector<std::pair<UOpRef, UOpRef>>& launch) {
  std::vector<size_t> globals, locals;
  for (size_t d = 0; d < ks.full.size(); d++) {
    lw.ranges.push_back(UOp::cconst(it, 0));
    if (ks.full[d] == 1) continue;
    lw.ranges[d] = UOp::make(Ops::RANGE, it, {ks.full[d].uop(it)},
                             std::vector<int64_t>{static_cast<int64_t>(d), ks.kind[d]});
    if (!ks.full[d].is_const()) continue; // a symbolic dim stays a loop in every thread
    if (ks.kind[d] == kGlobal) globals.push_back(d);
    if (ks.kind[d] == kLocal || ks.kind[d] == kGroup) locals.push_back(d);
  }
  auto special = [&](LaunchDim ld, int64_t size, int64_t limit, const char* what) {
    if (size > limit)
      throw IllegalOpt("launch dim " + ld.name() + " has " + std::to_string(size) + " " + what +
                       "; the device allows " + std::to_string(limit));
    launch.push_back({lw.special(ld, UOp::cconst(it, static_cast<double>(size))), nullptr});
    return launch.back().first;
  };
  if (locals.size() > 3) throw IllegalOpt("more than 3 local and group dims");
  int64_t threads = 1;
  for (size_t k = 0; k < locals.size(); k++) {
    size_t d = locals[locals.size() - 1 - k];
    threads *= ks.full[d];
    int64_t axis = lw.target.max_local_axis[k],
            limit = axis > 0 ? std::min(axis, lw.target.max_local) : lw.target.max_local;
    lw.ranges[d] = special({true, static_cast<int>(k)}, ks.full[d], limit, "threads");
  }
  if (threads > lw.target.max_local)
    throw IllegalOpt("a work-group of " + std::to_string(threads) + " threads; the device allows " +
                     std::to_string(lw.target.max_local));
  size_t n = globals.size();
  for (size_t k = 0; k < std::min<size_t>(n, 2); k++) {
    size_t d = globals[n - 1 - k];
    int64_t limit = k == 0 && lw.target.max_groups_x > 0 ? lw.target.max_groups_x : lw.target.max_groups;
    lw.ranges[d] = special({false, static_cast<int>(k)}, ks.full[d], limit, "work-groups");
  }
  if (n < 3) return;
  // gidx2 spans the outer dims, each dim's index by division and remainder, as many as fit the
  // device's limit from the inside out; dims further out stay loops in every thread
  size_t first = n - 2;
  int64_t total = 1;
  while (first > 0 && total * ks.full[globals[first - 1]] <= lw.target.max_groups)
    total *= ks.full[globals[--first]];
  lw.outer_loops = first > 0;
  if (first == n - 2) return;
  UOpRef g2 = special({false, 2}, total, lw.target.max_groups, "work-groups");
  int64_t inner = total;
  for (size_t k = first; k + 2 < n; k++) {
    size_t d = globals[k];
    inner /= ks.full[d];
    UOpRef v = inner > 1 ? alu(Ops::IDIV, {g2, UOp::cconst(it, static_cast<double>(inner))}) : g2;
    lw.ranges[d] = k == first ? v : alu(Ops::MOD, {v, UOp::cconst(it, static_cast<double>(ks.full[d]))});
  }
}

// The kernel reads its Variables' values from one more buffer (int32, one slot per Variable in
// order of name), so every backend passes them as it passes buffers. Each DEFINE_VAR gets the load
// of its slot as its source; renderers name the value after the Variable.
UOpRef bind_vars(const UOpRef& lowered, const UOpRef& ast, std::vector<VarArg>& vars) {
  std::map<std::string, const UOp*> found;
  int64_t nbufs = 0;
  for (const UOp* u : toposort(ast.get()))
    if (u->op == Ops::DEFINE_GLOBAL) nbufs = std::max(nbufs, u->iarg() + 1);
  for (const UOp* u : toposort(lowered.get()))
    if (u->op == Ops::DEFINE_VAR && u->src.empty()) found[u->var().name] = u;
  if (found.empty()) return lowered;
  UOpRef buf = UOp::make(Ops::DEFINE_GLOBAL, DType::Int32, {}, nbufs);
  std::vector<std::pair<const UOp*, UOpRef>> subs;
  for (auto& [name, u] : found) {
    UOpRef slot = UOp::cconst(DType::Int32, static_cast<double>(vars.size()));
    UOpRef load = UOp::make(Ops::LOAD, DType::Int32, {UOp::make(Ops::INDEX, DType::Int32, {buf, slot})});
    subs.push_back({u, UOp::make(Ops::DEFINE_VAR, DType::Int32, {load}, u->arg)});
    vars.push_back(u->var());
  }
  return substitute(lowered, subs);
}

// The loop nest and launch ids of `k` (its shape, AST and index dtype from the opts step); sets
// k.lowered, the launch sizes, and on a CPU the loops that stand in for the launch ids.
void lower_to_loops(LoweredKernel& k, const Target& target) {
  const KernelShape& ks = k.shape;
  const UOpRef& ast = k.ast;
  DType it = k.index_dtype;
  std::vector<std::pair<UOpRef, UOpRef>> launch; // each SPECIAL, and the RANGE a CPU runs instead
  if (target.gpu && std::count(ks.kind.begin(), ks.kind.end(), kVector))
    throw IllegalOpt("VECTORIZE: a GPU runs its dims over outputs as threads, not loops to vectorize");
  Lowerer lw(ks, it, target, k.noopt);
  int globals = 0, locals = 0;
  if (target.gpu) gpu_launch(lw, ks, it, launch);
  for (size_t d = 0; d < ks.full.size() && !target.gpu; d++) {
    if (ks.full[d] == 1) {
      lw.ranges.push_back(UOp::cconst(it, 0));
      continue;
    }
    UOpRef size = ks.full[d].uop(it);
    UOpRef range =
        UOp::make(Ops::RANGE, it, {size}, std::vector<int64_t>{static_cast<int64_t>(d), ks.kind[d]});
    int* n = ks.kind[d] == kGlobal ? &globals : ks.kind[d] == kLocal ? &locals : nullptr;
    if (n && *n < 3) {
      launch.push_back({lw.special({ks.kind[d] == kLocal, (*n)++}, size), range});
      lw.ranges.push_back(launch.back().first);
    } else
      lw.ranges.push_back(range);
  }
  std::vector<UOpRef> stores{lw.lower(ast->src[0])};
  for (size_t d = 0; d < ks.full.size(); d++) {
    if (ks.kind[d] != kUpcast) continue;
    std::vector<UOpRef> next;
    for (auto& st : stores)
      for (auto& c : expand_dim(st, lw.ranges[d], ks.full[d], k.noopt))
        next.push_back(c);
    stores = std::move(next);
  }
  k.lowered = UOp::make(Ops::SINK, DType::Void, stores);
  size_t dims = std::max(lw.global_size.size(), lw.local_size.size()); // as many of each, 1 for none
  k.global_size = lw.global_size, k.local_size = lw.local_size;
  k.global_size.resize(dims, 1);
  k.local_size.resize(dims, 1);
  for (auto& [special, range] : launch)
    if (range) k.cpu_loops.push_back({special, range});
}

} // namespace

LoweredKernel apply_opts(const UOpRef& ast, const std::vector<Opt>* opts, const Target& target, bool noopt) {
  LoweredKernel k;
  k.noopt = noopt;
  KernelShape ks = kernel_shape(ast);
  k.out_shape = ks.out;
  ViewList sts;
  for (const UOp* v : views_of(ast))
    sts.push_back({v, v->st()});
  if (opts || !noopt) {
    // merge adjacent dims (right to left) wherever every view stays one view and none is stacked
    // on another (try_merge), then opts
    for (size_t i = ks.full.size(); i-- > 1;)
      try_merge(ks, sts, i - 1);
  }
  if (opts) {
    for (auto& o : *opts)
      apply_opt(ks, sts, o);
    k.opts = *opts;
  } else if (!noopt && !is_symbolic(ks.full)) {   // the hand-coded opts split and unroll numbers only
    std::unordered_map<const UOp*, DType> loaded; // views of buffers (not of constants)
    Ops reduce_op = Ops::SINK;
    const UOp *stored = nullptr, *value = nullptr;
    for (const UOp* u : toposort(ast.get())) {
      if (u->op == Ops::LOAD) loaded[u->src[1].get()] = u->dtype;
      if (u->op == Ops::REDUCE_AXIS) reduce_op = u->rarg().op;
      if (u->op == Ops::STORE && u->src.size() > 2) stored = u->src[1].get(), value = u->src[2].get();
    }
    k.opts = hand_coded_opts(ks, sts, loaded, reduce_op, target, stored, value);
  }
  k.ast = apply_views(ast, ks, sts);
  k.shape = ks;
  k.full_shape = ks.full;
  int64_t reach = 0; // index math is int32 unless some view can reach past 2^31
  for (auto& [u, st] : sts)
    reach = std::max(reach, st.max_index_value());
  k.index_dtype = reach > 2147483647 ? DType::Int64 : DType::Int32;
  bool reduces = false;
  for (size_t d = 0; d < ks.full.size(); d++)
    reduces |= ks.reduces(d);
  k.name = reduces ? "r" : "E";
  for (auto& d : ks.full) { // a symbolic size by its Variables' names: r_16_start_pos_4
    std::string s;
    for (char c : d.str())
      s += c == '+'                           ? "_p"
           : c == '-'                         ? "_m"
           : c == '*'                         ? "_x"
           : c == '(' || c == ')' || c == ' ' ? ""
                                              : std::string(1, c);
    k.name += "_" + s;
  }
  return k;
}

void lower(LoweredKernel& k, const Target& target) { lower_to_loops(k, target); }

void simplify(LoweredKernel& k) {
  // The CPU runs each launch dim as the loop it stands for (the outermost one split across cores).
  std::vector<std::pair<const UOp*, UOpRef>> subs;
  for (auto& [special, range] : k.cpu_loops)
    subs.push_back({special.get(), range});
  UOpRef loops = subs.empty() ? k.lowered : substitute(k.lowered, subs);
  k.vars.clear();
  loops = bind_vars(loops, k.ast, k.vars);
  k.simplified = apply_semantics(graph_rewrite(loops, k.noopt ? symbolic_simple() : symbolic()));
}

void linearize(LoweredKernel& k, const Target& target) {
  k.linear = linearize(k.simplified);
  if (target.max_thread_iterations > 0) { // every loop's trips times those of the loops around it
    int64_t total = 0, trips = 1;
    std::vector<int64_t> stack;
    for (auto& u : k.linear)
      if (u->op == Ops::RANGE) {
        stack.push_back(trips);
        trips *= static_cast<int64_t>(u->src[0]->vmax());
        total += trips;
      } else if (u->op == Ops::ENDRANGE) {
        trips = stack.back(), stack.pop_back();
      }
    if (total > target.max_thread_iterations)
      throw IllegalOpt(
          "each thread would run " + std::to_string(total) + " loop iterations; the device stops at " +
          std::to_string(target.max_thread_iterations) + " (spread the work with GROUPTOP or LOCAL)");
  }
}

LoweredKernel lower_kernel(const UOpRef& ast, const std::vector<Opt>* opts, const Target& target,
                           std::optional<bool> noopt) {
  bool no = noopt.value_or(settings().noopt);
  LoweredKernel k = apply_opts(ast, opts, target, no);
  lower(k, target);
  simplify(k);
  linearize(k, target);
  return k;
}

} // namespace mg
