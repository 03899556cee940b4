#include "engine/lowerer.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "engine/pattern.h"
#include "engine/settings.h"
#include "engine/shapetracker.h"
#include "engine/symbolic.h"

namespace mg {

namespace {

struct KernelShape {
  Shape full, out;
  std::vector<bool> reduce; // per dim
};

std::vector<const UOp*> views_of(const UOpRef& ast) {
  std::vector<const UOp*> r;
  for (const UOp* u : toposort(ast.get()))
    if (u->op == Ops::VIEW) r.push_back(u);
  return r;
}

// Merges dims i and i+1 of every view (shape full or out) if each stays a single view.
bool try_merge(KernelShape& ks, size_t i, std::vector<std::pair<const UOp*, ShapeTracker>>& sts) {
  if (ks.reduce[i] != ks.reduce[i + 1]) return false;
  auto merged = [&](const Shape& s) {
    Shape r = s;
    r[i] *= r[i + 1];
    r.erase(r.begin() + i + 1);
    return r;
  };
  Shape nf = merged(ks.full), no = merged(ks.out);
  std::vector<ShapeTracker> out;
  for (auto& [u, st] : sts) {
    const Shape& target = st.shape() == ks.full ? nf : no;
    auto v = st.views.back().reshape(target);
    if (!v) return false;
    ShapeTracker n = st;
    n.views.back() = *v;
    out.push_back(n);
  }
  for (size_t k = 0; k < sts.size(); k++) sts[k].second = out[k];
  ks.full = nf, ks.out = no;
  ks.reduce.erase(ks.reduce.begin() + i + 1);
  return true;
}

UOpRef view_uop(const ShapeTracker& st) {
  return UOp::make(Ops::VIEW, DType::Void, {}, std::make_shared<const ShapeTracker>(st));
}

struct Lowerer {
  KernelShape ks;
  std::vector<UOpRef> ranges; // per dim; CONST 0 for size-1 dims
  std::unordered_map<const UOp*, UOpRef> memo;

  std::vector<UOpRef> idxs_for(const Shape& s) {
    std::vector<UOpRef> r;
    for (size_t d = 0; d < s.size(); d++) r.push_back(s[d] == 1 ? UOp::cconst(DType::Int32, 0) : ranges[d]);
    return r;
  }

  UOpRef lower(const UOpRef& u) {
    if (auto it = memo.find(u.get()); it != memo.end()) return it->second;
    UOpRef r;
    switch (u->op) {
    case Ops::LOAD:
    case Ops::STORE: {
      const ShapeTracker& st = u->src[1]->st();
      auto [idx, valid] = st.to_indexed(idxs_for(st.shape()));
      std::vector<UOpRef> isrc{u->src[0], idx};
      bool gated = !(valid->op == Ops::CONST && valid->const_value() != 0);
      if (gated) isrc.push_back(valid);
      UOpRef index = UOp::make(Ops::INDEX, u->src[0]->dtype, isrc);
      if (u->op == Ops::LOAD) r = UOp::make(Ops::LOAD, u->dtype, {index});
      else r = UOp::make(Ops::STORE, DType::Void, {index, lower(u->src[2])});
      break;
    }
    case Ops::CONST: {
      if (u->src.empty()) {
        r = u;
        break;
      }
      const ShapeTracker& st = u->src[0]->st();
      auto [idx, valid] = st.to_indexed(idxs_for(st.shape()));
      UOpRef c = UOp::make(Ops::CONST, u->dtype, {}, u->arg);
      r = alu(Ops::WHERE, {valid, c, UOp::cconst(u->dtype, 0)});
      break;
    }
    case Ops::REDUCE_AXIS: {
      std::vector<UOpRef> src{lower(u->src[0])};
      for (auto a : u->rarg().axes)
        if (ks.full[a] != 1) src.push_back(ranges[a]);
      r = src.size() == 1 ? src[0] : UOp::make(Ops::REDUCE, u->dtype, src, static_cast<int64_t>(u->rarg().op));
      break;
    }
    default: {
      std::vector<UOpRef> src;
      for (auto& s : u->src) src.push_back(lower(s));
      r = UOp::make(u->op, u->dtype, src, u->arg);
    }
    }
    memo[u.get()] = r;
    return r;
  }
};

} // namespace

LoweredKernel lower_kernel(const UOpRef& ast0) {
  LoweredKernel k;
  const UOp* store = ast0->src.at(0).get();
  KernelShape ks;
  ks.out = store->src[1]->st().shape();
  ks.full = ks.out;
  std::vector<int64_t> axes;
  for (const UOp* u : toposort(ast0.get()))
    if (u->op == Ops::REDUCE_AXIS) axes = u->rarg().axes;
  // the reduce's input shape: any view inside it has the full shape
  for (const UOp* v : views_of(ast0))
    if (v->st().shape() != ks.out) ks.full = v->st().shape();
  ks.reduce.assign(ks.full.size(), false);
  for (auto a : axes) ks.reduce[a] = true;

  // Merge adjacent dims (right to left) wherever every view stays one view.
  std::vector<std::pair<const UOp*, ShapeTracker>> sts;
  for (const UOp* v : views_of(ast0)) sts.push_back({v, v->st()});
  if (!settings().noopt)
    for (size_t i = ks.full.size(); i-- > 1;) try_merge(ks, i - 1, sts);
  std::vector<int64_t> new_axes;
  for (size_t d = 0; d < ks.full.size(); d++)
    if (ks.reduce[d]) new_axes.push_back(static_cast<int64_t>(d));
  // rebuild the AST bottom-up with the merged views and renumbered reduce axes
  std::unordered_map<const UOp*, UOpRef> vmap;
  for (auto& [u, st] : sts) vmap[u] = view_uop(st);
  PatternMatcher remap{
      {UPat::op(Ops::VIEW), [&](const Match& m) {
         auto it = vmap.find(m.root().get());
         return it == vmap.end() ? UOpRef() : it->second;
       }},
      {UPat::op(Ops::REDUCE_AXIS), [&](const Match& m) {
         auto& u = m.root();
         if (u->rarg().axes == new_axes) return UOpRef();
         return UOp::make(Ops::REDUCE_AXIS, u->dtype, u->src, ReduceArg{u->rarg().op, new_axes});
       }}};
  k.ast = graph_rewrite(ast0, remap);
  k.full_shape = ks.full;
  k.out_shape = ks.out;

  Lowerer lw{ks};
  for (size_t d = 0; d < ks.full.size(); d++) {
    if (ks.full[d] == 1) lw.ranges.push_back(UOp::cconst(DType::Int32, 0));
    else
      lw.ranges.push_back(UOp::make(Ops::RANGE, DType::Int32, {UOp::cconst(DType::Int32, static_cast<double>(ks.full[d]))},
                                    std::vector<int64_t>{static_cast<int64_t>(d), ks.reduce[d] ? 1 : 0}));
  }
  k.lowered = lw.lower(k.ast);
  k.simplified = graph_rewrite(k.lowered, settings().noopt ? symbolic_simple() : symbolic());
  k.linear = linearize(k.simplified);
  k.name = new_axes.empty() ? "E" : "r";
  for (auto d : ks.full) k.name += "_" + std::to_string(d);
  return k;
}

} // namespace mg
