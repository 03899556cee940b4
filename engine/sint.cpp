#include "engine/sint.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include "engine/symbolic.h"
#include "engine/uop.h"

namespace mg {

namespace {

// An expression as sum(coef * atom) + c, atoms being variables (or any non-affine part), so
// that start_pos+1 - start_pos folds to 1 and equal sums build the same UOp.
struct Affine {
  std::map<const UOp*, std::pair<UOpRef, int64_t>> terms; // keyed by node, ordered when built
  int64_t c = 0;
};

Affine affine(const sint& s) {
  Affine a;
  if (s.is_const()) {
    a.c = s.value();
    return a;
  }
  std::vector<std::pair<UOpRef, int64_t>> todo{{s.expr(), 1}};
  while (!todo.empty()) {
    auto [u, k] = todo.back();
    todo.pop_back();
    if (u->op == Ops::CONST)
      a.c += k * u->const_bits();
    else if (u->op == Ops::ADD)
      todo.push_back({u->src[0], k}), todo.push_back({u->src[1], k});
    else if (u->op == Ops::MUL && u->src[1]->op == Ops::CONST)
      todo.push_back({u->src[0], k * u->src[1]->const_bits()});
    else {
      auto& t = a.terms[u.get()];
      t.first = u;
      t.second += k;
    }
  }
  return a;
}

// Terms in a stable order (variables by name), so equal sums are equal graphs.
std::string atom_key(const UOp& u) {
  const UOp& v = u.op == Ops::BIND ? *u.src[0] : u;
  if (v.op == Ops::DEFINE_VAR) return std::get<VarArg>(v.arg).name + (u.op == Ops::BIND ? "=" : "");
  return "~" + std::to_string(u.hash);
}

sint build(const Affine& a) {
  std::vector<std::pair<UOpRef, int64_t>> ts;
  for (auto& [_, t] : a.terms)
    if (t.second != 0) ts.push_back(t);
  if (ts.empty()) return sint(a.c);
  std::sort(ts.begin(), ts.end(), [](auto& x, auto& y) { return atom_key(*x.first) < atom_key(*y.first); });
  UOpRef e;
  for (auto& [u, k] : ts) {
    UOpRef t = k == 1 ? u : alu(Ops::MUL, {u, UOp::cconst(DType::Int32, static_cast<double>(k))});
    e = e ? alu(Ops::ADD, {e, t}) : t;
  }
  if (a.c != 0) e = alu(Ops::ADD, {e, UOp::cconst(DType::Int32, static_cast<double>(a.c))});
  return sint(e);
}

} // namespace

sint::sint(UOpRef e) {
  if (e->op == Ops::CONST)
    c_ = e->const_bits();
  else
    e_ = std::move(e);
}

int64_t sint::value() const {
  if (e_)
    throw std::runtime_error("the size " + str() +
                             " is symbolic (it depends on a Variable) where a number is needed here");
  return c_;
}

UOpRef sint::uop(DType dt) const {
  if (!e_) return UOp::cconst(dt, static_cast<double>(c_));
  return dt == e_->dtype ? e_ : cast(e_, dt);
}

int64_t sint::vmin() const { return e_ ? static_cast<int64_t>(e_->vmin()) : c_; }
int64_t sint::vmax() const { return e_ ? static_cast<int64_t>(e_->vmax()) : c_; }

std::string sint::str() const {
  if (!e_) return std::to_string(c_);
  std::function<std::string(const UOp&)> s = [&](const UOp& u) -> std::string {
    switch (u.op) {
    case Ops::CONST:
      return std::to_string(u.const_bits());
    case Ops::DEFINE_VAR:
      return std::get<VarArg>(u.arg).name;
    case Ops::BIND:
      return s(*u.src[0]);
    case Ops::ADD:
      if (u.src[1]->op == Ops::CONST && u.src[1]->const_bits() < 0)
        return "(" + s(*u.src[0]) + "-" + std::to_string(-u.src[1]->const_bits()) + ")";
      return "(" + s(*u.src[0]) + "+" + s(*u.src[1]) + ")";
    case Ops::MUL:
      return "(" + s(*u.src[0]) + "*" + s(*u.src[1]) + ")";
    default:
      return std::string(name(u.op)) + "(...)";
    }
  };
  return s(*e_);
}

size_t sint::hash() const { return e_ ? e_->hash : std::hash<int64_t>{}(c_); }

sint operator+(const sint& a, const sint& b) {
  if (a.is_const() && b.is_const()) return sint(a.value() + b.value());
  Affine x = affine(a), y = affine(b);
  for (auto& [k, t] : y.terms) {
    auto& d = x.terms[k];
    d.first = t.first;
    d.second += t.second;
  }
  x.c += y.c;
  return build(x);
}

sint operator*(const sint& a, const sint& b) {
  if (a.is_const() && b.is_const()) return sint(a.value() * b.value());
  if (!a.is_const() && !b.is_const())
    return sint(graph_rewrite(alu(Ops::MUL, {a.uop(), b.uop()}), symbolic()));
  const sint& e = a.is_const() ? b : a;
  int64_t k = a.is_const() ? a.value() : b.value();
  Affine x = affine(e);
  for (auto& [_, t] : x.terms)
    t.second *= k;
  x.c *= k;
  return build(x);
}

sint operator-(const sint& a, const sint& b) { return a + b * sint(-1); }

bool is_symbolic(const Shape& s) {
  return std::any_of(s.begin(), s.end(), [](const sint& d) { return !d.is_const(); });
}
int64_t max_numel(const Shape& s) {
  int64_t n = 1;
  for (auto& d : s)
    n *= d.vmax();
  return n;
}
std::vector<int64_t> to_ints(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }
Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }
int64_t prod(const Shape& s) {
  int64_t n = 1;
  for (auto& d : s)
    n *= d.value();
  return n;
}
sint sprod(const Shape& s) {
  sint n = 1;
  for (auto& d : s)
    n = n * d;
  return n;
}

} // namespace mg
