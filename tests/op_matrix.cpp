// Every primitive elementwise op, reduce and cast, on every dtype, run on one device and compared
// with a host loop written here in plain C++ (wrapping integers, IEEE floats, and the choices
// engine/codegen/semantics.h states), on edge values: 0, -0, ±inf, NaN, denormals, int min/max,
// shift amounts at the width. Inputs and outputs travel as raw bytes, so 64-bit integers are exact.
//   op_matrix DEVICE     prints the op x dtype matrix; exits 1 if any cell is wrong, or fails with
//                        an error that does not name what the device lacks
// A cell is "ok", "err" (the device refused, naming the dtype or op), "WRONG" or "-" (not an op
// of that dtype).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

using namespace mg;

namespace {

// One element: a float as a double, an integer as its 64-bit two's complement (sign-extended
// for signed types, zero-extended for unsigned).
struct V {
  double f = 0;
  uint64_t i = 0;
};

int bits(DType d) { return d == DType::Bool ? 1 : itemsize(d) * 8; }

// Wraps a 64-bit pattern into dtype d.
uint64_t wrap(DType d, uint64_t x) {
  int b = bits(d);
  if (d == DType::Bool) return x != 0;
  if (b == 64) return x;
  uint64_t m = (uint64_t{1} << b) - 1;
  x &= m;
  if (!is_unsigned(d) && (x >> (b - 1)) & 1) x |= ~m;
  return x;
}
int64_t sv(const V& v) { return static_cast<int64_t>(v.i); }
// Rounds a double to float dtype d.
double round_to(DType d, double x) {
  switch (d) {
  case DType::Float16:
    return static_cast<double>(static_cast<_Float16>(x));
  case DType::BFloat16:
    return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
  case DType::Float32:
    return static_cast<float>(x);
  default:
    return x;
  }
}
V F(DType d, double x) { return V{round_to(d, x), 0}; }
V I(DType d, uint64_t x) { return V{0, wrap(d, x)}; }

std::string encode(DType d, const std::vector<V>& vs) {
  std::string out;
  for (const V& v : vs) {
    char b[8];
    switch (d) {
    case DType::Float16: {
      _Float16 h = static_cast<_Float16>(v.f);
      std::memcpy(b, &h, 2);
      break;
    }
    case DType::BFloat16: {
      uint16_t h = f32_to_bf16(static_cast<float>(v.f));
      std::memcpy(b, &h, 2);
      break;
    }
    case DType::Float32: {
      float f = static_cast<float>(v.f);
      std::memcpy(b, &f, 4);
      break;
    }
    case DType::Float64:
      std::memcpy(b, &v.f, 8);
      break;
    default:
      std::memcpy(b, &v.i, 8); // little-endian: the low bytes first
    }
    out.append(b, static_cast<size_t>(itemsize(d)));
  }
  return out;
}

std::vector<V> decode(DType d, const std::string& s) {
  std::vector<V> out;
  size_t n = static_cast<size_t>(itemsize(d));
  for (size_t k = 0; k + n <= s.size(); k += n) {
    const char* p = s.data() + k;
    V v;
    if (d == DType::Float16) {
      _Float16 h;
      std::memcpy(&h, p, 2);
      v.f = static_cast<double>(h);
    } else if (d == DType::BFloat16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v.f = bf16_to_f32(h);
    } else if (d == DType::Float32) {
      float f;
      std::memcpy(&f, p, 4);
      v.f = f;
    } else if (d == DType::Float64) {
      std::memcpy(&v.f, p, 8);
    } else {
      uint64_t x = 0;
      std::memcpy(&x, p, n);
      v.i = wrap(d, x);
    }
    out.push_back(v);
  }
  return out;
}

double denorm_min(DType d) {
  switch (d) {
  case DType::Float16:
    return std::ldexp(1.0, -24);
  case DType::BFloat16:
    return std::ldexp(1.0, -133);
  case DType::Float32:
    return std::numeric_limits<float>::denorm_min();
  default:
    return std::numeric_limits<double>::denorm_min();
  }
}

double min_normal(DType d) {
  switch (d) {
  case DType::Float16:
    return std::ldexp(1.0, -14);
  case DType::Float64:
    return std::ldexp(1.0, -1022);
  default:
    return std::ldexp(1.0, -126);
  }
}

std::vector<V> edge_values(DType d) {
  std::vector<V> r;
  if (d == DType::Bool) return {I(d, 0), I(d, 1)};
  if (is_float(d)) {
    double inf = INFINITY;
    for (double x : {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.75, -100.7, 1e-3, 65504.0, 3e38, 1e300,
                     denorm_min(d), -denorm_min(d), inf, -inf, double(NAN)})
      r.push_back(F(d, x));
    return r;
  }
  int b = bits(d);
  uint64_t mx = is_unsigned(d) ? wrap(d, ~uint64_t{0}) : wrap(d, ~uint64_t{0} >> (65 - b));
  uint64_t mn = is_unsigned(d) ? 0 : wrap(d, uint64_t{1} << (b - 1));
  for (uint64_t x : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t(b - 1),
                     uint64_t(b), uint64_t(b + 1), uint64_t{100}, uint64_t(-1), uint64_t(-2), uint64_t(-7),
                     uint64_t(-100), mx, mx - 1, mn, mn + 1})
    r.push_back(I(d, x));
  return r;
}

// ---------------------------------------------------------------- the reference

enum class Tol { Exact, Rounded, Math }; // what the result may differ by (see close())

struct OpCase {
  Ops op;
  int arity;
  std::function<bool(DType)> applies;
  std::function<V(DType, const std::vector<V>&)> ref; // dtype of the inputs
  Tol tol = Tol::Exact;
};

bool floats(DType d) { return is_float(d); }
bool ints(DType d) { return is_int(d); }
bool numbers(DType d) { return d != DType::Bool; }
bool all(DType) { return true; }
bool ints_bools(DType d) { return !is_float(d); }

V fop(DType d, double x) { return F(d, x); }
bool less(DType d, const V& a, const V& b) {
  if (is_float(d)) return a.f < b.f;
  return is_unsigned(d) || d == DType::Bool ? a.i < b.i : sv(a) < sv(b);
}

V idiv(DType d, const V& a, const V& b) {
  // the quotient rounds to the dtype (the narrow floats compute in float32) before truncating
  if (is_float(d)) return F(d, std::trunc(round_to(itemsize(d) == 2 ? DType::Float32 : d, a.f / b.f)));
  if (b.i == 0) return I(d, 0);
  if (is_unsigned(d)) return I(d, a.i / b.i);
  if (sv(b) == -1) return I(d, 0 - a.i);
  return I(d, static_cast<uint64_t>(sv(a) / sv(b)));
}
V mod(DType d, const V& a, const V& b) {
  if (is_float(d)) return F(d, std::fmod(a.f, b.f));
  if (b.i == 0) return I(d, 0);
  if (is_unsigned(d)) return I(d, a.i % b.i);
  if (sv(b) == -1) return I(d, 0);
  return I(d, static_cast<uint64_t>(sv(a) % sv(b)));
}
V shift(DType d, bool left, const V& a, const V& n) {
  uint64_t amount = wrap(is_unsigned(d) ? d : DType::UInt64, n.i) &
                    (bits(d) == 64 ? ~uint64_t{0} : (uint64_t{1} << bits(d)) - 1);
  if (amount >= static_cast<uint64_t>(bits(d)))
    return left || is_unsigned(d) ? I(d, 0) : I(d, sv(a) < 0 ? ~uint64_t{0} : 0);
  if (left) return I(d, a.i << amount);
  return is_unsigned(d) ? I(d, a.i >> amount) : I(d, static_cast<uint64_t>(sv(a) >> amount));
}

std::vector<OpCase> op_cases() {
  using Vs = const std::vector<V>&;
  return {
      {Ops::NEG, 1, numbers, [](DType d, Vs v) { return is_float(d) ? fop(d, -v[0].f) : I(d, 0 - v[0].i); }},
      {Ops::EXP2, 1, floats, [](DType d, Vs v) { return fop(d, std::exp2(v[0].f)); }, Tol::Math},
      {Ops::LOG2, 1, floats, [](DType d, Vs v) { return fop(d, std::log2(v[0].f)); }, Tol::Math},
      {Ops::SIN, 1, floats, [](DType d, Vs v) { return fop(d, std::sin(v[0].f)); }, Tol::Math},
      {Ops::SQRT, 1, floats, [](DType d, Vs v) { return fop(d, std::sqrt(v[0].f)); }, Tol::Rounded},
      {Ops::RECIP, 1, floats, [](DType d, Vs v) { return fop(d, 1.0 / v[0].f); }, Tol::Rounded},
      {Ops::TRUNC, 1, numbers, [](DType d, Vs v) { return is_float(d) ? fop(d, std::trunc(v[0].f)) : v[0]; }},
      {Ops::ADD, 2, all,
       [](DType d, Vs v) {
         return is_float(d) ? fop(d, v[0].f + v[1].f)
                            : I(d, d == DType::Bool ? v[0].i | v[1].i : v[0].i + v[1].i);
       }},
      {Ops::SUB, 2, numbers,
       [](DType d, Vs v) { return is_float(d) ? fop(d, v[0].f - v[1].f) : I(d, v[0].i - v[1].i); }},
      {Ops::MUL, 2, all,
       [](DType d, Vs v) { return is_float(d) ? fop(d, v[0].f * v[1].f) : I(d, v[0].i * v[1].i); }},
      {Ops::FDIV, 2, floats, [](DType d, Vs v) { return fop(d, v[0].f / v[1].f); }, Tol::Rounded},
      {Ops::IDIV, 2, numbers, [](DType d, Vs v) { return idiv(d, v[0], v[1]); }},
      {Ops::MOD, 2, numbers, [](DType d, Vs v) { return mod(d, v[0], v[1]); }},
      {Ops::MAX, 2, all,
       [](DType d, Vs v) {
         if (is_float(d) && (std::isnan(v[0].f) || std::isnan(v[1].f))) return F(d, NAN);
         return less(d, v[0], v[1]) ? v[1] : v[0];
       }},
      {Ops::POW, 2, floats, [](DType d, Vs v) { return fop(d, std::pow(v[0].f, v[1].f)); }, Tol::Math},
      {Ops::CMPLT, 2, all, [](DType d, Vs v) { return I(DType::Bool, less(d, v[0], v[1])); }},
      {Ops::CMPNE, 2, all,
       [](DType d, Vs v) { return I(DType::Bool, is_float(d) ? v[0].f != v[1].f : v[0].i != v[1].i); }},
      {Ops::AND, 2, ints_bools, [](DType d, Vs v) { return I(d, v[0].i & v[1].i); }},
      {Ops::OR, 2, ints_bools, [](DType d, Vs v) { return I(d, v[0].i | v[1].i); }},
      {Ops::XOR, 2, ints_bools, [](DType d, Vs v) { return I(d, v[0].i ^ v[1].i); }},
      {Ops::SHL, 2, ints, [](DType d, Vs v) { return shift(d, true, v[0], v[1]); }},
      {Ops::SHR, 2, ints, [](DType d, Vs v) { return shift(d, false, v[0], v[1]); }},
      {Ops::WHERE, 3, all, [](DType d, Vs v) { return v[0].i ? v[1] : v[2]; }},
  };
}

// A float cast to an integer saturates, NaN gives 0 (engine/codegen/semantics.h).
V cast_ref(DType from, DType to, const V& v) {
  if (to == DType::Bool) return I(to, is_float(from) ? v.f != 0 : v.i != 0);
  if (is_float(to)) {
    if (is_float(from)) return F(to, v.f);
    // an integer to a float rounds once: through long double (64-bit mantissa) it is exact first
    long double x = is_unsigned(from) || from == DType::Bool ? static_cast<long double>(v.i)
                                                             : static_cast<long double>(sv(v));
    switch (to) {
    case DType::Float64:
      return V{static_cast<double>(x), 0};
    case DType::Float32:
      return V{static_cast<float>(x), 0};
    case DType::Float16:
      return V{static_cast<double>(static_cast<_Float16>(static_cast<float>(x))), 0};
    default:
      return F(to, static_cast<float>(x));
    }
  }
  if (!is_float(from)) return I(to, v.i);
  double x = v.f;
  if (std::isnan(x)) return I(to, 0);
  int b = bits(to);
  if (is_unsigned(to)) {
    if (x <= 0) return I(to, 0);
    if (x >= std::ldexp(1.0, b)) return I(to, ~uint64_t{0});
    return I(to, static_cast<uint64_t>(std::trunc(x)));
  }
  if (x <= -std::ldexp(1.0, b - 1)) return I(to, uint64_t{1} << (b - 1));
  if (x >= std::ldexp(1.0, b - 1)) return I(to, ~uint64_t{0} >> (65 - b));
  return I(to, static_cast<uint64_t>(static_cast<int64_t>(std::trunc(x))));
}

// ---------------------------------------------------------------- comparing

double ulp_rel(DType d) {
  switch (d) {
  case DType::Float16:
    return std::ldexp(1.0, -10);
  case DType::BFloat16:
    return std::ldexp(1.0, -7);
  case DType::Float32:
    return std::ldexp(1.0, -23);
  default:
    return std::ldexp(1.0, -52);
  }
}

bool close(DType d, const V& got, const V& want, Tol tol) {
  if (!is_float(d)) return got.i == want.i;
  double g = got.f, w = want.f;
  if (std::isnan(w)) return std::isnan(g);
  if (std::isnan(g)) return false;
  if (std::isinf(w) || std::isinf(g)) return g == w;
  if (g == w) return true; // -0 equals 0: no op here has a sign of zero that matters
  // the two narrow floats are computed in float32 then rounded: one rounding of slack
  double rel = tol == Tol::Exact ? (itemsize(d) == 2 ? 1 : 0) : tol == Tol::Rounded ? 4 : 64;
  double slack = rel * ulp_rel(d) * std::fabs(w);
  if (tol == Tol::Math && d == DType::Float64)
    slack = std::ldexp(std::fabs(w), -40);                  // pow's exponent amplifies
  if (tol == Tol::Math) slack += 64 * ulp_rel(d);           // sin near its zeros, log2 near 1
  if (std::fabs(w) < min_normal(d)) slack += denorm_min(d); // a denormal result may be flushed
  return std::fabs(g - w) <= slack;
}

std::string show(DType d, const V& v) {
  char b[64];
  if (is_float(d))
    std::snprintf(b, sizeof b, "%.9g", v.f);
  else if (is_unsigned(d) || d == DType::Bool)
    std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(v.i));
  else
    std::snprintf(b, sizeof b, "%lld", static_cast<long long>(sv(v)));
  return b;
}

struct Cell {
  std::string mark = "-";
  std::string detail;
};

const std::vector<DType> kDTypes{DType::Bool,   DType::Int8,    DType::UInt8,    DType::Int16,
                                 DType::UInt16, DType::Int32,   DType::UInt32,   DType::Int64,
                                 DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32,
                                 DType::Float64};

Tensor input(const std::string& dev, DType d, const std::vector<V>& vs) {
  std::string bytes = encode(d, vs);
  return Tensor::from_bytes(bytes.data(), bytes.size(), {static_cast<int64_t>(vs.size())}, d, dev);
}

// Elements left uncompared, and why (printed under the matrix).
std::map<std::string, int> g_skipped;

// Runs `make` on the device and compares element by element with `want`; `skip` names why an
// element is not compared (or "").
Cell run(const std::string& dev, DType out, const std::function<Tensor()>& make, const std::vector<V>& want,
         const std::function<std::string(size_t)>& args, Tol tol, const std::string& dtype_name,
         const std::function<std::string(size_t)>& skip = nullptr) {
  Cell c;
  try {
    Tensor t = make();
    std::vector<V> got = decode(out, t.to_bytes());
    int bad = 0;
    for (size_t k = 0; k < want.size(); k++)
      if (std::string why = skip ? skip(k) : ""; !why.empty())
        g_skipped[why]++;
      else if (!close(out, got[k], want[k], tol) && bad++ == 0)
        c.detail = args(k) + " gave " + show(out, got[k]) + ", want " + show(out, want[k]);
    c.mark = bad ? "WRONG" : "ok";
    if (bad) c.detail += " (" + std::to_string(bad) + " of " + std::to_string(want.size()) + " wrong)";
  } catch (const std::exception& e) {
    c.detail = e.what();
    // a clear refusal names what the device lacks
    c.mark = c.detail.find(dtype_name) != std::string::npos ? "err" : "FAIL";
  }
  return c;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: op_matrix DEVICE\n");
    return 2;
  }
  std::string dev = argv[1];
  try {
    if (std::string why = get_device(dev).unavailable(); !why.empty()) {
      std::printf("SKIPPED: %s cannot run here: %s\n", dev.c_str(), why.c_str());
      return 0;
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  // a device that flushes denormals (a GPU's float model) gives 0 for the smallest one times 1
  bool flushes = false;
  try {
    std::vector<V> one{F(DType::Float32, denorm_min(DType::Float32))};
    Tensor x = input(dev, DType::Float32, one);
    flushes =
        decode(DType::Float32, Tensor(alu(Ops::MUL, {x.uop, UOp::cconst(DType::Float32, 1.0)})).to_bytes())[0]
            .f == 0;
  } catch (const std::exception&) {
  }
  std::map<std::string, std::map<DType, Cell>> rows;
  std::vector<std::string> order;
  auto put = [&](const std::string& row, DType d, Cell c) {
    if (!rows.count(row)) order.push_back(row);
    rows[row][d] = std::move(c);
  };

  for (const OpCase& oc : op_cases()) {
    for (DType d : kDTypes) {
      if (!oc.applies(d)) {
        put(name(oc.op), d, Cell{});
        continue;
      }
      std::vector<V> e = edge_values(d);
      std::vector<std::vector<V>> cols(static_cast<size_t>(oc.arity));
      std::vector<V> want;
      std::vector<V> conds{I(DType::Bool, 1), I(DType::Bool, 0)};
      size_t n = oc.arity == 1 ? e.size() : e.size() * e.size() * (oc.arity == 3 ? 2 : 1);
      for (size_t k = 0; k < n; k++) {
        std::vector<V> in;
        if (oc.arity == 1)
          in = {e[k]};
        else if (oc.arity == 2)
          in = {e[k / e.size()], e[k % e.size()]};
        else
          in = {conds[k % 2], e[(k / 2) / e.size()], e[(k / 2) % e.size()]};
        for (size_t j = 0; j < in.size(); j++)
          cols[j].push_back(in[j]);
        want.push_back(oc.ref(d, in));
      }
      DType out = oc.op == Ops::CMPLT || oc.op == Ops::CMPNE ? DType::Bool : d;
      auto make = [&] {
        std::vector<UOpRef> src;
        for (size_t j = 0; j < cols.size(); j++)
          src.push_back(input(dev, oc.op == Ops::WHERE && j == 0 ? DType::Bool : d, cols[j]).uop);
        Tensor t(alu(oc.op, src));
        return t.realize();
      };
      auto args = [&](size_t k) {
        std::string s = std::string(name(oc.op)) + "(";
        for (size_t j = 0; j < cols.size(); j++)
          s += (j ? ", " : "") + show(oc.op == Ops::WHERE && j == 0 ? DType::Bool : d, cols[j][k]);
        return s + ")";
      };
      auto skip = [&](size_t k) -> std::string {
        for (size_t j = 0; j < cols.size(); j++)
          if (is_float(d) && flushes && cols[j][k].f != 0 && std::fabs(cols[j][k].f) < min_normal(d))
            return dev + " flushes denormals to zero (so denormal inputs are not compared)";
        if (oc.op == Ops::SIN && dev == "VULKAN" && std::fabs(cols[0][k].f) > 1e5)
          return "sin past |x| = 1e5 is not compared (GLSL leaves its precision open; float64's "
                 "mg_sind reduces by pi/2 in two parts)";
        return "";
      };
      put(name(oc.op), d, run(dev, out, make, want, args, oc.tol, name(d), skip));
    }
  }

  // each integer op's result used inside an expression before it is stored (C promotes narrow
  // integers to int: a result must still wrap as its dtype): CMPNE(op(a, b), reference) is false
  for (const OpCase& oc : op_cases()) {
    if (oc.arity > 2 || oc.op == Ops::CMPLT || oc.op == Ops::CMPNE) continue;
    std::string row = std::string(name(oc.op)) + " in an expr";
    for (DType d : kDTypes) {
      if (!oc.applies(d) || !is_int(d)) {
        put(row, d, Cell{});
        continue;
      }
      std::vector<V> e = edge_values(d);
      std::vector<std::vector<V>> cols(static_cast<size_t>(oc.arity));
      std::vector<V> ref, want;
      for (size_t k = 0; k < (oc.arity == 1 ? e.size() : e.size() * e.size()); k++) {
        std::vector<V> in =
            oc.arity == 1 ? std::vector<V>{e[k]} : std::vector<V>{e[k / e.size()], e[k % e.size()]};
        for (size_t j = 0; j < in.size(); j++)
          cols[j].push_back(in[j]);
        ref.push_back(oc.ref(d, in));
        want.push_back(I(DType::Bool, 0));
      }
      auto make = [&] {
        std::vector<UOpRef> src;
        for (auto& c : cols)
          src.push_back(input(dev, d, c).uop);
        return Tensor(alu(Ops::CMPNE, {alu(oc.op, src), input(dev, d, ref).uop})).realize();
      };
      auto args = [&](size_t k) {
        std::string s = std::string(name(oc.op)) + "(";
        for (size_t j = 0; j < cols.size(); j++)
          s += (j ? ", " : "") + show(d, cols[j][k]);
        return s + ") != " + show(d, ref[k]);
      };
      put(row, d, run(dev, DType::Bool, make, want, args, Tol::Exact, name(d)));
    }
  }

  // reduces: each row of values reduced to one
  std::function<V(DType, const std::vector<V>&)> max_ref;
  for (const OpCase& oc : op_cases())
    if (oc.op == Ops::MAX) max_ref = oc.ref;
  for (Ops rop : {Ops::ADD, Ops::MAX}) {
    std::string row = std::string("REDUCE ") + name(rop);
    for (DType d : kDTypes) {
      std::vector<std::vector<V>> sets;
      if (is_float(d)) {
        auto f = [&](std::initializer_list<double> xs) {
          std::vector<V> r;
          for (double x : xs)
            r.push_back(F(d, x));
          return r;
        };
        sets = {f({1, 2.5, -3, 0.5, 8, -0.25, 100, 7}),
                f({1, INFINITY, 2, 3}),
                f({INFINITY, -INFINITY, 1, 0}),
                f({NAN, 1, 2, -INFINITY}),
                f({-INFINITY, -INFINITY}),
                f({-0.0, -0.0, -0.0}),
                f({denorm_min(d), denorm_min(d), 0})};
      } else {
        std::vector<V> e = edge_values(d);
        sets = {e};
        for (size_t k = 0; k + 1 < e.size(); k++)
          sets.push_back({e[k], e[k + 1], e[(k * 7) % e.size()]});
      }
      std::vector<V> want;
      for (auto& s : sets) {
        V acc = s[0];
        for (size_t k = 1; k < s.size(); k++) {
          if (rop == Ops::MAX)
            acc = max_ref(d, {acc, s[k]});
          else
            acc =
                is_float(d) ? V{acc.f + s[k].f, 0} : I(d, d == DType::Bool ? acc.i | s[k].i : acc.i + s[k].i);
        }
        if (is_float(d)) acc.f = round_to(d, acc.f);
        want.push_back(acc);
      }
      auto make = [&] {
        std::vector<Tensor> parts;
        for (auto& s : sets)
          parts.push_back(
              Tensor(UOp::make(Ops::REDUCE_AXIS, d, {input(dev, d, s).uop}, ReduceArg{rop, {0}})));
        std::string bytes;
        for (auto& p : parts)
          bytes += p.to_bytes();
        return Tensor::from_bytes(bytes.data(), bytes.size(), {static_cast<int64_t>(parts.size())}, d, dev);
      };
      auto args = [&](size_t k) {
        std::string s = row + "(";
        for (size_t j = 0; j < sets[k].size(); j++)
          s += (j ? ", " : "") + show(d, sets[k][j]);
        return s + ")";
      };
      put(row, d, run(dev, d, make, want, args, Tol::Exact, name(d)));
    }
  }

  // casts: every dtype to every dtype
  for (DType to : kDTypes) {
    std::string row = std::string("CAST to ") + name(to);
    for (DType from : kDTypes) {
      std::vector<V> e = edge_values(from), want;
      for (const V& v : e)
        want.push_back(cast_ref(from, to, v));
      auto make = [&] { return Tensor(UOp::make(Ops::CAST, to, {input(dev, from, e).uop})).realize(); };
      auto args = [&](size_t k) { return std::string(name(from)) + " " + show(from, e[k]); };
      Cell c = run(dev, to, make, want, args, Tol::Exact, name(from));
      if (c.mark == "FAIL" && c.detail.find(name(to)) != std::string::npos) c.mark = "err";
      put(row, from, c);
    }
  }

  // bitcasts: every pair of one size (bool has no bits to reinterpret); the reference is the bytes
  // read as the other type
  for (DType to : kDTypes) {
    if (to == DType::Bool) continue;
    std::string row = std::string("BITCAST to ") + name(to);
    for (DType from : kDTypes) {
      if (from == DType::Bool || from == to || itemsize(from) != itemsize(to)) {
        put(row, from, Cell{});
        continue;
      }
      std::vector<V> e = edge_values(from), want = decode(to, encode(from, e));
      auto make = [&] {
        Tensor x = input(dev, from, e);
        Tensor y = x.add(Tensor::full(x.shape(), 0, from)); // a computed value, not a buffer
        return Tensor(UOp::make(Ops::BITCAST, to, {y.uop})).realize();
      };
      auto args = [&](size_t k) { return std::string(name(from)) + " " + show(from, e[k]); };
      // NaN payloads and -0 + 0 may change through the ADD: compare bits of what went in
      auto skip = [&](size_t k) -> std::string {
        return is_float(from) && (std::isnan(e[k].f) || e[k].f == 0)
                   ? "BITCAST of NaN and -0 after an ADD (bits not fixed)"
                   : "";
      };
      Cell c = run(dev, to, make, want, args, Tol::Exact, name(from), skip);
      put(row, from, c);
    }
  }

  // the matrix, then what went wrong
  std::printf("op_matrix on %s: rows are ops, columns the input dtype\n%-16s", dev.c_str(), "");
  for (DType d : kDTypes)
    std::printf(" %-8.8s", name(d));
  std::printf("\n");
  int wrong = 0, failed = 0, ok = 0, refused = 0;
  std::vector<std::string> notes;
  for (auto& row : order) {
    std::printf("%-16s", row.c_str());
    for (DType d : kDTypes) {
      const Cell& c = rows[row][d];
      std::printf(" %-8s", c.mark.c_str());
      if (c.mark == "WRONG") wrong++;
      if (c.mark == "FAIL") failed++;
      if (c.mark == "ok") ok++;
      if (c.mark == "err") refused++;
      if (!c.detail.empty() && c.mark != "ok")
        notes.push_back(c.mark + " " + row + " " + name(d) + ": " + c.detail);
    }
    std::printf("\n");
  }
  for (auto& n : notes)
    std::printf("%s\n", n.c_str());
  for (auto& [why, n] : g_skipped)
    std::printf("not compared: %d elements: %s\n", n, why.c_str());
  std::printf("%d ok, %d refused with a clear error, %d wrong, %d failed otherwise\n", ok, refused, wrong,
              failed);
  return wrong || failed ? 1 : 0;
}
