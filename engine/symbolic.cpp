#include "engine/symbolic.h"

#include <cmath>
#include <map>
#include <numeric>
#include <optional>

namespace mg {

namespace {
using P = UPat;
const P x = P::var("x"), y = P::var("y"), c1 = P::cvar("c1"), c2 = P::cvar("c2");

bool is_int_like(const UOp& u) { return !is_float(u.dtype); }
UOpRef cst(const UOpRef& like, double v) { return UOp::cconst_like(like, v); }
double cv(const Match& m, const char* n) { return m[n]->const_value(); }

std::vector<Ops> alu_ops() {
  std::vector<Ops> r;
  for (int o = 0; o < num_ops; o++)
    if (is_elementwise(static_cast<Ops>(o)) && static_cast<Ops>(o) != Ops::BITCAST)
      r.push_back(static_cast<Ops>(o));
  return r;
}

// The value-preserving core.
std::vector<std::pair<UPat, RewriteFn>> simple_rules() {
  return {
      // const folding: an ALU op on constants is a constant
      {P::op(alu_ops()).where([](const UOp& u) {
         for (auto& s : u.src)
           if (s->op != Ops::CONST) return false;
         return !u.src.empty();
       }),
       [](const Match& m) {
         auto& u = m.root();
         std::vector<double> v;
         for (auto& s : u->src)
           v.push_back(s->const_value());
         if (u->op == Ops::CAST) return cast_const(*u->src[0], u->dtype);
         return UOp::cconst(u->dtype, exec_alu(u->op, u->dtype, v));
       }},
      // a gate that folded to true (a padded dim's tail, UPCAST away) is no gate
      {P::op(Ops::INDEX).where([](const UOp& u) {
         return u.src.size() == 3 && u.src[2]->op == Ops::CONST && u.src[2]->const_value() != 0;
       }),
       [](const Match& m) {
         auto& u = m.root();
         return UOp::make(Ops::INDEX, u->dtype, {u->src[0], u->src[1]}, u->arg);
       }},
      // a load whose gate folded to false (a concatenation's other pieces, UPCAST apart) reads
      // nothing: it is the 0 the renderer would give it
      {P::op(Ops::LOAD).where([](const UOp& u) {
         const UOp& i = *u.src[0];
         return i.op == Ops::INDEX && i.src.size() == 3 && i.src[2]->op == Ops::CONST &&
                i.src[2]->const_value() == 0;
       }),
       [](const Match& m) { return UOp::cconst(m.root()->dtype, 0); }},
      {x + 0, [](const Match& m) { return m["x"]; }},                                        // x+0 -> x
      {x * 1, [](const Match& m) { return m["x"]; }},                                        // x*1 -> x
      {(x * 0).where(is_int_like), [](const Match& m) { return cst(m["x"], 0); }},           // x*0 -> 0
      {x.idiv(P::cnst(1)), [](const Match& m) { return m["x"]; }},                           // x//1 -> x
      {x.mod(P::cnst(1)).where(is_int_like), [](const Match& m) { return cst(m["x"], 0); }}, // x%1 -> 0
      {-(-x), [](const Match& m) { return m["x"]; }},                                        // -(-x) -> x
      {x.max(x), [](const Match& m) { return m["x"]; }},                                     // max(x,x) -> x
      {P::op(Ops::SUB, {x, x}).where(is_int_like), [](const Match& m) { return cst(m["x"], 0); }}, // x-x -> 0
      {P::op(Ops::CAST, {x}).where([](const UOp& u) { return u.dtype == u.src[0]->dtype; }),
       [](const Match& m) { return m["x"]; }}, // cast to own dtype
      {x & P::cnst(1), [](const Match& m) { return m["x"]->dtype == DType::Bool ? m["x"] : nullptr; }},
      {x & P::cnst(0),
       [](const Match& m) { return m["x"]->dtype == DType::Bool ? cst(m["x"], 0) : nullptr; }},
      {x | P::cnst(0), [](const Match& m) { return m["x"]->dtype == DType::Bool ? m["x"] : nullptr; }},
      {x & x, [](const Match& m) { return m["x"]; }},
      // where with a known condition, or equal branches
      {P::op(Ops::WHERE, {P::cvar("c"), x, y}),
       [](const Match& m) { return cv(m, "c") != 0 ? m["x"] : m["y"]; }},
      {P::op(Ops::WHERE, {P::var("c"), x, x}), [](const Match& m) { return m["x"]; }},
  };
}

// Sum of terms, dropping the empty sum to a zero constant of `like`'s dtype.
UOpRef sum_terms(const std::vector<UOpRef>& ts, const UOpRef& like) {
  if (ts.empty()) return cst(like, 0);
  UOpRef r = ts[0];
  for (size_t i = 1; i < ts.size(); i++)
    r = r + ts[i];
  return r;
}

// For x >= 0 and g dividing c: x//c = (x//g)//(c/g). When every term's coefficient but a
// few is a multiple of g, and those few sum to S in [0, g), x//g is exact: the big terms over g.
// So (a*216 + b*36 + s) // 6912 with 0 <= b*36 + s < 216 is a // 32 (the index math of a view
// that reshapes a merged dim back). x%c = ((x//g) % (c/g))*g + S likewise.
UOpRef fold_by_gcd(const UOpRef& xu, int64_t c, bool want_div) {
  auto terms = split_add(xu);
  auto coef = [](const UOpRef& t) -> int64_t {
    if (t->op == Ops::CONST) return static_cast<int64_t>(t->const_value());
    if (t->op == Ops::MUL && t->src[1]->op == Ops::CONST)
      return static_cast<int64_t>(t->src[1]->const_value());
    return 1;
  };
  std::vector<int64_t> cands;
  for (auto& t : terms)
    if (int64_t g = std::gcd(coef(t), c); g > 1 && g < c) cands.push_back(g);
  std::sort(cands.rbegin(), cands.rend());
  for (int64_t g : cands) {
    std::vector<UOpRef> big, small;
    bool ok = true;
    for (auto& t : terms) {
      int64_t k = coef(t);
      if (k % g != 0) {
        small.push_back(t);
        continue;
      }
      if (t->vmin() < 0) ok = false;
      if (t->op == Ops::CONST)
        big.push_back(cst(t, static_cast<double>(k / g)));
      else if (k == g)
        big.push_back(t->op == Ops::MUL ? t->src[0] : t); // coefficient g == 1 is excluded above
      else
        big.push_back(t->src[0] * static_cast<double>(k / g));
    }
    if (!ok || big.empty()) continue;
    UOpRef sm = sum_terms(small, xu);
    if (sm->vmin() < 0 || sm->vmax() >= static_cast<double>(g)) continue;
    UOpRef b = sum_terms(big, xu);
    if (want_div) return idiv(b, static_cast<double>(c / g));
    return mod(b, static_cast<double>(c / g)) * static_cast<double>(g) + sm;
  }
  return nullptr;
}

// a / b rounded down (C rounds toward 0)
int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// (sum of coef_i * t_i + k) // c and % c for x >= 0: split each coefficient (and k) into a
// multiple of c and a remainder in [0, c). With x = Q*c + R, floor(x/c) = Q + floor(R/c), and
// if R's range stays within one multiple of c the quotient and remainder are exact.
UOpRef fold_divmod(const UOpRef& xu, int64_t c, bool want_div) {
  if (c <= 0 || xu->vmin() < 0) return nullptr;
  std::vector<UOpRef> quot, rest;
  bool moved = false;
  for (auto& t : split_add(xu)) {
    bool is_const = t->op == Ops::CONST, scaled = t->op == Ops::MUL && t->src[1]->op == Ops::CONST;
    if (!is_const && !scaled) {
      rest.push_back(t);
      continue;
    }
    int64_t v = static_cast<int64_t>((is_const ? t : t->src[1])->const_value());
    int64_t q = floor_div(v, c), r = v - q * c;
    if (q == 0) {
      rest.push_back(t);
      continue;
    }
    moved = true;
    if (is_const) {
      quot.push_back(cst(t, static_cast<double>(q)));
      if (r) rest.push_back(cst(t, static_cast<double>(r)));
    } else {
      quot.push_back(q == 1 ? t->src[0] : t->src[0] * static_cast<double>(q));
      if (r) rest.push_back(r == 1 ? t->src[0] : t->src[0] * static_cast<double>(r));
    }
  }
  UOpRef r = sum_terms(rest, xu);
  double qlo = std::floor(r->vmin() / c), qhi = std::floor(r->vmax() / c);
  if (qlo != qhi && !moved)
    if (UOpRef g = fold_by_gcd(xu, c, want_div)) return g;
  if (qlo != qhi) {
    // x//c = Q + R//c and x%c = R%c, with C's truncation agreeing with floor only for R >= 0
    if (!moved || r->vmin() < 0) return nullptr;
    if (want_div) return sum_terms(quot, xu) + idiv(r, static_cast<double>(c));
    return mod(r, static_cast<double>(c));
  }
  if (want_div) {
    if (qlo) quot.push_back(cst(xu, qlo));
    return sum_terms(quot, xu);
  }
  return qlo ? r + (-qlo * c) : r;
}

bool depends_on(const UOp* u, const std::vector<UOpRef>& ranges) {
  for (const UOp* n : toposort(u))
    for (auto& r : ranges)
      if (n == r.get()) return true;
  return false;
}

// The number of r in [0, N) that satisfy every comparison in `conds`, each a bound of the form
// k < a + r or a + r < k with a and k free of the reduce's ranges; nullptr if one is not.
UOpRef count_where(const std::vector<UOpRef>& conds, const UOpRef& r, const std::vector<UOpRef>& all) {
  UOpRef lo = UOp::cconst(r->dtype, 0), hi = r->src[0];
  for (auto& c : conds) {
    if (c->op != Ops::CMPLT || c->src[0]->dtype != r->dtype) return nullptr;
    bool r_left = depends_on(c->src[0].get(), all);
    const UOpRef& side = c->src[r_left ? 0 : 1];
    const UOpRef& k = c->src[r_left ? 1 : 0];
    if (depends_on(k.get(), all)) return nullptr;
    std::vector<UOpRef> rest;
    int seen = 0;
    for (auto& t : split_add(side)) {
      if (t == r)
        seen++;
      else if (depends_on(t.get(), all))
        return nullptr;
      else
        rest.push_back(t);
    }
    if (seen != 1) return nullptr;
    UOpRef a = sum_terms(rest, k), bound = alu(Ops::SUB, {k, a});
    if (r_left)
      hi = alu(Ops::WHERE, {alu(Ops::CMPLT, {hi, bound}), hi, bound}); // min(hi, bound)
    else
      lo = alu(Ops::MAX, {lo, bound + 1});
  }
  return alu(Ops::MAX, {alu(Ops::SUB, {hi, lo}), UOp::cconst(r->dtype, 0)});
}

// Sums over loops of values that do not change inside them fold to closed forms, so
// arange (a cumsum of a constant, as tinygrad builds it) costs O(n) and not O(n^2):
// sum_r c = c*N, and sum_r where(lo <= r < hi, c, 0) = c*max(min(hi,N) - max(lo,0), 0).
UOpRef fold_reduce(const UOpRef& red) {
  std::vector<UOpRef> ranges(red->src.begin() + 1, red->src.end());
  std::vector<UOpRef> folded, kept;
  auto times = [](const UOpRef& v, const UOpRef& n) { return v * cast(n, v->dtype); };
  for (auto& t : split_add(red->src[0])) {
    if (!depends_on(t.get(), ranges)) {
      UOpRef f = t;
      for (auto& r : ranges)
        f = times(f, r->src[0]);
      folded.push_back(f);
      continue;
    }
    UOpRef f;
    if (t->op == Ops::WHERE && t->src[2]->op == Ops::CONST && t->src[2]->const_value() == 0 &&
        !depends_on(t->src[1].get(), ranges)) {
      std::vector<UOpRef> conds;
      std::vector<UOpRef> todo{t->src[0]};
      while (!todo.empty()) {
        UOpRef c = todo.back();
        todo.pop_back();
        if (c->op == Ops::AND)
          todo.push_back(c->src[0]), todo.push_back(c->src[1]);
        else
          conds.push_back(c);
      }
      for (auto& r : ranges) {
        bool only_r = true;
        for (auto& c : conds)
          only_r &= !depends_on(c.get(), ranges) || depends_on(c.get(), {r});
        if (!only_r) continue;
        if (UOpRef n = count_where(conds, r, ranges)) {
          f = times(t->src[1], n);
          for (auto& o : ranges)
            if (o != r) f = times(f, o->src[0]);
        }
        break;
      }
    }
    if (f)
      folded.push_back(f);
    else
      kept.push_back(t);
  }
  if (folded.empty()) return nullptr;
  if (!kept.empty()) {
    std::vector<UOpRef> src{sum_terms(kept, red)};
    src.insert(src.end(), ranges.begin(), ranges.end());
    folded.push_back(UOp::make(Ops::REDUCE, red->dtype, src, red->arg));
  }
  return sum_terms(folded, red);
}

// The clauses of a gate: an AND chain's leaves.
void clauses_of(const UOpRef& v, std::vector<UOpRef>& out) {
  if (v->op == Ops::AND && v->dtype == DType::Bool) {
    clauses_of(v->src[0], out);
    clauses_of(v->src[1], out);
  } else {
    out.push_back(v);
  }
}

// e as k * v + d: one loop or launch index v times a constant k > 0, plus a constant d.
struct Linear {
  UOpRef v;
  int64_t k = 0, d = 0;
};
std::optional<Linear> linear_in_one(const UOpRef& e) {
  Linear l;
  for (auto& t : split_add(e)) {
    if (t->op == Ops::CONST) {
      l.d += static_cast<int64_t>(t->const_value());
      continue;
    }
    bool scaled = t->op == Ops::MUL && t->src[1]->op == Ops::CONST;
    const UOpRef& v = scaled ? t->src[0] : t;
    if (l.v || (v->op != Ops::RANGE && v->op != Ops::SPECIAL)) return std::nullopt;
    l.v = v;
    l.k = scaled ? static_cast<int64_t>(t->src[1]->const_value()) : 1;
  }
  if (!l.v || l.k <= 0) return std::nullopt;
  return l;
}

// tinygrad's simplify_valid: a gated access's index simplified within the bounds its gate sets on
// the loop indices. A concatenation's piece is read only where its index is in the piece, e.g.
// 8 <= i < 16 of 24 chunks; there i*16 - 128 >= 0, so the divisions and remainders of the piece's
// view fold, which over all of i they could not (the GPT's q, k and v gradients joined: 1.6 ms of
// div/mod per element). Each narrowed index is swapped for a Variable with the narrowed bounds,
// the index simplified, and the Variable swapped back.
UOpRef index_given_valid(const UOpRef& index) {
  std::vector<UOpRef> clauses;
  clauses_of(index->src[2], clauses);
  struct Bounds {
    UOpRef v;
    int64_t lo, hi;
  };
  std::map<const UOp*, Bounds> bounds; // by loop or launch index
  for (auto& c : clauses) {
    if (c->op != Ops::CMPLT) continue;
    bool left = c->src[1]->op == Ops::CONST; // k*v + d < c, else c < k*v + d
    if (left == (c->src[0]->op == Ops::CONST)) continue;
    auto l = linear_in_one(c->src[left ? 0 : 1]);
    if (!l) continue;
    int64_t lim = static_cast<int64_t>(c->src[left ? 1 : 0]->const_value()) - l->d;
    auto [it, fresh] = bounds.try_emplace(
        l->v.get(), Bounds{l->v, static_cast<int64_t>(l->v->vmin()), static_cast<int64_t>(l->v->vmax())});
    Bounds& b = it->second;
    if (left)
      b.hi = std::min(b.hi, floor_div(lim - 1, l->k));
    else
      b.lo = std::max(b.lo, floor_div(lim, l->k) + 1);
  }
  std::vector<std::pair<const UOp*, UOpRef>> in, out;
  std::vector<UOpRef> vars; // kept alive while `out` points at them
  for (auto& [v, b] : bounds) {
    if (b.lo > b.hi) return nullptr; // never valid: left to the gate
    if (b.lo == v->vmin() && b.hi == v->vmax()) continue;
    std::string name = "valid@" + std::to_string(reinterpret_cast<uintptr_t>(v));
    vars.push_back(UOp::make(Ops::DEFINE_VAR, v->dtype, {}, VarArg{name, b.lo, b.hi}));
    in.push_back({v, vars.back()});
    out.push_back({vars.back().get(), b.v});
  }
  if (in.empty()) return nullptr;
  RewriteTrace quiet; // the inner passes stay out of VIZ's list of this kernel's passes
  UOpRef idx = graph_rewrite(substitute(index->src[1], in), symbolic());
  idx = substitute(idx, out);
  if (idx == index->src[1]) return nullptr;
  return UOp::make(Ops::INDEX, index->dtype, {index->src[0], idx, index->src[2]}, index->arg);
}

std::vector<std::pair<UPat, RewriteFn>> full_rules() {
  auto r = simple_rules();
  std::vector<std::pair<UPat, RewriteFn>> more{
      // a proven single value is a constant
      {P::op(alu_ops()).where(
           [](const UOp& u) { return !is_float(u.dtype) && u.vmin() == u.vmax() && u.op != Ops::CONST; }),
       [](const Match& m) { return cst(m.root(), m.root()->vmin()); }},
      {P::op(Ops::RANGE).where([](const UOp& u) { return u.vmax() == 0; }),
       [](const Match& m) { return cst(m.root(), 0); }},
      {P::op(Ops::REDUCE).where([](const UOp& u) { return u.rarg().op == Ops::ADD; }),
       [](const Match& m) { return fold_reduce(m.root()); }},
      {P::op(Ops::INDEX).where([](const UOp& u) { return u.src.size() == 3; }),
       [](const Match& m) { return index_given_valid(m.root()); }},
      // integer subtraction and negation as multiply-adds, so the chain rules below see them
      {P::op(Ops::SUB, {x, y}).where(is_int_like), [](const Match& m) { return m["x"] + m["y"] * -1; }},
      {(-x).where(is_int_like), [](const Match& m) { return m["x"] * -1; }},
      // max decided by ranges
      {x.max(y).where(is_int_like),
       [](const Match& m) {
         if (m["x"]->vmin() >= m["y"]->vmax()) return m["x"];
         return m["y"]->vmin() >= m["x"]->vmax() ? m["y"] : UOpRef();
       }},
      // chains: (x+c1)+c2 -> x+(c1+c2), (x*c1)*c2 -> x*(c1*c2)
      // (integers only: reassociating floats changes rounding)
      {((x + c1) + c2).where(is_int_like),
       [](const Match& m) { return m["x"] + (cv(m, "c1") + cv(m, "c2")); }},
      {((x * c1) * c2).where(is_int_like),
       [](const Match& m) { return m["x"] * (cv(m, "c1") * cv(m, "c2")); }},
      // constants to the right: c+x -> x+c (commuted patterns match either order; this fixes the print order)
      {P::op(Ops::ADD, {P::cvar("c"), x}).where([](const UOp& u) { return u.src[0]->op == Ops::CONST; }),
       [](const Match& m) { return m["x"] + m["c"]; }},
      {P::op(Ops::MUL, {P::cvar("c"), x}).where([](const UOp& u) { return u.src[0]->op == Ops::CONST; }),
       [](const Match& m) { return m["x"] * m["c"]; }},
      // move constants out of sums: (x+c)+y -> (x+y)+c
      {((x + c1) + y).where(is_int_like),
       [](const Match& m) { return m["y"]->op == Ops::CONST ? nullptr : (m["x"] + m["y"]) + m["c1"]; }},
      // x+x -> x*2, x*c1+x*c2 -> x*(c1+c2), x*c+x -> x*(c+1)
      {(x + x).where(is_int_like), [](const Match& m) { return m["x"] * 2; }},
      {((x * c1) + (x * c2)).where(is_int_like),
       [](const Match& m) { return m["x"] * (cv(m, "c1") + cv(m, "c2")); }},
      {((x * c1) + x).where(is_int_like), [](const Match& m) { return m["x"] * (cv(m, "c1") + 1); }},
      // distribute over constant offsets: (x+c1)*c2 -> x*c2 + c1*c2 (helps div/mod folding)
      {((x + c1) * c2).where(is_int_like),
       [](const Match& m) { return m["x"] * m["c2"] + cv(m, "c1") * cv(m, "c2"); }},
      // div and mod from ranges
      {x.idiv(c1).where(is_int_like),
       [](const Match& m) { return fold_divmod(m["x"], static_cast<int64_t>(cv(m, "c1")), true); }},
      {x.mod(c1).where(is_int_like),
       [](const Match& m) { return fold_divmod(m["x"], static_cast<int64_t>(cv(m, "c1")), false); }},
      // (x//c1)//c2 -> x//(c1*c2) for x >= 0
      {x.idiv(c1).idiv(c2).where(is_int_like),
       [](const Match& m) {
         if (m["x"]->vmin() < 0 || cv(m, "c1") <= 0 || cv(m, "c2") <= 0) return UOpRef();
         return idiv(m["x"], cv(m, "c1") * cv(m, "c2"));
       }},
      // compares: x*c1 < c2 -> x < ceil(c2/c1) for c1 > 0; x+c1 < c2 -> x < c2-c1
      {(x * c1).lt(c2).where([](const UOp& u) { return is_int_like(*u.src[0]); }),
       [](const Match& m) {
         double a = cv(m, "c1"), b = cv(m, "c2");
         if (a <= 0) return UOpRef();
         return lt(m["x"], std::ceil(b / a));
       }},
      {(x + c1).lt(c2).where([](const UOp& u) { return is_int_like(*u.src[0]); }),
       [](const Match& m) { return lt(m["x"], cv(m, "c2") - cv(m, "c1")); }},
      {x.lt(x).where([](const UOp& u) { return is_int_like(*u.src[0]); }),
       [](const Match& m) { return UOp::cconst(DType::Bool, 0); }},
  };
  r.insert(r.end(), more.begin(), more.end());
  return r;
}
} // namespace

std::vector<UOpRef> split_add(const UOpRef& x) {
  if (x->op != Ops::ADD) return {x};
  auto a = split_add(x->src[0]), b = split_add(x->src[1]);
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const PatternMatcher& symbolic_simple() {
  static const PatternMatcher pm(simple_rules());
  return pm;
}
const PatternMatcher& symbolic() {
  static const PatternMatcher pm(full_rules());
  return pm;
}

} // namespace mg
