// Tensor elementwise ops, creation, randomness and error messages, realized through the real
// pipeline (schedule -> codegen -> CPU backend) and checked against hand-written C++ loops.
// Every op runs on contiguous inputs and on permuted / expanded / padded / shrunk / flipped /
// multi-view inputs; the reference applies the same views to plain arrays.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "tensor_helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
struct Unary {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<double(double)> ref;
  double lo, hi, pad; // input range; value padded views use (inside the op's domain)
  double rtol, atol;
};

const std::vector<Unary>& float_unary() {
  static const std::vector<Unary> u{
      {"neg", [](const Tensor& t) { return t.neg(); }, [](double x) { return -x; }, -3, 3, 0, 0, 0},
      {"exp", [](const Tensor& t) { return t.exp(); }, [](double x) { return std::exp(x); }, -3, 3, 0, 1e-5,
       1e-6},
      {"exp2", [](const Tensor& t) { return t.exp2(); }, [](double x) { return std::exp2(x); }, -3, 3, 0,
       1e-5, 1e-6},
      {"log", [](const Tensor& t) { return t.log(); }, [](double x) { return std::log(x); }, 0.1, 5, 1, 1e-5,
       1e-6},
      {"log2", [](const Tensor& t) { return t.log2(); }, [](double x) { return std::log2(x); }, 0.1, 5, 1,
       1e-5, 1e-6},
      {"sqrt", [](const Tensor& t) { return t.sqrt(); }, [](double x) { return std::sqrt(x); }, 0, 5, 1, 1e-6,
       1e-7},
      {"rsqrt", [](const Tensor& t) { return t.rsqrt(); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5,
       1, 1e-5, 1e-6},
      {"reciprocal", [](const Tensor& t) { return t.reciprocal(); }, [](double x) { return 1 / x; }, 0.2, 5,
       1, 1e-6, 1e-7},
      {"sin", [](const Tensor& t) { return t.sin(); }, [](double x) { return std::sin(x); }, -4, 4, 0, 1e-5,
       1e-6},
      {"cos", [](const Tensor& t) { return t.cos(); }, [](double x) { return std::cos(x); }, -4, 4, 0, 1e-5,
       1e-6},
      {"relu", [](const Tensor& t) { return t.relu(); }, [](double x) { return x > 0 ? x : 0; }, -3, 3, 0, 0,
       0},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -5, 5, 0, 1e-5, 1e-6},
      {"tanh", [](const Tensor& t) { return t.tanh(); }, [](double x) { return std::tanh(x); }, -3, 3, 0,
       1e-5, 1e-6},
      {"abs", [](const Tensor& t) { return t.abs(); }, [](double x) { return std::fabs(x); }, -3, 3, 0, 0, 0},
      {"square", [](const Tensor& t) { return t.square(); }, [](double x) { return x * x; }, -3, 3, 0, 1e-6,
       0},
  };
  return u;
}

struct Binary {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> f;
  std::function<double(double, double)> ref;
  double alo, ahi, blo, bhi;
  double rtol, atol;
  DType out; // Void: same as the inputs
};

const std::vector<Binary>& float_binary() {
  static const std::vector<Binary> b{
      {"add", [](auto& x, auto& y) { return x.add(y); }, [](double x, double y) { return x + y; }, -3, 3, -3,
       3, 1e-6, 1e-7, DType::Void},
      {"sub", [](auto& x, auto& y) { return x.sub(y); }, [](double x, double y) { return x - y; }, -3, 3, -3,
       3, 1e-6, 1e-7, DType::Void},
      {"mul", [](auto& x, auto& y) { return x.mul(y); }, [](double x, double y) { return x * y; }, -3, 3, -3,
       3, 1e-6, 1e-7, DType::Void},
      {"div", [](auto& x, auto& y) { return x.div(y); }, [](double x, double y) { return x / y; }, -3, 3, 0.5,
       3, 1e-6, 1e-7, DType::Void},
      {"maximum", [](auto& x, auto& y) { return x.maximum(y); },
       [](double x, double y) { return std::max(x, y); }, -3, 3, -3, 3, 0, 0, DType::Void},
      {"minimum", [](auto& x, auto& y) { return x.minimum(y); },
       [](double x, double y) { return std::min(x, y); }, -3, 3, -3, 3, 0, 0, DType::Void},
      {"pow", [](auto& x, auto& y) { return x.pow(y); }, [](double x, double y) { return std::pow(x, y); },
       0.5, 2.5, -2, 2, 1e-5, 1e-6, DType::Void},
      {"idiv (floor)", [](auto& x, auto& y) { return x.idiv(y); },
       [](double x, double y) { return std::floor(x / y); }, -9, 9, 0.5, 3, 0, 0, DType::Void},
      // comparisons on integer-valued floats so that equality happens
      {"lt", [](auto& x, auto& y) { return x.lt(y); }, [](double x, double y) { return double(x < y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"le", [](auto& x, auto& y) { return x.le(y); }, [](double x, double y) { return double(x <= y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"gt", [](auto& x, auto& y) { return x.gt(y); }, [](double x, double y) { return double(x > y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"ge", [](auto& x, auto& y) { return x.ge(y); }, [](double x, double y) { return double(x >= y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"eq", [](auto& x, auto& y) { return x.eq(y); }, [](double x, double y) { return double(x == y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"ne", [](auto& x, auto& y) { return x.ne(y); }, [](double x, double y) { return double(x != y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
  };
  return b;
}

const std::vector<Binary>& int_binary() {
  static const std::vector<Binary> b{
      {"add", [](auto& x, auto& y) { return x.add(y); }, [](double x, double y) { return x + y; }, -50, 50,
       -50, 50, 0, 0, DType::Void},
      {"sub", [](auto& x, auto& y) { return x.sub(y); }, [](double x, double y) { return x - y; }, -50, 50,
       -50, 50, 0, 0, DType::Void},
      {"mul", [](auto& x, auto& y) { return x.mul(y); }, [](double x, double y) { return x * y; }, -50, 50,
       -50, 50, 0, 0, DType::Void},
      {"maximum", [](auto& x, auto& y) { return x.maximum(y); },
       [](double x, double y) { return std::max(x, y); }, -9, 9, -9, 9, 0, 0, DType::Void},
      {"minimum", [](auto& x, auto& y) { return x.minimum(y); },
       [](double x, double y) { return std::min(x, y); }, -9, 9, -9, 9, 0, 0, DType::Void},
      // // floors, as in Lua and Python (C would truncate toward zero)
      {"idiv", [](auto& x, auto& y) { return x.idiv(y); },
       [](double x, double y) { return std::floor(x / y); }, -40, 40, 1, 6, 0, 0, DType::Void},
      {"idiv (negative divisor)", [](auto& x, auto& y) { return x.idiv(y); },
       [](double x, double y) { return std::floor(x / y); }, -40, 40, -6, -1, 0, 0, DType::Void},
      {"div (true)", [](auto& x, auto& y) { return x.div(y); }, [](double x, double y) { return x / y; }, -20,
       20, 1, 6, 1e-6, 1e-7, DType::Float32},
      {"pow", [](auto& x, auto& y) { return x.pow(y); }, [](double x, double y) { return std::pow(x, y); },
       -3, 3, 0, 4, 0, 0, DType::Void},
      {"lt", [](auto& x, auto& y) { return x.lt(y); }, [](double x, double y) { return double(x < y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"le", [](auto& x, auto& y) { return x.le(y); }, [](double x, double y) { return double(x <= y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"gt", [](auto& x, auto& y) { return x.gt(y); }, [](double x, double y) { return double(x > y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"ge", [](auto& x, auto& y) { return x.ge(y); }, [](double x, double y) { return double(x >= y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"eq", [](auto& x, auto& y) { return x.eq(y); }, [](double x, double y) { return double(x == y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
      {"ne", [](auto& x, auto& y) { return x.ne(y); }, [](double x, double y) { return double(x != y); }, -2,
       2, -2, 2, 0, 0, DType::Bool},
  };
  return b;
}

void run_binary(const Binary& op, DType dt, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto& cs = cases_2d();
  for (size_t i = 0; i < cs.size(); i++) {
    // both sides are views, of different kinds
    const ViewCase &ca = cs[i], &cb = cs[(i + 3) % cs.size()];
    INFO(op.name << " " << name(dt) << ": lhs " << ca.name << ", rhs " << cb.name);
    // pad with a value inside both domains (division by a padded 0 would be inf)
    bool integral = op.out == DType::Bool; // comparisons: integer values, so that equality happens
    Input a = make_input(ca, dt, rng, op.alo, op.ahi, op.alo > 0 ? op.alo : 1, integral);
    Input b = make_input(cb, dt, rng, op.blo, op.bhi, op.blo > 0 ? op.blo : 1, integral);
    Tensor r = op.f(a.t, b.t);
    CHECK(r.dtype() == (op.out == DType::Void ? dt : op.out));
    check_values(r, zip(a.ref, b.ref, op.ref), op.rtol, op.atol);
  }
}
} // namespace

TEST_CASE("float32 unary ops on contiguous and view inputs", "[tensor][elementwise]") {
  std::mt19937 rng(1);
  for (auto& op : float_unary()) {
    for (auto& c : cases_2d()) {
      INFO(op.name << " on " << c.name);
      Input in = make_input(c, DType::Float32, rng, op.lo, op.hi, op.pad);
      Tensor r = op.f(in.t);
      CHECK(r.dtype() == DType::Float32);
      check_values(r, map(in.ref, op.ref), op.rtol, op.atol);
    }
  }
}

TEST_CASE("float32 unary ops on 3-d views", "[tensor][elementwise]") {
  std::mt19937 rng(2);
  for (auto& op : float_unary()) {
    if (std::string(op.name) != "exp" && std::string(op.name) != "sqrt" && std::string(op.name) != "relu")
      continue;
    for (auto& c : cases_3d()) {
      INFO(op.name << " on " << c.name);
      Input in = make_input(c, DType::Float32, rng, op.lo, op.hi, op.pad);
      check_values(op.f(in.t), map(in.ref, op.ref), op.rtol, op.atol);
    }
  }
}

TEST_CASE("int32 unary ops", "[tensor][elementwise]") {
  std::mt19937 rng(3);
  for (auto& c : cases_2d()) {
    INFO(c.name);
    Input in = make_input(c, DType::Int32, rng, -9, 9, 0);
    Tensor n = in.t.neg(), a = in.t.abs(), r = in.t.relu(), s = in.t.square();
    CHECK(n.dtype() == DType::Int32);
    CHECK(a.dtype() == DType::Int32);
    CHECK(s.dtype() == DType::Int32);
    check_values(n, map(in.ref, [](double x) { return -x; }));
    check_values(a, map(in.ref, [](double x) { return std::fabs(x); }));
    check_values(r, map(in.ref, [](double x) { return x > 0 ? x : 0; }));
    check_values(s, map(in.ref, [](double x) { return x * x; }));
  }
  // transcendental ops of ints compute in float32
  Input p = make_contiguous({3, 4}, DType::Int32, rng, 0, 9);
  Tensor sq = p.t.sqrt(), ex = p.t.exp();
  CHECK(sq.dtype() == DType::Float32);
  CHECK(ex.dtype() == DType::Float32);
  check_values(sq, map(p.ref, [](double x) { return std::sqrt(x); }), 1e-6, 1e-7);
  check_values(ex, map(p.ref, [](double x) { return std::exp(x); }), 1e-5, 1e-6);
}

TEST_CASE("float32 binary ops and comparisons on view inputs", "[tensor][elementwise]") {
  uint32_t seed = 10;
  for (auto& op : float_binary())
    run_binary(op, DType::Float32, seed++);
}

TEST_CASE("int32 binary ops and comparisons on view inputs", "[tensor][elementwise]") {
  uint32_t seed = 40;
  for (auto& op : int_binary())
    run_binary(op, DType::Int32, seed++);
}

TEST_CASE("pow with negative bases and integer exponents", "[tensor][elementwise]") {
  Tensor b = Tensor::from_data({-2, -2, -3, 2, -1.5, 0}, {6}, DType::Float32);
  Tensor e = Tensor::from_data({3, 2, 1, -1, 2, 2}, {6}, DType::Float32);
  check_values(b.pow(e), A({6}, {-8, 4, -3, 0.5, 2.25, 0}), 1e-5, 1e-6);
  Tensor bi = Tensor::from_data({2, -2, 3, 5}, {4}, DType::Int32);
  Tensor ei = Tensor::from_data({10, 3, 0, 2}, {4}, DType::Int32);
  Tensor pi = bi.pow(ei);
  CHECK(pi.dtype() == DType::Int32);
  check_values(pi, A({4}, {1024, -8, 1, 25}));
}

TEST_CASE("broadcasting binary ops", "[tensor][elementwise][broadcast]") {
  std::mt19937 rng(70);
  struct Case {
    IShape a, b;
  };
  const std::vector<Case> cases{{{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}},
                                {{1}, {3, 4}},    {{3, 4}, {}},     {{}, {2, 3}},     {{5, 1, 1}, {1, 2, 3}}};
  for (auto& c : cases) {
    INFO(str(c.a) << " with " << str(c.b));
    Input a = make_contiguous(c.a, DType::Float32, rng, -3, 3),
          b = make_contiguous(c.b, DType::Float32, rng, 0.5, 3);
    check_values(a.t.add(b.t), zip(a.ref, b.ref, [](double x, double y) { return x + y; }), 1e-6, 1e-7);
    check_values(a.t.mul(b.t), zip(a.ref, b.ref, [](double x, double y) { return x * y; }), 1e-6, 1e-7);
    check_values(b.t.sub(a.t), zip(b.ref, a.ref, [](double x, double y) { return x - y; }), 1e-6, 1e-7);
    check_values(a.t.div(b.t), zip(a.ref, b.ref, [](double x, double y) { return x / y; }), 1e-6, 1e-7);
    check_values(a.t.lt(b.t), zip(a.ref, b.ref, [](double x, double y) { return double(x < y); }));
    check_values(a.t.maximum(b.t), zip(a.ref, b.ref, [](double x, double y) { return std::max(x, y); }));
  }
  // broadcasting a view: a flipped (3,1) against a permuted (1,4)
  Input a = make_input({"flipped col", {3, 1}, {{Ops::FLIP, {0}}}}, DType::Int32, rng, -9, 9);
  Input b = make_input({"permuted row", {4, 1}, {{Ops::PERMUTE, {1, 0}}}}, DType::Int32, rng, -9, 9);
  check_values(a.t.mul(b.t), zip(a.ref, b.ref, [](double x, double y) { return x * y; }));
  check_values(a.t.sub(b.t), zip(a.ref, b.ref, [](double x, double y) { return x - y; }));
}

TEST_CASE("scalars take tinygrad's dtype rule", "[tensor][elementwise][dtype]") {
  Tensor fi = Tensor::from_data({1, 2, 3}, {3}, DType::Int32);
  Tensor ff = Tensor::from_data({1.5, 2, 3}, {3}, DType::Float32);
  Tensor r1 = fi.add(Tensor::from_scalar(Scalar{2, DType::Int32}, fi));
  CHECK(r1.dtype() == DType::Int32);
  check_values(r1, A({3}, {3, 4, 5}));
  Tensor r2 =
      fi.mul(Tensor::from_scalar(Scalar{1.5, DType::Float32}, fi)); // float scalar makes an int tensor float
  CHECK(r2.dtype() == DType::Float32);
  check_values(r2, A({3}, {1.5, 3, 4.5}));
  Tensor r3 = ff.add(Tensor::from_scalar(Scalar{1, DType::Int32}, ff));
  CHECK(r3.dtype() == DType::Float32);
  check_values(r3, A({3}, {2.5, 3, 4}));
  Tensor i8 = Tensor::from_data({1, 2, 3}, {3}, DType::Int8);
  Tensor r4 = i8.add(Tensor::from_scalar(Scalar{100, DType::Int32}, i8)); // an int scalar keeps int8
  CHECK(r4.dtype() == DType::Int8);
  check_values(r4, A({3}, {101, 102, 103}));
}

TEST_CASE("binary ops promote mixed dtypes", "[tensor][elementwise][dtype]") {
  Tensor i32 = Tensor::from_data({1, -2, 3}, {3}, DType::Int32);
  Tensor f32 = Tensor::from_data({0.5, 0.25, -1}, {3}, DType::Float32);
  Tensor r = i32.add(f32);
  CHECK(r.dtype() == DType::Float32);
  check_values(r, A({3}, {1.5, -1.75, 2}));
  Tensor i8 = Tensor::from_data({-100, 100, 5}, {3}, DType::Int8);
  Tensor u8 = Tensor::from_data({200, 100, 250}, {3}, DType::UInt8);
  Tensor s = i8.add(u8);
  CHECK(s.dtype() == DType::Int16); // int8 + uint8 -> int16: no wrap
  check_values(s, A({3}, {100, 200, 255}));
  Tensor b = Tensor::from_data({1, 0, 1}, {3}, DType::Bool);
  Tensor bi = b.add(i32);
  CHECK(bi.dtype() == DType::Int32);
  check_values(bi, A({3}, {2, -2, 4}));
  Tensor f64 = Tensor::from_data({0.1, 0.2, 0.3}, {3}, DType::Float64);
  Tensor d = f64.mul(f32);
  CHECK(d.dtype() == DType::Float64);
  check_values(d, A({3}, {0.1 * 0.5, 0.2 * 0.25, -0.3}), 1e-12, 1e-15);
}

TEST_CASE("where selects with broadcasting and on views", "[tensor][elementwise]") {
  std::mt19937 rng(80);
  const auto& cs = cases_2d();
  for (size_t i = 0; i < cs.size(); i++) {
    INFO(cs[i].name);
    Input x = make_input(cs[i], DType::Float32, rng, -2, 2);
    Input y = make_input(cs[(i + 2) % cs.size()], DType::Float32, rng, -2, 2);
    Input z = make_input(cs[(i + 5) % cs.size()], DType::Float32, rng, -2, 2);
    Tensor cond = x.t.gt(y.t);
    A cref = zip(x.ref, y.ref, [](double a, double b) { return double(a > b); });
    check_values(cond.where(y.t, z.t), where3(cref, y.ref, z.ref));
    check_values(cond.logical_not(), map(cref, [](double v) { return double(v == 0); }));
  }
  // condition (3,1), values (1,4) and a scalar-shaped (1,)
  Tensor c = Tensor::from_data({1, 0, 1}, {3, 1}, DType::Bool);
  Tensor a = Tensor::from_data({1, 2, 3, 4}, {1, 4}, DType::Int32);
  Tensor b = Tensor::from_data({-7}, {1}, DType::Int32);
  Tensor w = c.where(a, b);
  CHECK(w.shape() == IShape{3, 4});
  CHECK(w.dtype() == DType::Int32);
  check_values(w, A({3, 4}, {1, 2, 3, 4, -7, -7, -7, -7, 1, 2, 3, 4}));
}

TEST_CASE("cast between dtypes", "[tensor][elementwise][cast]") {
  std::mt19937 rng(90);
  for (auto& c : cases_2d()) {
    INFO(c.name);
    Input f = make_input(c, DType::Float32, rng, -5, 5, -2.5);
    Tensor fi = f.t.cast(DType::Int32);
    CHECK(fi.dtype() == DType::Int32);
    check_values(fi, map(f.ref, [](double x) { return std::trunc(x); })); // C truncation toward 0
    check_values(f.t.cast(DType::Bool), map(f.ref, [](double x) { return double(x != 0); }));
    Input i = make_input(c, DType::Int32, rng, -1000, 1000, 7);
    Tensor iff = i.t.cast(DType::Float32);
    CHECK(iff.dtype() == DType::Float32);
    check_values(iff, i.ref);
    check_values(i.t.cast(DType::Float64), i.ref);
  }
  Tensor a = Tensor::from_data({-2.7, -0.5, 0, 0.5, 2.7, 100.9}, {6}, DType::Float32);
  check_values(a.cast(DType::Int32), A({6}, {-2, 0, 0, 0, 2, 100}));
  check_values(a.cast(DType::Bool), A({6}, {1, 1, 0, 1, 1, 1}));
  Tensor b = Tensor::from_data({1, 0, 1}, {3}, DType::Bool);
  check_values(b.cast(DType::Int32), A({3}, {1, 0, 1}));
  check_values(b.cast(DType::Float32), A({3}, {1, 0, 1}));
  Tensor w = Tensor::from_data({300, -1, 255, 256}, {4}, DType::Int32);
  check_values(w.cast(DType::UInt8), A({4}, {44, 255, 255, 0})); // modular, as C
  Tensor big = Tensor::from_data({16777217, 3}, {2}, DType::Int64);
  check_values(big.cast(DType::Float64), A({2}, {16777217, 3}));
  CHECK(a.cast(DType::Float32).dtype() == DType::Float32);
}

TEST_CASE("the other dtypes compute, reduce and cast", "[tensor][dtype]") {
  const std::vector<DType> dts{DType::Float16, DType::BFloat16, DType::Float64, DType::Int8,  DType::UInt8,
                               DType::Int16,   DType::UInt16,   DType::UInt32,  DType::Int64, DType::UInt64};
  for (DType dt : dts) {
    INFO(name(dt));
    Tensor a = Tensor::from_data({1, 0, 3, 7, 2, 5}, {2, 3}, dt).flip({1}); // a view: {{3,0,1},{5,2,7}}
    A ra({2, 3}, {3, 0, 1, 5, 2, 7});
    Tensor b = a.add(a).mul(a);
    CHECK(b.dtype() == dt);
    check_values(b, map(ra, [](double x) { return 2 * x * x; }));
    Tensor m = a.max(std::vector<int64_t>{1});
    CHECK(m.dtype() == dt);
    check_values(m, A({2}, {3, 7}));
    check_values(a.sum(std::vector<int64_t>{0}), A({3}, {8, 2, 8}));
    check_values(a.cast(DType::Float32), ra);
    check_values(a.lt(a.T().reshape({2, 3})), A({2, 3}, {0, 1, 0, 0, 0, 0})); // vs {{3,5,0},{2,1,7}}
    if (is_float(dt)) {
      Tensor f = Tensor::from_data({1.5, 2.25, -3, 0.5}, {4}, dt);
      check_values(f.add(f).mul(f), A({4}, {4.5, 10.125, 18, 0.5}));
    }
  }
}

TEST_CASE("sum and mean of float16 and bfloat16 keep their dtype, as in tinygrad",
          "[tensor][dtype][reduce]") {
  // tinygrad accumulates half sums in float32 and casts the result back to the input dtype
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(name(dt));
    Tensor a = Tensor::from_data({1, 2, 3, 4}, {2, 2}, dt);
    Tensor s = a.sum(std::vector<int64_t>{1});
    CHECK(s.dtype() == dt);
    check_values(s, A({2}, {3, 7}));
    Tensor m = a.mean();
    CHECK(m.dtype() == dt);
    check_values(m, A({}, {2.5}));
  }
}

// ---- creation

TEST_CASE("full, zeros, ones, empty", "[tensor][creation]") {
  Tensor f = Tensor::full({2, 3}, 2.5, DType::Float32);
  CHECK(f.shape() == IShape{2, 3});
  CHECK(f.dtype() == DType::Float32);
  check_values(f, A::filled({2, 3}, 2.5));
  Tensor fi = Tensor::full({4}, -7, DType::Int32);
  CHECK(fi.dtype() == DType::Int32);
  check_values(fi, A::filled({4}, -7));
  check_values(Tensor::zeros({3, 1, 2}), A::filled({3, 1, 2}, 0));
  check_values(Tensor::ones({5}, DType::Int32), A::filled({5}, 1));
  CHECK(Tensor::ones({5}).dtype() == DType::Float32);
  Tensor e = Tensor::empty({2, 5}, DType::Int32);
  CHECK(e.shape() == IShape{2, 5});
  CHECK(e.dtype() == DType::Int32);
  CHECK(e.numel() == 10);
  // a 0-d full
  Tensor s = Tensor::full({}, 3, DType::Float32);
  CHECK(s.ndim() == 0);
  CHECK(s.item() == 3);
  // full of a view: used in arithmetic
  check_values(
      Tensor::full({2, 2}, 3, DType::Int32).mul(Tensor::from_data({1, 2, 3, 4}, {2, 2}, DType::Int32)),
      A({2, 2}, {3, 6, 9, 12}));
}

TEST_CASE("from_data keeps values, shape and dtype", "[tensor][creation]") {
  Tensor t = Tensor::from_data({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float32);
  CHECK(t.shape() == IShape{2, 3});
  CHECK(t.ndim() == 2);
  CHECK(t.numel() == 6);
  CHECK(t.device() == "CPU");
  check_values(t, A({2, 3}, {1, 2, 3, 4, 5, 6}));
  Tensor d = Tensor::from_data({0.1, 1e-300}, {2}, DType::Float64);
  check_values(d, A({2}, {0.1, 1e-300}));
  Tensor f = Tensor::from_data({0.1}, {1}, DType::Float32);
  CHECK(f.data()[0] == static_cast<double>(0.1f));
  Tensor u = Tensor::from_data({0, 255, 128}, {3}, DType::UInt8);
  check_values(u, A({3}, {0, 255, 128}));
  Tensor l = Tensor::from_data({-5000000000.0, 5000000000.0}, {2}, DType::Int64);
  check_values(l, A({2}, {-5000000000.0, 5000000000.0}));
  CHECK(Tensor::from_data({4.5}, {}, DType::Float32).item() == 4.5);
  CHECK(Tensor::from_data({1, 2, 3}, {3}, DType::Int32).sum().item() == 6);
  CHECK(!Tensor::from_data({1, 2, 3}, {3}, DType::Int32).to_string().empty());
}

TEST_CASE("arange", "[tensor][creation]") {
  Tensor a = Tensor::arange(0, 10, 2);
  CHECK(a.dtype() == DType::Int32);
  check_values(a, A({5}, {0, 2, 4, 6, 8}));
  check_values(Tensor::arange(5, 0, -1), A({5}, {5, 4, 3, 2, 1}));
  check_values(Tensor::arange(10, 0, -3), A({4}, {10, 7, 4, 1}));
  check_values(Tensor::arange(-3, 3), A({6}, {-3, -2, -1, 0, 1, 2}));
  Tensor f = Tensor::arange(0, 1, 0.25);
  CHECK(f.dtype() == DType::Float32);
  check_values(f, A({4}, {0, 0.25, 0.5, 0.75}), 1e-6, 1e-7);
  Tensor g = Tensor::arange(0, 5, 1, DType::Float32);
  CHECK(g.dtype() == DType::Float32);
  check_values(g, A({5}, {0, 1, 2, 3, 4}));
  // a long arange (exercises whatever builds it: cumsum, pooling...)
  Tensor l = Tensor::arange(0, 1000);
  std::vector<double> want(1000);
  std::iota(want.begin(), want.end(), 0.0);
  check_values(l, A({1000}, want));
  CHECK(Tensor::arange(3, 3).numel() == 0);
}

TEST_CASE("eye", "[tensor][creation]") {
  for (int64_t n : {1, 2, 5}) {
    Tensor e = Tensor::eye(n);
    CHECK(e.dtype() == DType::Float32);
    A want = A::filled({n, n}, 0);
    for (int64_t i = 0; i < n; i++)
      want.at({i, i}) = 1;
    check_values(e, want);
  }
  Tensor ei = Tensor::eye(3, DType::Int32);
  CHECK(ei.dtype() == DType::Int32);
  check_values(ei.sum(std::vector<int64_t>{0}), A({3}, {1, 1, 1}));
}

TEST_CASE("rand is uniform in 0 to 1 excluding 1", "[tensor][random]") {
  Tensor::manual_seed(123);
  Tensor r = Tensor::rand({100, 100});
  CHECK(r.dtype() == DType::Float32);
  CHECK(r.shape() == IShape{100, 100});
  auto v = r.data();
  double sum = 0, sq = 0;
  int low = 0;
  for (double x : v) {
    REQUIRE(x >= 0);
    REQUIRE(x < 1);
    sum += x;
    sq += x * x;
    low += x < 0.5;
  }
  double mean = sum / v.size(), var = sq / v.size() - mean * mean;
  CHECK(mean == Approx(0.5).margin(0.02));
  CHECK(var == Approx(1.0 / 12).margin(0.01));
  CHECK(low == Approx(5000).margin(300));
  // not constant, and distinct values
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  CHECK(std::unique(s.begin(), s.end()) - s.begin() > 9000);
}

TEST_CASE("randn has mean 0 and std 1", "[tensor][random]") {
  Tensor::manual_seed(321);
  Tensor r = Tensor::randn({10000});
  CHECK(r.dtype() == DType::Float32);
  auto v = r.data();
  double sum = 0, sq = 0;
  int within1 = 0;
  for (double x : v) {
    REQUIRE(std::isfinite(x));
    sum += x;
    sq += x * x;
    within1 += std::fabs(x) < 1;
  }
  double mean = sum / v.size(), sd = std::sqrt(sq / v.size() - mean * mean);
  CHECK(mean == Approx(0).margin(0.05));
  CHECK(sd == Approx(1).margin(0.05));
  CHECK(within1 == Approx(6827).margin(250)); // P(|x| < 1) of a normal
}

TEST_CASE("manual_seed makes random tensors reproducible", "[tensor][random]") {
  Tensor::manual_seed(42);
  auto a1 = Tensor::rand({50}).data();
  auto a2 = Tensor::rand({50}).data();
  auto n1 = Tensor::randn({3, 7}).data();
  Tensor::manual_seed(42);
  auto b1 = Tensor::rand({50}).data();
  auto b2 = Tensor::rand({50}).data();
  auto m1 = Tensor::randn({3, 7}).data();
  CHECK(a1 == b1);
  CHECK(a2 == b2);
  CHECK(n1 == m1);
  CHECK(a1 != a2); // the stream advances
  Tensor::manual_seed(43);
  CHECK(Tensor::rand({50}).data() != a1);
}

// ---- errors name what is wrong

TEST_CASE("incompatible broadcasting throws naming both shapes", "[tensor][errors]") {
  Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({5});
  REQUIRE_THROWS_WITH(a.add(b), Catch::Contains("(3, 4)") && Catch::Contains("(5,)"));
  Tensor c = Tensor::zeros({2, 3}), d = Tensor::zeros({3, 2});
  REQUIRE_THROWS_WITH(c.mul(d), Catch::Contains("(2, 3)") && Catch::Contains("(3, 2)"));
  REQUIRE_THROWS_WITH(c.where(c, d), Catch::Contains("(3, 2)"));
  REQUIRE_THROWS(broadcast_shape({2, 3}, {4, 3}));
  CHECK(broadcast_shape({3, 1}, {1, 4}) == IShape{3, 4});
  CHECK(broadcast_shape({4}, {2, 3, 4}) == IShape{2, 3, 4});
}

TEST_CASE("reshape to a different numel throws naming the shapes", "[tensor][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(a.reshape({4, 2}), Catch::Contains("(2, 3)") && Catch::Contains("(4, 2)"));
  REQUIRE_THROWS_WITH(a.reshape({7}), Catch::Contains("(2, 3)") && Catch::Contains("(7,)"));
  REQUIRE_THROWS_WITH(a.reshape({-1, 4}), Catch::Contains("(2, 3)"));
  REQUIRE_THROWS(a.reshape({-1, -1}));
}

TEST_CASE("axis out of range throws naming the axis", "[tensor][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(a.sum(std::vector<int64_t>{2}), Catch::Contains("2") && Catch::Contains("(2, 3)"));
  REQUIRE_THROWS_WITH(a.max(std::vector<int64_t>{-3}), Catch::Contains("-3") && Catch::Contains("(2, 3)"));
  REQUIRE_THROWS_WITH(a.argmax(5), Catch::Contains("5"));
  REQUIRE_THROWS_WITH(a.softmax(2), Catch::Contains("2"));
  REQUIRE_THROWS_WITH(a.cumsum(-4), Catch::Contains("-4"));
  REQUIRE_THROWS_WITH(a.resolve_axis(2), Catch::Contains("axis") && Catch::Contains("2"));
  CHECK(a.resolve_axis(-1) == 1);
  CHECK(a.resolve_axis(-2) == 0);
  REQUIRE_THROWS(a.unsqueeze(4));
  REQUIRE_THROWS(a.flip({3}));
  REQUIRE_THROWS(a.transpose(0, 2));
}

TEST_CASE("bad permutations throw naming the order and shape", "[tensor][errors]") {
  Tensor a = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(a.permute({0, 0, 1}), Catch::Contains("(0, 0, 1)") && Catch::Contains("(2, 3, 4)"));
  REQUIRE_THROWS_WITH(a.permute({0, 1}), Catch::Contains("(0, 1)") && Catch::Contains("(2, 3, 4)"));
  REQUIRE_THROWS_WITH(a.permute({0, 1, 3}), Catch::Contains("(0, 1, 3)"));
}

TEST_CASE("other bad arguments throw clear errors", "[tensor][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(a.expand({4, 3}), Catch::Contains("(2, 3)") && Catch::Contains("(4, 3)"));
  REQUIRE_THROWS_WITH(a.shrink({{0, 3}, {0, 3}}), Catch::Contains("(2, 3)"));
  REQUIRE_THROWS(a.shrink({{0, 1}}));
  REQUIRE_THROWS(a.pad({{1, 1}}));
  REQUIRE_THROWS(a.pad({{-1, 0}, {0, 0}}));
  REQUIRE_THROWS_WITH(a.matmul(Tensor::zeros({4, 5})),
                      Catch::Contains("(2, 3)") && Catch::Contains("(4, 5)"));
  REQUIRE_THROWS_WITH(Tensor::from_data({1, 2, 3}, {2, 2}, DType::Float32), Catch::Contains("(2, 2)"));
  REQUIRE_THROWS_WITH(a.item(), Catch::Contains("(2, 3)"));
  REQUIRE_THROWS(Tensor::arange(0, 5, 0));
  auto index = [](int64_t i) { return Slice{true, i, std::nullopt, std::nullopt, std::nullopt}; };
  REQUIRE_THROWS(a.slice({index(2)}));
  REQUIRE_THROWS(a.slice({Slice{false, 0, std::nullopt, std::nullopt, 0}}));
  REQUIRE_THROWS(a.slice({index(0), index(0), index(0)}));
  // the tensor is still usable after an error
  check_values(a.add(Tensor::ones({2, 3})), A::filled({2, 3}, 1));
}
