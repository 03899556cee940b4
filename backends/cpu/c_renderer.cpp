#include "backends/cpu/c_renderer.h"

#include "engine/lowerer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
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
    return v < 0 ? "(" + s + ")" : s;
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
  case Ops::EXP2:
    return fcall("exp2", d, a);
  case Ops::LOG2:
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

const char* kPrelude = "#include <math.h>\n";
const char* kBf16 = "static inline float bf16_to_f32(unsigned short h) { union { unsigned int u; float f; } "
                    "x = { (unsigned int)h << 16 }; return x.f; }\n"
                    "static inline unsigned short f32_to_bf16(float f) { union { float f; unsigned int u; } "
                    "x = { f }; return (unsigned short)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16); }\n"
                    "static inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }\n";

std::string ptr_type(DType d) { return d == DType::BFloat16 ? "unsigned short" : c_type(d); }

} // namespace

std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) {
  // Uses and loop depth of each node decide what is inlined: a value used once, in the loop
  // where it is computed, becomes part of its user's expression.
  std::unordered_map<const UOp*, int> uses, depth;
  std::unordered_map<const UOp*, const UOp*> user;
  std::map<int64_t, DType> globals;
  bool bf16 = false;
  int dep = 0;
  for (auto& u : linear) {
    if (u->op == Ops::ENDRANGE) dep--;
    depth[u.get()] = dep;
    if (u->op == Ops::RANGE) dep++;
    for (auto& s : u->src)
      uses[s.get()]++, user[s.get()] = u.get();
    if (u->op == Ops::DEFINE_GLOBAL) globals[u->iarg()] = u->dtype;
    bf16 |= u->dtype == DType::BFloat16;
  }
  std::ostringstream body;
  std::unordered_map<const UOp*, std::string> expr;
  std::unordered_map<const UOp*, int> nesting; // parenthesis depth of an inlined expression
  std::map<std::string, int> counters;
  auto fresh = [&](const std::string& p) { return p + std::to_string(counters[p]++); };
  int ind = 1;
  const UOp* par = parallel ? parallel_loop(linear) : nullptr;
  auto line = [&](const std::string& s) { body << std::string(ind * 2, ' ') << s << "\n"; };
  auto E = [&](const UOpRef& s) -> const std::string& {
    auto it = expr.find(s.get());
    if (it == expr.end()) {
      if (s->op == Ops::CONST) return expr[s.get()] = literal(s->dtype, s->const_value());
      throw std::logic_error(std::string("internal error: C renderer used ") + name(s->op) +
                             " before defining it");
    }
    return it->second;
  };
  for (auto& u : linear) {
    const UOp* p = u.get();
    switch (u->op) {
    case Ops::CONST:
      E(u);
      break;
    case Ops::DEFINE_GLOBAL:
      expr[p] = "data" + std::to_string(u->iarg());
      break;
    case Ops::RANGE: {
      std::string n = std::string(u->varg()[1] ? "ridx" : "gidx") + std::to_string(u->varg()[0]);
      expr[p] = n;
      if (p == par) { // this core's share of the outermost loop
        std::string sz = E(u->src[0]);
        std::string t = c_type(u->dtype);
        line(t + " lo = (" + t + ")(" + sz + "*(long long)core/ncores), hi = (" + t + ")(" + sz +
             "*(long long)(core+1)/ncores);");
        line("for (" + t + " " + n + " = lo; " + n + " < hi; " + n + "++) {");
      } else
        line("for (" + std::string(c_type(u->dtype)) + " " + n + " = 0; " + n + " < " + E(u->src[0]) + "; " +
             n + "++) {");
      ind++;
      break;
    }
    case Ops::ENDRANGE:
      ind--;
      line("}");
      break;
    case Ops::INDEX: {
      std::string ref = E(u->src[0]) + "[" + E(u->src[1]) + "]";
      if (u->dtype == DType::BFloat16) ref = "bf16_to_f32(" + ref + ")";
      expr[p] = ref;
      break;
    }
    case Ops::LOAD: {
      const UOp* idx = u->src[0].get();
      std::string v = expr.at(idx);
      if (idx->src.size() > 2) v = "(" + E(idx->src[2]) + "?" + v + ":" + literal(u->dtype, 0) + ")";
      std::string n = fresh("val");
      line(std::string(c_type(u->dtype)) + " " + n + " = " + v + ";");
      expr[p] = n;
      break;
    }
    case Ops::STORE: {
      const UOp* idx = u->src[0].get();
      std::string target = E(idx->src[0]) + "[" + E(idx->src[1]) + "]";
      std::string v = E(u->src[1]);
      if (idx->dtype == DType::BFloat16) v = "f32_to_bf16(" + v + ")";
      line(target + " = " + v + ";");
      break;
    }
    case Ops::DEFINE_ACC: {
      std::string n = fresh("acc");
      line(std::string(c_type(u->dtype)) + " " + n + " = " + E(u->src[0]) + ";");
      expr[p] = n;
      break;
    }
    case Ops::ASSIGN:
      line(E(u->src[0]) + " = " + E(u->src[1]) + ";");
      break;
    default: {
      std::vector<std::string> a;
      for (auto& s : u->src)
        a.push_back(E(s));
      std::string e = alu_expr(*u, a);
      const UOp* us = user.count(p) ? user[p] : nullptr;
      int nest = 1;
      for (auto& s : u->src)
        nest = std::max(nest, nesting[s.get()] + 1);
      // inline single-use values computed in their user's loop, but keep clang's bracket depth small
      if (uses[p] == 1 && us && depth[us] == depth[p] && nest < 64)
        expr[p] = e, nesting[p] = nest;
      else {
        std::string n = fresh("alu");
        line(std::string(c_type(u->dtype)) + " " + n + " = " + e + ";");
        expr[p] = n;
      }
    }
    }
  }
  std::ostringstream os;
  os << kPrelude << (bf16 ? kBf16 : "") << "void " << fn << "(void** bufs, int core, int ncores) {\n";
  for (auto& [i, d] : globals)
    os << "  " << (i == 0 ? "" : "const ") << ptr_type(d) << "* restrict data" << i << " = bufs[" << i
       << "];\n";
  os << body.str() << "}\n";
  return os.str();
}

} // namespace mg
