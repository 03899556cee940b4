// Tensor movement ops (reshape, permute, transpose, expand, pad, shrink, flip, squeeze,
// unsqueeze, flatten), basic slicing with steps and negative steps, and contiguous(),
// applied on top of view inputs and checked against the same ops on plain arrays.
#include <catch2/catch.hpp>

#include "tensor_helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
// Python's slice semantics for one axis of size n.
std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step0) {
  int64_t step = step0.value_or(1);
  int64_t b, e;
  if (step > 0) {
    b = start ? (*start < 0 ? std::max<int64_t>(*start + n, 0) : std::min(*start, n)) : 0;
    e = stop ? (*stop < 0 ? std::max<int64_t>(*stop + n, 0) : std::min(*stop, n)) : n;
  } else {
    b = start ? (*start < 0 ? std::max<int64_t>(*start + n, -1) : std::min(*start, n - 1)) : n - 1;
    e = stop ? (*stop < 0 ? std::max<int64_t>(*stop + n, -1) : std::min(*stop, n - 1)) : -1;
  }
  std::vector<int64_t> r;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step)
    r.push_back(i);
  return r;
}

// a[idx] for basic indexing, on a plain array.
A ref_slice(const A& a, const std::vector<Slice>& sl) {
  std::vector<std::vector<int64_t>> picks;
  std::vector<bool> keep;
  for (size_t d = 0; d < a.shape.size(); d++) {
    if (d >= sl.size()) {
      picks.push_back(slice_indices(a.shape[d], std::nullopt, std::nullopt, std::nullopt));
      keep.push_back(true);
    } else if (sl[d].is_index) {
      int64_t i = sl[d].index < 0 ? sl[d].index + a.shape[d] : sl[d].index;
      picks.push_back({i});
      keep.push_back(false);
    } else {
      picks.push_back(slice_indices(a.shape[d], sl[d].start, sl[d].stop, sl[d].step));
      keep.push_back(true);
    }
  }
  IShape full, out;
  for (size_t d = 0; d < picks.size(); d++) {
    full.push_back(static_cast<int64_t>(picks[d].size()));
    if (keep[d]) out.push_back(static_cast<int64_t>(picks[d].size()));
  }
  A r = A::filled(full, 0);
  for_each_index(full, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx.size());
    for (size_t d = 0; d < idx.size(); d++)
      src[d] = picks[d][idx[d]];
    r.at(idx) = a.at(src);
  });
  return ref_reshape(r, out);
}

Slice idx(int64_t i) { return Slice{true, i, std::nullopt, std::nullopt, std::nullopt}; }
Slice sl(std::optional<int64_t> b, std::optional<int64_t> e, std::optional<int64_t> s = std::nullopt) {
  return Slice{false, 0, b, e, s};
}
} // namespace

TEST_CASE("movement ops on top of view inputs", "[tensor][movement]") {
  std::mt19937 rng(200);
  using Op = std::function<Tensor(const Tensor&)>;
  using Ref = std::function<A(const A&)>;
  struct M {
    const char* name;
    Op t;
    Ref r;
  };
  const std::vector<M> ms{
      {"reshape (4,3)",
       [](const Tensor& t) {
         return t.reshape({4, 3});
       },
       [](const A& a) {
         return ref_reshape(a, {4, 3});
       }},
      {"reshape (2,-1)",
       [](const Tensor& t) {
         return t.reshape({2, -1});
       },
       [](const A& a) {
         return ref_reshape(a, {2, 6});
       }},
      {"reshape (12,)", [](const Tensor& t) { return t.reshape({12}); },
       [](const A& a) { return ref_reshape(a, {12}); }},
      {"reshape (2,3,2,1)",
       [](const Tensor& t) {
         return t.reshape({2, 3, 2, 1});
       },
       [](const A& a) {
         return ref_reshape(a, {2, 3, 2, 1});
       }},
      {"permute",
       [](const Tensor& t) {
         return t.permute({1, 0});
       },
       [](const A& a) {
         return ref_permute(a, {1, 0});
       }},
      {"permute (-1,0)",
       [](const Tensor& t) {
         return t.permute({-1, 0});
       },
       [](const A& a) {
         return ref_permute(a, {1, 0});
       }},
      {"T", [](const Tensor& t) { return t.T(); },
       [](const A& a) {
         return ref_permute(a, {1, 0});
       }},
      {"transpose()", [](const Tensor& t) { return t.transpose(); },
       [](const A& a) {
         return ref_permute(a, {1, 0});
       }},
      {"expand via unsqueeze",
       [](const Tensor& t) {
         return t.unsqueeze(0).expand({2, 3, 4});
       },
       [](const A& a) {
         return ref_expand(ref_reshape(a, {1, 3, 4}), {2, 3, 4});
       }},
      {"expand middle with -1",
       [](const Tensor& t) {
         return t.reshape({3, 1, 4}).expand({-1, 5, -1});
       },
       [](const A& a) {
         return ref_expand(ref_reshape(a, {3, 1, 4}), {3, 5, 4});
       }},
      {"expand new leading dims",
       [](const Tensor& t) {
         return t.expand({2, 3, 4});
       },
       [](const A& a) {
         return ref_expand(ref_reshape(a, {1, 3, 4}), {2, 3, 4});
       }},
      {"pad 0",
       [](const Tensor& t) {
         return t.pad({{1, 2}, {0, 1}});
       },
       [](const A& a) {
         return ref_pad(a, {{1, 2}, {0, 1}}, 0.0);
       }},
      {"pad 7.5",
       [](const Tensor& t) {
         return t.pad({{0, 0}, {3, 1}}, 7.5);
       },
       [](const A& a) {
         return ref_pad(a, {{0, 0}, {3, 1}}, 7.5);
       }},
      {"shrink",
       [](const Tensor& t) {
         return t.shrink({{1, 3}, {0, 2}});
       },
       [](const A& a) {
         return ref_shrink(a, {{1, 3}, {0, 2}});
       }},
      {"flip 0", [](const Tensor& t) { return t.flip({0}); },
       [](const A& a) {
         return ref_flip(a, {true, false});
       }},
      {"flip -1", [](const Tensor& t) { return t.flip({-1}); },
       [](const A& a) {
         return ref_flip(a, {false, true});
       }},
      {"flip both",
       [](const Tensor& t) {
         return t.flip({0, 1});
       },
       [](const A& a) {
         return ref_flip(a, {true, true});
       }},
      {"pad, flip, shrink, permute",
       [](const Tensor& t) {
         return t.pad({{2, 0}, {1, 1}}).flip({1}).shrink({{1, 5}, {0, 3}}).permute({1, 0});
       },
       [](const A& a) {
         return ref_permute(
             ref_shrink(ref_flip(ref_pad(a, {{2, 0}, {1, 1}}, 0.0), {false, true}), {{1, 5}, {0, 3}}),
             {1, 0});
       }},
      {"flatten", [](const Tensor& t) { return t.flatten(); },
       [](const A& a) { return ref_reshape(a, {12}); }},
      {"unsqueeze -1", [](const Tensor& t) { return t.unsqueeze(-1); },
       [](const A& a) {
         return ref_reshape(a, {3, 4, 1});
       }},
      {"unsqueeze 1 then squeeze", [](const Tensor& t) { return t.unsqueeze(1).squeeze(); },
       [](const A& a) { return a; }},
      {"contiguous", [](const Tensor& t) { return t.contiguous(); }, [](const A& a) { return a; }},
  };
  for (auto& c : cases_2d()) {
    for (auto& m : ms) {
      INFO(m.name << " on " << c.name);
      Input in = make_input(c, DType::Float32, rng, -9, 9, 0.5);
      check_values(m.t(in.t), m.r(in.ref));
    }
  }
  // a few on int32 and on 3-d views
  for (auto& c : cases_3d()) {
    INFO("3-d " << c.name);
    Input in = make_input(c, DType::Int32, rng, -99, 99, 5);
    check_values(in.t.permute({2, 0, 1}), ref_permute(in.ref, {2, 0, 1}));
    check_values(in.t.transpose(0, 2), ref_permute(in.ref, {2, 1, 0}));
    check_values(in.t.flatten(1), ref_reshape(in.ref, {2, 12}));
    check_values(in.t.flatten(0, 1), ref_reshape(in.ref, {6, 4}));
    check_values(in.t.reshape({4, 6}), ref_reshape(in.ref, {4, 6}));
    check_values(in.t.flip({0, 2}), ref_flip(in.ref, {true, false, true}));
    check_values(in.t.pad({{0, 1}, {1, 0}, {2, 2}}, -1), ref_pad(in.ref, {{0, 1}, {1, 0}, {2, 2}}, -1.0));
    check_values(in.t.shrink({{1, 2}, {0, 3}, {1, 3}}), ref_shrink(in.ref, {{1, 2}, {0, 3}, {1, 3}}));
  }
}

TEST_CASE("shapes of movement results", "[tensor][movement]") {
  Tensor a = Tensor::zeros({2, 1, 3, 1});
  CHECK(a.squeeze().shape() == IShape{2, 3});
  CHECK(a.squeeze(1).shape() == IShape{2, 3, 1});
  CHECK(a.squeeze(-1).shape() == IShape{2, 1, 3});
  CHECK(a.unsqueeze(0).shape() == IShape{1, 2, 1, 3, 1});
  CHECK(a.unsqueeze(-1).shape() == IShape{2, 1, 3, 1, 1});
  CHECK(a.flatten().shape() == IShape{6});
  CHECK(a.flatten(1).shape() == IShape{2, 3});
  CHECK(a.flatten(0, 2).shape() == IShape{6, 1});
  CHECK(a.reshape({-1}).shape() == IShape{6});
  CHECK(a.reshape({3, -1}).shape() == IShape{3, 2});
  CHECK(a.permute({3, 2, 1, 0}).shape() == IShape{1, 3, 1, 2});
  CHECK(a.expand({2, 4, 3, 5}).shape() == IShape{2, 4, 3, 5});
  CHECK(a.pad({{1, 1}, {0, 0}, {2, 0}, {0, 3}}).shape() == IShape{4, 1, 5, 4});
  CHECK(a.shrink({{0, 1}, {0, 1}, {1, 3}, {0, 1}}).shape() == IShape{1, 1, 2, 1});
  CHECK(Tensor::zeros({4, 5}).T().shape() == IShape{5, 4});
  CHECK(Tensor::zeros({2, 3, 4}).transpose(0, 2).shape() == IShape{4, 3, 2});
}

TEST_CASE("movement-only results of a realized buffer read back correctly", "[tensor][movement]") {
  Tensor a = Tensor::from_data({0, 1, 2, 3, 4, 5}, {2, 3}, DType::Int32);
  a.realize();
  check_values(a.permute({1, 0}), A({3, 2}, {0, 3, 1, 4, 2, 5}));
  check_values(a.reshape({3, 2}), A({3, 2}, {0, 1, 2, 3, 4, 5}));
  check_values(a.permute({1, 0}).reshape({6}), A({6}, {0, 3, 1, 4, 2, 5}));
  check_values(a.reshape({1, 6}).expand({2, 6}), A({2, 6}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  check_values(a.flip({1}), A({2, 3}, {2, 1, 0, 5, 4, 3}));
  check_values(a.shrink({{1, 2}, {1, 3}}), A({1, 2}, {4, 5}));
  check_values(a.pad({{0, 0}, {1, 0}}), A({2, 4}, {0, 0, 1, 2, 0, 3, 4, 5}));
  // the result of a computation, then viewed
  Tensor b = a.add(a);
  b.realize();
  check_values(b.T().flip({0}), A({3, 2}, {4, 10, 2, 8, 0, 6}));
}

TEST_CASE("slicing with steps, negative steps and indices", "[tensor][slice]") {
  std::mt19937 rng(210);
  const std::vector<std::vector<Slice>> cases{
      {sl(1, 3), sl(std::nullopt, std::nullopt, 2)}, // a[1:3, ::2]
      {idx(0)},                                      // a[0]
      {idx(-1)},                                     // a[-1]
      {sl(std::nullopt, std::nullopt, -1)},          // a[::-1]
      {sl(std::nullopt, std::nullopt, -2), idx(1)},  // a[::-2, 1]
      {sl(4, 0, -2), sl(5, 1, -3)},                  // a[4:0:-2, 5:1:-3]
      {idx(2), sl(1, 5, 2)},                         // a[2, 1:5:2]
      {sl(-3, std::nullopt), sl(std::nullopt, -2)},  // a[-3:, :-2]
      {sl(-100, 100), sl(3, 3)},                     // clamped, and empty
      {sl(std::nullopt, std::nullopt, 3), sl(std::nullopt, std::nullopt, -4)},
      {idx(-5), idx(-6)}, // 0-d
      {sl(1, std::nullopt), sl(0, 6, 5)},
  };
  const std::vector<ViewCase> bases{
      {"contiguous", {5, 6}, {}},
      {"permuted", {6, 5}, {{Ops::PERMUTE, {1, 0}}}},
      {"padded", {3, 4}, {{Ops::PAD, {1, 1, 2, 0}}}},
      {"flipped+shrunk", {7, 6}, {{Ops::FLIP, {0}}, {Ops::SHRINK, {1, 6, 0, 6}}}},
      {"expanded", {5, 1}, {{Ops::EXPAND, {5, 6}}}},
  };
  for (auto& b : bases) {
    for (size_t k = 0; k < cases.size(); k++) {
      INFO("slice case " << k << " on " << b.name);
      Input in = make_input(b, DType::Float32, rng, -9, 9, 0.5);
      A want = ref_slice(in.ref, cases[k]);
      Tensor got = in.t.slice(cases[k]);
      CHECK(got.shape() == want.shape);
      if (want.data.empty())
        CHECK(got.numel() == 0);
      else
        check_values(got, want);
    }
  }
  // slicing a 3-d int tensor, then computing with the slice
  Input t = make_contiguous({4, 5, 6}, DType::Int32, rng, -9, 9);
  std::vector<Slice> s3{sl(std::nullopt, std::nullopt, -1), idx(2), sl(1, std::nullopt, 2)};
  A r3 = ref_slice(t.ref, s3);
  check_values(t.t.slice(s3), r3);
  check_values(t.t.slice(s3).mul(t.t.slice(s3)), map(r3, [](double v) { return v * v; }));
  check_values(t.t.slice({idx(1)}), ref_slice(t.ref, {idx(1)}));
}
