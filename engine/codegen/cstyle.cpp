#include "engine/codegen/cstyle.h"

#include "engine/codegen/slp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "engine/codegen/linearize.h"
#include "engine/codegen/opts.h"
#include "engine/errors.h"

namespace mg {

std::string cstyle_literal(const Dialect& dl, DType d, double v) {
  char b[64];
  if (is_float(d)) {
    if (std::isnan(v)) return dl.nan;
    if (std::isinf(v)) return v > 0 ? dl.inf : "(-" + dl.inf + ")";
    const std::string& suf = d == DType::Float64 ? dl.double_suffix : dl.float_suffix;
    if (v == std::floor(v) && std::fabs(v) < 1e15)
      std::snprintf(b, sizeof b, "%.1f", v);
    else
      std::snprintf(b, sizeof b, d == DType::Float64 ? "%.17g" : "%.9g", v);
    std::string s = b + suf;
    if (d == DType::Float16) s = dl.cast(d, s);
    return std::signbit(v) ? "(" + s + ")" : s; // -0.0 too: x - -0.0f must not read as x--0.0f
  }
  return cstyle_int_literal(dl, d, int_bits(d, v));
}

std::string cstyle_int_literal(const Dialect& dl, DType d, int64_t v) {
  char b[64];
  if (d == DType::Bool) return dl.typed_literals ? dl.cast(d, v != 0 ? "1" : "0") : v != 0 ? "1" : "0";
  if (d == DType::UInt64) {
    std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(v));
    return b + dl.uint64_suffix;
  }
  if (d == DType::Int64 && v == INT64_MIN)
    return "(-9223372036854775807" + dl.int64_suffix + "-1" + dl.int64_suffix + ")";
  std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
  if (d == DType::Int64) return "(" + std::string(b) + dl.int64_suffix + ")";
  if (d == DType::Int32 && v == INT32_MIN) return "(-2147483647-1)";
  if (d == DType::UInt32) return std::string(b) + dl.uint_suffix;
  std::string s = v < 0 ? "(" + std::string(b) + ")" : b;
  return d == DType::Int32 || !dl.typed_literals ? s : dl.cast(d, s);
}

namespace {

std::string alu_expr(const Dialect& dl, const UOp& u, const std::vector<std::string>& a) {
  if (dl.alu)
    if (std::string e = dl.alu(u, a); !e.empty()) return e;
  DType d = u.dtype;
  auto bin = [&](const char* op) { return "(" + a[0] + op + a[1] + ")"; };
  auto lit = [&](double v) { return cstyle_literal(dl, d, v); };
  switch (u.op) {
  case Ops::NEG:
    return "(-" + a[0] + ")";
  case Ops::EXP2:
    return dl.math("exp2", d, a);
  case Ops::LOG2:
    return dl.math("log2", d, a);
  case Ops::SIN:
    return dl.math("sin", d, a);
  case Ops::SQRT:
    return dl.math("sqrt", d, a);
  case Ops::TRUNC:
    return is_float(d) ? dl.math("trunc", d, a) : a[0];
  case Ops::POW:
    return dl.math("pow", d, a);
  case Ops::RECIP:
    return "(" + lit(1) + "/" + a[0] + ")";
  case Ops::CAST:
    return dl.cast(d, a[0]);
  case Ops::BITCAST: {
    DType from = u.src[0]->dtype;
    if (is_int(from) && is_int(d)) return dl.cast(d, a[0]); // one size: the cast keeps the bits
    if (std::string e = dl.bitcast ? dl.bitcast(from, d, a[0]) : ""; !e.empty()) return e;
    throw std::runtime_error(
        "the " + dl.name + " renderer cannot BITCAST " + name(from) + " to " + name(d) +
        (from == DType::BFloat16 || d == DType::BFloat16 || from == DType::Float16 || d == DType::Float16
             ? " (it computes the 16-bit floats in float32)"
             : ""));
  }
  case Ops::ADD:
    return bin("+");
  case Ops::SUB:
    return bin("-");
  case Ops::MUL:
    return bin("*");
  case Ops::IDIV: // integer division by 0 and -1 was made safe by pm_semantics
    return is_float(d) ? dl.math("trunc", d, {bin("/")}) : bin("/");
  case Ops::MOD:
    return is_float(d) ? dl.math("fmod", d, a) : dl.rem ? dl.rem(a[0], a[1]) : bin("%");
  case Ops::FDIV:
    return bin("/");
  case Ops::MAX: // float MAX became a NaN-aware WHERE in pm_semantics
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
  throw std::runtime_error("the " + dl.name + " renderer does not support " + name(u.op) + " yet");
}

// Whether alu_expr writes an operand more than once (so an inlined operand would be copied,
// and nested copies grow the source exponentially): those operands get names instead.
bool repeats_operands(const Dialect& dl, const UOp& u) {
  return u.op == Ops::MAX || (u.op == Ops::MOD && dl.rem && !is_float(u.dtype));
}

// The state of one rendering: what each node is called, and the body written so far.
struct CRender {
  explicit CRender(const Dialect& d) : dl(d) {}
  const Dialect& dl;
  std::unordered_map<const UOp*, int> uses, depth, nesting; // nesting: parentheses of an inlined value
  std::unordered_map<const UOp*, const UOp*> user;
  std::unordered_map<const UOp*, std::string> expr;
  std::map<std::string, int> counters;
  std::vector<std::string> shared;
  std::ostringstream body;
  int ind = 1;
  const UOp* par = nullptr; // the loop split across cores, if any
  bool par_nested = false;  // whether it has loops inside
  bool one_acc = false;     // the kernel has a single accumulator
  std::unordered_set<const UOp*> tiles;   // tile loops (linearize.h)
  std::unordered_set<const UOp*> gathers; // loops that would gather (linearize.h)
  Packs packs;                          // a tile's scalars written as vectors (slp.h)
  std::unordered_map<int, std::string> pack_expr;
  std::unordered_map<int, int> pack_uses; // by the other packs

  std::string fresh(const std::string& p) { return p + std::to_string(counters[p]++); }
  void line(const std::string& s) { body << std::string(ind * 2, ' ') << s << "\n"; }
  const std::string& E(const UOpRef& s) {
    auto it = expr.find(s.get());
    if (it != expr.end()) return it->second;
    if (s->op == Ops::CONST)
      return expr[s.get()] = is_float(s->dtype) ? cstyle_literal(dl, s->dtype, s->const_value())
                                                : cstyle_int_literal(dl, s->dtype, s->const_bits());
    internal_error(dl.name + " renderer used " + name(s->op) + " before defining it");
  }
  // A named variable `prefix<N>` holding `value`.
  void declare(const UOpRef& u, const std::string& prefix, const std::string& value) {
    std::string n = fresh(prefix);
    line(dl.type(u->dtype) + " " + n + " = " + value + ";");
    expr[u.get()] = n;
  }
};

void render_range(CRender& r, const UOpRef& u) {
  int kind = static_cast<int>(u->varg()[1]);
  const char* prefix = kind == kReduce   ? "ridx"
                       : kind == kGroup  ? "grp"
                       : kind == kLocal  ? "lidx"
                       : kind == kBlock  ? "blk"
                       : kind == kVector ? "vidx"
                                         : "gidx";
  std::string n = prefix + std::to_string(u->varg()[0]);
  std::string t = r.dl.type(u->dtype), sz = r.E(u->src[0]);
  r.expr[u.get()] = n;
  std::string lo = "0", hi = sz, share_lo = "(" + t + ")(" + sz + "*(long long)core/ncores)",
              share_hi = "(" + t + ")(" + sz + "*(long long)(core+1)/ncores)";
  // This core's share of the outermost loop. A loop with loops inside keeps its constant bounds
  // and skips the other shares: with bounds that vary by core, clang vectorized a convolution's
  // body 9x worse. A single loop takes the share as its bounds, or it would not vectorize.
  bool skip = u.get() == r.par && r.par_nested;
  if (u.get() == r.par && !r.par_nested) lo = share_lo, hi = share_hi;
  if (kind == kVector && !r.dl.vector_loop.empty()) r.line(r.dl.vector_loop);
  if (r.tiles.count(u.get()) && !r.dl.tile_loop.empty()) r.line(r.dl.tile_loop);
  if (r.gathers.count(u.get()) && !r.dl.scalar_loop.empty()) r.line(r.dl.scalar_loop);
  r.line("for (" + t + " " + n + " = " + lo + "; " + n + " < " + hi + "; " + n + "++) {");
  if (skip) r.line("  if (" + n + " < " + share_lo + " || " + n + " >= " + share_hi + ") continue;");
  r.ind++;
}

// The index of an INDEX, and the element of a buffer or shared array it points at.
std::string index_of(CRender& r, const UOp& idx) {
  return r.dl.index ? r.dl.index(idx.src[1]->dtype, r.E(idx.src[1])) : r.E(idx.src[1]);
}
std::string element(CRender& r, const UOp& idx) { return r.E(idx.src[0]) + "[" + index_of(r, idx) + "]"; }
bool is_shared(const UOp& idx) { return idx.src[0]->op == Ops::DEFINE_LOCAL; }

void render_load(CRender& r, const UOpRef& u) {
  const UOp& idx = *u->src[0];
  std::string v = is_shared(idx) || !r.dl.load
                      ? element(r, idx)
                      : r.dl.load(idx.src[0]->dtype, r.E(idx.src[0]), index_of(r, idx));
  if (idx.src.size() > 2) // gated
    v = "(" + r.E(idx.src[2]) + "?" + v + ":" + cstyle_literal(r.dl, u->dtype, 0) + ")";
  r.declare(u, "val", v);
}

void render_store(CRender& r, const UOpRef& u) {
  const UOp& idx = *u->src[0];
  std::string v = r.E(u->src[1]);
  std::string gate = idx.src.size() > 2 ? "if (" + r.E(idx.src[2]) + ") " : ""; // a padded dim (PADTO)
  if (is_shared(idx) || !r.dl.store) return r.line(gate + element(r, idx) + " = " + v + ";");
  r.line(gate + r.dl.store(idx.src[0]->dtype, r.E(idx.src[0]), index_of(r, idx), v));
}

// A kernel's only float sum may add its terms in any order, so clang vectorizes the loop into
// partial sums, one per lane (16x faster for a sum of exponentials); C's strict order allows no
// such thing. The term gets its own name first, so only the accumulation is reordered. Kernels
// with a tile of accumulators (matmul) already have independent chains, and a term split off
// its addition would no longer fuse into one multiply-add.
bool is_float_sum(const CRender& r, const UOpRef& u) {
  const UOpRef& v = u->src[1];
  return r.dl.reassociate && r.one_acc && is_float(v->dtype) && v->op == Ops::ADD && v->src[0] == u->src[0];
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

// Values are inlined into their single user when computed in the same loop (keeping the
// compiler's bracket depth small); otherwise they get a name.
void render_alu(CRender& r, const UOpRef& u) {
  std::vector<std::string> a;
  int nest = 1;
  for (auto& s : u->src) {
    a.push_back(r.E(s));
    nest = std::max(nest, r.nesting[s.get()] + 1);
  }
  std::string e = alu_expr(r.dl, *u, a);
  if (r.dl.half_in_float && u->dtype == DType::Float16 && u->op != Ops::CAST && u->op != Ops::WHERE &&
      u->op != Ops::MAX && u->op != Ops::NEG)
    e = r.dl.cast(DType::Float16, e); // (a choice or a sign change of half values is already one)
  // C promotes 8- and 16-bit integers to int: a sum, difference, product, negation or left shift
  // can leave their range, and used inline (a comparison) it would not wrap as the dtype does
  bool widens =
      u->op == Ops::ADD || u->op == Ops::SUB || u->op == Ops::MUL || u->op == Ops::NEG || u->op == Ops::SHL;
  if (widens && is_int(u->dtype) && itemsize(u->dtype) < 4)
    e = r.dl.wrap ? r.dl.wrap(u->dtype, e) : r.dl.cast(u->dtype, e);
  const UOp* us = r.user.count(u.get()) ? r.user[u.get()] : nullptr;
  // A named index plus a constant is written out at each use, however many: declared, it is one
  // more value live across the loops between its uses. A blocked reduce's 100 output indices,
  // read before its loop and stored after it, made clang spill the loop's accumulators (625
  // stack accesses against 60).
  bool offset = u->op == Ops::ADD && is_int(u->dtype) && u->src[1]->op == Ops::CONST &&
                a[0].find_first_of("( ") == std::string::npos;
  if (offset || (r.uses[u.get()] == 1 && us && r.depth[us] == r.depth[u.get()] && nest < 64 &&
                 !repeats_operands(r.dl, *us)))
    r.expr[u.get()] = e, r.nesting[u.get()] = nest;
  else
    r.declare(u, "alu", e);
}

void render_shared(CRender& r, const UOpRef& u) {
  std::string n = "temp" + std::to_string(u->varg()[0]);
  r.expr[u.get()] = n;
  std::string decl = r.dl.type(u->dtype) + " " + n + "[" + std::to_string(u->varg()[1]) + "]";
  if (r.dl.shared_in_body)
    r.line(r.dl.shared + decl + ";");
  else
    r.shared.push_back(decl);
}

// The terms of a sum of packs, each pack an addition used only there taken apart.
void sum_terms(const CRender& r, int id, std::vector<int>& out) {
  const Pack& p = r.packs.packs[static_cast<size_t>(id)];
  if (p.kind == Pack::Alu && p.members[0]->op == Ops::ADD && r.pack_uses.at(id) == 1 && p.src[0] >= 0 &&
      p.src[1] >= 0) {
    sum_terms(r, p.src[0], out);
    sum_terms(r, p.src[1], out);
  } else {
    out.push_back(id);
  }
}

// An accumulator's new value. acc + (t0 + t1 + ...) (an unrolled reduce's terms summed first) is
// written ((acc + t0) + t1) + ..., so that each product fuses with its addition into one
// multiply-add, as the loop without the unroll would add them.
std::string accumulated(CRender& r, const Pack& assign) {
  const int acc = assign.src[0], value = assign.src[1];
  const Pack& v = r.packs.packs[static_cast<size_t>(value)];
  if (v.kind != Pack::Alu || v.members[0]->op != Ops::ADD || r.pack_uses.at(value) != 1 ||
      (v.src[0] != acc && v.src[1] != acc) || v.src[0] == v.src[1])
    return r.pack_expr.at(value);
  const int rest = v.src[0] == acc ? v.src[1] : v.src[0];
  if (rest < 0) return r.pack_expr.at(value);
  std::vector<int> terms;
  sum_terms(r, rest, terms);
  std::string e = r.pack_expr.at(acc);
  for (int t : terms)
    e = "(" + e + "+" + r.pack_expr.at(t) + ")";
  return e;
}

// A LoadGroup (slp.h): its vector loads joined into one long vector, each pack's lanes picked out
// of it (clang lowers the shuffles to a few permutes), where loading lane by lane took a gather.
void render_group(CRender& r, const LoadGroup& g) {
  const std::string buf = r.expr.at(g.buffer), base = r.expr.at(g.base);
  std::vector<std::string> parts;
  for (int64_t off : g.loads) {
    std::string n = r.fresh("run");
    std::string at = off == 0 ? base : base + (off < 0 ? "" : "+") + std::to_string(off);
    r.line("mg_float" + std::to_string(g.width) + " " + n + " = *(const mg_float" + std::to_string(g.width) +
           "u*)&" + buf + "[" + at + "];");
    parts.push_back(n);
  }
  for (int width = 2 * g.width; parts.size() > 1; width *= 2) {
    std::vector<std::string> joined;
    std::string all;
    for (int i = 0; i < width; i++)
      all += (i ? "," : "") + std::to_string(i);
    for (size_t i = 0; i < parts.size(); i += 2) {
      std::string n = r.fresh("run");
      r.line("mg_float" + std::to_string(width) + " " + n + " = __builtin_shufflevector(" + parts[i] + ", " +
             parts[i + 1] + ", " + all + ");");
      joined.push_back(n);
    }
    parts = std::move(joined);
  }
  for (size_t i = 0; i < g.packs.size(); i++) {
    std::string pick;
    for (int64_t e : g.picks[i])
      pick += "," + std::to_string(e);
    std::string n = r.fresh("val");
    r.line("mg_float" + std::to_string(r.packs.lanes) + " " + n + " = __builtin_shufflevector(" + parts[0] +
           ", " + parts[0] + pick + ");");
    r.pack_expr[g.packs[i]] = n;
  }
}

// A pack (slp.h) as one vector statement, written where its last lane's scalar would be.
void render_pack(CRender& r, int id) {
  const Pack& p = r.packs.packs[static_cast<size_t>(id)];
  const std::string lanes = std::to_string(r.packs.lanes), mask = "mg_int" + lanes,
                    t = (p.members[0]->dtype == DType::Bool ? "mg_int" : "mg_float") + lanes, tu = t + "u";
  const UOp& u0 = *p.members[0];
  auto splat = [&](const std::string& x) {
    std::string s = "(" + t + "){";
    for (int l = 0; l < r.packs.lanes; l++)
      s += (l ? ", " : "") + x;
    return s + "}";
  };
  // source s of the pack's op: its pack's vector, or the one scalar all lanes read
  auto operand = [&](size_t s, bool vector) {
    int q = p.src[s];
    if (q >= 0) return r.pack_expr.at(q);
    return vector ? splat(r.E(u0.src[s])) : r.E(u0.src[s]);
  };
  auto address = [&](const UOp& idx) { return "&" + element(r, idx); };
  auto declare = [&](const std::string& prefix, const std::string& value) {
    std::string n = r.fresh(prefix);
    r.line(t + " " + n + " = " + value + ";");
    r.pack_expr[id] = n;
  };
  switch (p.kind) {
  case Pack::Acc:
    return declare("acc", splat(r.E(u0.src[0])));
  case Pack::Load: {
    if (p.stride == 1) return declare("val", "*(const " + tu + "*)" + address(*u0.src[0]));
    if (r.pack_expr.count(id)) return; // its group's
    if (auto g = r.packs.group_of.find(id); g != r.packs.group_of.end())
      return render_group(r, r.packs.groups[static_cast<size_t>(g->second)]);
    std::string lanes_of = "(" + t + "){"; // a lane at a time
    for (size_t l = 0; l < p.members.size(); l++)
      lanes_of += (l ? ", " : "") + element(r, *p.members[l]->src[0]);
    return declare("val", lanes_of + "}");
  }
  case Pack::Assign:
    return r.line(r.pack_expr.at(p.src[0]) + " = " + accumulated(r, p) + ";");
  case Pack::Store:
    return r.line("*(" + tu + "*)" + address(*u0.src[0]) + " = " + r.pack_expr.at(p.src[0]) + ";");
  case Pack::Alu:
    break;
  }
  std::string e;
  switch (u0.op) {
  case Ops::NEG:
    e = "(-" + operand(0, false) + ")";
    break;
  case Ops::WHERE:
    if (p.src[0] < 0) {
      e = "(" + operand(0, false) + "?" + operand(1, true) + ":" + operand(2, true) + ")";
      break;
    }
    // a condition per lane (C's ?: takes none): the lanes' bits chosen by the comparison's mask
    e = "((" + t + ")((" + operand(0, false) + "&(" + mask + ")" + operand(1, true) + ")|(~" +
        operand(0, false) + "&(" + mask + ")" + operand(2, true) + ")))";
    break;
  case Ops::CMPLT:
  case Ops::CMPNE:
    e = "(" + operand(0, false) + (u0.op == Ops::CMPLT ? "<" : "!=") + operand(1, false) + ")";
    break;
  default: {
    const char* op = u0.op == Ops::ADD ? "+" : u0.op == Ops::SUB ? "-" : u0.op == Ops::MUL ? "*" : "/";
    e = "(" + operand(0, false) + op + operand(1, false) + ")";
  }
  }
  // a comparison is named: a choice by it writes it twice (its bits and their complement)
  if (r.pack_uses[id] == 1 && u0.op != Ops::WHERE && u0.op != Ops::CMPLT && u0.op != Ops::CMPNE)
    r.pack_expr[id] = e; // written into its one user
  else
    declare("vec", e);
}

// What each non-ALU op of the linear program becomes.
const std::unordered_map<Ops, void (*)(CRender&, const UOpRef&)>& c_rules() {
  static const std::unordered_map<Ops, void (*)(CRender&, const UOpRef&)> rules{
      {Ops::CONST, [](CRender& r, const UOpRef& u) { r.E(u); }},
      {Ops::DEFINE_GLOBAL,
       [](CRender& r, const UOpRef& u) { r.expr[u.get()] = "data" + std::to_string(u->iarg()); }},
      {Ops::DEFINE_LOCAL, render_shared},
      {Ops::DEFINE_VAR, // a Variable's value, read from its slot and named after it
       [](CRender& r, const UOpRef& u) {
         r.line(r.dl.type(u->dtype) + " " + u->var().name + " = " + r.E(u->src[0]) + ";");
         r.expr[u.get()] = u->var().name;
       }},
      {Ops::SPECIAL,
       [](CRender& r, const UOpRef& u) {
         LaunchDim ld = launch_dim(*u);
         std::string n = ld.name();
         r.line(r.dl.type(u->dtype) + " " + n + " = " + r.dl.special(ld) + "; /* " + r.E(u->src[0]) + " */");
         r.expr[u.get()] = n;
       }},
      {Ops::BARRIER, [](CRender& r, const UOpRef&) { r.line(r.dl.barrier); }},
      {Ops::RANGE, render_range},
      {Ops::ENDRANGE,
       [](CRender& r, const UOpRef&) {
         r.ind--;
         r.line("}");
       }},
      {Ops::INDEX, [](CRender&, const UOpRef&) {}}, // written where it is loaded or stored
      {Ops::LOAD, render_load},
      {Ops::STORE, render_store},
      {Ops::DEFINE_ACC, [](CRender& r, const UOpRef& u) { r.declare(u, "acc", r.E(u->src[0])); }},
      {Ops::ASSIGN, render_assign},
  };
  return rules;
}

} // namespace

std::string render_cstyle(const Dialect& dl, const std::string& fn, const std::vector<UOpRef>& linear,
                          bool parallel) {
  CRender r(dl);
  KernelParts parts{fn, {}, {}, {}, "", &linear};
  std::map<int64_t, DType> globals;
  int dep = 0;
  for (auto& u : linear) {
    if (u->op == Ops::ENDRANGE) dep--;
    r.depth[u.get()] = dep;
    if (u->op == Ops::RANGE) dep++;
    for (auto& s : u->src)
      r.uses[s.get()]++, r.user[s.get()] = u.get();
    if (u->op == Ops::DEFINE_GLOBAL) globals[u->iarg()] = u->dtype;
    if (u->op == Ops::SPECIAL && launch_dim(*u).local) {
      size_t i = static_cast<size_t>(launch_dim(*u).axis);
      if (parts.local_size.size() <= i) parts.local_size.resize(i + 1, 1);
      parts.local_size[i] = static_cast<int64_t>(u->src[0]->const_value());
    }
  }
  r.par = parallel ? parallel_loop(linear) : nullptr;
  r.tiles = tile_loops(linear);
  r.gathers = gather_loops(linear);
  r.one_acc = std::count_if(linear.begin(), linear.end(),
                            [](const UOpRef& u) { return u->op == Ops::DEFINE_ACC; }) == 1;
  r.par_nested =
      std::count_if(linear.begin(), linear.end(), [](const UOpRef& u) { return u->op == Ops::RANGE; }) > 1;
  if (dl.vector_lanes) r.packs = find_packs(linear, dl.vector_lanes());
  for (auto& p : r.packs.packs)
    for (int q : p.src)
      if (q >= 0) r.pack_uses[q]++;
  const auto& rules = c_rules();
  for (size_t i = 0; i < linear.size(); i++) {
    const UOpRef& u = linear[i];
    if (auto p = r.packs.of.find(u.get()); p != r.packs.of.end()) {
      if (r.packs.packs[static_cast<size_t>(p->second)].last == i) render_pack(r, p->second);
      continue;
    }
    auto it = rules.find(u->op);
    if (it != rules.end())
      it->second(r, u);
    else
      render_alu(r, u);
  }
  for (int64_t i = 0; !globals.empty() && i <= globals.rbegin()->first; i++)
    parts.globals.push_back({i, globals.count(i) ? globals[i] : DType::Void});
  parts.shared = r.shared;
  parts.body = r.body.str();
  return dl.header(parts);
}

} // namespace mg
