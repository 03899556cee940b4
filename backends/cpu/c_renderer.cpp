#include "backends/cpu/c_renderer.h"
#include "engine/codegen/opts.h"
#include "engine/errors.h"

#include "engine/codegen/linearize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace mg {

namespace {

std::string literal(DType d, double v) {
  char b[64];
  if (is_float(d)) {
    const char* suf = d == DType::Float64 ? "" : "f";
    if (std::isnan(v)) return "NAN";
    if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
    if (v == std::floor(v) && std::fabs(v) < 1e15)
      std::snprintf(b, sizeof b, "%.1f%s", v, suf);
    else
      std::snprintf(b, sizeof b, d == DType::Float64 ? "%.17g%s" : "%.9g%s", v, suf);
    std::string s = b;
    if (d == DType::Float16) s = "((_Float16)" + s + ")";
    return std::signbit(v) ? "(" + s + ")" : s; // -0.0 too: x - -0.0f must not read as x--0.0f
  }
  if (d == DType::Bool) return v != 0 ? "1" : "0";
  if (d == DType::UInt64) {
    std::snprintf(b, sizeof b, "%lluull", static_cast<unsigned long long>(v));
    return b;
  }
  if (d == DType::Int64 && v <= -9223372036854775808.0) return "(-9223372036854775807ll-1)"; // INT64_MIN
  std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
  if (d == DType::Int64) return std::string("(") + b + "ll)";
  if (d == DType::Int32 && v <= -2147483648.0) return "(-2147483647-1)";
  if (d == DType::UInt32) return std::string(b) + "u";
  return v < 0 ? "(" + std::string(b) + ")" : b;
}

// The C math function for a float op, computing half and bfloat16 in float.
std::string fcall(const char* f, DType d, const std::vector<std::string>& a) {
  std::string args;
  bool narrow = d == DType::Float16;
  for (size_t i = 0; i < a.size(); i++)
    args += (i ? ", " : "") + (narrow ? "(float)" + a[i] : a[i]);
  std::string call = std::string(f) + (d == DType::Float64 ? "" : "f") + "(" + args + ")";
  return narrow ? "((_Float16)" + call + ")" : call;
}

std::string alu_expr(const UOp& u, const std::vector<std::string>& a) {
  DType d = u.dtype;
  auto bin = [&](const char* op) { return "(" + a[0] + op + a[1] + ")"; };
  switch (u.op) {
  case Ops::NEG:
    return "(-" + a[0] + ")";
  case Ops::EXP2: // float32 through our own exp2, which vectorizes (libm's exp2f is a call per element)
    if (d == DType::Float32) return "mg_exp2f(" + a[0] + ")";
    return fcall("exp2", d, a);
  case Ops::LOG2:
    if (d == DType::Float32) return "mg_log2f(" + a[0] + ")";
    return fcall("log2", d, a);
  case Ops::SIN:
    return fcall("sin", d, a);
  case Ops::SQRT:
    return fcall("sqrt", d, a);
  case Ops::POW:
    return fcall("pow", d, a);
  case Ops::RECIP:
    return "(" + literal(d, 1) + "/" + a[0] + ")";
  case Ops::CAST:
    if (d == DType::BFloat16) return "bf16_round((float)" + a[0] + ")";
    return "((" + std::string(c_type(d)) + ")" + a[0] + ")";
  case Ops::ADD:
    return bin("+");
  case Ops::SUB:
    return bin("-");
  case Ops::MUL:
    return bin("*");
  case Ops::IDIV:
  case Ops::MOD: {
    if (is_float(d)) return u.op == Ops::MOD ? fcall("fmod", d, a) : fcall("trunc", d, {bin("/")});
    // integer x/0 traps (SIGFPE) in C: give 0 instead, unless the divisor is a known non-zero
    const UOp& b = *u.src[1];
    bool safe = b.op == Ops::CONST && b.const_value() != 0 && b.const_value() != -1;
    std::string e = bin(u.op == Ops::IDIV ? "/" : "%");
    if (safe) return e;
    if (is_unsigned(d)) return "(" + a[1] + "==0?0:" + e + ")";
    // x/-1 is -x, and INT_MIN/-1 traps too
    std::string special = u.op == Ops::IDIV ? "(" + a[1] + "==0?0:-" + a[0] + ")" : "0";
    return "((" + a[1] + "==0||" + a[1] + "==-1)?" + special + ":" + e + ")";
  }
  case Ops::FDIV:
    return bin("/");
  case Ops::MAX: // NaN wins, as in numpy and torch
    if (is_float(d))
      return "((" + a[0] + ">" + a[1] + "||" + a[0] + "!=" + a[0] + ")?" + a[0] + ":" + a[1] + ")";
    return "((" + a[0] + ">" + a[1] + ")?" + a[0] + ":" + a[1] + ")";
  case Ops::CMPLT:
    return bin("<");
  case Ops::CMPNE:
    return bin("!=");
  case Ops::AND:
    return bin("&");
  case Ops::OR:
    return bin("|");
  case Ops::XOR:
    return bin("^");
  case Ops::SHL:
    return bin("<<");
  case Ops::SHR:
    return bin(">>");
  case Ops::WHERE:
    return "(" + a[0] + "?" + a[1] + ":" + a[2] + ")";
  default:
    break;
  }
  throw std::runtime_error(std::string("the C renderer does not support ") + name(u.op) + " yet");
}

// Whether alu_expr writes an operand more than once (so an inlined operand would be copied,
// and nested copies grow the source exponentially): those operands get names instead.
bool repeats_operands(const UOp& u) {
  if (u.op == Ops::MAX) return is_float(u.dtype);
  if (u.op == Ops::IDIV || u.op == Ops::MOD) {
    const UOp& b = *u.src[1];
    return !is_float(u.dtype) && !(b.op == Ops::CONST && b.const_value() != 0 && b.const_value() != -1);
  }
  return false;
}

// The libm functions kernels call, declared rather than included: clang knows them as builtins
// (sqrtf becomes an instruction), and parsing no system header keeps a compile to milliseconds.
const char* kPrelude =
    "float exp2f(float), log2f(float), sinf(float), sqrtf(float), powf(float, float), fmodf(float, float),\n"
    "  truncf(float), fminf(float, float), fmaxf(float, float);\n"
    "double exp2(double), log2(double), sin(double), sqrt(double), pow(double, double), fmod(double, "
    "double),\n"
    "  trunc(double);\n"
    "#define NAN __builtin_nanf(\"\")\n"
    "#define INFINITY __builtin_inff()\n";
const char* kBf16 = "static inline float bf16_to_f32(unsigned short h) { union { unsigned int u; float f; } "
                    "x = { (unsigned int)h << 16 }; return x.f; }\n"
                    "static inline unsigned short f32_to_bf16(float f) { union { float f; unsigned int u; } "
                    "x = { f }; return (unsigned short)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16); }\n"
                    "static inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }\n";

// 2^x in float32 from arithmetic alone, so clang vectorizes the loops that use it: x = n + f with
// n an integer and |f| <= 1/2; 2^f by its Taylor series to degree 7 (truncation error 5e-9,
// below float32's rounding); 2^n by building the exponent bits, in two halves so that results
// down to the subnormals and up to inf come out right. Integer x gives exact powers of two.
const char* kExp2 =
    "static inline float mg_exp2f(float x) {\n"
    "  float c = fminf(fmaxf(x, -151.0f), 129.0f), n = __builtin_rintf(c), f = c - n;\n"
    "  float p = 1.0f + f * (0.693147181f + f * (0.240226507f + f * (0.0555041087f + f * (0.00961812911f\n"
    "    + f * (0.00133335581f + f * (0.000154035304f + f * 0.0000152527338f))))));\n"
    "  int e = (int)n, a = e >> 1, b = e - a;\n"
    "  union { unsigned int u; float f; } sa = { (unsigned int)(a + 127) << 23 }, sb = { (unsigned int)(b + "
    "127) << 23 };\n"
    "  return x != x ? x : p * sa.f * sb.f;\n"
    "}\n";

// log2 in float32 the same way: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), and log2(m) by the
// series in t = (m-1)/(m+1) (odd powers to t^9; truncation error 3e-10 for |t| <= 0.172).
// Subnormals are scaled into the normal range first; powers of two come out exact.
const char* kLog2 =
    "static inline float mg_log2f(float x) {\n"
    "  int sub = x < 1.17549435e-38f;\n"
    "  union { float f; unsigned int u; } v = { sub ? x * 8388608.0f : x };\n"
    "  int e = (int)((v.u >> 23) & 0xffu) - (sub ? 150 : 127);\n"
    "  v.u = (v.u & 0x007fffffu) | 0x3f800000u;\n"
    "  int big = v.f > 1.41421356f;\n"
    "  float m = big ? v.f * 0.5f : v.f, t = (m - 1.0f) / (m + 1.0f), t2 = t * t;\n"
    "  float p = t * (2.88539008f + t2 * (0.961796694f + t2 * (0.577078016f + t2 * (0.412198583f + t2 * "
    "0.320598898f))));\n"
    "  float r = (float)(e + big) + p;\n"
    "  return x > 0.0f && x < INFINITY ? r : x == 0.0f ? -INFINITY : x == INFINITY ? x : NAN;\n"
    "}\n";

std::string ptr_type(DType d) { return d == DType::BFloat16 ? "unsigned short" : c_type(d); }

} // namespace

namespace {

// The state of one rendering: what each node is called, and the body written so far.
struct CRender {
  std::unordered_map<const UOp*, int> uses, depth, nesting; // nesting: parentheses of an inlined value
  std::unordered_map<const UOp*, const UOp*> user;
  std::unordered_map<const UOp*, std::string> expr;
  std::map<std::string, int> counters;
  std::ostringstream body;
  int ind = 1;
  const UOp* par = nullptr; // the loop split across cores, if any
  bool par_nested = false;  // whether it has loops inside
  bool one_acc = false;     // the kernel has a single accumulator

  std::string fresh(const std::string& p) { return p + std::to_string(counters[p]++); }
  void line(const std::string& s) { body << std::string(ind * 2, ' ') << s << "\n"; }
  const std::string& E(const UOpRef& s) {
    auto it = expr.find(s.get());
    if (it != expr.end()) return it->second;
    if (s->op == Ops::CONST) return expr[s.get()] = literal(s->dtype, s->const_value());
    internal_error(std::string("C renderer used ") + name(s->op) + " before defining it");
  }
  // A named variable `prefix<N>` holding `value`.
  void declare(const UOpRef& u, const std::string& prefix, const std::string& value) {
    std::string n = fresh(prefix);
    line(std::string(c_type(u->dtype)) + " " + n + " = " + value + ";");
    expr[u.get()] = n;
  }
};

void render_range(CRender& r, const UOpRef& u) {
  int kind = static_cast<int>(u->varg()[1]);
  const char* prefix = kind == kReduce  ? "ridx"
                       : kind == kGroup ? "grp"
                       : kind == kLocal ? "lidx"
                       : kind == kBlock ? "blk"
                                        : "gidx";
  std::string n = prefix + std::to_string(u->varg()[0]);
  std::string t = c_type(u->dtype), sz = r.E(u->src[0]);
  r.expr[u.get()] = n;
  std::string lo = "0", hi = sz, share_lo = "(" + t + ")(" + sz + "*(long long)core/ncores)",
              share_hi = "(" + t + ")(" + sz + "*(long long)(core+1)/ncores)";
  // This core's share of the outermost loop. A loop with loops inside keeps its constant bounds
  // and skips the other shares: with bounds that vary by core, clang vectorized a convolution's
  // body 9x worse. A single loop takes the share as its bounds, or it would not vectorize.
  bool skip = u.get() == r.par && r.par_nested;
  if (u.get() == r.par && !r.par_nested) lo = share_lo, hi = share_hi;
  r.line("for (" + t + " " + n + " = " + lo + "; " + n + " < " + hi + "; " + n + "++) {");
  if (skip) r.line("  if (" + n + " < " + share_lo + " || " + n + " >= " + share_hi + ") continue;");
  r.ind++;
}

void render_load(CRender& r, const UOpRef& u) {
  const UOp* idx = u->src[0].get();
  std::string v = r.expr.at(idx);
  if (idx->src.size() > 2) v = "(" + r.E(idx->src[2]) + "?" + v + ":" + literal(u->dtype, 0) + ")"; // gated
  r.declare(u, "val", v);
}

void render_store(CRender& r, const UOpRef& u) {
  const UOp* idx = u->src[0].get();
  std::string v = r.E(u->src[1]);
  if (idx->dtype == DType::BFloat16) v = "f32_to_bf16(" + v + ")";
  std::string gate = idx->src.size() > 2 ? "if (" + r.E(idx->src[2]) + ") " : ""; // a padded dim (PADTO)
  r.line(gate + r.E(idx->src[0]) + "[" + r.E(idx->src[1]) + "] = " + v + ";");
}

// A kernel's only float sum may add its terms in any order, so clang vectorizes the loop into
// partial sums, one per lane (16x faster for a sum of exponentials); C's strict order allows no
// such thing. The term gets its own name first, so only the accumulation is reordered. Kernels
// with a tile of accumulators (matmul) already have independent chains, and a term split off
// its addition would no longer fuse into one multiply-add.
bool is_float_sum(const CRender& r, const UOpRef& u) {
  const UOpRef& v = u->src[1];
  return r.one_acc && is_float(v->dtype) && v->op == Ops::ADD && v->src[0] == u->src[0];
}

void render_assign(CRender& r, const UOpRef& u) {
  const std::string& acc = r.E(u->src[0]);
  if (!is_float_sum(r, u)) return r.line(acc + " = " + r.E(u->src[1]) + ";");
  const UOpRef& term = u->src[1]->src[1];
  std::string t = r.E(term);
  if (term->op != Ops::LOAD && r.expr.count(term.get()) && t.find_first_of("(+-*/?") != std::string::npos) {
    r.declare(term, "red", t);
    t = r.E(term);
  }
  r.line("{ _Pragma(\"clang fp reassociate(on)\") " + acc + " = (" + acc + "+" + t + "); }");
}

// Values are inlined into their single user when computed in the same loop (keeping clang's
// bracket depth small); otherwise they get a name.
void render_alu(CRender& r, const UOpRef& u) {
  std::vector<std::string> a;
  int nest = 1;
  for (auto& s : u->src) {
    a.push_back(r.E(s));
    nest = std::max(nest, r.nesting[s.get()] + 1);
  }
  std::string e = alu_expr(*u, a);
  const UOp* us = r.user.count(u.get()) ? r.user[u.get()] : nullptr;
  if (r.uses[u.get()] == 1 && us && r.depth[us] == r.depth[u.get()] && nest < 64 && !repeats_operands(*us))
    r.expr[u.get()] = e, r.nesting[u.get()] = nest;
  else
    r.declare(u, "alu", e);
}

// What each non-ALU op of the linear program becomes in C.
const std::unordered_map<Ops, void (*)(CRender&, const UOpRef&)>& c_rules() {
  static const std::unordered_map<Ops, void (*)(CRender&, const UOpRef&)> rules{
      {Ops::CONST, [](CRender& r, const UOpRef& u) { r.E(u); }},
      {Ops::DEFINE_GLOBAL,
       [](CRender& r, const UOpRef& u) { r.expr[u.get()] = "data" + std::to_string(u->iarg()); }},
      {Ops::RANGE, render_range},
      {Ops::ENDRANGE,
       [](CRender& r, const UOpRef&) {
         r.ind--;
         r.line("}");
       }},
      {Ops::INDEX,
       [](CRender& r, const UOpRef& u) {
         std::string ref = r.E(u->src[0]) + "[" + r.E(u->src[1]) + "]";
         r.expr[u.get()] = u->dtype == DType::BFloat16 ? "bf16_to_f32(" + ref + ")" : ref;
       }},
      {Ops::LOAD, render_load},
      {Ops::STORE, render_store},
      {Ops::DEFINE_ACC, [](CRender& r, const UOpRef& u) { r.declare(u, "acc", r.E(u->src[0])); }},
      {Ops::ASSIGN, render_assign},
  };
  return rules;
}

} // namespace

// The widest run of loads from consecutive addresses (base, base+1, ...) in a kernel with two or
// more accumulators (a tile, or a reduce's lanes): how wide the rows are that clang can load as
// vectors. 16 for a kernel with one accumulator or none.
int64_t tile_row_width(const std::vector<UOpRef>& linear, int64_t accumulators) {
  if (accumulators < 2) return 16;
  std::map<std::pair<const UOp*, const UOp*>, std::set<int64_t>> offsets; // (buffer, base) -> offsets
  for (auto& u : linear) {
    if (u->op != Ops::LOAD) continue;
    const UOp* buf = u->src[0]->src[0].get();
    const UOp* idx = u->src[0]->src[1].get();
    if (idx->op == Ops::ADD && idx->src[1]->op == Ops::CONST)
      offsets[{buf, idx->src[0].get()}].insert(static_cast<int64_t>(idx->src[1]->const_value()));
    else
      offsets[{buf, idx}].insert(0);
  }
  int64_t widest = 1;
  for (auto& [base, ks] : offsets)
    for (int64_t k : ks) {
      int64_t run = 1;
      while (ks.count(k + run))
        run++;
      widest = std::max(widest, run);
    }
  return widest;
}

std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) {
  CRender r;
  std::map<int64_t, DType> globals;
  bool bf16 = false;
  int dep = 0;
  for (auto& u : linear) {
    if (u->op == Ops::ENDRANGE) dep--;
    r.depth[u.get()] = dep;
    if (u->op == Ops::RANGE) dep++;
    for (auto& s : u->src)
      r.uses[s.get()]++, r.user[s.get()] = u.get();
    if (u->op == Ops::DEFINE_GLOBAL) globals[u->iarg()] = u->dtype;
    bf16 |= u->dtype == DType::BFloat16;
  }
  r.par = parallel ? parallel_loop(linear) : nullptr;
  int64_t accumulators =
      std::count_if(linear.begin(), linear.end(), [](const UOpRef& u) { return u->op == Ops::DEFINE_ACC; });
  r.one_acc = accumulators == 1;
  r.par_nested =
      std::count_if(linear.begin(), linear.end(), [](const UOpRef& u) { return u->op == Ops::RANGE; }) > 1;
  const auto& rules = c_rules();
  for (auto& u : linear) {
    auto it = rules.find(u->op);
    if (it != rules.end())
      it->second(r, u);
    else
      render_alu(r, u);
  }
  std::ostringstream os;
  std::string body = r.body.str();
  // A tile of accumulators is packed into vectors along the rows it loads; where a row is
  // narrower than a 512-bit vector, clang packs two rows into one and loads them with gathers (a
  // 5x5 convolution with 8-wide rows ran 10x slower). The CPU device reads this line as a flag.
  if (tile_row_width(linear, accumulators) < 16) os << kCompileFlagTag << "-mprefer-vector-width=256\n";
  os << kPrelude << (bf16 ? kBf16 : "") << (body.find("mg_exp2f(") != std::string::npos ? kExp2 : "")
     << (body.find("mg_log2f(") != std::string::npos ? kLog2 : "") << "void " << fn
     << "(void** bufs, int core, int ncores) {\n";
  for (auto& [i, d] : globals)
    os << "  " << (i == 0 ? "" : "const ") << ptr_type(d) << "* restrict data" << i << " = bufs[" << i
       << "];\n";
  os << body << "}\n";
  return os.str();
}

} // namespace mg
