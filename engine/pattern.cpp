#include "engine/pattern.h"
#include "engine/errors.h"

#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace mg {

UPat UPat::any(std::string name) {
  UPat p;
  p.name = std::move(name);
  return p;
}
UPat UPat::cvar(std::string name, std::optional<DType> dt) {
  UPat p;
  p.ops = {Ops::CONST};
  p.name = std::move(name);
  p.dtype = dt;
  return p;
}
UPat UPat::cnst(double v) {
  UPat p = cvar();
  p.value = v;
  return p;
}
UPat UPat::op(Ops o) {
  UPat p;
  p.ops = {o};
  return p;
}
UPat UPat::op(Ops o, std::vector<UPat> src, std::string name) {
  UPat p;
  p.ops = {o};
  p.commute = is_commutative(o) && src.size() == 2;
  p.src = std::move(src);
  p.name = std::move(name);
  return p;
}
UPat UPat::op(std::vector<Ops> os, std::optional<std::vector<UPat>> src, std::string name) {
  UPat p;
  p.ops = std::move(os);
  p.src = std::move(src);
  p.name = std::move(name);
  return p;
}
UPat UPat::idiv(const UPat& b) const { return op(Ops::IDIV, {*this, b}); }
UPat UPat::mod(const UPat& b) const { return op(Ops::MOD, {*this, b}); }
UPat UPat::lt(const UPat& b) const { return op(Ops::CMPLT, {*this, b}); }
UPat UPat::ne(const UPat& b) const { return op(Ops::CMPNE, {*this, b}); }
UPat UPat::max(const UPat& b) const { return op(Ops::MAX, {*this, b}); }
UPat UPat::cast() const { return op(Ops::CAST, {*this}); }
UPat operator+(const UPat& a, const UPat& b) { return UPat::op(Ops::ADD, {a, b}); }
UPat operator*(const UPat& a, const UPat& b) { return UPat::op(Ops::MUL, {a, b}); }
UPat operator-(const UPat& a) { return UPat::op(Ops::NEG, {a}); }
UPat operator&(const UPat& a, const UPat& b) { return UPat::op(Ops::AND, {a, b}); }
UPat operator|(const UPat& a, const UPat& b) { return UPat::op(Ops::OR, {a, b}); }

const UOpRef& Match::operator[](const std::string& n) const {
  for (auto& [k, v] : vars)
    if (k == n) return v;
  internal_error("pattern has no variable '" + n + "'");
}

namespace {
bool match_srcs(const std::vector<UPat>& ps, const UOp& u, const std::vector<size_t>& order, Match& m) {
  for (size_t i = 0; i < ps.size(); i++)
    if (!upat_match(ps[i], u.src[order[i]], m)) return false;
  return true;
}
} // namespace

bool upat_match(const UPat& p, const UOpRef& u, Match& m) {
  if (!p.ops.empty() && std::find(p.ops.begin(), p.ops.end(), u->op) == p.ops.end()) return false;
  if (p.dtype && *p.dtype != u->dtype) return false;
  if (p.value && (u->op != Ops::CONST || u->const_value() != *p.value)) return false;
  if (p.pred && !p.pred(*u)) return false;
  if (!p.name.empty()) {
    bool bound = false;
    for (auto& [k, v] : m.vars)
      if (k == p.name) {
        if (v != u) return false;
        bound = true;
      }
    if (!bound) m.vars.emplace_back(p.name, u);
  }
  if (!p.src) return true;
  if (p.src->size() != u->src.size()) return false;
  size_t saved = m.vars.size();
  std::vector<size_t> order(u->src.size());
  for (size_t i = 0; i < order.size(); i++)
    order[i] = i;
  if (match_srcs(*p.src, *u, order, m)) return true;
  m.vars.resize(saved);
  if (!p.commute) return false;
  order = {1, 0};
  if (match_srcs(*p.src, *u, order, m)) return true;
  m.vars.resize(saved);
  return false;
}

PatternMatcher::PatternMatcher(std::initializer_list<std::pair<UPat, RewriteFn>> rules,
                               std::source_location where)
    : rules_(rules), where_(rules_.size(), where), first_(rules_.size(), 0) {
  index();
}
PatternMatcher::PatternMatcher(std::vector<std::pair<UPat, RewriteFn>> rules, std::source_location where)
    : rules_(std::move(rules)), where_(rules_.size(), where), first_(rules_.size(), 0) {
  index();
}

static std::string location(const std::source_location& w) {
  std::string f = w.file_name();
  return f.substr(f.find_last_of('/') + 1) + ":" + std::to_string(w.line());
}

std::string PatternMatcher::table_name() const {
  std::string names;
  for (size_t i = 0; i < rules_.size(); i++)
    if (first_[i] == i) names += (names.empty() ? "" : "+") + location(where_[i]);
  return names.empty() ? "(empty table)" : names;
}

std::string PatternMatcher::rule_name(size_t i) const {
  return location(where_.at(i)) + " #" + std::to_string(i - first_[i]) + " " + rules_[i].first.to_string();
}

namespace {
thread_local RewriteTrace* g_trace = nullptr;
}
RewriteTrace::RewriteTrace() : outer_(g_trace) { g_trace = this; }
RewriteTrace::~RewriteTrace() { g_trace = outer_; }
RewriteTrace* RewriteTrace::active() { return g_trace; }

std::string UPat::to_string() const {
  std::string s;
  if (value) {
    std::ostringstream os;
    os << *value;
    s = os.str();
  } else if (ops.empty()) {
    s = name.empty() ? "_" : name;
  } else {
    if (ops.size() > 1) s += "{";
    for (size_t i = 0; i < std::min<size_t>(ops.size(), 4); i++)
      s += (i ? "|" : "") + std::string(mg::name(ops[i]));
    if (ops.size() > 4) s += "|... " + std::to_string(ops.size()) + " ops";
    if (ops.size() > 1) s += "}";
    if (ops == std::vector<Ops>{Ops::CONST} && !name.empty()) s = name; // a named constant: c1
  }
  if (src) {
    s += "(";
    for (size_t i = 0; i < src->size(); i++)
      s += (i ? ", " : "") + (*src)[i].to_string();
    s += ")";
  }
  if (pred) s += "?";
  return s;
}

void PatternMatcher::index() {
  by_op_.assign(num_ops, {});
  for (size_t i = 0; i < rules_.size(); i++) {
    const auto& ops = rules_[i].first.ops;
    for (int o = 0; o < num_ops; o++)
      if (ops.empty() || std::find(ops.begin(), ops.end(), static_cast<Ops>(o)) != ops.end())
        by_op_[o].push_back(i);
  }
}

PatternMatcher PatternMatcher::operator+(const PatternMatcher& other) const {
  PatternMatcher r = *this;
  r.rules_.insert(r.rules_.end(), other.rules_.begin(), other.rules_.end());
  r.where_.insert(r.where_.end(), other.where_.begin(), other.where_.end());
  for (size_t f : other.first_)
    r.first_.push_back(f + rules_.size());
  r.index();
  return r;
}

UOpRef PatternMatcher::rewrite(const UOpRef& u, void* ctx, size_t* fired) const {
  for (size_t i : by_op_[static_cast<size_t>(u->op)]) {
    Match m;
    m.ctx = ctx;
    m.vars.emplace_back("", u);
    if (!upat_match(rules_[i].first, u, m)) continue;
    if (UOpRef r = rules_[i].second(m); r && r != u) {
      if (fired) *fired = i;
      return r;
    }
  }
  return nullptr;
}

UOpRef graph_rewrite(const UOpRef& root, const PatternMatcher& pm, void* ctx,
                     std::vector<std::pair<UOpRef, UOpRef>>* changed) {
  // Explicit stack (no recursion): graphs can be 100k nodes deep.
  // Keyed by pointer, so every key is kept alive: a freed node's address could be reused.
  std::unordered_map<const UOp*, std::pair<UOpRef, UOpRef>> done_;
  struct {
    decltype(done_)& m;
    size_t count(const UOp* u) const { return m.count(u); }
    const UOpRef& at(const UOp* u) const { return m.at(u).second; }
  } done{done_};
  auto finish = [&](const UOpRef& key, UOpRef value) { done_[key.get()] = {key, std::move(value)}; };
  struct Frame {
    UOpRef n;
    int stage;
    UOpRef pending; // result of one rewrite step, being rewritten in turn
  };
  RewriteTrace* trace = RewriteTrace::active();
  int pass = 0;
  if (trace) {
    pass = static_cast<int>(trace->passes.size());
    trace->passes.push_back(pm.table_name());
  }
  std::vector<Frame> stack{{root, 0, nullptr}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.stage == 0) {
      if (done.count(f.n.get())) {
        stack.pop_back();
        continue;
      }
      f.stage = 1;
      UOpRef n = f.n;
      for (auto it = n->src.rbegin(); it != n->src.rend(); ++it)
        if (!done.count(it->get())) stack.push_back({*it, 0, nullptr});
    } else if (f.stage == 1) {
      std::vector<UOpRef> ns;
      ns.reserve(f.n->src.size());
      bool changed = false;
      for (auto& s : f.n->src) {
        ns.push_back(done.at(s.get()));
        changed |= ns.back() != s;
      }
      UOpRef x = changed ? f.n->replace_src(std::move(ns)) : f.n;
      size_t fired = 0;
      UOpRef y = pm.rewrite(x, ctx, trace ? &fired : nullptr);
      if (y && trace) trace->steps.push_back({pass, pm.rule_name(fired), x, y});
      if (!y) {
        finish(f.n, x);
        if (x != f.n) finish(x, x);
        stack.pop_back();
      } else {
        f.stage = 2;
        f.pending = y;
        stack.push_back({y, 0, nullptr});
      }
    } else {
      finish(f.n, done.at(f.pending.get()));
      stack.pop_back();
    }
  }
  if (changed)
    for (auto& [k, v] : done_)
      if (v.first != v.second) changed->emplace_back(v.first, v.second);
  return done.at(root.get());
}

UOpRef rewrite_once(const UOpRef& root, const PatternMatcher& pm) {
  RewriteTrace* trace = RewriteTrace::active();
  int pass = 0;
  if (trace) {
    pass = static_cast<int>(trace->passes.size());
    trace->passes.push_back(pm.table_name());
  }
  std::unordered_map<const UOp*, UOpRef> refs{{root.get(), root}}, done; // root keeps every key alive
  std::vector<const UOp*> order = toposort(root.get());
  for (const UOp* u : order)
    for (auto& s : u->src)
      refs.emplace(s.get(), s);
  for (const UOp* u : order) {
    UOpRef x = with_sources(refs.at(u), done);
    size_t fired = 0;
    UOpRef y = pm.rewrite(x, nullptr, trace ? &fired : nullptr);
    if (y && trace) trace->steps.push_back({pass, pm.rule_name(fired), x, y});
    done[u] = y ? y : x;
  }
  return done.at(root.get());
}

UOpRef substitute(const UOpRef& root, const std::vector<std::pair<const UOp*, UOpRef>>& subs,
                  std::source_location where) {
  std::unordered_map<const UOp*, UOpRef> map(subs.begin(), subs.end());
  PatternMatcher pm({{UPat::any().where([&](const UOp& u) { return map.count(&u) > 0; }),
                      [&](const Match& m) { return map.at(m.root().get()); }}},
                    where);
  return graph_rewrite(root, pm);
}

} // namespace mg
