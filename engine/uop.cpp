#include "engine/uop.h"
#include "engine/errors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/device.h"
#include "engine/shapetracker.h"

namespace mg {

namespace {
// The hash-consing table: content hash -> live nodes with that hash.
struct Table {
  std::unordered_multimap<size_t, std::pair<const UOp*, std::__weak_ptr<const UOp, __gnu_cxx::_S_single>>>
      map;
};
Table& table() {
  static Table* t = new Table(); // never destroyed: UOps may outlive static destruction order
  return *t;
}

Shape infer_shape(Ops op, const std::vector<UOpRef>& src, const Arg& arg, bool& has) {
  has = false;
  auto first_shaped = [&]() -> const UOp* {
    for (auto& s : src)
      if (s->has_shape) return s.get();
    return nullptr;
  };
  if (op == Ops::CONST) {
    has = src.empty(); // a CONST with a VIEW source lives in a kernel AST
    return {};
  }
  if (op == Ops::BUFFER) {
    has = true;
    return {static_cast<int64_t>(buffer_size(*std::get<std::shared_ptr<Buffer>>(arg)))};
  }
  if (src.empty()) return {};
  const UOp* s = first_shaped();
  if (!s) return {};
  has = true;
  const auto& in = s->shape;
  switch (op) {
  case Ops::RESHAPE:
  case Ops::EXPAND:
    return std::get<Shape>(arg);
  case Ops::PERMUTE: {
    auto& p = std::get<std::vector<int64_t>>(arg);
    Shape out;
    for (auto i : p)
      out.push_back(in[i]);
    return out;
  }
  case Ops::PAD: {
    auto& p = std::get<Shape>(arg);
    Shape out = in;
    for (size_t i = 0; i < in.size(); i++)
      out[i] = out[i] + p[2 * i] + p[2 * i + 1];
    return out;
  }
  case Ops::SHRINK: {
    auto& p = std::get<Shape>(arg);
    Shape out = in;
    for (size_t i = 0; i < in.size(); i++)
      out[i] = p[2 * i + 1] - p[2 * i];
    return out;
  }
  case Ops::REDUCE_AXIS: {
    Shape out = in;
    for (auto a : std::get<ReduceArg>(arg).axes)
      if (a < static_cast<int64_t>(out.size())) out[a] = 1;
    return out;
  }
  case Ops::SINK:
    has = false;
    return {};
  default:
    return in;
  }
}
} // namespace

UOpRef UOp::unique_tag() {
  static int64_t serial = 0;
  return cconst(DType::Int64, static_cast<double>(++serial));
}

uint64_t& UOp::mutation_epoch() {
  static uint64_t e = 1;
  return e;
}

size_t hash_arg(const Arg& a) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return 0;
        else if constexpr (std::is_same_v<T, int64_t>)
          return std::hash<int64_t>{}(v);
        else if constexpr (std::is_same_v<T, double>) {
          uint64_t bits;
          std::memcpy(&bits, &v, 8);
          return std::hash<uint64_t>{}(bits) ^ 0x55;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          size_t h = 7;
          for (auto x : v)
            h = hash_mix(h, std::hash<int64_t>{}(x));
          return h;
        } else if constexpr (std::is_same_v<T, ReduceArg>) {
          size_t h = static_cast<size_t>(v.op) * 31;
          for (auto x : v.axes)
            h = hash_mix(h, std::hash<int64_t>{}(x));
          return h;
        } else if constexpr (std::is_same_v<T, std::string>)
          return std::hash<std::string>{}(v);
        else if constexpr (std::is_same_v<T, std::shared_ptr<const ShapeTracker>>)
          return v->hash();
        else if constexpr (std::is_same_v<T, VarArg>)
          return hash_mix(std::hash<std::string>{}(v.name),
                          hash_mix(std::hash<int64_t>{}(v.lo), std::hash<int64_t>{}(v.hi)));
        else if constexpr (std::is_same_v<T, Shape>) {
          size_t h = 11;
          for (auto& x : v)
            h = hash_mix(h, x.hash());
          return h;
        } else
          return std::hash<const void*>{}(v.get());
      },
      a);
}

bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<double>(&a)) { // bitwise, so NaN==NaN and -0 != 0
    double y = std::get<double>(b);
    return std::memcmp(x, &y, 8) == 0;
  }
  if (auto* x = std::get_if<std::shared_ptr<const ShapeTracker>>(&a))
    return **x == *std::get<std::shared_ptr<const ShapeTracker>>(b);
  return a == b;
}

UOp::UOp(Ops op, DType dtype, std::vector<UOpRef> src, Arg arg, size_t hash)
    : op(op), dtype(dtype), src(std::move(src)), arg(std::move(arg)), hash(hash) {}

UOpRef UOp::make(Ops op, DType dtype, std::vector<UOpRef> src, Arg arg) {
  if (int a = info(op).arity; a != kAny && static_cast<size_t>(a) != src.size())
    internal_error(std::string(name(op)) + " takes " + std::to_string(a) + " sources, got " +
                   std::to_string(src.size()));
  size_t h = hash_mix(static_cast<size_t>(op) * 1315423911u, static_cast<size_t>(dtype));
  for (auto& s : src) // structural: equal graphs hash alike in every run (caches key on it)
    h = hash_mix(h, s->hash);
  h = hash_mix(h, hash_arg(arg));
  auto& t = table();
  auto [lo, hi] = t.map.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const UOp* u = it->second.first;
    if (u->op != op || u->dtype != dtype || u->src != src || !arg_equal(u->arg, arg)) continue;
    if (auto sp = it->second.second.lock()) return sp;
  }
  auto node = std::__make_shared<UOp, __gnu_cxx::_S_single>(op, dtype, std::move(src), std::move(arg), h);
  node->shape = infer_shape(op, node->src, node->arg, node->has_shape);
  t.map.emplace(h, std::make_pair(node.get(), std::__weak_ptr<const UOp, __gnu_cxx::_S_single>(node)));
  return node;
}

UOp::~UOp() {
  auto& t = table();
  auto [lo, hi] = t.map.equal_range(hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second.first == this) {
      t.map.erase(it);
      break;
    }
  // Free long chains iteratively: a recursive release of a 100k-op graph would overflow the stack.
  static thread_local bool draining = false;
  static thread_local std::vector<UOpRef> pending;
  for (auto& s : src)
    pending.push_back(std::move(s));
  if (realized) pending.push_back(std::move(realized));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    UOpRef x = std::move(pending.back());
    pending.pop_back();
  }
  draining = false;
}

size_t live_uops() { return table().map.size(); }

double truncate_to(DType dt, double v) {
  if (!is_float(dt) && !std::isfinite(v)) return 0; // no integer holds nan or inf
  switch (dt) {
  case DType::Bool:
    return v != 0 ? 1 : 0;
  case DType::Int8:
    return static_cast<int8_t>(static_cast<int64_t>(v));
  case DType::UInt8:
    return static_cast<uint8_t>(static_cast<int64_t>(v));
  case DType::Int16:
    return static_cast<int16_t>(static_cast<int64_t>(v));
  case DType::UInt16:
    return static_cast<uint16_t>(static_cast<int64_t>(v));
  case DType::Int32:
    return static_cast<int32_t>(static_cast<int64_t>(v));
  case DType::UInt32:
    return static_cast<uint32_t>(static_cast<int64_t>(v));
  case DType::Int64:
    return static_cast<double>(static_cast<int64_t>(v));
  case DType::UInt64:
    return v < 0 ? static_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(v))) : std::trunc(v);
  case DType::Float32:
    return static_cast<float>(v);
  case DType::Float16:
    return static_cast<double>(static_cast<_Float16>(v));
  case DType::BFloat16:
    return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
  default:
    return v;
  }
}

UOpRef cast_const(const UOp& c, DType to) {
  DType from = c.dtype;
  if (!is_float(to) && !is_float(from)) return UOp::cconst_bits(to, c.const_bits()); // wraps
  double v = c.const_value();
  if (is_float(from) && is_int(to)) { // saturating, as pm_semantics; NaN gives 0
    int bits = itemsize(to) * 8;
    bool un = is_unsigned(to);
    if (std::isnan(v)) return UOp::cconst_bits(to, 0);
    if (v <= (un ? 0.0 : -std::ldexp(1.0, bits - 1)))
      return UOp::cconst_bits(to, un ? 0 : INT64_MIN >> (64 - bits));
    if (v >= std::ldexp(1.0, un ? bits : bits - 1))
      return UOp::cconst_bits(to, un ? -1 : INT64_MAX >> (64 - bits));
    v = std::trunc(v);
  }
  return UOp::cconst(to, v);
}

int64_t wrap_bits(DType dt, int64_t x) {
  if (dt == DType::Bool) return x != 0;
  int b = itemsize(dt) * 8;
  if (b >= 64) return x;
  uint64_t m = (uint64_t{1} << b) - 1, u = static_cast<uint64_t>(x) & m;
  if (!is_unsigned(dt) && (u >> (b - 1)) & 1) u |= ~m;
  return static_cast<int64_t>(u);
}

int64_t int_bits(DType dt, double v) {
  if (!std::isfinite(v)) return 0;
  if (dt == DType::Bool) return v != 0;
  constexpr double two63 = 9223372036854775808.0, two64 = 18446744073709551616.0;
  if (dt == DType::UInt64 && v >= two64) return -1; // uint64's max reads as 2^64 in a double
  v = std::trunc(v);
  if (v >= two63 || v < -two63) { // wraps modulo 2^64, done in doubles (exact for powers of two)
    double m = std::fmod(v, two64);
    if (m < 0) m += two64;
    return wrap_bits(dt, static_cast<int64_t>(static_cast<uint64_t>(m)));
  }
  return wrap_bits(dt, static_cast<int64_t>(v));
}

UOpRef UOp::cconst(DType dtype, double v) {
  if (is_float(dtype)) return make(Ops::CONST, dtype, {}, truncate_to(dtype, v));
  return make(Ops::CONST, dtype, {}, int_bits(dtype, v));
}
UOpRef UOp::cconst_bits(DType dtype, int64_t bits) {
  if (is_float(dtype)) internal_error("cconst_bits of a float");
  return make(Ops::CONST, dtype, {}, wrap_bits(dtype, bits));
}
int64_t UOp::const_bits() const {
  if (auto* d = std::get_if<double>(&arg)) return int_bits(dtype, *d);
  return std::get<int64_t>(arg);
}
UOpRef UOp::cconst_like(const UOpRef& x, double v) { return cconst(x->dtype, v); }

double UOp::const_value() const {
  if (auto* d = std::get_if<double>(&arg)) return *d;
  int64_t b = std::get<int64_t>(arg);
  return dtype == DType::UInt64 ? static_cast<double>(static_cast<uint64_t>(b)) : static_cast<double>(b);
}

int64_t UOp::numel() const { return prod(shape); }
int64_t UOp::max_numel() const { return mg::max_numel(shape); }

UOpRef UOp::replace_src(std::vector<UOpRef> s) const { return make(op, dtype, std::move(s), arg); }

double exec_alu(Ops op, DType dt, const std::vector<double>& v) {
  bool fl = is_float(dt);
  auto I = [](double x) { return static_cast<int64_t>(x); };
  double r = 0;
  switch (op) {
  case Ops::NEG:
    r = -v[0];
    break;
  case Ops::EXP2:
    r = std::exp2(v[0]);
    break;
  case Ops::LOG2:
    r = std::log2(v[0]);
    break;
  case Ops::SIN:
    r = std::sin(v[0]);
    break;
  case Ops::SQRT:
    r = std::sqrt(v[0]);
    break;
  case Ops::TRUNC:
    r = std::trunc(v[0]);
    break;
  case Ops::RECIP:
    r = 1.0 / v[0];
    break;
  case Ops::CAST:
    r = v[0];
    break;
  case Ops::ADD:
    r = v[0] + v[1];
    break;
  case Ops::SUB:
    r = v[0] - v[1];
    break;
  case Ops::MUL:
    r = v[0] * v[1];
    break;
  case Ops::IDIV: // as pm_semantics decides: x // 0 is 0, x // -1 is -x
    if (fl)
      r = std::trunc(v[0] / v[1]);
    else
      r = v[1] == 0 ? 0 : v[1] == -1 ? -v[0] : static_cast<double>(I(v[0]) / I(v[1]));
    break;
  case Ops::MOD:
    if (fl)
      r = std::fmod(v[0], v[1]);
    else
      r = v[1] == 0 || v[1] == -1 ? 0 : static_cast<double>(I(v[0]) % I(v[1]));
    break;
  case Ops::MAX:
    r = std::isnan(v[0]) || std::isnan(v[1]) ? NAN : std::max(v[0], v[1]);
    break;
  case Ops::FDIV:
    r = v[0] / v[1];
    break;
  case Ops::POW:
    r = std::pow(v[0], v[1]);
    break;
  case Ops::CMPLT:
    return v[0] < v[1];
  case Ops::CMPNE:
    return v[0] != v[1];
  case Ops::AND:
    r = static_cast<double>(I(v[0]) & I(v[1]));
    break;
  case Ops::OR:
    r = static_cast<double>(I(v[0]) | I(v[1]));
    break;
  case Ops::XOR:
    r = static_cast<double>(I(v[0]) ^ I(v[1]));
    break;
  case Ops::SHL: // past the width: what shifting one bit at a time gives (pm_semantics)
  case Ops::SHR: {
    uint64_t n = static_cast<uint64_t>(I(v[1])), bits = static_cast<uint64_t>(itemsize(dt)) * 8;
    if (op == Ops::SHL)
      r = n >= bits ? 0 : static_cast<double>(static_cast<uint64_t>(I(v[0])) << n);
    else
      r = n >= bits ? (v[0] < 0 ? -1 : 0) : static_cast<double>(I(v[0]) >> n);
    break;
  }
  case Ops::WHERE:
    r = v[0] != 0 ? v[1] : v[2];
    break;
  default:
    internal_error(std::string("exec_alu of ") + name(op));
  }
  return truncate_to(dt, r);
}

double UOp::vmin() const {
  if (!range_) {
    double lo = dtype_min(dtype), hi = dtype_max(dtype);
    auto one = [&](double a, double b) { lo = a, hi = b; };
    if (op == Ops::CONST)
      one(const_value(), const_value());
    else if (op == Ops::DEFINE_VAR)
      one(static_cast<double>(var().lo), static_cast<double>(var().hi));
    else if (op == Ops::BIND) // its value is a parameter of the kernel, not part of the code
      one(src[0]->vmin(), src[0]->vmax());
    else if (op == Ops::RANGE || op == Ops::SPECIAL)
      one(0, src[0]->vmax() - 1);
    else if (op == Ops::ADD && !is_float(dtype))
      one(src[0]->vmin() + src[1]->vmin(), src[0]->vmax() + src[1]->vmax());
    else if (op == Ops::SUB && !is_float(dtype))
      one(src[0]->vmin() - src[1]->vmax(), src[0]->vmax() - src[1]->vmin());
    else if (op == Ops::NEG && !is_float(dtype))
      one(-src[0]->vmax(), -src[0]->vmin());
    else if (op == Ops::MUL && !is_float(dtype)) {
      double c[4] = {src[0]->vmin() * src[1]->vmin(), src[0]->vmin() * src[1]->vmax(),
                     src[0]->vmax() * src[1]->vmin(), src[0]->vmax() * src[1]->vmax()};
      one(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
    } else if (op == Ops::IDIV && !is_float(dtype) && src[1]->op == Ops::CONST && src[1]->const_value() > 0 &&
               src[0]->vmin() >= 0) {
      double c = src[1]->const_value();
      one(std::floor(src[0]->vmin() / c), std::floor(src[0]->vmax() / c));
    } else if (op == Ops::MOD && !is_float(dtype) && src[1]->op == Ops::CONST && src[1]->const_value() > 0) {
      double c = src[1]->const_value();
      if (src[0]->vmin() >= 0)
        one(0, std::min(c - 1, src[0]->vmax()));
      else
        one(-(c - 1), c - 1);
    } else if (op == Ops::MAX)
      one(std::max(src[0]->vmin(), src[1]->vmin()), std::max(src[0]->vmax(), src[1]->vmax()));
    else if (op == Ops::CMPLT) {
      if (src[0]->vmax() < src[1]->vmin())
        one(1, 1);
      else if (src[0]->vmin() >= src[1]->vmax())
        one(0, 0);
      else
        one(0, 1);
    } else if (op == Ops::CMPNE) {
      if (src[0]->vmax() < src[1]->vmin() || src[0]->vmin() > src[1]->vmax())
        one(1, 1);
      else if (src[0]->vmin() == src[0]->vmax() && src[1]->vmin() == src[1]->vmax() &&
               src[0]->vmin() == src[1]->vmin())
        one(0, 0);
      else
        one(0, 1);
    } else if (op == Ops::AND && dtype == DType::Bool)
      one(std::min(src[0]->vmin(), src[1]->vmin()), std::min(src[0]->vmax(), src[1]->vmax()));
    else if (op == Ops::OR && dtype == DType::Bool)
      one(std::max(src[0]->vmin(), src[1]->vmin()), std::max(src[0]->vmax(), src[1]->vmax()));
    else if (op == Ops::WHERE) {
      if (src[0]->vmin() == 1)
        one(src[1]->vmin(), src[1]->vmax());
      else if (src[0]->vmax() == 0)
        one(src[2]->vmin(), src[2]->vmax());
      else
        one(std::min(src[1]->vmin(), src[2]->vmin()), std::max(src[1]->vmax(), src[2]->vmax()));
    } else if (op == Ops::CAST && !is_float(dtype) && !is_float(src[0]->dtype) &&
               src[0]->vmin() >= dtype_min(dtype) && src[0]->vmax() <= dtype_max(dtype))
      one(src[0]->vmin(), src[0]->vmax());
    // Clamp into what the dtype can hold (an overflow would wrap: then nothing is proven).
    if (lo < dtype_min(dtype) || hi > dtype_max(dtype)) lo = dtype_min(dtype), hi = dtype_max(dtype);
    range_ = {lo, hi};
  }
  return range_->first;
}
double UOp::vmax() const {
  vmin();
  return range_->second;
}

std::string shape_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); i++)
    r += (i ? ", " : "") + s[i].str();
  return r + (s.size() == 1 ? ",)" : ")");
}
std::string shape_str(const std::vector<int64_t>& s) { return shape_str(to_shape(s)); }

std::string UOp::arg_string() const {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, int64_t>)
          os << v;
        else if constexpr (std::is_same_v<T, double>)
          os << v;
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          if (op == Ops::SPECIAL && v.size() == 2) // {local, axis}: as the kernel names it
            os << (v[0] ? "lidx" : "gidx") << v[1];
          else
            os << shape_str(v);
        } else if constexpr (std::is_same_v<T, ReduceArg>) {
          os << name(v.op);
          if (!v.axes.empty()) os << ", axes " << shape_str(v.axes);
        } else if constexpr (std::is_same_v<T, std::string>)
          os << v;
        else if constexpr (std::is_same_v<T, std::shared_ptr<const ShapeTracker>>)
          os << v->to_string();
        else if constexpr (std::is_same_v<T, VarArg>)
          os << v.name << " [" << v.lo << ", " << v.hi << "]";
        else if constexpr (std::is_same_v<T, Shape>)
          os << shape_str(v);
        else
          os << buffer_string(*v);
      },
      arg);
  return os.str();
}

UOpRef with_sources(const UOpRef& u, const std::unordered_map<const UOp*, UOpRef>& done) {
  std::vector<UOpRef> ns;
  ns.reserve(u->src.size());
  bool changed = false;
  for (auto& s : u->src) {
    ns.push_back(done.at(s.get()));
    changed |= ns.back() != s;
  }
  return changed ? u->replace_src(std::move(ns)) : u;
}

std::vector<const UOp*> toposort(const UOp* root) {
  std::vector<const UOp*> out;
  std::unordered_set<const UOp*> seen;
  std::vector<std::pair<const UOp*, size_t>> stack{{root, 0}};
  seen.insert(root);
  while (!stack.empty()) {
    auto& [u, i] = stack.back();
    if (i < u->src.size()) {
      const UOp* s = u->src[i++].get();
      if (seen.insert(s).second) stack.push_back({s, 0});
    } else {
      out.push_back(u);
      stack.pop_back();
    }
  }
  return out;
}

std::string print_tree(const UOpRef& root) {
  std::unordered_map<const UOp*, int> parents;
  for (const UOp* u : toposort(root.get()))
    for (auto& s : u->src)
      parents[s.get()]++;
  std::unordered_map<const UOp*, int> names;
  std::ostringstream os;
  std::function<void(const UOp*, int)> rec = [&](const UOp* u, int depth) {
    std::string ind(depth * 2, ' ');
    if (auto it = names.find(u); it != names.end()) {
      os << ind << "%" << it->second << "\n";
      return;
    }
    os << ind;
    if (parents[u] > 1) {
      int id = static_cast<int>(names.size());
      names[u] = id;
      os << "%" << id << " = ";
    }
    os << name(u->op) << " " << name(u->dtype);
    if (u->has_shape && !u->shape.empty()) os << " " << shape_str(u->shape);
    // a RESHAPE's or EXPAND's arg is its shape, already printed
    std::string a = (u->op == Ops::RESHAPE || u->op == Ops::EXPAND) ? "" : u->arg_string();
    if (!a.empty()) os << " " << a;
    os << "\n";
    for (auto& s : u->src)
      rec(s.get(), depth + 1);
  };
  rec(root.get(), 0);
  return os.str();
}

} // namespace mg

namespace mg {
UOpRef alu(Ops op, std::vector<UOpRef> src) {
  ResultDType r = info(op).result;
  if (r == ResultDType::Given || static_cast<int>(src.size()) != info(op).arity)
    internal_error(std::string("alu(") + name(op) + ") with " + std::to_string(src.size()) + " sources");
  DType dt = r == ResultDType::Bool ? DType::Bool : src[r == ResultDType::Src1 ? 1 : 0]->dtype;
  return UOp::make(op, dt, std::move(src));
}
UOpRef uand(const UOpRef& a, const UOpRef& b) { return alu(Ops::AND, {a, b}); }
UOpRef cast(const UOpRef& a, DType d) { return a->dtype == d ? a : UOp::make(Ops::CAST, d, {a}); }
double reduce_identity(Ops op, DType d) {
  switch (info(op).identity) {
  case Identity::Zero:
    return 0;
  case Identity::One:
    return 1;
  case Identity::Lowest:
    return dtype_min(d);
  case Identity::None:
    break;
  }
  internal_error(std::string("no identity for reduce ") + name(op));
}

} // namespace mg
