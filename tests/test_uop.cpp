// UOp: hash-consing, toposort, print_tree, value ranges, exec_alu, deep graphs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/uop.h"
#include "test_util.h"

using namespace mg;

namespace {
UOpRef range(int64_t n, int64_t axis = 0) {
  return UOp::make(Ops::RANGE, DType::Int32, {UOp::cconst(DType::Int32, static_cast<double>(n))},
                   std::vector<int64_t>{axis, 0});
}
size_t count_substr(const std::string& s, const std::string& sub) {
  size_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size()))
    n++;
  return n;
}
} // namespace

TEST_CASE("UOp::make hash-conses equal parts into one object", "[uop]") {
  auto a = UOp::cconst(DType::Int32, 3);
  auto b = UOp::cconst(DType::Int32, 3);
  CHECK(a == b);
  CHECK(a.get() == b.get());

  auto r = range(10);
  auto x1 = UOp::make(Ops::ADD, DType::Int32, {r, a});
  auto x2 = UOp::make(Ops::ADD, DType::Int32, {range(10), UOp::cconst(DType::Int32, 3)});
  CHECK(x1.get() == x2.get());
  // the operator builders hash-cons too
  CHECK((r + 3.0).get() == x1.get());

  // any differing part gives a different node
  CHECK(UOp::make(Ops::MUL, DType::Int32, {r, a}).get() != x1.get()); // op
  CHECK(UOp::make(Ops::ADD, DType::Int64, {r, a}).get() != x1.get()); // dtype
  CHECK(UOp::make(Ops::ADD, DType::Int32, {a, r}).get() != x1.get()); // source order
  CHECK(UOp::make(Ops::ADD, DType::Int32, {r, UOp::cconst(DType::Int32, 4)}).get() != x1.get()); // source
  CHECK(range(10, 0).get() != range(10, 1).get());                                               // arg
  CHECK(range(10).get() != range(11).get());
  CHECK(UOp::cconst(DType::Int32, 1).get() != UOp::cconst(DType::Float32, 1).get());
  CHECK(UOp::cconst(DType::Float32, 1.5).get() != UOp::cconst(DType::Float32, 2.5).get());
  CHECK(UOp::cconst(DType::Float32, 1.5).get() == UOp::cconst(DType::Float32, 1.5).get());

  // different arg kinds with "equal" contents are different
  auto v1 = UOp::make(Ops::RESHAPE, DType::Float32, {r}, Shape{2, 5});
  auto v2 = UOp::make(Ops::RESHAPE, DType::Float32, {r}, Shape{5, 2});
  auto v3 = UOp::make(Ops::RESHAPE, DType::Float32, {r}, Shape{2, 5});
  CHECK(v1.get() != v2.get());
  CHECK(v1.get() == v3.get());
  auto ra = UOp::make(Ops::REDUCE_AXIS, DType::Float32, {r}, ReduceArg{Ops::ADD, {0}});
  CHECK(ra.get() == UOp::make(Ops::REDUCE_AXIS, DType::Float32, {r}, ReduceArg{Ops::ADD, {0}}).get());
  CHECK(ra.get() != UOp::make(Ops::REDUCE_AXIS, DType::Float32, {r}, ReduceArg{Ops::MAX, {0}}).get());
}

TEST_CASE("dead UOps leave the hash-consing table", "[uop]") {
  size_t before = live_uops();
  {
    auto r = range(7, 42);
    auto e = (r * 3.0 + 1.0) * 5.0;
    CHECK(live_uops() > before);
  }
  CHECK(live_uops() == before);
  // a node rebuilt after its death is a fresh, working node
  auto r = range(7, 42);
  CHECK(r->src.at(0)->const_value() == 7);
}

TEST_CASE("constants store values as their dtype holds them", "[uop]") {
  CHECK(UOp::cconst(DType::Int32, 3)->const_value() == 3);
  CHECK(UOp::cconst(DType::Float32, 0.1)->const_value() == static_cast<double>(0.1f));
  CHECK(UOp::cconst(DType::Int8, 200)->const_value() == -56);
  CHECK(UOp::cconst(DType::UInt8, 257)->const_value() == 1);
  CHECK(UOp::cconst(DType::Bool, 5)->const_value() == 1);
  auto f = UOp::cconst(DType::Float64, 2.5);
  CHECK(UOp::cconst_like(f, 7)->dtype == DType::Float64);
}

TEST_CASE("toposort lists every node once, sources before users", "[uop]") {
  auto r0 = range(4, 0), r1 = range(5, 1);
  auto shared = r0 * 2.0 + r1;
  auto root = alu(Ops::MAX, {shared * 3.0, shared + 1.0});
  auto order = toposort(root.get());

  REQUIRE(!order.empty());
  CHECK(order.back() == root.get());
  std::unordered_map<const UOp*, size_t> pos;
  for (size_t i = 0; i < order.size(); i++) {
    CHECK(pos.count(order[i]) == 0); // once
    pos[order[i]] = i;
  }
  for (const UOp* u : order)
    for (auto& s : u->src) {
      REQUIRE(pos.count(s.get()) == 1); // every reachable node is listed
      CHECK(pos[s.get()] < pos[u]);
    }
  // count the distinct nodes independently
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack{root.get()};
  while (!stack.empty()) {
    auto* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    for (auto& s : u->src)
      stack.push_back(s.get());
  }
  CHECK(order.size() == seen.size());
}

TEST_CASE("print_tree names a shared node once and refers to it after", "[uop]") {
  auto r = range(8, 3);
  auto shared = UOp::make(Ops::IDIV, DType::Int32, {r, UOp::cconst(DType::Int32, 3)});
  auto root =
      UOp::make(Ops::ADD, DType::Int32, {shared, UOp::make(Ops::MUL, DType::Int32, {shared, shared})});
  std::string t = print_tree(root);
  INFO(t);
  // the IDIV node is printed in full exactly once
  CHECK(count_substr(t, "IDIV") == 1);
  CHECK(count_substr(t, "RANGE") == 1);
  CHECK(count_substr(t, "ADD") == 1);
  CHECK(count_substr(t, "MUL") == 1);
  // and named %0, referred to twice more
  CHECK(count_substr(t, "%0") == 3);

  // a tree with no sharing names nothing
  auto plain = UOp::make(Ops::ADD, DType::Int32, {range(3, 9), UOp::cconst(DType::Int32, 11)});
  std::string tp = print_tree(plain);
  INFO(tp);
  CHECK(count_substr(tp, "%") == 0);
  CHECK(count_substr(tp, "ADD") == 1);
  CHECK(count_substr(tp, "int32") >= 1);
}

TEST_CASE("a 100,000-op chain builds, sorts and is destroyed without stack overflow", "[uop][deep]") {
  size_t before = live_uops();
  {
    auto x = range(10, 0);
    for (int i = 0; i < 100000; i++)
      x = (i % 2) ? x + 1.0 : x * 1.0;
    auto order = toposort(x.get());
    // 100,000 ALU nodes + RANGE + its CONST + const 1 (shared by ADDs and MULs)
    CHECK(order.size() == 100000 + 3);
    CHECK(order.back() == x.get());
    std::string t = print_tree(range(2, 1) + 1.0); // unrelated small tree still prints
    CHECK(!t.empty());
  }
  CHECK(live_uops() == before);
}

TEST_CASE("vmin/vmax prove ranges of index arithmetic", "[uop]") {
  auto r = range(10, 0); // [0, 9]
  CHECK(r->vmin() == 0);
  CHECK(r->vmax() == 9);
  auto e = r * 4.0 + 3.0; // [3, 39]
  CHECK(e->vmin() == 3);
  CHECK(e->vmax() == 39);
  auto n = r * -2.0; // [-18, 0]
  CHECK(n->vmin() == -18);
  CHECK(n->vmax() == 0);
  auto d = idiv(e, 4); // [0, 9]
  CHECK(d->vmin() == 0);
  CHECK(d->vmax() == 9);
  auto m = mod(e, 4);
  CHECK(m->vmin() >= 0);
  CHECK(m->vmax() <= 3);
  auto c = lt(r, 100);
  CHECK(c->dtype == DType::Bool);
  CHECK(c->vmin() == 1);
  CHECK(c->vmax() == 1);
  auto c2 = lt(r, 5);
  CHECK(c2->vmin() == 0);
  CHECK(c2->vmax() == 1);
  auto k = UOp::cconst(DType::Int32, -4);
  CHECK(k->vmin() == -4);
  CHECK(k->vmax() == -4);
  auto mx = alu(Ops::MAX, {r, UOp::cconst(DType::Int32, 5)});
  CHECK(mx->vmin() == 5);
  CHECK(mx->vmax() == 9);
  // a proven range always contains every value the expression takes
  for (int64_t i = 0; i < 10; i++) {
    mgtest::Evaluator ev;
    ev.vars[r.get()] = i;
    for (auto& u : {e, n, d, m, mx}) {
      int64_t v = ev.eval(u);
      CHECK(v >= u->vmin());
      CHECK(v <= u->vmax());
    }
  }
}

TEST_CASE("exec_alu computes with C semantics in the given dtype", "[uop]") {
  // truncating integer division and remainder, as C does
  CHECK(exec_alu(Ops::IDIV, DType::Int32, {7, 2}) == 3);
  CHECK(exec_alu(Ops::IDIV, DType::Int32, {-7, 2}) == -3);
  CHECK(exec_alu(Ops::IDIV, DType::Int32, {7, -2}) == -3);
  CHECK(exec_alu(Ops::MOD, DType::Int32, {-7, 2}) == -1);
  CHECK(exec_alu(Ops::MOD, DType::Int32, {7, -2}) == 1);
  CHECK(exec_alu(Ops::MOD, DType::Int32, {7, 3}) == 1);
  CHECK(exec_alu(Ops::ADD, DType::Int32, {2, 3}) == 5);
  CHECK(exec_alu(Ops::MUL, DType::Int32, {-4, 3}) == -12);
  CHECK(exec_alu(Ops::MAX, DType::Int32, {-4, 3}) == 3);
  CHECK(exec_alu(Ops::CMPLT, DType::Bool, {2, 3}) == 1);
  CHECK(exec_alu(Ops::CMPLT, DType::Bool, {3, 3}) == 0);
  CHECK(exec_alu(Ops::CMPNE, DType::Bool, {3, 3}) == 0);
  CHECK(exec_alu(Ops::WHERE, DType::Int32, {0, 5, 9}) == 9);
  CHECK(exec_alu(Ops::WHERE, DType::Int32, {1, 5, 9}) == 5);
  CHECK(exec_alu(Ops::NEG, DType::Int32, {5}) == -5);
  CHECK(exec_alu(Ops::XOR, DType::Int32, {6, 3}) == 5);
  CHECK(exec_alu(Ops::AND, DType::Int32, {6, 3}) == 2);
  CHECK(exec_alu(Ops::OR, DType::Int32, {6, 3}) == 7);
  CHECK(exec_alu(Ops::SHL, DType::Int32, {3, 2}) == 12);
  CHECK(exec_alu(Ops::SHR, DType::Int32, {12, 2}) == 3);
  // wraps like the dtype
  CHECK(exec_alu(Ops::ADD, DType::Int8, {100, 100}) == -56);
  CHECK(exec_alu(Ops::ADD, DType::UInt8, {200, 100}) == 44);
  CHECK(exec_alu(Ops::MUL, DType::Int32, {65536, 65536}) == 0);
  // floats round to their dtype
  CHECK(exec_alu(Ops::ADD, DType::Float32, {0.1, 0.2}) == static_cast<double>(static_cast<float>(0.1 + 0.2)));
  CHECK(exec_alu(Ops::SQRT, DType::Float64, {2}) == std::sqrt(2.0));
  CHECK(exec_alu(Ops::RECIP, DType::Float64, {4}) == 0.25);
  CHECK(exec_alu(Ops::EXP2, DType::Float64, {3}) == 8);
  CHECK(exec_alu(Ops::LOG2, DType::Float64, {8}) == 3);
  CHECK(truncate_to(DType::Int8, 200) == -56);
  CHECK(truncate_to(DType::UInt8, -1) == 255);
  CHECK(truncate_to(DType::Int32, 2.9) == 2);
  CHECK(truncate_to(DType::Int32, -2.9) == -2);
  CHECK(truncate_to(DType::Bool, 0.5) == 1);
}

TEST_CASE("shapes of tensor-level UOps", "[uop]") {
  auto c = UOp::cconst(DType::Float32, 1);
  CHECK(c->has_shape);
  CHECK(c->shape.empty());
  auto rs = UOp::make(Ops::RESHAPE, DType::Float32, {c}, Shape{1, 1});
  CHECK(rs->shape == Shape{1, 1});
  auto ex = UOp::make(Ops::EXPAND, DType::Float32, {rs}, Shape{3, 4});
  CHECK(ex->shape == Shape{3, 4});
  CHECK(ex->numel() == 12);
  auto pm = UOp::make(Ops::PERMUTE, DType::Float32, {ex}, std::vector<int64_t>{1, 0});
  CHECK(pm->shape == Shape{4, 3});
  auto pd = UOp::make(Ops::PAD, DType::Float32, {pm}, Shape{1, 2, 0, 3});
  CHECK(pd->shape == Shape{7, 6});
  auto sh = UOp::make(Ops::SHRINK, DType::Float32, {pd}, Shape{1, 5, 2, 4});
  CHECK(sh->shape == Shape{4, 2});
  auto red = UOp::make(Ops::REDUCE_AXIS, DType::Float32, {sh}, ReduceArg{Ops::ADD, {1}});
  CHECK(red->shape == Shape{4, 1});
  auto add = UOp::make(Ops::ADD, DType::Float32, {red, red});
  CHECK(add->shape == Shape{4, 1});
  CHECK(shape_str(Shape{3, 4}) == "(3, 4)");
  CHECK(shape_str(Shape{5}) == "(5,)");
}
