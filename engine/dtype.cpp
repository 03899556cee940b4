#include "engine/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace mg {

namespace {
struct Info {
  const char* name;
  const char* c;
  int size;
  int prio;
};
constexpr std::array infos{
#define X(n, s, c, sz, p) Info{s, c, sz, p},
    MG_DTYPES(X)
#undef X
};
const Info& info(DType d) { return infos[static_cast<size_t>(d)]; }

// Edges of the promotion lattice (tinygrad's promo_lattice).
std::vector<DType> parents(DType d) {
  using D = DType;
  switch (d) {
  case D::Bool:
    return {D::Int8, D::UInt8};
  case D::Int8:
    return {D::Int16};
  case D::Int16:
    return {D::Int32};
  case D::Int32:
    return {D::Int64};
  case D::Int64:
    return {D::Float16, D::BFloat16};
  case D::UInt8:
    return {D::Int16, D::UInt16};
  case D::UInt16:
    return {D::Int32, D::UInt32};
  case D::UInt32:
    return {D::Int64, D::UInt64};
  case D::UInt64:
    return {D::Float16, D::BFloat16};
  case D::Float16:
    return {D::Float32};
  case D::BFloat16:
    return {D::Float32};
  case D::Float32:
    return {D::Float64};
  default:
    return {};
  }
}

void upward(DType d, std::vector<DType>& out) {
  if (std::find(out.begin(), out.end(), d) != out.end()) return;
  out.push_back(d);
  for (DType p : parents(d))
    upward(p, out);
}
} // namespace

const char* name(DType d) { return info(d).name; }
std::string type_in(DType d, const TypeNames& names, const char* language) {
  if (d == DType::Void) throw std::invalid_argument(std::string(language) + " has no type for void");
  return names.at(static_cast<size_t>(d) - 1);
}
const char* c_type(DType d) { return info(d).c; }
int itemsize(DType d) { return info(d).size; }
int priority(DType d) { return info(d).prio; }
bool is_float(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}
bool is_unsigned(DType d) {
  return d == DType::UInt8 || d == DType::UInt16 || d == DType::UInt32 || d == DType::UInt64;
}
bool is_int(DType d) { return !is_float(d) && d != DType::Bool && d != DType::Void; }

DType dtype_from_name(const std::string& s) {
  static const std::vector<std::pair<std::string, DType>> aliases{
      {"float", DType::Float32}, {"half", DType::Float16},  {"double", DType::Float64},
      {"int", DType::Int32},     {"long", DType::Int64},    {"char", DType::Int8},
      {"uchar", DType::UInt8},   {"short", DType::Int16},   {"uint", DType::UInt32},
      {"ulong", DType::UInt64},  {"ushort", DType::UInt16}, {"bf16", DType::BFloat16}};
  for (size_t i = 1; i < infos.size(); i++)
    if (s == infos[i].name) return static_cast<DType>(i);
  for (auto& [a, d] : aliases)
    if (s == a) return d;
  throw std::invalid_argument("unknown dtype '" + s + "'");
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  std::vector<DType> ua, ub;
  upward(a, ua);
  upward(b, ub);
  DType best = DType::Void;
  for (DType d : ua) {
    if (std::find(ub.begin(), ub.end(), d) == ub.end()) continue;
    if (best == DType::Void || priority(d) < priority(best)) best = d;
  }
  if (best == DType::Void)
    throw std::invalid_argument(std::string("cannot promote ") + name(a) + " and " + name(b));
  return best;
}

DType sum_acc_dtype(DType d) {
  if (is_unsigned(d)) return promote(d, DType::UInt32);
  if (is_int(d) || d == DType::Bool) return promote(d, DType::Int32);
  return promote(d, DType::Float32) == DType::Float32 ? DType::Float32 : d;
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

DType float_of(DType d) { return is_float(d) ? d : default_float; }

double dtype_min(DType d) {
  switch (d) {
  case DType::Bool:
    return 0;
  case DType::Int8:
    return -128;
  case DType::Int16:
    return -32768;
  case DType::Int32:
    return std::numeric_limits<int32_t>::min();
  case DType::Int64:
    return static_cast<double>(std::numeric_limits<int64_t>::min());
  case DType::UInt8:
  case DType::UInt16:
  case DType::UInt32:
  case DType::UInt64:
    return 0;
  default:
    return -INFINITY;
  }
}
double dtype_max(DType d) {
  switch (d) {
  case DType::Bool:
    return 1;
  case DType::Int8:
    return 127;
  case DType::Int16:
    return 32767;
  case DType::Int32:
    return std::numeric_limits<int32_t>::max();
  case DType::Int64:
    return static_cast<double>(std::numeric_limits<int64_t>::max());
  case DType::UInt8:
    return 255;
  case DType::UInt16:
    return 65535;
  case DType::UInt32:
    return 4294967295.0;
  case DType::UInt64:
    return 18446744073709551615.0;
  default:
    return INFINITY;
  }
}

} // namespace mg
