#include "engine/codegen/slp.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace mg {

namespace {

constexpr int kFail = -2, kScalar = -1;

// idx as base + c (c = 0 where it has no constant term on the right)
std::pair<const UOp*, int64_t> base_offset(const UOp* idx) {
  if (idx->op == Ops::ADD && idx->src[1]->op == Ops::CONST)
    return {idx->src[0].get(), static_cast<int64_t>(idx->src[1]->const_value())};
  return {idx, 0};
}

// How many elements apart INDEX nodes `ix` point in one buffer, ungated (lane l at base + first
// + l * stride); 0 where they follow no such rule.
int64_t lane_stride(const std::vector<const UOp*>& ix) {
  for (const UOp* i : ix)
    if (i->op != Ops::INDEX || i->src.size() != 2 || i->src[0] != ix[0]->src[0]) return 0;
  auto [base, first] = base_offset(ix[0]->src[1].get());
  auto [b1, second] = base_offset(ix[1]->src[1].get());
  const int64_t stride = second - first;
  if (b1 != base || stride == 0) return 0;
  for (size_t l = 2; l < ix.size(); l++) {
    auto [b, c] = base_offset(ix[l]->src[1].get());
    if (b != base || c != first + static_cast<int64_t>(l) * stride) return 0;
  }
  return stride;
}

bool consecutive(const std::vector<const UOp*>& ix) { return lane_stride(ix) == 1; }

struct Finder {
  std::unordered_map<const UOp*, size_t> pos, depth;
  std::unordered_map<const UOp*, const UOp*> assign_of; // accumulator -> its ASSIGN
  std::map<std::vector<const UOp*>, int> memo;
  bool strided_loads = false; // whether a Load's lanes may lie apart (elementwise kernels)
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
    const DType want = u0->op == Ops::CMPLT || u0->op == Ops::CMPNE ? DType::Bool : DType::Float32;
    for (const UOp* u : m)
      if (u->op != u0->op || u->dtype != want || u->src.size() != u0->src.size() || !pos.count(u))
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
    case Ops::LOAD: {
      const int64_t stride = lane_stride(column(m, 0));
      if (stride == 0 || (stride != 1 && !strided_loads)) return kFail;
      Pack p{Pack::Load, m, {}};
      p.stride = stride;
      return add(std::move(p));
    }
    case Ops::ADD:
    case Ops::SUB:
    case Ops::MUL:
    case Ops::FDIV:
    case Ops::NEG:
    case Ops::WHERE:
    case Ops::CMPLT:
    case Ops::CMPNE: {
      std::vector<int> src;
      for (size_t s = 0; s < u0->src.size(); s++) {
        int p = pack(column(m, s));
        if (p == kFail) return kFail;
        src.push_back(p);
      }
      return add({Pack::Alu, m, src});
    }
    default:
      return kFail;
    }
  }

  // The strided Load packs, by buffer, base and stride, whose first elements are consecutive: runs
  // of 4 or 2 columns become LoadGroups (wider runs took shuffles of vectors too long to pay).
  void group_loads() {
    std::map<std::tuple<size_t, size_t, int64_t>, std::map<int64_t, int>> by; // -> first offset -> pack
    for (size_t id = 0; id < out.packs.size(); id++) {
      const Pack& p = out.packs[id];
      if (p.kind != Pack::Load || p.stride == 1) continue;
      const UOp* idx = p.members[0]->src[0].get();
      auto [base, first] = base_offset(idx->src[1].get());
      if (!pos.count(base)) continue;
      by[{pos.at(idx->src[0].get()), pos.at(base), p.stride}][first] = static_cast<int>(id);
    }
    for (auto& [key, cols] : by) {
      for (auto it = cols.begin(); it != cols.end();) {
        std::vector<std::pair<int64_t, int>> run{*it};
        for (++it; it != cols.end() && it->first == run.back().first + 1; ++it)
          run.push_back(*it);
        for (size_t at = 0; at < run.size();) {
          size_t w = run.size() - at >= 4 ? 4 : run.size() - at >= 2 ? 2 : 1;
          const Pack& p0 = out.packs[static_cast<size_t>(run[at].second)];
          for (size_t c = 1; c < w; c++)
            if (depth.at(out.packs[static_cast<size_t>(run[at + c].second)].members[0]) !=
                depth.at(p0.members[0]))
              w = 1;
          if (w > 1) {
            const UOp* idx = p0.members[0]->src[0].get();
            LoadGroup g{
                idx->src[0].get(), base_offset(idx->src[1].get()).first, run[at].first, p0.stride, {}};
            for (size_t c = 0; c < w; c++) {
              g.packs.push_back(run[at + c].second);
              out.group_of[run[at + c].second] = static_cast<int>(out.groups.size());
            }
            out.groups.push_back(std::move(g));
          }
          at += w;
        }
      }
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
  if (stores.empty() || stores.size() % static_cast<size_t>(lanes) != 0) return {};
  f.strided_loads = !accs;
  // rows of `lanes` stores to consecutive elements: the stores by buffer, base index and offset
  auto key = [&](const UOp* st) {
    auto [base, c] = base_offset(st->src[0]->src[1].get());
    return std::tuple{f.pos.at(st->src[0]->src[0].get()), f.pos.count(base) ? f.pos.at(base) : 0, c,
                      f.pos.at(st)};
  };
  for (const UOp* st : stores)
    if (st->src[0]->op != Ops::INDEX) return {};
  std::stable_sort(stores.begin(), stores.end(), [&](const UOp* a, const UOp* b) { return key(a) < key(b); });
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
  // a tile of accumulators; an elementwise kernel only for its runs of strided loads. Lane by lane,
  // a strided load is a gather, as clang's vectorizer makes it from the copies (a transpose's rows,
  // no run: 6.8-9.2 -> 10.8 ms packed, Xeon, 1 thread); a weight transform's rows of 3 are a run
  // of 2 and a gather each.
  if (accs &&
      std::none_of(f.out.packs.begin(), f.out.packs.end(), [](const Pack& p) { return p.kind == Pack::Acc; }))
    return {};
  f.group_loads();
  if (!accs && f.out.groups.empty()) return {};
  return std::move(f.out);
}

} // namespace mg
