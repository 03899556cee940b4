// UPat / PatternMatcher / graph_rewrite: the one rewrite mechanism. Symbolic rules,
// lowering and renderer fix-ups are all tables of (pattern -> lambda).
#pragma once
#include <functional>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "engine/uop.h"

namespace mg {

struct UPat {
  std::vector<Ops> ops;                 // empty: any op
  std::optional<DType> dtype;           // nullopt: any dtype
  std::optional<std::vector<UPat>> src; // nullopt: any sources
  bool commute = false;                 // two sources, either order
  std::string name;                     // bind the match to this name
  std::optional<double> value;          // CONST with this value
  std::function<bool(const UOp&)> pred; // extra condition

  static UPat any(std::string name = "");
  static UPat var(std::string name, std::optional<DType> dt = std::nullopt) {
    UPat p = any(std::move(name));
    p.dtype = dt;
    return p;
  }
  static UPat cvar(std::string name = "", std::optional<DType> dt = std::nullopt);
  static UPat cnst(double v);
  static UPat op(Ops o); // any sources
  static UPat op(Ops o, std::vector<UPat> src, std::string name = "");
  static UPat op(std::vector<Ops> os, std::optional<std::vector<UPat>> src = std::nullopt,
                 std::string name = "");
  UPat named(std::string n) const {
    UPat p = *this;
    p.name = std::move(n);
    return p;
  }
  UPat where(std::function<bool(const UOp&)> f) const {
    UPat p = *this;
    p.pred = std::move(f);
    return p;
  }
  // Builders that read like the algebra they match.
  UPat idiv(const UPat& b) const;
  UPat mod(const UPat& b) const;
  UPat lt(const UPat& b) const;
  UPat ne(const UPat& b) const;
  UPat max(const UPat& b) const;
  UPat cast() const;
  // The pattern as text, for the rule names VIZ shows: "ADD(x, 0)", "{MUL|ADD}(_, c)"; a
  // trailing "?" marks an extra condition.
  std::string to_string() const;
};

UPat operator+(const UPat& a, const UPat& b);
UPat operator*(const UPat& a, const UPat& b);
UPat operator-(const UPat& a); // NEG
UPat operator&(const UPat& a, const UPat& b);
UPat operator|(const UPat& a, const UPat& b);
inline UPat operator+(const UPat& a, double c) { return a + UPat::cnst(c); }
inline UPat operator*(const UPat& a, double c) { return a * UPat::cnst(c); }

struct Match {
  std::vector<std::pair<std::string, UOpRef>> vars;
  const UOpRef& root() const { return vars.front().second; }
  void* ctx = nullptr;
  const UOpRef& operator[](const std::string& n) const;
};

// A rule returns the replacement, or nullptr for "no change".
using RewriteFn = std::function<UOpRef(const Match&)>;

class PatternMatcher {
public:
  // `where` names the table in rule names: the file and line that built it.
  PatternMatcher(std::initializer_list<std::pair<UPat, RewriteFn>> rules,
                 std::source_location where = std::source_location::current());
  PatternMatcher(std::vector<std::pair<UPat, RewriteFn>> rules,
                 std::source_location where = std::source_location::current());
  // Rules are tried in table order; the first that returns non-null wins. `fired` (if given)
  // receives that rule's index.
  UOpRef rewrite(const UOpRef& u, void* ctx = nullptr, size_t* fired = nullptr) const;
  PatternMatcher operator+(const PatternMatcher& other) const;
  size_t size() const { return rules_.size(); }
  // "symbolic.cpp:339 #12 ADD(x, 0)": the table, the rule's place in it, its pattern.
  std::string rule_name(size_t i) const;
  std::string table_name() const; // "symbolic.cpp:339"

private:
  void index();
  std::vector<std::pair<UPat, RewriteFn>> rules_;
  std::vector<std::source_location> where_; // per rule: the table it came from (tables can be added)
  std::vector<size_t> first_;               // per rule: the index of its table's first rule
  std::vector<std::vector<size_t>> by_op_;  // rule indices to try for each op, in table order
};

// One rule firing inside graph_rewrite: `before` became `after`.
struct RewriteStep {
  int pass;         // which graph_rewrite call of the trace (0, 1, ...)
  std::string rule; // PatternMatcher::rule_name
  UOpRef before, after;
};
// While one is alive, every graph_rewrite on this thread records each rule that fires and the
// table of each pass (VIZ shows them). Traces nest: the innermost records.
class RewriteTrace {
public:
  RewriteTrace();
  ~RewriteTrace();
  RewriteTrace(const RewriteTrace&) = delete;
  RewriteTrace& operator=(const RewriteTrace&) = delete;
  std::vector<std::string> passes; // table_name of each graph_rewrite call
  std::vector<RewriteStep> steps;
  static RewriteTrace* active();

private:
  RewriteTrace* outer_;
};

bool upat_match(const UPat& p, const UOpRef& u, Match& m);

// Rewrites every node bottom-up, each to a fixed point of `pm`. `changed` (if given) receives each
// node that became another, with what it became.
UOpRef graph_rewrite(const UOpRef& root, const PatternMatcher& pm, void* ctx = nullptr,
                     std::vector<std::pair<UOpRef, UOpRef>>* changed = nullptr);
// Rewrites every node bottom-up once: a rule's result is used as it is, never matched again
// (for rules whose result contains the node they replace).
UOpRef rewrite_once(const UOpRef& root, const PatternMatcher& pm);
// Replaces nodes found in `subs` (by pointer) everywhere below root.
// `where` names the pass in a RewriteTrace: the caller.
UOpRef substitute(const UOpRef& root, const std::vector<std::pair<const UOp*, UOpRef>>& subs,
                  std::source_location where = std::source_location::current());

} // namespace mg
