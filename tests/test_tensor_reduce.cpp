// Tensor reductions and the ops composed from them (mean, argmax, cumsum, softmax,
// log_softmax, matmul) on contiguous and view inputs, against hand-written C++ loops.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/kernel_cache.h"
#include "engine/realize.h"
#include "tensor_helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
struct AxesCase {
  Axes axes;
  bool keepdim;
};
const std::vector<AxesCase> axes_2d{
    {std::nullopt, false},
    {std::nullopt, true},
    {std::vector<int64_t>{0}, false},
    {std::vector<int64_t>{1}, true},
    {std::vector<int64_t>{-1}, false},
    {std::vector<int64_t>{0, 1}, true},
};
const std::vector<AxesCase> axes_3d{
    {std::vector<int64_t>{0, 2}, false},
    {std::vector<int64_t>{1}, true},
    {std::vector<int64_t>{-1, -3}, true},
    {std::vector<int64_t>{2, 1}, false},
    {std::nullopt, false},
};

std::string axes_name(const AxesCase& a) {
  return (a.axes ? str(*a.axes) : std::string("all")) + (a.keepdim ? " keepdim" : "");
}

Tensor run_red(const Tensor& t, Red op, const AxesCase& a) {
  switch (op) {
  case Red::Sum:
    return t.sum(a.axes, a.keepdim);
  case Red::Max:
    return t.max(a.axes, a.keepdim);
  case Red::Min:
    return t.min(a.axes, a.keepdim);
  default:
    return t.mean(a.axes, a.keepdim);
  }
}
const char* red_name(Red r) {
  return r == Red::Sum ? "sum" : r == Red::Max ? "max" : r == Red::Min ? "min" : "mean";
}

// First index of the maximum along `axis` (all axes flattened when nullopt), as tinygrad does.
A ref_argmax(const A& a, std::optional<int64_t> axis, bool keepdim) {
  if (!axis) {
    size_t best = 0;
    for (size_t i = 1; i < a.data.size(); i++)
      if (a.data[i] > a.data[best]) best = i;
    return A({}, {static_cast<double>(best)});
  }
  int64_t ax = *axis < 0 ? *axis + static_cast<int64_t>(a.shape.size()) : *axis;
  IShape keep = a.shape;
  keep[ax] = 1;
  A r = A::filled(keep, 0), best = A::filled(keep, -INFINITY);
  for_each_index(a.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> o(idx);
    o[ax] = 0;
    if (a.at(idx) > best.at(o)) best.at(o) = a.at(idx), r.at(o) = static_cast<double>(idx[ax]);
  });
  if (!keepdim) {
    IShape s = a.shape;
    s.erase(s.begin() + ax);
    r = ref_reshape(r, s);
  }
  return r;
}

A ref_cumsum(const A& a, int64_t axis) {
  int64_t ax = axis < 0 ? axis + static_cast<int64_t>(a.shape.size()) : axis;
  A r = a;
  for_each_index(a.shape, [&](const std::vector<int64_t>& idx) {
    if (idx[ax] == 0) return;
    std::vector<int64_t> prev(idx);
    prev[ax]--;
    r.at(idx) = r.at(prev) + a.at(idx);
  });
  return r;
}

A ref_softmax(const A& a, int64_t axis, bool log) {
  int64_t ax = axis < 0 ? axis + static_cast<int64_t>(a.shape.size()) : axis;
  A m = reduce(a, std::vector<int64_t>{ax}, true, Red::Max);
  A e = zip(a, m, [](double x, double mx) { return std::exp(x - mx); });
  A s = reduce(e, std::vector<int64_t>{ax}, true, Red::Sum);
  if (!log) return zip(e, s, [](double x, double t) { return x / t; });
  A ls = zip(m, s, [](double mx, double t) { return mx + std::log(t); });
  return zip(a, ls, [](double x, double l) { return x - l; });
}

// Batched matmul reference with numpy's 1-d rules: a (..., n, k) @ b (..., k, m).
A ref_matmul(const A& a0, const A& b0) {
  A a = a0, b = b0;
  bool a1 = a.shape.size() == 1, b1 = b.shape.size() == 1;
  if (a1) a = ref_reshape(a, {1, a.shape[0]});
  if (b1) b = ref_reshape(b, {b.shape[0], 1});
  int64_t n = a.shape[a.shape.size() - 2], k = a.shape.back(), m = b.shape.back();
  IShape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  IShape batch = bshape(ba, bb);
  IShape sa = batch, sb = batch;
  sa.push_back(n), sa.push_back(k), sb.push_back(k), sb.push_back(m);
  A x = bcast(a, sa), y = bcast(b, sb);
  IShape so = batch;
  so.push_back(n), so.push_back(m);
  A r = A::filled(so, 0);
  int64_t nb = numel(batch);
  for (int64_t q = 0; q < nb; q++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) {
        double acc = 0;
        for (int64_t l = 0; l < k; l++)
          acc += x.data[(q * n + i) * k + l] * y.data[(q * k + l) * m + j];
        r.data[(q * n + i) * m + j] = acc;
      }
  IShape out = batch;
  if (!a1) out.push_back(n);
  if (!b1) out.push_back(m);
  return ref_reshape(r, out);
}
} // namespace

TEST_CASE("float32 sum/max/min/mean over each axis, several axes and all axes, on views",
          "[tensor][reduce]") {
  std::mt19937 rng(100);
  for (auto& c : cases_2d()) {
    for (Red op : {Red::Sum, Red::Max, Red::Min, Red::Mean}) {
      for (auto& ax : axes_2d) {
        INFO(red_name(op) << " " << axes_name(ax) << " on " << c.name);
        Input in = make_input(c, DType::Float32, rng, -5, 5, -6); // pad below the data: visible to max/min
        Tensor r = run_red(in.t, op, ax);
        CHECK(r.dtype() == DType::Float32);
        check_values(r, reduce(in.ref, ax.axes, ax.keepdim, op), 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("float32 reductions of 3-d views", "[tensor][reduce]") {
  std::mt19937 rng(101);
  for (auto& c : cases_3d()) {
    for (Red op : {Red::Sum, Red::Max, Red::Mean}) {
      for (auto& ax : axes_3d) {
        INFO(red_name(op) << " " << axes_name(ax) << " on " << c.name);
        Input in = make_input(c, DType::Float32, rng, -5, 5, 7); // pad above the data
        check_values(run_red(in.t, op, ax), reduce(in.ref, ax.axes, ax.keepdim, op), 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("int32 sum/max/min and mean", "[tensor][reduce]") {
  std::mt19937 rng(102);
  for (auto& c : cases_2d()) {
    for (Red op : {Red::Sum, Red::Max, Red::Min}) {
      for (auto& ax : axes_2d) {
        INFO(red_name(op) << " " << axes_name(ax) << " on " << c.name);
        Input in = make_input(c, DType::Int32, rng, -1000, 1000, 3);
        Tensor r = run_red(in.t, op, ax);
        CHECK(r.dtype() == DType::Int32);
        check_values(r, reduce(in.ref, ax.axes, ax.keepdim, op));
      }
    }
    INFO("mean on " << c.name);
    Input in = make_input(c, DType::Int32, rng, -1000, 1000, 3);
    Tensor m = in.t.mean(std::vector<int64_t>{1});
    CHECK(m.dtype() == DType::Float32); // the mean of ints is a float
    check_values(m, reduce(in.ref, std::vector<int64_t>{1}, false, Red::Mean), 1e-6, 1e-6);
  }
  // large values: an int32 sum must not go through float32 (16777217 is not a float32)
  Tensor big = Tensor::from_data({16777216, 1, 0, 0}, {4}, DType::Int32);
  check_values(big.sum(), A({}, {16777217}));
}

TEST_CASE("sums of small and boolean dtypes accumulate wider", "[tensor][reduce][dtype]") {
  Tensor b = Tensor::from_data(std::vector<double>(300, 1), {300}, DType::Bool);
  Tensor bs = b.sum();
  CHECK(bs.dtype() == DType::Int32); // tinygrad's sum_acc_dtype
  CHECK(bs.item() == 300);
  Tensor i8 = Tensor::from_data(std::vector<double>(100, 100), {100}, DType::Int8);
  Tensor s8 = i8.sum();
  CHECK(s8.dtype() == DType::Int32);
  CHECK(s8.item() == 10000);
  Tensor u8 = Tensor::from_data(std::vector<double>(10, 255), {10}, DType::UInt8);
  CHECK(u8.sum().dtype() == DType::UInt32);
  CHECK(u8.sum().item() == 2550);
  // a comparison mask counted: the usual accuracy idiom
  Tensor x = Tensor::from_data({1, 5, 3, 7, 2, 9}, {6}, DType::Int32);
  CHECK(x.gt(Tensor::full({6}, 3, DType::Int32)).sum().item() == 3);
}

TEST_CASE("a longer sum stays accurate", "[tensor][reduce]") {
  std::mt19937 rng(103);
  Input in = make_contiguous({4, 1000}, DType::Float32, rng, 0, 1);
  check_values(in.t.sum(std::vector<int64_t>{1}), reduce(in.ref, std::vector<int64_t>{1}, false, Red::Sum),
               1e-5, 1e-4);
  check_values(in.t.sum(), reduce(in.ref, std::nullopt, false, Red::Sum), 1e-5, 1e-3);
  check_values(in.t.max(std::vector<int64_t>{0}), reduce(in.ref, std::vector<int64_t>{0}, false, Red::Max));
}

TEST_CASE("argmax picks the first maximum", "[tensor][reduce][argmax]") {
  std::mt19937 rng(110);
  for (auto& c : cases_2d()) {
    for (std::optional<int64_t> axis : {std::optional<int64_t>{}, std::optional<int64_t>{0},
                                        std::optional<int64_t>{1}, std::optional<int64_t>{-1}}) {
      for (bool keep : {false, true}) {
        if (!axis && keep) continue;
        INFO("argmax axis " << (axis ? std::to_string(*axis) : "none") << (keep ? " keepdim" : "") << " on "
                            << c.name);
        Input f = make_input(c, DType::Float32, rng, -5, 5, 0);
        Tensor r = f.t.argmax(axis, keep);
        CHECK(r.dtype() == DType::Int32);
        check_values(r, ref_argmax(f.ref, axis, keep));
        // ints with many ties
        Input i = make_input(c, DType::Int32, rng, 0, 2, 2);
        check_values(i.t.argmax(axis, keep), ref_argmax(i.ref, axis, keep));
      }
    }
  }
  Tensor t = Tensor::from_data({1, 3, 3, 2, 9, 9}, {2, 3}, DType::Float32);
  check_values(t.argmax(1), A({2}, {1, 1}));
  check_values(t.argmax(0), A({3}, {1, 1, 1}));
  CHECK(t.argmax().item() == 4);
}

TEST_CASE("cumsum along each axis, on views", "[tensor][cumsum]") {
  std::mt19937 rng(120);
  for (auto& c : cases_2d()) {
    for (int64_t axis : {0, 1, -1}) {
      INFO("cumsum axis " << axis << " on " << c.name);
      Input f = make_input(c, DType::Float32, rng, -3, 3, 0.5);
      check_values(f.t.cumsum(axis), ref_cumsum(f.ref, axis), 1e-5, 1e-5);
      Input i = make_input(c, DType::Int32, rng, -50, 50, 4);
      Tensor ci = i.t.cumsum(axis);
      CHECK(ci.dtype() == DType::Int32);
      check_values(ci, ref_cumsum(i.ref, axis));
    }
  }
  for (auto& c : cases_3d()) {
    INFO("cumsum axis 1 on 3-d " << c.name);
    Input f = make_input(c, DType::Float32, rng, -3, 3, 0.5);
    check_values(f.t.cumsum(1), ref_cumsum(f.ref, 1), 1e-5, 1e-5);
  }
  for (int64_t n : {1, 37, 300}) {
    INFO("1-d cumsum of " << n);
    Input f = make_contiguous({n}, DType::Float32, rng, 0, 1);
    check_values(f.t.cumsum(0), ref_cumsum(f.ref, 0), 1e-5, 1e-4);
  }
}

TEST_CASE("softmax and log_softmax along each axis, on views", "[tensor][softmax]") {
  std::mt19937 rng(130);
  for (auto& c : cases_2d()) {
    for (int64_t axis : {-1, 0}) {
      INFO("axis " << axis << " on " << c.name);
      Input in = make_input(c, DType::Float32, rng, -4, 4, -1);
      Tensor s = in.t.softmax(axis);
      CHECK(s.dtype() == DType::Float32);
      check_values(s, ref_softmax(in.ref, axis, false), 1e-5, 1e-6);
      check_values(in.t.log_softmax(axis), ref_softmax(in.ref, axis, true), 1e-5, 1e-5);
    }
  }
  for (auto& c : cases_3d()) {
    INFO("axis 1 on 3-d " << c.name);
    Input in = make_input(c, DType::Float32, rng, -4, 4, -1);
    check_values(in.t.softmax(1), ref_softmax(in.ref, 1, false), 1e-5, 1e-6);
  }
  // large inputs must not overflow (max subtraction)
  Tensor big = Tensor::from_data({1000, 1001, 1002}, {3}, DType::Float32);
  check_values(big.softmax(), ref_softmax(A({3}, {1000, 1001, 1002}), 0, false), 1e-5, 1e-6);
  check_values(big.log_softmax(), ref_softmax(A({3}, {1000, 1001, 1002}), 0, true), 1e-5, 1e-5);
  // ints are promoted to float
  Tensor it = Tensor::from_data({1, 2, 3}, {3}, DType::Int32);
  CHECK(it.softmax().dtype() == DType::Float32);
  check_values(it.softmax(), ref_softmax(A({3}, {1, 2, 3}), 0, false), 1e-5, 1e-6);
}

// ---- matmul

namespace {
// |got - want| <= rtol * sum_k |a_ik * b_kj|: the standard bound for a float dot product.
void check_matmul(Tensor r, const A& a, const A& b, double rtol) {
  A want = ref_matmul(a, b);
  A absa = map(a, [](double v) { return std::fabs(v); }),
    absb = map(b, [](double v) { return std::fabs(v); });
  A scale = ref_matmul(absa, absb);
  REQUIRE(r.shape() == want.shape);
  auto got = r.data();
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); i++)
    if (!(std::fabs(got[i] - want.data[i]) <= rtol * std::max(scale.data[i], 1e-30))) {
      if (bad++ < 4)
        os << " at " << index_str(want.shape, i) << ": got " << got[i] << ", want " << want.data[i] << "\n";
    }
  if (bad) FAIL_CHECK(bad << " of " << got.size() << " matmul elements differ:\n" << os.str());
}
} // namespace

TEST_CASE("matmul 512x512 against a reference triple loop", "[tensor][matmul]") {
  std::mt19937 rng(140);
  Input a = make_contiguous({512, 512}, DType::Float32, rng, -1, 1);
  Input b = make_contiguous({512, 512}, DType::Float32, rng, -1, 1);
  Tensor r = a.t.matmul(b.t);
  CHECK(r.dtype() == DType::Float32);
  check_matmul(r, a.ref, b.ref, 1e-4);
}

TEST_CASE("matmul of non-square, batched, 1-d and view operands", "[tensor][matmul]") {
  std::mt19937 rng(141);
  {
    INFO("3x5 @ 5x7");
    Input a = make_contiguous({3, 5}, DType::Float32, rng, -2, 2),
          b = make_contiguous({5, 7}, DType::Float32, rng, -2, 2);
    check_matmul(a.t.matmul(b.t), a.ref, b.ref, 1e-5);
    check_matmul(a.t.dot(b.t), a.ref, b.ref, 1e-5);
  }
  {
    INFO("transposed and flipped operands");
    Input a = make_input({"T", {5, 3}, {{Ops::PERMUTE, {1, 0}}}}, DType::Float32, rng, -2, 2);
    Input b = make_input({"flipped", {5, 7}, {{Ops::FLIP, {0}}}}, DType::Float32, rng, -2, 2);
    check_matmul(a.t.matmul(b.t), a.ref, b.ref, 1e-5);
    Input c = make_input({"padded+shrunk", {4, 6}, {{Ops::PAD, {1, 0, 0, 2}}, {Ops::SHRINK, {0, 5, 1, 8}}}},
                         DType::Float32, rng, -2, 2);
    check_matmul(a.t.matmul(c.t), a.ref, c.ref, 1e-5);
    Input e = make_input({"expanded", {1, 7}, {{Ops::EXPAND, {5, 7}}}}, DType::Float32, rng, -2, 2);
    check_matmul(a.t.matmul(e.t), a.ref, e.ref, 1e-5);
  }
  {
    INFO("batched (2,3,4) @ (2,4,5) and broadcast (2,3,4) @ (4,5)");
    Input a = make_contiguous({2, 3, 4}, DType::Float32, rng, -2, 2);
    Input b = make_contiguous({2, 4, 5}, DType::Float32, rng, -2, 2);
    Input w = make_contiguous({4, 5}, DType::Float32, rng, -2, 2);
    check_matmul(a.t.matmul(b.t), a.ref, b.ref, 1e-5);
    check_matmul(a.t.matmul(w.t), a.ref, w.ref, 1e-5);
  }
  {
    INFO("1-d operands");
    Input v = make_contiguous({5}, DType::Float32, rng, -2, 2),
          m = make_contiguous({5, 3}, DType::Float32, rng, -2, 2);
    Input m2 = make_contiguous({4, 5}, DType::Float32, rng, -2, 2),
          u = make_contiguous({5}, DType::Float32, rng, -2, 2);
    check_matmul(v.t.matmul(m.t), v.ref, m.ref, 1e-5);   // (5,) @ (5,3) -> (3,)
    check_matmul(m2.t.matmul(u.t), m2.ref, u.ref, 1e-5); // (4,5) @ (5,) -> (4,)
    check_matmul(v.t.matmul(u.t), v.ref, u.ref, 1e-5);   // dot -> ()
  }
  {
    INFO("int32 matmul is exact");
    Input a = make_contiguous({3, 4}, DType::Int32, rng, -20, 20),
          b = make_contiguous({4, 2}, DType::Int32, rng, -20, 20);
    Tensor r = a.t.matmul(b.t);
    CHECK(r.dtype() == DType::Int32);
    check_values(r, ref_matmul(a.ref, b.ref));
  }
}

TEST_CASE("arange folds its cumsum to a closed form, also past the int32 index range", "[tensor][arange]") {
  // arange is a cumsum of a constant built from pad + expand + reshape + sum; the symbolic
  // rules fold the sum over the window to a count, so no reduce loop is left in the kernel
  for (int64_t n : {1, 7, 64, 100000}) {
    Tensor a = Tensor::arange(0, static_cast<double>(n));
    auto items = a.schedule();
    REQUIRE(items.size() == 1);
    CHECK(kernel_for(items[0]).src.find("ridx") == std::string::npos);
    std::vector<double> v = a.data();
    REQUIRE(static_cast<int64_t>(v.size()) == n);
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 97))
      CHECK(v[i] == static_cast<double>(i));
    CHECK(v.back() == static_cast<double>(n - 1));
  }
  // float steps and offsets
  std::vector<double> f = Tensor::arange(-1, 2, 0.25).data();
  REQUIRE(f.size() == 12);
  for (size_t i = 0; i < f.size(); i++)
    CHECK(f[i] == Approx(-1 + 0.25 * static_cast<double>(i)));
  // a cumsum of loaded data is a real reduction and stays correct
  std::vector<double> d{3, -1, 4, 1, -5, 9, 2, 6};
  std::vector<double> c = Tensor::from_data(d, {8}, DType::Int32).cumsum(0).data();
  double run = 0;
  for (size_t i = 0; i < d.size(); i++)
    CHECK(c[i] == (run += d[i]));
}
