#include "engine/codegen/slp.h"

#include <algorithm>
#include <map>

namespace mg {

namespace {

constexpr int kFail = -2, kScalar = -1;

// idx as base + c (c = 0 where it has no constant term on the right)
std::pair<const UOp*, int64_t> base_offset(const UOp* idx) {
  if (idx->op == Ops::ADD && idx->src[1]->op == Ops::CONST)
    return {idx->src[0].get(), static_cast<int64_t>(idx->src[1]->const_value())};
  return {idx, 0};
}

// Whether INDEX nodes `ix` point at consecutive elements of one buffer, ungated.
bool consecutive(const std::vector<const UOp*>& ix) {
  for (const UOp* i : ix)
    if (i->op != Ops::INDEX || i->src.size() != 2 || i->src[0] != ix[0]->src[0]) return false;
  auto [base, first] = base_offset(ix[0]->src[1].get());
  for (size_t l = 1; l < ix.size(); l++) {
    auto [b, c] = base_offset(ix[l]->src[1].get());
    if (b != base || c != first + static_cast<int64_t>(l)) return false;
  }
  return true;
}

struct Finder {
  std::unordered_map<const UOp*, size_t> pos, depth;
  std::unordered_map<const UOp*, const UOp*> assign_of; // accumulator -> its ASSIGN
  std::map<std::vector<const UOp*>, int> memo;
  Packs out;

  int add(Pack p) {
    for (const UOp* m : p.members) {
      if (out.of.count(m) || depth.at(m) != depth.at(p.members[0])) return kFail;
      p.last = std::max(p.last, pos.at(m));
    }
    int id = static_cast<int>(out.packs.size());
    for (const UOp* m : p.members)
      out.of[m] = id;
    memo[p.members] = id;
    out.packs.push_back(std::move(p));
    return id;
  }

  std::vector<const UOp*> column(const std::vector<const UOp*>& m, size_t s) {
    std::vector<const UOp*> c;
    for (const UOp* u : m)
      c.push_back(u->src[s].get());
    return c;
  }

  // The pack whose lane i is m[i]: kScalar where all lanes are one scalar, kFail where no pack fits.
  int pack(const std::vector<const UOp*>& m) {
    if (std::all_of(m.begin(), m.end(), [&](const UOp* u) { return u == m[0]; })) return kScalar;
    if (auto it = memo.find(m); it != memo.end()) return it->second;
    const UOp* u0 = m[0];
    for (const UOp* u : m)
      if (u->op != u0->op || u->dtype != DType::Float32 || u->src.size() != u0->src.size() || !pos.count(u))
        return kFail;
    switch (u0->op) {
    case Ops::DEFINE_ACC: {
      if (pack(column(m, 0)) != kScalar) return kFail; // one start value for every lane
      int acc = add({Pack::Acc, m, {kScalar}});
      if (acc == kFail) return kFail;
      std::vector<const UOp*> assigns;
      for (const UOp* a : m) {
        auto it = assign_of.find(a);
        if (it == assign_of.end()) return kFail;
        assigns.push_back(it->second);
      }
      int value = pack(column(assigns, 1));
      if (value == kFail || value == kScalar) return kFail;
      return add({Pack::Assign, assigns, {acc, value}}) == kFail ? kFail : acc;
    }
    case Ops::LOAD:
      if (!consecutive(column(m, 0))) return kFail;
      return add({Pack::Load, m, {}});
    case Ops::ADD:
    case Ops::SUB:
    case Ops::MUL:
    case Ops::FDIV:
    case Ops::NEG:
    case Ops::WHERE: {
      std::vector<int> src;
      for (size_t s = 0; s < u0->src.size(); s++) {
        int p = pack(column(m, s));
        if (p == kFail || (u0->op == Ops::WHERE && s == 0 && p != kScalar)) return kFail; // one condition
        src.push_back(p);
      }
      return add({Pack::Alu, m, src});
    }
    default:
      return kFail;
    }
  }
};

} // namespace

Packs find_packs(const std::vector<UOpRef>& linear, int lanes) {
  if (lanes < 2) return {};
  Finder f;
  f.out.lanes = lanes;
  size_t dep = 0;
  std::vector<const UOp*> stores;
  bool accs = false;
  for (size_t i = 0; i < linear.size(); i++) {
    const UOp* u = linear[i].get();
    if (u->op == Ops::ENDRANGE) dep--;
    f.pos[u] = i, f.depth[u] = dep;
    if (u->op == Ops::RANGE) dep++;
    if (u->op == Ops::ASSIGN) f.assign_of[u->src[0].get()] = u;
    if (u->op == Ops::STORE) stores.push_back(u);
    accs |= u->op == Ops::DEFINE_ACC;
  }
  if (!accs || stores.empty() || stores.size() % static_cast<size_t>(lanes) != 0) return {};
  for (size_t at = 0; at < stores.size(); at += static_cast<size_t>(lanes)) {
    std::vector<const UOp*> group(stores.begin() + static_cast<std::ptrdiff_t>(at),
                                  stores.begin() + static_cast<std::ptrdiff_t>(at) + lanes);
    if (!consecutive(f.column(group, 0))) return {};
    int value = f.pack(f.column(group, 1));
    if (value == kFail || value == kScalar || f.add({Pack::Store, group, {value}}) == kFail) return {};
  }
  // a lane read by a scalar op would need extracting: then no packs at all
  for (auto& u : linear) {
    if (f.out.of.count(u.get())) continue;
    for (auto& s : u->src)
      if (f.out.of.count(s.get())) return {};
  }
  for (auto& p : f.out.packs)
    if (p.kind == Pack::Acc) return std::move(f.out);
  return {};
}

} // namespace mg
