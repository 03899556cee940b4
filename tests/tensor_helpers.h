// Helpers for the Tensor tests: inputs built as views (permuted, expanded, padded, shrunk,
// flipped, multi-view) together with the same view materialized in plain C++, reference
// reductions and broadcasting, and a value comparison that reports the first mismatch.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "test_util.h"

namespace mgtest {

using A = Arr<double>;
using mg::DType;
using mg::Ops;
using mg::Tensor;

struct Mv {
  Ops op;
  std::vector<int64_t> arg; // flat pairs for PAD/SHRINK, axes for FLIP
};

// An input of shape `target`: made by from_data(base) followed by `moves`.
struct ViewCase {
  std::string name;
  IShape base;
  std::vector<Mv> moves;
};

inline Tensor apply_moves(Tensor t, const std::vector<Mv>& moves, double pad_value) {
  for (auto& m : moves) {
    switch (m.op) {
    case Ops::RESHAPE:
      t = t.reshape(mg::to_shape(m.arg));
      break;
    case Ops::PERMUTE:
      t = t.permute(m.arg);
      break;
    case Ops::EXPAND:
      t = t.expand(mg::to_shape(m.arg));
      break;
    case Ops::PAD:
      t = t.pad(to_pairs(m.arg), pad_value);
      break;
    case Ops::SHRINK:
      t = t.shrink(spairs(to_pairs(m.arg)));
      break;
    case Ops::FLIP:
      t = t.flip(m.arg);
      break;
    default:
      throw std::logic_error("apply_moves: bad op");
    }
  }
  return t;
}

inline A apply_moves(A a, const std::vector<Mv>& moves, double pad_value) {
  for (auto& m : moves) {
    switch (m.op) {
    case Ops::RESHAPE:
      a = ref_reshape(a, m.arg);
      break;
    case Ops::PERMUTE:
      a = ref_permute(a, m.arg);
      break;
    case Ops::EXPAND:
      a = ref_expand(a, m.arg);
      break;
    case Ops::PAD:
      a = ref_pad(a, to_pairs(m.arg), pad_value);
      break;
    case Ops::SHRINK:
      a = ref_shrink(a, to_pairs(m.arg));
      break;
    case Ops::FLIP: {
      std::vector<bool> ax(a.shape.size(), false);
      for (auto x : m.arg)
        ax[x < 0 ? x + a.shape.size() : x] = true;
      a = ref_flip(a, ax);
      break;
    }
    default:
      throw std::logic_error("apply_moves: bad op");
    }
  }
  return a;
}

// Every case yields shape (3, 4).
inline const std::vector<ViewCase>& cases_2d() {
  static const std::vector<ViewCase> c{
      {"contiguous", {3, 4}, {}},
      {"permuted", {4, 3}, {{Ops::PERMUTE, {1, 0}}}},
      {"expanded cols", {3, 1}, {{Ops::EXPAND, {3, 4}}}},
      {"expanded rows", {1, 4}, {{Ops::EXPAND, {3, 4}}}},
      {"padded", {2, 2}, {{Ops::PAD, {1, 0, 1, 1}}}},
      {"shrunk", {5, 6}, {{Ops::SHRINK, {1, 4, 2, 6}}}},
      {"flipped", {3, 4}, {{Ops::FLIP, {0, 1}}}},
      {"permuted+shrunk+flipped",
       {6, 3},
       {{Ops::PERMUTE, {1, 0}}, {Ops::SHRINK, {0, 3, 1, 5}}, {Ops::FLIP, {1}}}},
      {"two views (permute+reshape)", {2, 6}, {{Ops::PERMUTE, {1, 0}}, {Ops::RESHAPE, {3, 4}}}},
      {"padded+shrunk", {3, 3}, {{Ops::PAD, {0, 1, 2, 1}}, {Ops::SHRINK, {1, 4, 1, 5}}}},
  };
  return c;
}

// Every case yields shape (2, 3, 4).
inline const std::vector<ViewCase>& cases_3d() {
  static const std::vector<ViewCase> c{
      {"contiguous", {2, 3, 4}, {}},
      {"permuted", {4, 2, 3}, {{Ops::PERMUTE, {1, 2, 0}}}},
      {"expanded", {2, 1, 4}, {{Ops::EXPAND, {2, 3, 4}}}},
      {"padded", {2, 1, 2}, {{Ops::PAD, {0, 0, 1, 1, 1, 1}}}},
      {"shrunk+flipped", {3, 5, 4}, {{Ops::SHRINK, {1, 3, 1, 4, 0, 4}}, {Ops::FLIP, {0, 2}}}},
      {"two views", {4, 6}, {{Ops::PERMUTE, {1, 0}}, {Ops::RESHAPE, {2, 3, 4}}}},
  };
  return c;
}

inline double round_to(DType dt, double v) {
  switch (dt) {
  case DType::Float32:
    return static_cast<float>(v);
  case DType::Float64:
    return v;
  case DType::Bool:
    return v != 0;
  default:
    return std::trunc(v);
  }
}

// Uniform values in [lo, hi] (integers for integer dtypes, or when `integral`), rounded to
// what dt holds.
inline std::vector<double> gen(int64_t n, std::mt19937& rng, double lo, double hi, DType dt,
                               bool integral = false) {
  std::vector<double> r(n);
  for (auto& v : r) {
    if (mg::is_float(dt) && !integral)
      v = round_to(dt, std::uniform_real_distribution<double>(lo, hi)(rng));
    else if (dt == DType::Bool)
      v = std::uniform_int_distribution<int>(0, 1)(rng);
    else
      v = std::uniform_int_distribution<int64_t>(static_cast<int64_t>(lo), static_cast<int64_t>(hi))(rng);
  }
  return r;
}

struct Input {
  Tensor t;
  A ref;
};

inline Input make_input(const ViewCase& c, DType dt, std::mt19937& rng, double lo, double hi,
                        double pad_value = 0, bool integral = false) {
  auto d = gen(numel(c.base), rng, lo, hi, dt, integral);
  Tensor t = Tensor::from_data(d, mg::to_shape(c.base), dt);
  return {apply_moves(t, c.moves, pad_value), apply_moves(A(c.base, d), c.moves, pad_value)};
}

inline Input make_contiguous(const IShape& s, DType dt, std::mt19937& rng, double lo, double hi) {
  return make_input(ViewCase{"contiguous", s, {}}, dt, rng, lo, hi);
}

inline bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

inline std::string index_str(const IShape& s, int64_t flat) {
  std::vector<int64_t> idx(s.size());
  for (size_t i = s.size(); i-- > 0;) {
    idx[i] = flat % s[i];
    flat /= s[i];
  }
  return str(idx);
}

// Realizes t and compares with ref; rtol = atol = 0 means exact.
inline void check_values(Tensor t, const A& ref, double rtol = 0, double atol = 0) {
  REQUIRE(mg::to_ints(t.shape()) == ref.shape);
  std::vector<double> got = t.data();
  REQUIRE(got.size() == ref.data.size());
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < got.size(); i++)
    if (!close(got[i], ref.data[i], rtol, atol)) {
      if (bad++ < 4)
        os << "  at " << index_str(ref.shape, static_cast<int64_t>(i)) << ": got " << got[i] << ", want "
           << ref.data[i] << "\n";
    }
  if (bad)
    FAIL_CHECK(bad << " of " << got.size() << " elements differ (rtol " << rtol << ", atol " << atol << "):\n"
                   << os.str());
}

inline A map(const A& a, const std::function<double(double)>& f) {
  A r = a;
  for (auto& v : r.data)
    v = f(v);
  return r;
}

inline IShape bshape(const IShape& a, const IShape& b) {
  size_t n = std::max(a.size(), b.size());
  IShape r(n);
  for (size_t i = 0; i < n; i++) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) throw std::logic_error("bshape: incompatible");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

// numpy-style broadcast of x to shape s.
inline A bcast(const A& x, const IShape& s) {
  A r = A::filled(s, 0);
  size_t off = s.size() - x.shape.size();
  for_each_index(s, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j(x.shape.size());
    for (size_t i = 0; i < j.size(); i++)
      j[i] = x.shape[i] == 1 ? 0 : idx[i + off];
    r.at(idx) = x.at(j);
  });
  return r;
}

// numpy-style broadcasting of a binary function.
inline A zip(const A& a, const A& b, const std::function<double(double, double)>& f) {
  IShape s = bshape(a.shape, b.shape);
  A x = bcast(a, s), y = bcast(b, s);
  for (size_t i = 0; i < x.data.size(); i++)
    x.data[i] = f(x.data[i], y.data[i]);
  return x;
}

inline A where3(const A& c, const A& a, const A& b) {
  IShape s = bshape(c.shape, bshape(a.shape, b.shape));
  A cc = bcast(c, s), x = bcast(a, s), y = bcast(b, s);
  for (size_t i = 0; i < x.data.size(); i++)
    x.data[i] = cc.data[i] != 0 ? x.data[i] : y.data[i];
  return x;
}

enum class Red { Sum, Max, Min, Mean };

inline std::vector<int64_t> norm_axes(const std::optional<std::vector<int64_t>>& axes, size_t ndim) {
  std::vector<int64_t> r;
  if (!axes)
    for (size_t i = 0; i < ndim; i++)
      r.push_back(static_cast<int64_t>(i));
  else
    for (auto a : *axes)
      r.push_back(a < 0 ? a + static_cast<int64_t>(ndim) : a);
  return r;
}

inline A reduce(const A& a, const std::optional<std::vector<int64_t>>& axes0, bool keepdim, Red op) {
  auto axes = norm_axes(axes0, a.shape.size());
  IShape keep = a.shape;
  for (auto ax : axes)
    keep[ax] = 1;
  int64_t count = numel(a.shape) / std::max<int64_t>(1, numel(keep));
  A r = A::filled(keep, op == Red::Max ? -INFINITY : op == Red::Min ? INFINITY : 0.0);
  for_each_index(a.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> o(idx);
    for (auto ax : axes)
      o[ax] = 0;
    double& acc = r.at(o);
    double v = a.at(idx);
    if (op == Red::Max)
      acc = std::max(acc, v);
    else if (op == Red::Min)
      acc = std::min(acc, v);
    else
      acc += v;
  });
  if (op == Red::Mean)
    for (auto& v : r.data)
      v /= static_cast<double>(count);
  if (!keepdim) {
    IShape s;
    for (size_t i = 0; i < keep.size(); i++)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) s.push_back(keep[i]);
    r = ref_reshape(r, s);
  }
  return r;
}

inline Tensor scalar_like(const Tensor& t, double v) {
  return Tensor::from_scalar(mg::Scalar{v, mg::is_float(t.dtype()) ? DType::Float32 : DType::Int32}, t);
}

} // namespace mgtest
