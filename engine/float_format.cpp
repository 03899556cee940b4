#include "engine/float_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mg {

namespace {

constexpr int kPrecision = 8; // numpy's default print precision

// Whether the decimal text `s` reads back as x (a value of dtype d), rounding to nearest even.
bool reads_back(const std::string& s, double x, DType d) {
  switch (d) {
  case DType::Float32:
    return std::strtof(s.c_str(), nullptr) == static_cast<float>(x);
  case DType::Float16: // s has at most 17 digits: its double is far closer than half a float16 step
    return static_cast<double>(static_cast<_Float16>(std::strtod(s.c_str(), nullptr))) == x;
  case DType::BFloat16: {
    // bfloat16 is float32's top half: compare with the midpoints to x's neighbours
    double c = std::strtod(s.c_str(), nullptr);
    if (std::signbit(c) != std::signbit(x)) return false;
    float ax = std::fabs(static_cast<float>(x));
    uint32_t u;
    std::memcpy(&u, &ax, 4);
    uint32_t lo_bits = u - 0x10000, hi_bits = u + 0x10000;
    float lo, hi;
    std::memcpy(&lo, &lo_bits, 4);
    std::memcpy(&hi, &hi_bits, 4);
    if (std::isinf(hi)) hi = ax + (ax - lo);
    double mlo = (double(ax) + lo) / 2, mhi = (double(ax) + hi) / 2, ac = std::fabs(c);
    if (ac > mlo && ac < mhi) return true;
    bool even = ((u >> 16) & 1) == 0;
    return even && (ac == mlo || ac == mhi);
  }
  default:
    return std::strtod(s.c_str(), nullptr) == x;
  }
}

// "d.ddde+XX" (printf's %e) into its digits and exponent.
void parse_e(const char* buf, std::string& digits, int& exp10) {
  digits.clear();
  const char* p = buf;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits += *p;
  exp10 = *p ? std::atoi(p + 1) : 0;
}

void trim_zeros(std::string& digits) {
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
}

} // namespace

Decimal shortest_decimal(double x, DType d) {
  Decimal r;
  r.negative = std::signbit(x);
  double ax = std::fabs(x);
  char buf[64];
  for (int p = 1; p <= 17; p++) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, ax);
    std::string m;
    int e;
    parse_e(buf, m, e);
    long long mi = std::atoll(m.c_str());
    int scale = e - (p - 1); // ax ~ mi x 10^scale
    // the correctly rounded p digits first; where x's interval is lopsided (x a power of two),
    // the neighbour on the wide side may read back when they do not
    for (long long delta : {0LL, -1LL, 1LL}) {
      long long c = mi + delta;
      if (c <= 0) continue;
      std::string cs = std::to_string(c);
      std::string text = (r.negative ? "-" : "") + cs + "e" + std::to_string(scale);
      if (!reads_back(text, x, d)) continue;
      r.exp10 = scale + static_cast<int>(cs.size()) - 1;
      r.digits = cs;
      trim_zeros(r.digits);
      return r;
    }
  }
  // unreachable for finite x: 17 digits read back as any double
  std::snprintf(buf, sizeof buf, "%.16e", ax);
  parse_e(buf, r.digits, r.exp10);
  trim_zeros(r.digits);
  return r;
}

namespace {

// Positional text of finite v, shortest digits cut at kPrecision after the point, trailing
// zeros dropped but the point kept ("1.", "0.5").
std::string positional_text(double v, DType d) {
  const char* sign = std::signbit(v) ? "-" : "";
  if (v == 0) return std::string(sign) + "0.";
  Decimal dec = shortest_decimal(v, d);
  int frac_digits = std::max(0, static_cast<int>(dec.digits.size()) - 1 - dec.exp10);
  if (frac_digits > kPrecision) { // rounded at the cut, from the exact value
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", kPrecision, v);
    std::string s = buf;
    while (s.back() == '0')
      s.pop_back();
    return s;
  }
  if (dec.exp10 >= static_cast<int>(dec.digits.size())) {
    // the shortest digits stop above the units place (10416 as float16 reads back from 10420):
    // numpy prints every integer digit, exactly
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.0f.", v);
    return buf;
  }
  std::string ip, fp;
  if (dec.exp10 >= 0) {
    std::string ds = dec.digits;
    if (static_cast<int>(ds.size()) < dec.exp10 + 1) ds.append(dec.exp10 + 1 - ds.size(), '0');
    ip = ds.substr(0, dec.exp10 + 1);
    fp = ds.substr(dec.exp10 + 1);
  } else {
    ip = "0";
    fp = std::string(-dec.exp10 - 1, '0') + dec.digits;
  }
  return sign + ip + "." + fp;
}

// Scientific parts of finite v: sign and first digit, the digits after the point, the exponent.
// The shortest digits, cut at kPrecision after the point; where they are fewer than min_digits,
// the exact value's digits continue to min_digits, the last one rounded (numpy's min_digits:
// 9.470810e-07 as float32 is 9.4708099e-07 printed beside a value that needs 7 digits).
struct SciParts {
  std::string int_part, frac;
  int exp10;
};
SciParts sci_parts(double v, DType d, int min_digits = 0) {
  std::string sign = std::signbit(v) ? "-" : "";
  Decimal dec;
  int have = -1; // digits after the point
  if (v != 0) {
    dec = shortest_decimal(v, d);
    have = static_cast<int>(dec.digits.size()) - 1;
  }
  if (have > kPrecision || have < min_digits) {
    int n = have > kPrecision ? kPrecision : min_digits;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", n, std::fabs(v));
    parse_e(buf, dec.digits, dec.exp10);
    if (have > kPrecision) trim_zeros(dec.digits);
  } else if (v == 0) {
    dec.digits = "0";
  }
  return {sign + dec.digits.substr(0, 1), dec.digits.substr(1), dec.exp10};
}

std::string exp_text(int e, int digits) {
  std::string n = std::to_string(std::abs(e));
  if (static_cast<int>(n.size()) < digits) n.insert(0, digits - n.size(), '0');
  return std::string(e < 0 ? "-" : "+") + n;
}

} // namespace

FloatFormat::FloatFormat(const std::vector<double>& shown, DType d) : dtype_(d) {
  double max_abs = 0, min_abs = INFINITY;
  bool any_nonzero = false, nonfinite = false, neg_inf = false;
  for (double v : shown) {
    if (!std::isfinite(v)) {
      nonfinite = true;
      neg_inf |= std::isinf(v) && v < 0;
      continue;
    }
    if (v == 0) continue;
    any_nonzero = true;
    max_abs = std::max(max_abs, std::fabs(v));
    min_abs = std::min(min_abs, std::fabs(v));
  }
  // numpy's rule (suppress=False): very large, very small, or a wide range goes scientific
  scientific_ = any_nonzero && (max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1e3);
  bool any_finite = false;
  if (scientific_) {
    int frac = 0, ilen = 0, elen = 2;
    for (double v : shown) {
      if (!std::isfinite(v)) continue;
      any_finite = true;
      SciParts p = sci_parts(v, d);
      frac = std::max(frac, static_cast<int>(p.frac.size()));
      ilen = std::max(ilen, static_cast<int>(p.int_part.size()));
      elen = std::max(elen, static_cast<int>(std::to_string(std::abs(p.exp10)).size()));
    }
    precision_ = frac;
    pad_left_ = ilen;
    exp_digits_ = elen;
    pad_right_ = elen + 2 + frac; // "e", the sign, the digits, and the fraction
  } else {
    for (double v : shown) {
      if (!std::isfinite(v)) continue;
      any_finite = true;
      std::string s = positional_text(v, d);
      size_t dot = s.find('.');
      pad_left_ = std::max(pad_left_, static_cast<int>(dot));
      pad_right_ = std::max(pad_right_, static_cast<int>(s.size() - dot - 1));
    }
  }
  if (!any_finite) pad_left_ = pad_right_ = 0;
  if (nonfinite) { // room for nan, inf and -inf in the same column
    int offset = pad_right_ + 1;
    pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neg_inf ? 1 : 0) - offset});
  }
}

std::string FloatFormat::operator()(double v) const {
  if (!std::isfinite(v)) {
    std::string s = std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
    int width = pad_left_ + pad_right_ + 1;
    return std::string(std::max(0, width - static_cast<int>(s.size())), ' ') + s;
  }
  std::string ip, rest;
  if (scientific_) {
    SciParts p = sci_parts(v, dtype_, precision_);
    std::string frac = p.frac;
    if (static_cast<int>(frac.size()) < precision_) frac.append(precision_ - frac.size(), '0');
    ip = p.int_part;
    rest = "." + frac + "e" + exp_text(p.exp10, exp_digits_);
  } else {
    std::string s = positional_text(v, dtype_);
    size_t dot = s.find('.');
    ip = s.substr(0, dot);
    std::string frac = s.substr(dot + 1);
    rest = "." + frac + std::string(std::max(0, pad_right_ - static_cast<int>(frac.size())), ' ');
  }
  return std::string(std::max(0, pad_left_ - static_cast<int>(ip.size())), ' ') + ip + rest;
}

} // namespace mg
