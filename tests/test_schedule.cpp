// The scheduler: how many kernels a graph becomes (fusion), counted with schedule() before
// realizing and with the global kernel counter around realize(), plus the values.
#include <catch2/catch.hpp>

#include "engine/device.h"
#include "engine/realize.h"
#include "engine/schedule.h"
#include "tensor_helpers.h"

using namespace mg;
using namespace mgtest;

namespace {
Tensor sc(const Tensor& t, double v) { return scalar_like(t, v); }

Tensor realized(const IShape& s, DType dt, std::mt19937& rng, A* ref = nullptr, double lo = -3,
                double hi = 3) {
  Input in = make_contiguous(s, dt, rng, lo, hi);
  in.t.realize();
  if (ref) *ref = in.ref;
  return in.t;
}

int64_t kernels_during(const std::function<void()>& f) {
  int64_t before = global_counters().kernel_count;
  f();
  return global_counters().kernel_count - before;
}
} // namespace

TEST_CASE("elementwise ops fused into a reduce are one kernel", "[schedule]") {
  std::mt19937 rng(300);
  A ra;
  Tensor a = realized({4, 5}, DType::Float32, rng, &ra);
  Tensor out = a.add(sc(a, 1)).mul(sc(a, 2)).relu().sum();
  auto sched = out.schedule();
  CHECK(sched.size() == 1);
  int64_t n = kernels_during([&] { out.realize(); });
  CHECK(n == 1);
  double want = 0;
  for (double v : ra.data)
    want += std::max(0.0, (static_cast<double>(static_cast<float>(v)) + 1) * 2);
  CHECK(out.item() == Approx(want).epsilon(1e-5));
  // realizing again runs nothing
  CHECK(kernels_during([&] { out.realize(); }) == 0);
  CHECK(out.schedule().empty());
}

TEST_CASE("an elementwise chain is one kernel and realizing each step is one each", "[schedule]") {
  std::mt19937 rng(301);
  A ra;
  Tensor a = realized({3, 4}, DType::Float32, rng, &ra);
  Tensor chain = a.add(sc(a, 1)).mul(sc(a, 3)).sub(sc(a, 0.5));
  CHECK(chain.schedule().size() == 1);
  CHECK(kernels_during([&] { chain.realize(); }) == 1);
  check_values(chain, map(ra, [](double v) { return (v + 1) * 3 - 0.5; }), 1e-6, 1e-6);

  int64_t n = kernels_during([&] {
    Tensor b = a.add(sc(a, 1));
    b.realize();
    Tensor c = b.mul(sc(b, 3));
    c.realize();
    Tensor d = c.sub(sc(c, 0.5));
    d.realize();
    check_values(d, map(ra, [](double v) { return (v + 1) * 3 - 0.5; }), 1e-6, 1e-6);
  });
  CHECK(n == 3);
}

TEST_CASE("several unrealized inputs fuse and shared subexpressions are computed once", "[schedule]") {
  std::mt19937 rng(302);
  A ra, rb;
  Tensor a = realized({6}, DType::Float32, rng, &ra), b = realized({6}, DType::Float32, rng, &rb);
  Tensor s = a.mul(b);
  Tensor out = s.add(s.exp2()).maximum(s);
  CHECK(out.schedule().size() == 1);
  A want = zip(ra, rb, [](double x, double y) {
    double p = x * y;
    return std::max(p + std::exp2(p), p);
  });
  check_values(out, want, 1e-5, 1e-6);
}

TEST_CASE("realize_all realizes several outputs that share work", "[schedule]") {
  std::mt19937 rng(309);
  A ra;
  Tensor a = realized({2, 5}, DType::Float32, rng, &ra);
  Tensor b = a.add(sc(a, 1));
  Tensor c = b.mul(sc(b, 2)), d = b.sum(std::vector<int64_t>{1});
  int64_t n = kernels_during([&] { Tensor::realize_all({&c, &d}); });
  CHECK(n >= 2);
  CHECK(n <= 3);
  CHECK(c.schedule().empty());
  CHECK(d.schedule().empty());
  check_values(c, map(ra, [](double v) { return (v + 1) * 2; }), 1e-6, 1e-6);
  check_values(d, reduce(map(ra, [](double v) { return v + 1; }), std::vector<int64_t>{1}, false, Red::Sum),
               1e-5, 1e-5);
}

TEST_CASE("movement-only graphs of a realized buffer need no kernel", "[schedule]") {
  std::mt19937 rng(303);
  A ra;
  Tensor a = realized({3, 4}, DType::Float32, rng, &ra);
  Tensor p = a.permute({1, 0});
  CHECK(p.schedule().empty());
  CHECK(kernels_during([&] { p.realize(); }) == 0);
  Tensor r = a.reshape({2, 6});
  CHECK(r.schedule().empty());
  CHECK(kernels_during([&] { r.realize(); }) == 0);
  Tensor e = a.reshape({1, 12}).expand({5, 12});
  CHECK(e.schedule().empty());
  CHECK(kernels_during([&] { e.realize(); }) == 0);
  Tensor pre = a.permute({1, 0}).reshape({12}).reshape({4, 3});
  CHECK(pre.schedule().empty());
  CHECK(kernels_during([&] { pre.realize(); }) == 0);
  // and they still read back as their views
  check_values(p, ref_permute(ra, {1, 0}));
  check_values(r, ref_reshape(ra, {2, 6}));
  check_values(e, ref_expand(ref_reshape(ra, {1, 12}), {5, 12}));
  check_values(pre, ref_reshape(ref_permute(ra, {1, 0}), {4, 3}));
}

TEST_CASE("matmul is one kernel", "[schedule][matmul]") {
  std::mt19937 rng(304);
  A ra, rb;
  Tensor a = realized({8, 16}, DType::Float32, rng, &ra), b = realized({16, 4}, DType::Float32, rng, &rb);
  Tensor c = a.matmul(b);
  CHECK(c.schedule().size() == 1);
  CHECK(kernels_during([&] { c.realize(); }) == 1);
  A want = A::filled({8, 4}, 0);
  for (int64_t i = 0; i < 8; i++)
    for (int64_t j = 0; j < 4; j++)
      for (int64_t k = 0; k < 16; k++)
        want.at({i, j}) += ra.at({i, k}) * rb.at({k, j});
  check_values(c, want, 1e-5, 1e-5);
  // a matmul followed by an elementwise op still fuses into one kernel
  Tensor d = a.matmul(b).relu();
  CHECK(d.schedule().size() == 1);
  // so does a cheap op on its input (a scale), recomputed for each of the 4 columns
  CHECK(a.mul(sc(a, 2)).matmul(b).schedule().size() == 1);
}

TEST_CASE("softmax takes two or three kernels", "[schedule][softmax]") {
  std::mt19937 rng(305);
  A ra;
  Tensor a = realized({4, 8}, DType::Float32, rng, &ra);
  Tensor s = a.softmax();
  auto sched = s.schedule();
  INFO("softmax schedule has " << sched.size() << " kernels");
  CHECK(sched.size() <= 3);
  CHECK(sched.size() >= 2);
  int64_t n = kernels_during([&] { s.realize(); });
  CHECK(n == static_cast<int64_t>(sched.size()));
  A want = A::filled({4, 8}, 0);
  for (int64_t i = 0; i < 4; i++) {
    double m = -INFINITY, z = 0;
    for (int64_t j = 0; j < 8; j++)
      m = std::max(m, ra.at({i, j}));
    for (int64_t j = 0; j < 8; j++)
      z += std::exp(ra.at({i, j}) - m);
    for (int64_t j = 0; j < 8; j++)
      want.at({i, j}) = std::exp(ra.at({i, j}) - m) / z;
  }
  check_values(s, want, 1e-5, 1e-6);
}

TEST_CASE("a stored reduce is loaded by later kernels, never recomputed", "[schedule][softmax]") {
  // softmax(a @ b): the product is stored for the max; the sum and the output must load it
  std::mt19937 rng(306);
  A ra, rb;
  Tensor a = realized({6, 5}, DType::Float32, rng, &ra);
  Tensor b = realized({5, 7}, DType::Float32, rng, &rb);
  Tensor s = a.matmul(b).softmax(-1);
  auto sched = s.schedule();
  auto buffer_of = [](const Tensor& t) { // a realized tensor is movement ops over its BUFFER
    const UOp* u = t.uop.get();
    while (u->op != Ops::BUFFER)
      u = u->src[0].get();
    return u->buffer().get();
  };
  int reading_inputs = 0;
  for (auto& item : sched) {
    bool reads_a = false, reads_b = false;
    for (auto& buf : item.bufs) {
      reads_a |= buf.get() == buffer_of(a);
      reads_b |= buf.get() == buffer_of(b);
    }
    reading_inputs += reads_a || reads_b;
  }
  CHECK(reading_inputs == 1); // only the matmul's own kernel reads a and b
  A want = A::filled({6, 7}, 0);
  for (int64_t i = 0; i < 6; i++) {
    std::vector<double> m(7, 0);
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < 7; j++) {
      for (int64_t k = 0; k < 5; k++)
        m[j] += ra.at({i, k}) * rb.at({k, j});
      mx = std::max(mx, m[j]);
    }
    for (int64_t j = 0; j < 7; j++)
      z += std::exp(m[j] - mx);
    for (int64_t j = 0; j < 7; j++)
      want.at({i, j}) = std::exp(m[j] - mx) / z;
  }
  check_values(s, want, 1e-5, 1e-6);
}

TEST_CASE("a long reduce to one value is split into partial sums, then their sum", "[schedule][split]") {
  std::mt19937 rng(307);
  A ra;
  int64_t n = int64_t(1) << 22;
  Tensor a = realized({n}, DType::Float32, rng, &ra, 0, 1);
  Tensor s = a.sum();
  auto sched = s.schedule();
  REQUIRE(sched.size() == 2);
  CHECK(sched[0].bufs[0]->size >= 8); // the partial sums, one per piece of the input
  CHECK(sched[1].bufs[0]->size == 1);
  double want = 0;
  for (double v : ra.data)
    want += v;
  CHECK(s.item() == Approx(want).epsilon(1e-5));
  // a shorter reduce stays one fused kernel, and a reduce of constants is not split
  CHECK(a.shrink({{0, n / 2}}).sum().schedule().size() == 1);
  CHECK(Tensor::full({n}, 1.0, DType::Float32).sum().schedule().size() <= 1);
}

TEST_CASE(
    "a reduce over dims outside and inside its outputs (batch norm's sums) reduces the inner ones first",
    "[schedule][split]") {
  std::mt19937 rng(308);
  A ra;
  const int64_t n = 64, c = 8, h = 48, w = 48; // 1.2 M inputs, runs of 2304
  Tensor a = realized({n, c, h, w}, DType::Float32, rng, &ra, -1, 1);
  Tensor s = a.sum(std::vector<int64_t>{0, 2, 3}, true), mx = a.max(std::vector<int64_t>{0, 2, 3});
  for (const Tensor* t : {&s, &mx}) {
    auto sched = t->schedule();
    REQUIRE(sched.size() == 2);
    CHECK(sched[0].bufs[0]->size == n * c); // a partial result per image and channel, read in order
    CHECK(sched[1].bufs[0]->size == c);
  }
  std::vector<double> sums(c, 0), maxes(c, -1e30);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < c; j++)
      for (int64_t k = 0; k < h * w; k++) {
        double v = ra.data[static_cast<size_t>((i * c + j) * h * w + k)];
        sums[static_cast<size_t>(j)] += v;
        maxes[static_cast<size_t>(j)] = std::max(maxes[static_cast<size_t>(j)], v);
      }
  std::vector<double> got_s = s.data(), got_m = mx.data();
  for (size_t j = 0; j < static_cast<size_t>(c); j++) {
    CHECK(got_s[j] == Approx(sums[j]).epsilon(1e-5).margin(1e-3));
    CHECK(got_m[j] == maxes[j]);
  }
  // runs shorter than 64, and reduces of the inner dims only, stay one kernel
  CHECK(realized({4096, 32, 8}, DType::Float32, rng).sum(std::vector<int64_t>{0, 2}).schedule().size() == 1);
  CHECK(a.sum(std::vector<int64_t>{2, 3}).schedule().size() == 1);
  // nor is a reduce of constants only (it folds)
  CHECK(
      Tensor::full({n, c, h, w}, 1.0, DType::Float32).sum(std::vector<int64_t>{0, 2, 3}).schedule().size() <=
      1);
}

TEST_CASE("schedule items name their buffers with the output first", "[schedule]") {
  std::mt19937 rng(306);
  Tensor a = realized({5}, DType::Float32, rng), b = realized({5}, DType::Float32, rng);
  Tensor c = a.add(b);
  auto sched = c.schedule();
  REQUIRE(sched.size() == 1);
  const ScheduleItem& si = sched[0];
  REQUIRE(si.ast);
  CHECK(si.ast->op == Ops::SINK);
  REQUIRE(si.bufs.size() == 3); // output + two inputs
  CHECK(si.bufs[0]->size == 5);
  CHECK(si.bufs[0]->dtype == DType::Float32);
  CHECK(!si.to_string().empty());
  // schedule() is a preview: it leaves the tensor unrealized and repeatable
  CHECK(c.schedule().size() == 1);
}

TEST_CASE("a 10,000-op elementwise chain builds and schedules", "[schedule][deep]") {
  std::mt19937 rng(307);
  Tensor a = realized({16}, DType::Float32, rng);
  Tensor x = a;
  for (int i = 0; i < 10000; i++)
    x = (i % 2) ? x.add(sc(x, 1)) : x.mul(sc(x, 0.5));
  auto sched = x.schedule();
  CHECK(sched.size() >= 1);
  CHECK(sched.size() <= 2);
}

TEST_CASE("a 300-op chain realizes with the right value", "[schedule][deep]") {
  std::mt19937 rng(308);
  A ra;
  Tensor a = realized({8}, DType::Float32, rng, &ra);
  Tensor x = a;
  for (int i = 0; i < 300; i++)
    x = x.mul(sc(x, 0.5)).add(sc(x, 1));
  CHECK(kernels_during([&] { x.realize(); }) == 1);
  A want = map(ra, [](double v) {
    for (int i = 0; i < 300; i++)
      v = v * 0.5 + 1;
    return v;
  });
  check_values(x, want, 1e-5, 1e-6);
}

TEST_CASE("a reduce feeding two outputs runs once, in a kernel of its own", "[schedule]") {
  std::mt19937 rng(320);
  A ra;
  Tensor x = realized({6, 5}, DType::Float32, rng, &ra);
  Tensor s = x.sum(std::vector<int64_t>{1});
  Tensor b = s.add(sc(s, 1)), c = s.mul(sc(s, 2));
  // one kernel for the sum, one for each output; not the sum computed twice
  CHECK(kernels_during([&] { Tensor::realize_all({&b, &c}); }) == 3);
  A rs({6}, std::vector<double>(6, 0));
  for (int64_t i = 0; i < 6; i++)
    for (int64_t j = 0; j < 5; j++)
      rs.data[i] += ra.data[i * 5 + j];
  check_values(b, map(rs, [](double v) { return v + 1; }), 1e-5, 1e-5);
  check_values(c, map(rs, [](double v) { return v * 2; }), 1e-5, 1e-5);
  // a reduce used twice inside one output's kernel stays fused
  Tensor t = x.sum();
  CHECK(t.add(t.mul(sc(t, 2))).schedule().size() == 1);
}

// ---------------------------------------------------------------- kernel-boundary reasons
namespace {
std::vector<std::string> reasons(const std::vector<ScheduleItem>& items) {
  std::vector<std::string> r;
  for (auto& it : items)
    r.push_back(it.reason);
  return r;
}
using R = std::vector<std::string>;
} // namespace

TEST_CASE("each kernel says why it is a kernel", "[schedule][boundary]") {
  std::mt19937 rng(330);
  A ra, rb;
  Tensor a = realized({4, 5}, DType::Float32, rng, &ra);
  Tensor b = realized({5, 4}, DType::Float32, rng, &rb);
  A row_sum({4}, std::vector<double>(4, 0)), col_sum({4}, std::vector<double>(4, 0)),
      row_max({4}, std::vector<double>(4, -1e30));
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 5; j++) {
      row_sum.data[i] += static_cast<float>(ra.data[i * 5 + j]);
      col_sum.data[i] += static_cast<float>(rb.data[j * 4 + i]);
      row_max.data[i] =
          std::max(row_max.data[i], static_cast<double>(static_cast<float>(ra.data[i * 5 + j])));
    }

  SECTION("the graph's output, and an explicit realize") {
    Tensor x = a.add(sc(a, 1));
    CHECK(reasons(x.schedule()) == R{boundary::output});
    KernelLog log;
    Tensor y = a.mul(sc(a, 2));
    y.realize();
    (void)a.sub(sc(a, 1)).data(); // reading the values realizes the graph as its output
    REQUIRE(log.items.size() == 2);
    CHECK(reasons(log.items) == R{boundary::explicit_realize, boundary::output});
    check_values(y, map(ra, [](double v) { return static_cast<float>(v) * 2; }), 1e-6, 1e-6);
  }
  SECTION("contiguous") {
    Tensor x = a.add(sc(a, 1)).contiguous().mul(sc(a, 2));
    CHECK(reasons(x.schedule()) == R{boundary::contiguous, boundary::output});
    check_values(x, map(ra, [](double v) { return (static_cast<float>(v) + 1) * 2; }), 1e-5, 1e-5);
  }
  SECTION("assign target: written in place where its kernel reads the old value only where it writes") {
    Tensor t = realized({4, 5}, DType::Float32, rng);
    std::vector<double> before = t.data();
    t.assign(t.add(sc(t, 1)));
    auto items = t.schedule();
    CHECK(reasons(items) == R{boundary::assign_in_place});
    REQUIRE(items.size() == 1);
    CHECK(items[0].bufs.size() == 1); // the target is the output and the input
    std::vector<double> after = t.data();
    for (size_t i = 0; i < before.size(); i++)
      CHECK(after[i] == Approx(before[i] + 1).margin(1e-6));
  }
  SECTION("assign target: copied in where its kernel reads the old value elsewhere, or a later kernel does") {
    Tensor t = realized({4, 5}, DType::Float32, rng);
    std::vector<double> before = t.data();
    t.assign(t.flip({0}).add(sc(t, 1))); // row r gets old row 3 - r
    CHECK(reasons(t.schedule()) == R{boundary::assign, boundary::assign_copy});
    std::vector<double> after = t.data();
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 5; c++)
        CHECK(after[r * 5 + c] == Approx(before[(3 - r) * 5 + c] + 1).margin(1e-6));
    // a sum of the old value realized with the update: whichever runs first, it sums the old value
    Tensor u = realized({4, 5}, DType::Float32, rng);
    std::vector<double> old = u.data();
    Tensor total = u.sum();
    u.assign(u.mul(sc(u, 2)));
    Tensor::realize_all({&u, &total});
    double want = 0;
    for (double v : old)
      want += static_cast<float>(v);
    CHECK(total.item() == Approx(want).epsilon(1e-5));
    std::vector<double> now = u.data();
    for (size_t i = 0; i < old.size(); i++)
      CHECK(now[i] == Approx(old[i] * 2).margin(1e-6));
  }
  SECTION("a reduce feeds a reduce over other axes") {
    Tensor x = a.sum(std::vector<int64_t>{1}).max();
    CHECK(reasons(x.schedule()) == R{boundary::reduce_into_reduce, boundary::output});
    CHECK(x.item() == Approx(*std::max_element(row_sum.data.begin(), row_sum.data.end())).epsilon(1e-5));
  }
  SECTION("a reduce broadcast back: into another reduce (softmax's max) or into the output") {
    Tensor m = a.max(std::vector<int64_t>{1}, true);
    Tensor centered = a.sub(m);
    CHECK(reasons(centered.schedule()) == R{boundary::broadcast_back, boundary::output});
    Tensor e = centered.exp();
    Tensor sm = e.div(e.sum(std::vector<int64_t>{1}, true));
    CHECK(reasons(sm.schedule()) == R{boundary::broadcast_back, boundary::broadcast_back, boundary::output});
    A want({4, 5}, std::vector<double>(20));
    for (int64_t i = 0; i < 4; i++) {
      double s = 0;
      for (int64_t j = 0; j < 5; j++)
        s += std::exp(static_cast<float>(ra.data[i * 5 + j]) - row_max.data[i]);
      for (int64_t j = 0; j < 5; j++)
        want.data[i * 5 + j] = std::exp(static_cast<float>(ra.data[i * 5 + j]) - row_max.data[i]) / s;
    }
    check_values(sm, want, 1e-5, 1e-6);
  }
  SECTION("a reduce read through a pad") {
    Tensor x = a.sum(std::vector<int64_t>{1}).pad({{1, 1}}).add(sc(a, 1));
    CHECK(reasons(x.schedule()) == R{boundary::reduce_view, boundary::output});
    A want({6}, {1, 0, 0, 0, 0, 1});
    for (int64_t i = 0; i < 4; i++)
      want.data[i + 1] = row_sum.data[i] + 1;
    check_values(x, want, 1e-5, 1e-5);
  }
  SECTION("two reduces of different shapes") {
    Tensor x = a.sum(std::vector<int64_t>{1}).add(b.sum(std::vector<int64_t>{0}));
    CHECK(reasons(x.schedule()) == R{boundary::other_reduce, boundary::output});
    A want({4}, std::vector<double>(4));
    for (int64_t i = 0; i < 4; i++)
      want.data[i] = row_sum.data[i] + col_sum.data[i];
    check_values(x, want, 1e-5, 1e-5);
  }
  SECTION("used by two consumers that cannot share a loop") {
    Tensor s = a.sum(std::vector<int64_t>{1});
    Tensor x = s.add(sc(s, 1)), y = s.mul(sc(s, 2));
    CHECK(reasons(preview_schedule({x.uop, y.uop})) ==
          R{boundary::two_consumers, boundary::output, boundary::output});
    Tensor::realize_all({&x, &y});
    check_values(x, map(row_sum, [](double v) { return v + 1; }), 1e-5, 1e-5);
    check_values(y, map(row_sum, [](double v) { return v * 2; }), 1e-5, 1e-5);
  }
  SECTION("a float op that is not 0 at 0, padded: masked in the same kernel") {
    // exp(0) = 1 and log(0) = -inf in the padded region; the select keeps them out
    Tensor x = a.exp().pad({{0, 0}, {1, 0}}).add(a.abs().log().pad({{0, 0}, {0, 1}}));
    CHECK(reasons(x.schedule()) == R{boundary::output});
    A want({4, 6}, std::vector<double>(24, 0));
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 5; j++) {
        want.data[i * 6 + j + 1] += std::exp(static_cast<float>(ra.data[i * 5 + j]));
        want.data[i * 6 + j] += std::log(std::abs(static_cast<float>(ra.data[i * 5 + j])));
      }
    check_values(x, want, 1e-5, 1e-6);
  }
  SECTION("an integer division, padded: its divisor is 1 where the pad reads 0, in the same kernel") {
    std::mt19937 irng(306);
    A ri, rd;
    Tensor n = realized({4, 5}, DType::Int32, irng, &ri, -20, 20),
           d = realized({4, 5}, DType::Int32, irng, &rd, 1, 6);
    Tensor x = n.idiv(d).pad({{1, 0}, {0, 0}}); // floor division: an IDIV and a MOD
    CHECK(reasons(x.schedule()) == R{boundary::output});
    A want({5, 5}, std::vector<double>(25, 0));
    for (int64_t i = 0; i < 20; i++)
      want.data[i + 5] = std::floor(ri.data[i] / rd.data[i]);
    check_values(x, want, 0, 0);
  }
}

TEST_CASE("costly math broadcast into a matmul is computed once, in a kernel of its own",
          "[schedule][matmul]") {
  std::mt19937 rng(305);
  A ra, rb;
  Tensor a = realized({8, 16}, DType::Float32, rng, &ra), b = realized({16, 64}, DType::Float32, rng, &rb);
  // exp(a) / (1 + a*a): two transcendentals per element, which the matmul reads 64 times
  Tensor x = a.exp().div(a.mul(a).add(sc(a, 1)));
  Tensor c = x.matmul(b);
  CHECK(reasons(c.schedule()) == R{boundary::recompute, boundary::output});
  A want = A::filled({8, 64}, 0);
  for (int64_t i = 0; i < 8; i++)
    for (int64_t j = 0; j < 64; j++)
      for (int64_t k = 0; k < 16; k++) {
        double v = ra.at({i, k});
        want.at({i, j}) += std::exp(v) / (1 + v * v) * rb.at({k, j});
      }
  check_values(c, want, 1e-4, 1e-4);
}
