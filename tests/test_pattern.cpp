// UPat / PatternMatcher / graph_rewrite / substitute: the rewrite mechanism itself.
#include <catch2/catch.hpp>

#include <string>

#include "engine/pattern.h"
#include "test_util.h"

using namespace mg;

namespace {
using mgtest::ci;
using mgtest::range;
} // namespace

TEST_CASE("UPat matches op, dtype, const value and binds names", "[pattern]") {
  auto r = range(5);
  auto e = UOp::make(Ops::ADD, DType::Int32, {r, ci(3)});
  Match m;
  m.vars.emplace_back("", e);
  REQUIRE(upat_match(UPat::var("x") + UPat::cvar("c"), e, m));
  CHECK(m["x"] == r);
  CHECK(m["c"] == ci(3));

  Match m2;
  CHECK_FALSE(upat_match(UPat::var("x") * UPat::cvar("c"), e, m2)); // wrong op
  Match m3;
  CHECK_FALSE(upat_match(UPat::var("x") + UPat::cnst(4), e, m3)); // wrong value
  Match m4;
  CHECK(upat_match(UPat::var("x") + UPat::cnst(3), e, m4));
  Match m5;
  CHECK_FALSE(upat_match(UPat::var("x", DType::Float32) + UPat::cvar("c"), e, m5)); // wrong dtype
  Match m6;
  CHECK(upat_match(UPat::var("x", DType::Int32) + UPat::cvar("c"), e, m6));
}

TEST_CASE("commutative patterns match either source order", "[pattern]") {
  auto r = range(5);
  auto e = UOp::make(Ops::ADD, DType::Int32, {ci(3), r}); // const first
  Match m;
  REQUIRE(upat_match(UPat::var("x") + UPat::cvar("c"), e, m));
  CHECK(m["x"] == r);
  CHECK(m["c"] == ci(3));
  // IDIV is not commutative
  auto d = UOp::make(Ops::IDIV, DType::Int32, {ci(3), r});
  Match m2;
  CHECK_FALSE(upat_match(UPat::var("x").idiv(UPat::cvar("c")), d, m2));
}

TEST_CASE("a name used twice must bind the same node", "[pattern]") {
  auto r0 = range(5, 0), r1 = range(5, 1);
  Match m;
  CHECK(upat_match(UPat::var("x") + UPat::var("x"), r0 + r0, m));
  Match m2;
  CHECK_FALSE(upat_match(UPat::var("x") + UPat::var("x"), r0 + r1, m2));
}

TEST_CASE("predicates and op lists restrict matches", "[pattern]") {
  auto r = range(5);
  UPat small = UPat::cvar("c").where([](const UOp& u) { return u.const_value() < 10; });
  Match m;
  CHECK(upat_match(UPat::var("x") * small, r * 4.0, m));
  Match m2;
  CHECK_FALSE(upat_match(UPat::var("x") * small, r * 40.0, m2));
  UPat addmul = UPat::op(std::vector<Ops>{Ops::ADD, Ops::MUL}, std::nullopt, "e");
  Match m3, m4, m5;
  CHECK(upat_match(addmul, r + 1.0, m3));
  CHECK(upat_match(addmul, r * 2.0, m4));
  CHECK_FALSE(upat_match(addmul, idiv(r, 2), m5));
}

TEST_CASE("PatternMatcher tries rules in table order and null means no change", "[pattern]") {
  int calls_first = 0;
  PatternMatcher pm{
      {UPat::var("x") + UPat::cvar("c"),
       [&](const Match&) -> UOpRef {
         calls_first++;
         return nullptr; // declines
       }},
      {UPat::var("x") + UPat::cvar("c"), [](const Match& m) { return m["x"]; }},
      {UPat::var("x") + UPat::cvar("c"), [](const Match& m) { return m["c"]; }}, // never reached
  };
  auto r = range(4);
  CHECK(pm.rewrite(r + 7.0) == r);
  CHECK(calls_first == 1);
  CHECK(pm.rewrite(r * 7.0) == nullptr);
  CHECK(pm.size() == 3);
  PatternMatcher both =
      pm + PatternMatcher{{UPat::var("x") * UPat::cvar("c"), [](const Match& m) { return m["x"]; }}};
  CHECK(both.size() == 4);
  CHECK(both.rewrite(r * 7.0) == r);
}

TEST_CASE("graph_rewrite rewrites bottom-up to a fixed point", "[pattern]") {
  // x*2 -> x+x, then x+x (with x a RANGE) -> x: a two-step chain of rules
  PatternMatcher pm{
      {UPat::var("x") * UPat::cnst(2), [](const Match& m) { return m["x"] + m["x"]; }},
      {UPat::op(Ops::RANGE).named("r") + UPat::op(Ops::RANGE).named("r"),
       [](const Match& m) { return m["r"]; }},
  };
  auto r = range(6);
  auto e = ((r * 2.0) * 2.0) * 2.0;
  CHECK(graph_rewrite(e, pm) == r);
  // a node rewritten once is reused wherever it is shared
  auto s = r * 2.0;
  auto shared = UOp::make(Ops::MAX, DType::Int32, {s, s});
  auto out = graph_rewrite(shared, pm);
  REQUIRE(out->op == Ops::MAX);
  CHECK(out->src[0] == r);
  CHECK(out->src[1] == r);
}

TEST_CASE("graph_rewrite handles 100,000-deep graphs without recursion", "[pattern][deep]") {
  PatternMatcher pm{
      {(UPat::var("x") + UPat::cvar("a")) + UPat::cvar("b"),
       [](const Match& m) { return m["x"] + (m["a"]->const_value() + m["b"]->const_value()); }},
  };
  auto r = range(10);
  auto x = r;
  for (int i = 0; i < 100000; i++)
    x = x + 1.0;
  auto out = graph_rewrite(x, pm);
  REQUIRE(out->op == Ops::ADD);
  CHECK(out->src[0] == r);
  REQUIRE(out->src[1]->op == Ops::CONST);
  CHECK(out->src[1]->const_value() == 100000);
}

TEST_CASE("substitute replaces nodes by pointer everywhere", "[pattern]") {
  auto r0 = range(4, 0), r1 = range(6, 1);
  auto e = (r0 * 3.0 + r1) * 2.0 + r0;
  auto out = substitute(e, {{r0.get(), ci(2)}, {r1.get(), ci(5)}});
  mgtest::Evaluator ev;
  CHECK(ev.eval(out) == ((2 * 3 + 5) * 2 + 2));
  // nodes not mentioned are kept
  auto out2 = substitute(e, {{r1.get(), r0}});
  mgtest::Evaluator ev2;
  ev2.vars[r0.get()] = 3;
  CHECK(ev2.eval(out2) == ((3 * 3 + 3) * 2 + 3));
  // substituting nothing returns the same graph
  CHECK(substitute(e, {}) == e);
}

TEST_CASE("a RewriteTrace records each rule that fires, by name, with the nodes it changed",
          "[pattern][viz]") {
  auto r = range(8);
  auto e = (r * 1) + 0; // two identities
  PatternMatcher mul1{{UPat::var("x") * 1, [](const Match& m) { return m["x"]; }}};
  PatternMatcher add0{{UPat::var("x") + 0, [](const Match& m) { return m["x"]; }}};
  PatternMatcher both = mul1 + add0;
  std::vector<RewriteStep> steps;
  std::vector<std::string> passes;
  {
    RewriteTrace tr;
    CHECK(graph_rewrite(e, both) == r);
    {
      RewriteTrace inner; // nested: the inner one records, the outer sees nothing of it
      CHECK(graph_rewrite(r + 0, add0) == r);
      CHECK(inner.steps.size() == 1);
    }
    steps = tr.steps;
    passes = tr.passes;
  }
  CHECK(graph_rewrite(e, both) == r); // no trace alive: nothing recorded, nothing breaks
  REQUIRE(passes.size() == 1);
  // the table is named after where each part was built: two lines of this file, joined
  CHECK(passes[0].find("test_pattern.cpp:") == 0);
  CHECK(passes[0].find('+') != std::string::npos);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].rule.find("#0 MUL(x, 1)") != std::string::npos);
  CHECK(steps[0].before == r * 1);
  CHECK(steps[0].after == r);
  CHECK(steps[1].rule.find("#0 ADD(x, 0)") != std::string::npos); // #0 of its own table
  CHECK(steps[1].before == r + 0);
  CHECK(steps[1].after == r);
  CHECK(both.rule_name(1).find("#0 ADD(x, 0)") != std::string::npos);
  CHECK((UPat::var("x") * UPat::cvar("c")).where([](const UOp&) { return true; }).to_string() ==
        "MUL(x, c)?");
}
