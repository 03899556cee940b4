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

// Whether two index values are one: the same node, or a sum of the same two terms in either order
// (the lowerer builds a copy's index a + b and another's b + a).
bool same_index(const UOp* a, const UOp* b) {
  return a == b ||
         (a->op == Ops::ADD && b->op == Ops::ADD && a->src[0] == b->src[1] && a->src[1] == b->src[0]);
}

// Where INDEX nodes `ix` point in one buffer, ungated, as offsets from one base; empty where
// they do not.
std::vector<int64_t> lane_offsets(const std::vector<const UOp*>& ix) {
  for (const UOp* i : ix)
    if (i->op != Ops::INDEX || i->src.size() != 2 || i->src[0] != ix[0]->src[0]) return {};
  const UOp* base = base_offset(ix[0]->src[1].get()).first;
  std::vector<int64_t> out;
  for (const UOp* i : ix) {
    auto [b, c] = base_offset(i->src[1].get());
    if (!same_index(b, base)) return {};
    out.push_back(c);
  }
  return out;
}

// The lanes' one stride (0 where they have none)
int64_t stride_of(const std::vector<int64_t>& o) {
  for (size_t l = 2; l < o.size(); l++)
    if (o[l] - o[l - 1] != o[1] - o[0]) return 0;
  return o[1] - o[0];
}

bool consecutive(const std::vector<const UOp*>& ix) {
  std::vector<int64_t> o = lane_offsets(ix);
  return !o.empty() && stride_of(o) == 1;
}

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
      std::vector<int64_t> o = lane_offsets(column(m, 0));
      if (o.empty()) return kFail;
      Pack p{Pack::Load, m, {}};
      p.stride = stride_of(o);
      if (p.stride != 1 && !strided_loads) return kFail;
      if (p.stride != 1) p.offsets = std::move(o);
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

  void group(const UOp* buffer, const UOp* base, int width, std::vector<int64_t> loads,
             std::vector<int> packs, std::vector<std::vector<int64_t>> picks) {
    for (int id : packs)
      out.group_of[id] = static_cast<int>(out.groups.size());
    out.groups.push_back({buffer, base, width, std::move(loads), std::move(packs), std::move(picks)});
  }

  // Strided Load packs not (or already) in a group, by buffer and base (in program order), each
  // with its packs in order of their first lane's offset.
  std::map<std::pair<size_t, size_t>, std::map<int64_t, int>> strided_by_base(bool grouped) {
    std::map<std::pair<size_t, size_t>, std::map<int64_t, int>> by;
    for (size_t id = 0; id < out.packs.size(); id++) {
      const Pack& p = out.packs[id];
      if (p.kind != Pack::Load || p.stride == 1 || out.group_of.count(static_cast<int>(id)) != grouped)
        continue;
      const UOp* idx = p.members[0]->src[0].get();
      const UOp* base = base_offset(idx->src[1].get()).first;
      if (!pos.count(base)) continue;
      by[{pos.at(idx->src[0].get()), pos.at(base)}][p.offsets[0]] = static_cast<int>(id);
    }
    return by;
  }

  const UOp* index_of(int id) const { return out.packs[static_cast<size_t>(id)].members[0]->src[0].get(); }
  size_t depth_of(int id) const { return depth.at(out.packs[static_cast<size_t>(id)].members[0]); }

  // Runs: packs of one stride whose lanes' offsets follow each other's by 1, 4 or 2 at a time
  // (wider runs took shuffles of vectors too long to pay). Spans: the other strided packs of one
  // base whose lanes together read within 1, 2 or 4 vectors' worth of elements.
  void group_loads() {
    const int lanes = out.lanes;
    for (auto& [key, cols] : strided_by_base(false)) {
      std::vector<std::pair<int64_t, int>> col(cols.begin(), cols.end());
      for (size_t at = 0; at < col.size();) {
        const Pack& p0 = out.packs[static_cast<size_t>(col[at].second)];
        size_t w = 1;
        while (w < 4 && at + w < col.size() && col[at + w].first == col[at].first + static_cast<int64_t>(w) &&
               out.packs[static_cast<size_t>(col[at + w].second)].stride == p0.stride && p0.stride != 0 &&
               depth_of(col[at + w].second) == depth_of(col[at].second))
          w++;
        if (w == 3) w = 2;
        if (w > 1) {
          std::vector<int64_t> loads;
          std::vector<int> packs;
          std::vector<std::vector<int64_t>> picks(w);
          for (int l = 0; l < lanes; l++)
            loads.push_back(col[at].first + l * p0.stride);
          for (size_t c = 0; c < w; c++) {
            packs.push_back(col[at + c].second);
            for (int l = 0; l < lanes; l++)
              picks[c].push_back(static_cast<int64_t>(c) + l * static_cast<int64_t>(w));
          }
          const UOp* idx = index_of(col[at].second);
          group(idx->src[0].get(), base_offset(idx->src[1].get()).first, static_cast<int>(w),
                std::move(loads), std::move(packs), std::move(picks));
        }
        at += w;
      }
    }
    for (auto& [key, cols] : strided_by_base(false)) {
      int64_t lo = INT64_MAX, hi = INT64_MIN; // the first element read and the last
      std::vector<int> packs;
      bool one_depth = true;
      for (auto& [first, id] : cols) {
        one_depth &= depth_of(id) == depth_of(cols.begin()->second);
        packs.push_back(id);
        for (int64_t o : out.packs[static_cast<size_t>(id)].offsets)
          lo = std::min(lo, o), hi = std::max(hi, o);
      }
      // those elements in 1, 2 or 4 vectors (the last one moved back to end at the last read, so
      // that nothing past it is read)
      const int64_t span = hi - lo + 1;
      if (!one_depth || span < lanes || span > 4 * lanes) continue;
      const int64_t count = span <= lanes ? 1 : span <= 2 * lanes ? 2 : 4;
      std::vector<int64_t> loads;
      for (int64_t i = 0; i < count; i++)
        loads.push_back(std::min(lo + i * lanes, lo + span - lanes));
      std::vector<std::vector<int64_t>> picks;
      for (int id : packs) {
        picks.emplace_back();
        for (int64_t o : out.packs[static_cast<size_t>(id)].offsets) {
          int64_t i = std::min((o - lo) / lanes, count - 1);
          picks.back().push_back(i * lanes + o - loads[static_cast<size_t>(i)]);
        }
      }
      const UOp* idx = index_of(packs[0]);
      group(idx->src[0].get(), base_offset(idx->src[1].get()).first, lanes, std::move(loads),
            std::move(packs), std::move(picks));
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
