// Shared helpers for the engine tests: plain C++ reference implementations that know nothing
// of the engine's internals (materialized arrays, movement ops on them, a UOp evaluator).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/uop.h"

// Failed checks print dtypes and ops by name.
namespace Catch {
template <> struct StringMaker<mg::DType> {
  static std::string convert(mg::DType d) { return mg::name(d); }
};
template <> struct StringMaker<mg::Ops> {
  static std::string convert(mg::Ops o) { return mg::name(o); }
};
} // namespace Catch

// The engine's shapes may be symbolic; the references here are plain numbers.
namespace mg {
inline bool operator==(const Shape& a, const std::vector<int64_t>& b) { return a == to_shape(b); }
} // namespace mg

namespace mgtest {

using IShape = std::vector<int64_t>; // plain numbers: the references know nothing of Variables
using Pairs = std::vector<std::pair<int64_t, int64_t>>;

inline int64_t numel(const IShape& s) {
  int64_t n = 1;
  for (auto d : s)
    n *= d;
  return n;
}

inline std::vector<int64_t> row_major_strides(const IShape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;)
    st[i - 1] = st[i] * s[i];
  return st;
}

inline int64_t numel(const mg::Shape& s) { return mg::prod(s); }
inline std::string str(const mg::Shape& s) { return mg::shape_str(s); }
inline std::string str(const IShape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); i++)
    os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

// Calls f(idx) for every multi-index of shape s in row-major order.
inline void for_each_index(const IShape& s, const std::function<void(const std::vector<int64_t>&)>& f) {
  if (numel(s) == 0) return;
  std::vector<int64_t> idx(s.size(), 0);
  while (true) {
    f(idx);
    size_t d = s.size();
    while (d > 0) {
      if (++idx[d - 1] < s[d - 1]) break;
      idx[d - 1] = 0;
      d--;
    }
    if (d == 0) return;
  }
}

// A materialized row-major n-d array.
template <class T> struct Arr {
  IShape shape;
  std::vector<T> data;

  Arr() = default;
  Arr(IShape s, std::vector<T> d) : shape(std::move(s)), data(std::move(d)) {
    if (static_cast<int64_t>(data.size()) != numel(shape)) throw std::logic_error("Arr: size mismatch");
  }
  template <class S>
  requires std::same_as<S, mg::Shape> Arr(const S& s, std::vector<T> d) : Arr(mg::to_ints(s), std::move(d)) {}
  static Arr filled(IShape s, T v) { return Arr(s, std::vector<T>(numel(s), v)); }
  int64_t flat(const std::vector<int64_t>& idx) const {
    int64_t f = 0;
    for (size_t i = 0; i < shape.size(); i++)
      f = f * shape[i] + idx[i];
    return f;
  }
  T& at(const std::vector<int64_t>& idx) { return data[flat(idx)]; }
  const T& at(const std::vector<int64_t>& idx) const { return data[flat(idx)]; }
};

// ---- movement ops on materialized arrays (the naive reference for views)

// An engine shape as plain numbers (the references take those).
inline IShape ints(const mg::Shape& s) { return mg::to_ints(s); }
inline std::vector<std::pair<mg::sint, mg::sint>> spairs(const Pairs& p) { return {p.begin(), p.end()}; }

template <class T> Arr<T> ref_reshape(const Arr<T>& a, const IShape& s) {
  if (numel(s) != numel(a.shape)) throw std::logic_error("ref_reshape: numel differs");
  return Arr<T>(s, a.data);
}

template <class T> Arr<T> ref_permute(const Arr<T>& a, const std::vector<int64_t>& order) {
  IShape s;
  for (auto o : order)
    s.push_back(a.shape[o]);
  Arr<T> r = Arr<T>::filled(s, T{});
  for_each_index(s, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(a.shape.size());
    for (size_t i = 0; i < order.size(); i++)
      src[order[i]] = idx[i];
    r.at(idx) = a.at(src);
  });
  return r;
}

// Broadcast dims of size 1 (same rank) to s.
template <class T> Arr<T> ref_expand(const Arr<T>& a, const IShape& s) {
  Arr<T> r = Arr<T>::filled(s, T{});
  for_each_index(s, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx);
    for (size_t i = 0; i < s.size(); i++)
      if (a.shape[i] == 1) src[i] = 0;
    r.at(idx) = a.at(src);
  });
  return r;
}

template <class T> Arr<T> ref_pad(const Arr<T>& a, const Pairs& p, T fill) {
  IShape s = a.shape;
  for (size_t i = 0; i < s.size(); i++)
    s[i] += p[i].first + p[i].second;
  Arr<T> r = Arr<T>::filled(s, fill);
  for_each_index(a.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> dst(idx);
    for (size_t i = 0; i < idx.size(); i++)
      dst[i] += p[i].first;
    r.at(dst) = a.at(idx);
  });
  return r;
}

template <class T> Arr<T> ref_shrink(const Arr<T>& a, const Pairs& p) {
  IShape s(a.shape.size());
  for (size_t i = 0; i < s.size(); i++)
    s[i] = p[i].second - p[i].first;
  Arr<T> r = Arr<T>::filled(s, T{});
  for_each_index(s, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx);
    for (size_t i = 0; i < idx.size(); i++)
      src[i] += p[i].first;
    r.at(idx) = a.at(src);
  });
  return r;
}

template <class T> Arr<T> ref_flip(const Arr<T>& a, const std::vector<bool>& axes) {
  Arr<T> r = a;
  for_each_index(a.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx);
    for (size_t i = 0; i < idx.size(); i++)
      if (axes[i]) src[i] = a.shape[i] - 1 - idx[i];
    r.at(idx) = a.at(src);
  });
  return r;
}

inline Pairs to_pairs(const std::vector<int64_t>& flat) {
  Pairs r;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    r.emplace_back(flat[i], flat[i + 1]);
  return r;
}

// ---- an independent evaluator for integer/bool UOp trees (C semantics: truncating / and %)

struct Evaluator {
  std::unordered_map<const mg::UOp*, int64_t> vars; // RANGE (or any leaf) -> value
  std::unordered_map<const mg::UOp*, int64_t> memo;

  static int64_t wrap(mg::DType dt, int64_t v) {
    switch (dt) {
    case mg::DType::Bool:
      return v != 0;
    case mg::DType::Int8:
      return static_cast<int8_t>(v);
    case mg::DType::Int16:
      return static_cast<int16_t>(v);
    case mg::DType::Int32:
      return static_cast<int32_t>(v);
    case mg::DType::UInt8:
      return static_cast<uint8_t>(v);
    case mg::DType::UInt16:
      return static_cast<uint16_t>(v);
    case mg::DType::UInt32:
      return static_cast<uint32_t>(v);
    default:
      return v;
    }
  }

  int64_t eval(const mg::UOp* u) {
    if (auto it = vars.find(u); it != vars.end()) return it->second;
    if (auto it = memo.find(u); it != memo.end()) return it->second;
    using mg::Ops;
    auto s = [&](size_t i) { return eval(u->src[i].get()); };
    int64_t r = 0;
    switch (u->op) {
    case Ops::CONST:
      r = static_cast<int64_t>(u->const_value());
      break;
    case Ops::RANGE:
      throw std::runtime_error("Evaluator: unbound RANGE");
    case Ops::ADD:
      r = s(0) + s(1);
      break;
    case Ops::SUB:
      r = s(0) - s(1);
      break;
    case Ops::MUL:
      r = s(0) * s(1);
      break;
    case Ops::NEG:
      r = -s(0);
      break;
    case Ops::IDIV: {
      int64_t b = s(1);
      if (b == 0) throw std::runtime_error("Evaluator: division by zero");
      r = s(0) / b;
      break;
    }
    case Ops::MOD: {
      int64_t b = s(1);
      if (b == 0) throw std::runtime_error("Evaluator: modulo by zero");
      r = s(0) % b;
      break;
    }
    case Ops::MAX:
      r = std::max(s(0), s(1));
      break;
    case Ops::CMPLT:
      r = s(0) < s(1);
      break;
    case Ops::CMPNE:
      r = s(0) != s(1);
      break;
    case Ops::AND:
      r = s(0) & s(1);
      break;
    case Ops::OR:
      r = s(0) | s(1);
      break;
    case Ops::XOR:
      r = s(0) ^ s(1);
      break;
    case Ops::SHL:
      r = s(0) << s(1);
      break;
    case Ops::SHR:
      r = s(0) >> s(1);
      break;
    case Ops::WHERE:
      r = s(0) ? s(1) : s(2);
      break;
    case Ops::CAST:
      r = s(0);
      break;
    default:
      throw std::runtime_error(std::string("Evaluator: unsupported op ") + mg::name(u->op));
    }
    r = wrap(u->dtype, r);
    memo[u] = r;
    return r;
  }
  int64_t eval(const mg::UOpRef& u) { return eval(u.get()); }
};

inline size_t node_count(const mg::UOpRef& u) { return mg::toposort(u.get()).size(); }

// A loop index in [0, n) over `axis`, and an int32 constant: the leaves of index math.
inline mg::UOpRef range(int64_t n, int64_t axis = 0) {
  return mg::UOp::make(mg::Ops::RANGE, mg::DType::Int32,
                       {mg::UOp::cconst(mg::DType::Int32, static_cast<double>(n))},
                       std::vector<int64_t>{axis, 0});
}
inline mg::UOpRef ci(double v) { return mg::UOp::cconst(mg::DType::Int32, v); }

} // namespace mgtest
