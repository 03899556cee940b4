// View / ShapeTracker: random compositions of movement ops checked against a naive
// materialized copy (an explicit array of element indices, -1 for padding), through both
// offset_of and the symbolic index/validity expressions of to_indexed.
#include <catch2/catch.hpp>

#include <cstdio>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/pattern.h"
#include "engine/shapetracker.h"
#include "engine/symbolic.h"
#include "test_util.h"

using namespace mg;
using mgtest::IShape;
using mgtest::Arr;

namespace {
struct MoveOp {
  Ops op;
  std::vector<int64_t> arg; // flat pairs for PAD/SHRINK, 0/1 per axis for FLIP
};

std::string describe(const IShape& base, const std::vector<MoveOp>& ops) {
  std::ostringstream os;
  os << "contiguous" << mgtest::str(base);
  for (auto& m : ops)
    os << " ." << name(m.op) << mgtest::str(m.arg);
  return os.str();
}

ShapeTracker apply_st(ShapeTracker st, const MoveOp& m) {
  switch (m.op) {
  case Ops::RESHAPE:
    return st.reshape(to_shape(m.arg));
  case Ops::PERMUTE:
    return st.permute(m.arg);
  case Ops::EXPAND:
    return st.expand(to_shape(m.arg));
  case Ops::PAD:
    return st.pad(mgtest::to_pairs(m.arg));
  case Ops::SHRINK:
    return st.shrink(mgtest::spairs(mgtest::to_pairs(m.arg)));
  case Ops::FLIP:
    return st.flip(std::vector<bool>(m.arg.begin(), m.arg.end()));
  default:
    throw std::logic_error("bad op");
  }
}

Arr<int64_t> apply_ref(const Arr<int64_t>& a, const MoveOp& m) {
  switch (m.op) {
  case Ops::RESHAPE:
    return mgtest::ref_reshape(a, m.arg);
  case Ops::PERMUTE:
    return mgtest::ref_permute(a, m.arg);
  case Ops::EXPAND:
    return mgtest::ref_expand(a, m.arg);
  case Ops::PAD:
    return mgtest::ref_pad(a, mgtest::to_pairs(m.arg), int64_t{-1});
  case Ops::SHRINK:
    return mgtest::ref_shrink(a, mgtest::to_pairs(m.arg));
  case Ops::FLIP:
    return mgtest::ref_flip(a, std::vector<bool>(m.arg.begin(), m.arg.end()));
  default:
    throw std::logic_error("bad op");
  }
}

Arr<int64_t> iota_arr(const IShape& s) {
  std::vector<int64_t> d(mgtest::numel(s));
  std::iota(d.begin(), d.end(), 0);
  return Arr<int64_t>(s, d);
}

// Every index of the final shape: offset_of and to_indexed agree with the materialized copy.
// Returns the tracker, so callers can report how many views and masks were exercised.
ShapeTracker check_against_reference(const IShape& base, const std::vector<MoveOp>& ops,
                                     bool check_symbolic = true) {
  ShapeTracker st = ShapeTracker::contiguous(to_shape(base));
  Arr<int64_t> ref = iota_arr(base);
  for (auto& m : ops) {
    st = apply_st(st, m);
    ref = apply_ref(ref, m);
  }
  INFO(describe(base, ops));
  INFO(st.to_string());
  REQUIRE(st.shape() == ref.shape);
  REQUIRE(st.size() == mgtest::numel(ref.shape));

  // offset_of: the reference semantics
  mgtest::for_each_index(ref.shape, [&](const std::vector<int64_t>& idx) {
    INFO("index " << mgtest::str(idx));
    REQUIRE(st.offset_of(idx) == ref.at(idx));
  });
  if (!check_symbolic) return st;

  // to_indexed over RANGE variables, simplified by symbolic(), evaluated at every index
  std::vector<UOpRef> vars;
  for (size_t i = 0; i < ref.shape.size(); i++)
    vars.push_back(UOp::make(Ops::RANGE, DType::Int32,
                             {UOp::cconst(DType::Int32, static_cast<double>(ref.shape[i]))},
                             std::vector<int64_t>{static_cast<int64_t>(i), 0}));
  auto [idx_e, valid_e] = st.to_indexed(vars);
  REQUIRE(idx_e->dtype == DType::Int32);
  REQUIRE(valid_e->dtype == DType::Bool);
  UOpRef idx_s = graph_rewrite(idx_e, symbolic()), valid_s = graph_rewrite(valid_e, symbolic());
  mgtest::for_each_index(ref.shape, [&](const std::vector<int64_t>& idx) {
    INFO("index " << mgtest::str(idx));
    mgtest::Evaluator ev;
    for (size_t i = 0; i < vars.size(); i++)
      ev.vars[vars[i].get()] = idx[i];
    int64_t want = ref.at(idx);
    // the expressions as to_indexed builds them
    {
      INFO("unsimplified to_indexed");
      REQUIRE(ev.eval(valid_e) == (want >= 0 ? 1 : 0));
      if (want >= 0) REQUIRE(ev.eval(idx_e) == want);
    }
    // and after symbolic()
    mgtest::Evaluator ev2;
    ev2.vars = ev.vars;
    INFO("simplified:\nidx = " << print_tree(idx_s) << "valid = " << print_tree(valid_s));
    REQUIRE(ev2.eval(valid_s) == (want >= 0 ? 1 : 0));
    if (want >= 0) REQUIRE(ev2.eval(idx_s) == want);
  });

  // to_indexed with constant indices folds to constants under symbolic()
  int n = 0;
  mgtest::for_each_index(ref.shape, [&](const std::vector<int64_t>& idx) {
    if (n++ % 7 != 0) return; // a sample is enough here
    std::vector<UOpRef> cidx;
    for (auto i : idx)
      cidx.push_back(UOp::cconst(DType::Int32, static_cast<double>(i)));
    auto [ie, ve] = st.to_indexed(cidx);
    UOpRef vs = graph_rewrite(ve, symbolic());
    INFO("const index " << mgtest::str(idx));
    REQUIRE(vs->op == Ops::CONST);
    int64_t want = ref.at(idx);
    REQUIRE(vs->const_value() == (want >= 0 ? 1 : 0));
    if (want >= 0) {
      UOpRef is = graph_rewrite(ie, symbolic());
      REQUIRE(is->op == Ops::CONST);
      REQUIRE(static_cast<int64_t>(is->const_value()) == want);
    }
  });
  return st;
}

// ---- random movement-op sequences

struct MoveGen {
  std::mt19937 rng;
  explicit MoveGen(uint32_t seed) : rng(seed) {}
  int rnd(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  bool coin(int pct) { return rnd(0, 99) < pct; }

  IShape random_shape(int max_numel) {
    for (;;) {
      IShape s(rnd(1, 4));
      for (auto& d : s)
        d = rnd(1, 5);
      if (mgtest::numel(s) <= max_numel) return s;
    }
  }

  // A new shape with the same numel: merge, split, add/remove 1s, or refactor entirely.
  IShape reshape_target(const IShape& s) {
    int64_t n = mgtest::numel(s);
    int kind = rnd(0, 3);
    if (kind == 0 && s.size() >= 2) { // merge two adjacent dims
      size_t i = rnd(0, static_cast<int>(s.size()) - 2);
      IShape r(s.begin(), s.begin() + i);
      r.push_back(s[i] * s[i + 1]);
      r.insert(r.end(), s.begin() + i + 2, s.end());
      return r;
    }
    if (kind == 1) { // split a dim with a divisor
      for (int tries = 0; tries < 8; tries++) {
        size_t i = rnd(0, static_cast<int>(s.size()) - 1);
        std::vector<int64_t> divs;
        for (int64_t d = 2; d < s[i]; d++)
          if (s[i] % d == 0) divs.push_back(d);
        if (divs.empty()) continue;
        int64_t d = divs[rnd(0, static_cast<int>(divs.size()) - 1)];
        IShape r(s.begin(), s.begin() + i);
        r.push_back(d);
        r.push_back(s[i] / d);
        r.insert(r.end(), s.begin() + i + 1, s.end());
        return r;
      }
    }
    if (kind == 2) { // insert or remove a 1
      IShape r = s;
      auto it = std::find(r.begin(), r.end(), 1);
      if (it != r.end() && r.size() > 1 && coin(50))
        r.erase(it);
      else
        r.insert(r.begin() + rnd(0, static_cast<int>(r.size())), 1);
      return r;
    }
    // any factorization of n into up to 4 factors
    IShape r;
    int64_t rest = n;
    while (rest > 1 && r.size() < 3) {
      std::vector<int64_t> divs;
      for (int64_t d = 1; d <= rest; d++)
        if (rest % d == 0) divs.push_back(d);
      int64_t d = divs[rnd(0, static_cast<int>(divs.size()) - 1)];
      r.push_back(d);
      rest /= d;
    }
    r.push_back(rest);
    std::shuffle(r.begin(), r.end(), rng);
    return r;
  }

  MoveOp random_op(const IShape& s) {
    for (;;) {
      switch (rnd(0, 5)) {
      case 0:
        return {Ops::RESHAPE, reshape_target(s)};
      case 1: {
        std::vector<int64_t> p(s.size());
        std::iota(p.begin(), p.end(), 0);
        std::shuffle(p.begin(), p.end(), rng);
        return {Ops::PERMUTE, p};
      }
      case 2: {
        IShape e = s;
        bool any = false;
        for (auto& d : e)
          if (d == 1 && coin(70)) d = rnd(2, 3), any = true;
        if (!any || mgtest::numel(e) > 600) continue;
        return {Ops::EXPAND, e};
      }
      case 3: {
        std::vector<int64_t> p;
        int64_t n = 1;
        for (auto d : s) {
          int64_t b = coin(50) ? rnd(0, 2) : 0, a = coin(50) ? rnd(0, 2) : 0;
          p.push_back(b), p.push_back(a);
          n *= d + b + a;
        }
        if (n > 600) continue;
        return {Ops::PAD, p};
      }
      case 4: {
        std::vector<int64_t> p;
        for (auto d : s) {
          int64_t lo = rnd(0, static_cast<int>(d) - 1),
                  hi = rnd(static_cast<int>(lo) + 1, static_cast<int>(d));
          if (coin(30)) lo = 0, hi = d;
          p.push_back(lo), p.push_back(hi);
        }
        return {Ops::SHRINK, p};
      }
      default: {
        std::vector<int64_t> f;
        for (size_t i = 0; i < s.size(); i++)
          f.push_back(coin(50) ? 1 : 0);
        return {Ops::FLIP, f};
      }
      }
    }
  }
};
} // namespace

TEST_CASE("random movement-op compositions match a materialized copy", "[shapetracker][random]") {
  MoveGen g(12345u);
  int multi_view = 0, masked = 0;
  const int n_cases = 1500;
  for (int t = 0; t < n_cases; t++) {
    IShape base = g.random_shape(120);
    std::vector<MoveOp> ops;
    IShape cur = base;
    int n = g.rnd(1, 6);
    for (int k = 0; k < n; k++) {
      MoveOp m = g.random_op(cur);
      ops.push_back(m);
      cur = apply_ref(Arr<int64_t>::filled(cur, 0), m).shape;
    }
    ShapeTracker st = check_against_reference(base, ops);
    multi_view += st.views.size() > 1;
    for (auto& v : st.views) {
      if (v.mask) {
        masked++;
        break;
      }
    }
  }
  std::printf("shapetracker random check: %d compositions, %d with several views, %d with masks\n", n_cases,
              multi_view, masked);
}

TEST_CASE("hand-picked compositions match a materialized copy", "[shapetracker]") {
  using M = MoveOp;
  const Ops R = Ops::RESHAPE, P = Ops::PERMUTE, E = Ops::EXPAND, D = Ops::PAD, S = Ops::SHRINK, F = Ops::FLIP;
  // transpose, then flatten: needs two views
  check_against_reference({3, 4}, {M{P, {1, 0}}, M{R, {12}}});
  // transpose, then split differently
  check_against_reference({2, 6}, {M{P, {1, 0}}, M{R, {3, 4}}});
  // merge of dims that stay contiguous after a permute
  check_against_reference({2, 3, 4}, {M{P, {2, 0, 1}}, M{R, {4, 6}}});
  // pad then reshape (mask through a reshape)
  check_against_reference({3, 4}, {M{D, {1, 1, 0, 2}}, M{R, {5, 1, 6}}});
  check_against_reference({3, 4}, {M{D, {1, 1, 0, 2}}, M{R, {30}}});
  // expand then reshape, expand then permute
  check_against_reference({3, 1}, {M{E, {3, 4}}, M{R, {12}}});
  check_against_reference({1, 4}, {M{E, {3, 4}}, M{P, {1, 0}}, M{R, {2, 6}}});
  // flip then shrink then pad then flip
  check_against_reference({5, 6}, {M{F, {1, 0}}, M{S, {1, 4, 2, 6}}, M{D, {2, 0, 1, 1}}, M{F, {1, 1}}});
  // shrink of a padded view back into the valid part, and partially
  check_against_reference({4}, {M{D, {3, 2}}, M{S, {2, 6}}});
  check_against_reference({4}, {M{D, {3, 2}}, M{S, {0, 2}}}); // entirely padding
  // a pooling-like pattern: pad, reshape into windows, permute, reshape
  check_against_reference({6}, {M{D, {1, 1}}, M{R, {4, 2}}, M{P, {1, 0}}, M{R, {8}}});
  // conv-style strided window: expand, reshape, shrink, reshape
  check_against_reference(
      {4}, {M{R, {1, 4}}, M{E, {3, 4}}, M{R, {12}}, M{S, {0, 10}}, M{R, {2, 5}}, M{S, {0, 2, 0, 4}}});
  // size-1 dims appearing and disappearing
  check_against_reference({1, 1, 3}, {M{R, {3}}, M{R, {1, 3, 1}}, M{P, {0, 0, 1, 0, 0, 0}}});
}

TEST_CASE("reshape of a contiguous tracker stays one contiguous view", "[shapetracker]") {
  auto st = ShapeTracker::contiguous({2, 3, 4});
  CHECK(st.is_contiguous());
  for (IShape s : {IShape{6, 4}, IShape{24}, IShape{4, 3, 2}, IShape{2, 1, 12, 1}, IShape{1, 24}}) {
    auto r = st.reshape(to_shape(s));
    INFO(r.to_string());
    CHECK(r.views.size() == 1);
    CHECK(r.is_contiguous());
    CHECK(r.shape() == s);
  }
  // merging permuted dims that are contiguous among themselves also stays one view
  auto p = st.permute({2, 0, 1}).reshape({4, 6});
  INFO(p.to_string());
  CHECK(p.views.size() == 1);
  CHECK_FALSE(p.is_contiguous());
}

TEST_CASE("permute then reshape produces two views when one cannot express it", "[shapetracker]") {
  auto st = ShapeTracker::contiguous({2, 3}).permute({1, 0}).reshape({6});
  INFO(st.to_string());
  CHECK(st.views.size() == 2);
  CHECK(st.shape() == IShape{6});
  const std::vector<int64_t> want{0, 3, 1, 4, 2, 5};
  for (int64_t i = 0; i < 6; i++)
    CHECK(st.offset_of({i}) == want[i]);
  // undoing the reshape gives back one view
  auto back = st.reshape({3, 2});
  INFO(back.to_string());
  CHECK(back.views.size() == 1);
  CHECK(back == ShapeTracker::contiguous({2, 3}).permute({1, 0}));
}

TEST_CASE("a masked view reshaped along the dims its mask leaves whole stays one view", "[shapetracker]") {
  using M = MoveOp;
  const Ops R = Ops::RESHAPE, P = Ops::PERMUTE, D = Ops::PAD;
  // dim 0 padded (a stacked piece); dims 1 and 2 split and merged, dim 0 carried
  check_against_reference({2, 8, 3}, {M{D, {1, 3, 0, 0, 0, 0}}, M{R, {6, 2, 4, 3}}});
  check_against_reference({2, 8, 3}, {M{D, {1, 3, 0, 0, 0, 0}}, M{R, {6, 24}}});
  check_against_reference({2, 8, 3}, {M{D, {1, 3, 0, 0, 0, 0}}, M{R, {6, 1, 4, 2, 3, 1}}});
  // a permuted group that is not contiguous among itself, and a split of the masked dim: two views
  check_against_reference({2, 4, 3}, {M{D, {1, 1, 0, 0, 0, 0}}, M{P, {0, 2, 1}}, M{R, {4, 12}}});
  check_against_reference({2, 4, 3}, {M{D, {1, 1, 0, 0, 0, 0}}, M{R, {2, 2, 12}}});
  auto st = ShapeTracker::contiguous({2, 8, 3}).pad({{1, 3}, {0, 0}, {0, 0}});
  auto split = st.reshape({6, 2, 4, 3});
  INFO(split.to_string());
  CHECK(split.views.size() == 1);
  CHECK(st.reshape({6, 24}).views.size() == 1);
  CHECK(st.permute({0, 2, 1}).reshape({6, 24}).views.size() == 2);
  CHECK(st.reshape({3, 2, 24}).views.size() == 2);
}

TEST_CASE("pad then shrink back returns the original view", "[shapetracker]") {
  auto base = ShapeTracker::contiguous({3, 4});
  auto round = base.pad({{1, 2}, {0, 3}}).shrink({{1, 4}, {0, 4}});
  INFO(round.to_string());
  CHECK(round == base);
  CHECK(round.is_contiguous());

  auto perm = ShapeTracker::contiguous({3, 4, 5}).permute({2, 0, 1}).flip({true, false, true});
  auto round2 = perm.pad({{2, 0}, {1, 1}, {0, 4}}).shrink({{2, 7}, {1, 4}, {0, 4}});
  INFO(round2.to_string());
  CHECK(round2 == perm);
}

TEST_CASE("views: canonical forms and strides", "[shapetracker]") {
  CHECK(strides_for_shape({2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
  CHECK(strides_for_shape({2, 1, 4}) == std::vector<int64_t>{4, 0, 1});
  View v = View::create({3, 4});
  CHECK(v.contiguous);
  CHECK(v.offset == 0);
  CHECK_FALSE(v.mask.has_value());
  // a full mask is dropped; a permuted view is not contiguous
  View m = View::create({3, 4}, std::vector<int64_t>{4, 1}, 0, Mask{{0, 3}, {0, 4}});
  CHECK_FALSE(m.mask.has_value());
  CHECK(m.contiguous);
  View p = v.permute({1, 0});
  CHECK(p.shape == IShape{4, 3});
  CHECK(p.strides == std::vector<int64_t>{1, 4});
  CHECK_FALSE(p.contiguous);
  // expand: stride 0 on the broadcast dim
  View e = View::create({3, 1}).expand({3, 5});
  CHECK(e.strides == std::vector<int64_t>{1, 0});
  // flip: negative stride, offset at the last element
  View f = View::create({4}).flip({true});
  CHECK(f.strides == std::vector<int64_t>{-1});
  CHECK(f.offset == 3);
  // shrink moves the offset
  View s = View::create({5, 6}).shrink({{1, 3}, {2, 5}});
  CHECK(s.offset == 1 * 6 + 2);
  CHECK(s.shape == IShape{2, 3});
  // movement ops through ShapeTracker::apply with flat UOp args
  auto st = ShapeTracker::contiguous({3, 4});
  CHECK(st.apply(Ops::PAD, Shape{1, 0, 0, 2}) == st.pad({{1, 0}, {0, 2}}));
  CHECK(st.apply(Ops::FLIP, std::vector<int64_t>{0, 1}) == st.flip({false, true}));
  CHECK(st.apply(Ops::PERMUTE, std::vector<int64_t>{1, 0}) == st.permute({1, 0}));
}
