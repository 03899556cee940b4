// Opts as data: random Opt lists on kernels of the kinds the test suite makes give the values
// of the same kernel under NOOPT; illegal lists are errors that name the opt, never crashes.
#include <algorithm>
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/codegen/lowerer.h"
#include "engine/device.h"
#include "engine/pattern.h"
#include "engine/realize.h"
#include "engine/settings.h"
#include "engine/tensor.h"

using namespace mg;

namespace {

// The values the last kernel of t's schedule writes with `opts` (earlier kernels run first);
// `info`, if given, gets that kernel's (its source).
std::vector<float> run_last(const Tensor& t, const std::vector<Opt>& opts, KernelInfo* info = nullptr) {
  auto items = t.schedule();
  REQUIRE(!items.empty());
  run_schedule({items.begin(), items.end() - 1});
  KernelInfo own;
  try_opts(items.back(), opts, 1, info ? *info : own);
  Buffer& out = *items.back().bufs[0];
  std::vector<float> v(out.size);
  out.copyout(v.data());
  return v;
}

// The values t's schedule writes under NOOPT (no dim merging, no opts, only the rewrites
// correctness needs): the reference every opt list is held to.
std::vector<float> run_noopt(const Tensor& t) {
  bool was = settings().noopt;
  settings().noopt = true;
  auto items = t.schedule();
  run_schedule(items);
  settings().noopt = was;
  Buffer& out = *items.back().bufs[0];
  std::vector<float> v(out.size);
  out.copyout(v.data());
  return v;
}

struct Case {
  std::string name;
  Tensor t;
};

std::vector<Case> cases() {
  Tensor::manual_seed(3);
  Tensor a = Tensor::rand({24, 40}), b = Tensor::rand({40, 36}), c = Tensor::rand({16, 48}),
         x = Tensor::rand({2, 3, 10, 12});
  Tensor::realize_all({&a, &b, &c, &x});
  Tensor conv = x.pad({{0, 0}, {0, 0}, {1, 1}, {1, 1}}, 0.0)
                    .reshape({2, 1, 3, 12, 14})
                    .expand({2, 4, 3, 12, 14})
                    .mul(Tensor::full({2, 4, 3, 12, 14}, 0.5, DType::Float32))
                    .sum(std::vector<int64_t>{2});
  return {{"matmul 24x40 @ 40x36", a.matmul(b)},
          {"sum over the last axis", c.sum(std::vector<int64_t>{1})},
          {"max over the first axis", c.max(std::vector<int64_t>{0})},
          {"sum of a broadcast product",
           a.reshape({24, 40, 1}).mul(b.reshape({1, 40, 36})).sum(std::vector<int64_t>{1})},
          {"elementwise on a permuted view", c.permute({1, 0}).mul(c.permute({1, 0})).add(c.permute({1, 0}))},
          {"a padded channel sum", conv},
          {"a full sum", x.mul(x).sum()}};
}

} // namespace

namespace {

// Draws random opt lists for each case on `device` (the default device while it runs) and checks
// every legal list against the NOOPT values; an illegal one must be an error naming the opt, or,
// on a GPU, the launch the device cannot take.
void check_random_opts(const std::string& device, int draws, int min_legal, int min_illegal) {
  std::string was_device = settings().device;
  settings().device = device;
  Target target = get_device(device).target();
  std::mt19937 rng(42);
  const int64_t amounts[] = {0, 2, 3, 4, 5, 8, 16, 7};
  auto random_opt = [&] {
    const OptOp ops[] = {OptOp::UPCAST, OptOp::UNROLL,    OptOp::UPCAST, OptOp::UNROLL, OptOp::SWAP,
                         OptOp::LOCAL,  OptOp::NOLOCALS,  OptOp::PADTO,  OptOp::GROUP,  OptOp::GROUPTOP,
                         OptOp::BLOCK,  OptOp::VECTORIZE, OptOp::MERGE};
    OptOp op = ops[rng() % std::size(ops)];
    if (op == OptOp::NOLOCALS) return Opt{op, 0, 0};
    int64_t axis = static_cast<int64_t>(rng() % 4);
    return Opt{op, axis, op == OptOp::SWAP ? static_cast<int64_t>(rng() % 4) : amounts[rng() % 8]};
  };
  int legal = 0, illegal = 0;
  for (auto& c : cases()) {
    INFO(device << ": " << c.name);
    std::vector<float> want = run_noopt(c.t);
    const UOpRef ast = c.t.schedule().back().ast;
    for (int draw = 0; draw < draws; draw++) {
      std::vector<Opt> opts;
      int n = 1 + static_cast<int>(rng() % 3);
      if (draw % 2 == 0) {
        // built to be legal: each opt kept only where the lowerer accepts the list so far
        for (int i = 0, tries = 0; i < n && tries < 40; tries++) {
          opts.push_back(random_opt());
          try {
            lower_kernel(ast, &opts, target);
            i++;
          } catch (const std::invalid_argument&) {
            opts.pop_back();
          }
        }
      } else {
        for (int i = 0; i < n; i++)
          opts.push_back(random_opt());
      }
      std::string list;
      for (auto& o : opts)
        list += o.to_string() + " ";
      INFO("opts: " << list);
      std::vector<float> got;
      try {
        got = run_last(c.t, opts);
      } catch (const std::invalid_argument& e) {
        illegal++;
        std::string msg = e.what();
        bool names_an_opt = msg.find("UPCAST(") == 0 || msg.find("UNROLL(") == 0 || msg.find("SWAP(") == 0 ||
                            msg.find("LOCAL(") == 0 || msg.find("NOLOCALS:") == 0 ||
                            msg.find("PADTO(") == 0 || msg.find("GROUP(") == 0 ||
                            msg.find("GROUPTOP(") == 0 || msg.find("BLOCK(") == 0 ||
                            msg.find("VECTORIZE(") == 0 || msg.find("MERGE(") == 0;
        bool names_the_launch =
            target.gpu && (msg.find("launch dim") == 0 || msg.find("a work-group of") == 0 ||
                           msg.find("more than 3 local") == 0 || msg.find("GROUP:") == 0 ||
                           msg.find("each thread would run") == 0 || msg.find("VECTORIZE:") == 0);
        CHECK((names_an_opt || names_the_launch));
        CHECK(draw % 2 == 1); // a list built to be legal is never refused
        continue;
      }
      legal++;
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); i++)
        if (std::fabs(got[i] - want[i]) > 1e-5f * (1 + std::fabs(want[i]))) {
          FAIL_CHECK("element " << i << ": " << got[i] << " with the opts, " << want[i] << " under NOOPT");
          break;
        }
    }
  }
  settings().device = was_device;
  // both kinds were really drawn: the test cannot pass on errors alone
  CHECK(legal >= min_legal);
  CHECK(illegal >= min_illegal);
}

} // namespace

TEST_CASE("random opt lists give the values of the NOOPT kernel, and illegal ones are errors") {
  check_random_opts("CPU", 100, 200, 50);
}

// The GPU lowering: launch dims as thread ids, LOCAL as work-groups, GROUP through shared memory
// and a barrier, on the devices that run here.
TEST_CASE("random opt lists on the GPU-style devices CL and VULKAN give the NOOPT values") {
  for (std::string dev : {"CL", "VULKAN"}) {
    if (std::string why = get_device(dev).unavailable(); !why.empty()) {
      WARN("SKIPPED: " << dev << " cannot run here: " << why);
      continue;
    }
    check_random_opts(dev, 30, 60, 15);
  }
}

TEST_CASE("SWAP changes the loop order and nothing else") {
  Tensor a = Tensor::rand({24, 40}), b = Tensor::rand({40, 36});
  Tensor::realize_all({&a, &b});
  Tensor t = a.matmul(b);
  auto ast = t.schedule().back().ast;
  std::vector<Opt> none, swap{{OptOp::SWAP, 0, 1}};
  CHECK(lower_kernel(ast, &none).full_shape == Shape{24, 36, 40});
  CHECK(lower_kernel(ast, &swap).full_shape == Shape{36, 24, 40}); // the output loops exchanged
  std::vector<float> want = run_last(t, none), got = run_last(t, swap);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); i++)
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("launch dims: up to 3 dims over outputs are SPECIAL gidx in the lowered IR, loops on the CPU") {
  auto count = [](const UOpRef& root, Ops op) {
    int n = 0;
    for (const UOp* u : toposort(root.get()))
      n += u->op == op;
    return n;
  };
  Tensor a = Tensor::rand({32, 48}), b = Tensor::rand({48, 40}), e = Tensor::rand({2, 3, 4, 5, 6});
  Tensor::realize_all({&a, &b, &e});
  LoweredKernel mm = lower_kernel(a.matmul(b).schedule().back().ast);
  // the hand-coded tile: 32 = 4 x 8 and 40 = 5 x 8 upcast; the launch is the 4 x 5 tiles
  CHECK(mm.global_size == Shape{4, 5});
  CHECK(mm.local_size == Shape{1, 1});
  CHECK(count(mm.lowered, Ops::SPECIAL) == 2);
  CHECK(count(mm.simplified, Ops::SPECIAL) == 0); // the CPU runs them as loops
  bool special_in_linear = false;
  for (auto& u : mm.linear)
    special_in_linear |= u->op == Ops::SPECIAL;
  CHECK_FALSE(special_in_linear);
  std::vector<Opt> none;
  LoweredKernel ew =
      lower_kernel(e.add(e).permute({4, 3, 2, 1, 0}).contiguous().schedule().back().ast, &none);
  CHECK(ew.global_size.size() == 3); // five dims over outputs: three launch dims, two loops
  CHECK(count(ew.lowered, Ops::SPECIAL) == 3);
}

TEST_CASE("LOCAL makes a local launch dim after the global ones, and NOLOCALS forbids it") {
  Tensor a = Tensor::rand({32, 48}), b = Tensor::rand({48, 40});
  Tensor::realize_all({&a, &b});
  Tensor t = a.matmul(b);
  auto ast = t.schedule().back().ast;
  std::vector<Opt> local{{OptOp::LOCAL, 1, 8}, {OptOp::LOCAL, 0, 4}};
  LoweredKernel k = lower_kernel(ast, &local);
  CHECK(k.full_shape == Shape{8, 5, 8, 4, 48}); // globals 32/4 and 40/8, then the locals in order
  CHECK(k.global_size == Shape{8, 5});
  CHECK(k.local_size == Shape{8, 4});
  int lidx = 0;
  for (const UOp* u : toposort(k.lowered.get()))
    lidx += u->op == Ops::SPECIAL && launch_dim(*u).local;
  CHECK(lidx == 2);
  std::vector<Opt> none;
  std::vector<float> want = run_last(t, none), got = run_last(t, local);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); i++)
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
  std::vector<Opt> refused{{OptOp::NOLOCALS, 0, 0}, {OptOp::LOCAL, 0, 4}};
  CHECK_THROWS_WITH(lower_kernel(ast, &refused), "LOCAL(0, 4): the kernel was given NOLOCALS");
  std::vector<Opt> late{{OptOp::LOCAL, 0, 4}, {OptOp::NOLOCALS, 0, 0}};
  CHECK_THROWS_WITH(lower_kernel(ast, &late), "NOLOCALS: the kernel has local or group dims already");
}

TEST_CASE("a GPU's per-axis thread limit makes a work-group past it illegal (CUDA: 64 along z)") {
  Tensor e = Tensor::rand({128, 4, 4});
  e.realize();
  auto ast = e.add(e).schedule().back().ast;
  Target gpu;
  gpu.gpu = true;
  // three local dims: the outermost is lidx2, 128 threads of a 512-thread work-group
  std::vector<Opt> deep{{OptOp::LOCAL, 0, 128}, {OptOp::LOCAL, 0, 2}, {OptOp::LOCAL, 0, 2}};
  LoweredKernel k = lower_kernel(ast, &deep, gpu);
  CHECK(k.local_size == Shape{2, 2, 128});
  gpu.max_local_axis[2] = 64;
  CHECK_THROWS_WITH(lower_kernel(ast, &deep, gpu), "launch dim lidx2 has 128 threads; the device allows 64");
  std::vector<Opt> shallow{{OptOp::LOCAL, 0, 64}, {OptOp::LOCAL, 0, 2}, {OptOp::LOCAL, 0, 2}};
  CHECK(lower_kernel(ast, &shallow, gpu).local_size == Shape{2, 2, 64});
  auto names = device_names();
  if (std::find(names.begin(), names.end(), "CUDA") != names.end()) // where the toolkit was found
    CHECK(get_device("CUDA").target().max_local_axis[2] == 64);
}

TEST_CASE("GROUP and GROUPTOP reduce in partial results, combined after") {
  Tensor c = Tensor::rand({6, 96});
  Tensor::realize_all({&c});
  for (bool max : {false, true}) {
    Tensor t = max ? c.max(std::vector<int64_t>{1}) : c.sum(std::vector<int64_t>{1});
    auto ast = t.schedule().back().ast;
    std::vector<Opt> group{{OptOp::GROUP, 0, 8}}, top{{OptOp::GROUPTOP, 0, 8}, {OptOp::UNROLL, 0, 4}};
    CHECK(lower_kernel(ast, &group).full_shape == Shape{6, 12, 8}); // every 8th element: 8 partials
    CHECK(lower_kernel(ast, &top).full_shape == Shape{6, 8, 3, 4}); // 8 runs of 12, each unrolled by 4
    std::vector<Opt> none;
    std::vector<float> want = run_last(t, none);
    for (auto* opts : {&group, &top}) {
      std::vector<float> got = run_last(t, *opts);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); i++)
        REQUIRE(got[i] == Approx(want[i]).epsilon(1e-5));
    }
    std::vector<Opt> refused{{OptOp::NOLOCALS, 0, 0}, {OptOp::GROUP, 0, 8}};
    CHECK_THROWS_WITH(lower_kernel(ast, &refused), "GROUP(0, 8): the kernel was given NOLOCALS");
  }
}

TEST_CASE("BLOCK runs the reduce in blocks outside the output loops, on one core or two") {
  Tensor a = Tensor::rand({8, 512}), b = Tensor::rand({512, 48});
  Tensor::realize_all({&a, &b});
  Tensor t = a.matmul(b);
  auto ast = t.schedule().back().ast;
  std::vector<Opt> none, block{{OptOp::BLOCK, 0, 64}},
      tiled{{OptOp::UPCAST, 1, 16}, {OptOp::BLOCK, 0, 32}, {OptOp::UNROLL, 0, 4}};
  CHECK(lower_kernel(ast, &block).full_shape == Shape{8, 8, 48, 64}); // 8 blocks of 64, outermost
  std::vector<float> want = run_last(t, none);
  struct Restore {
    int threads = settings().threads;
    ~Restore() { settings().threads = threads; }
  } restore;
  for (int cores : {1, 2}) {
    settings().threads = cores;
    for (auto* opts : {&block, &tiled}) {
      std::vector<float> got = run_last(t, *opts);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); i++)
        REQUIRE(got[i] == Approx(want[i]).epsilon(1e-5));
    }
  }
  // accumulators that do not fill whole vectors (12) start from the partial sums of the blocks
  // before, with no combine after the loop: the sums run in the order of the same tile
  // unblocked, to the bit. Rows of whole vectors (16) add the partial sums after the loop.
  std::vector<Opt> odd{{OptOp::UPCAST, 1, 12}, {OptOp::BLOCK, 0, 32}, {OptOp::UNROLL, 0, 4}},
      unblocked{{OptOp::UPCAST, 1, 12}, {OptOp::UNROLL, 0, 4}};
  std::vector<float> same_order = run_last(t, unblocked), blocked = run_last(t, odd);
  REQUIRE(blocked.size() == same_order.size());
  for (size_t i = 0; i < blocked.size(); i++)
    REQUIRE(blocked[i] == same_order[i]);
  auto from_partial = [&](const std::vector<Opt>& opts) {
    int n = 0;
    for (auto& u : lower_kernel(ast, &opts).linear)
      n += u->op == Ops::DEFINE_ACC && u->src[0]->op == Ops::WHERE;
    return n;
  };
  CHECK(from_partial(odd) == 12);
  CHECK(from_partial(tiled) == 0);
  // the output must hold the partial result: not when something is applied after the reduce
  auto relu_ast = a.matmul(b).relu().schedule().back().ast;
  CHECK_THROWS_WITH(lower_kernel(relu_ast, &block), Catch::Contains("does not store its reduce as is"));
}

namespace {
// The kernel made_on(dev) ends with, run with `opts` and with none on the CPU and LLVM devices at
// 1 and 2 cores, against `want`; `check` looks at each run's kernel (with the opts or not).
void on_host_devices(const std::function<Tensor(const std::string&)>& made_on, const std::vector<Opt>& opts,
                     const std::vector<float>& want,
                     const std::function<void(const std::string&, bool, const KernelInfo&)>& check = {}) {
  struct Restore {
    int threads = settings().threads;
    ~Restore() { settings().threads = threads; }
  } restore;
  const std::vector<Opt> none;
  for (std::string dev : {"CPU", "LLVM"}) {
    for (int cores : {1, 2}) {
      settings().threads = cores;
      for (const auto* o : {&opts, &none}) {
        INFO(dev << " at " << cores << " cores, " << (o == &opts ? "with the opts" : "no opts"));
        KernelInfo info;
        std::vector<float> got = run_last(made_on(dev), *o, &info);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); i++) // x*x+x may be one fused multiply-add
          REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6).margin(1e-6));
        if (check) check(dev, o == &opts, info);
      }
    }
  }
}
} // namespace

// A transpose whose rows of 6 load contiguously and store 4 floats apart, the gaps filled by the
// 4 copies of the upcast: the shape of a Winograd output transform, which clang leaves scalar
// unless told.
TEST_CASE("VECTORIZE tells the compiler to vectorize the innermost loop, and nothing else changes") {
  std::vector<double> data(16 * 4 * 6);
  std::mt19937 rng(7);
  for (auto& v : data)
    v = static_cast<double>(rng() % 1000) / 100 - 5;
  auto made_on = [&](const std::string& dev) {
    Tensor x = Tensor::from_data(data, {16, 4, 6}, DType::Float32, dev).permute({0, 2, 1});
    return x.mul(x).add(x);
  };
  auto ast = made_on("CPU").schedule().back().ast;
  std::vector<Opt> vec{{OptOp::UPCAST, 2, 4}, {OptOp::VECTORIZE, 1, 0}};
  LoweredKernel k = lower_kernel(ast, &vec);
  CHECK(k.shape.kind.back() == kUpcast);
  CHECK(std::count(k.shape.kind.begin(), k.shape.kind.end(), kVector) == 1);
  std::vector<float> want(data.size());
  for (int64_t i = 0; i < 16; i++) // out[i, j, k] = x[i, k, j]^2 + x[i, k, j]
    for (int64_t j = 0; j < 6; j++)
      for (int64_t c = 0; c < 4; c++) {
        float v = static_cast<float>(data[(i * 4 + c) * 6 + j]);
        want[(i * 6 + j) * 4 + c] = v * v + v;
      }
  on_host_devices(made_on, vec, want, [](const std::string& dev, bool with_opts, const KernelInfo& info) {
    bool marked = info.src.find(dev == "CPU" ? "#pragma clang loop vectorize(enable)"
                                             : "llvm.loop.vectorize.enable") != std::string::npos;
    CHECK(marked == with_opts);
  });
  // only the innermost loop, once, with no amount
  std::vector<Opt> outer{{OptOp::VECTORIZE, 0, 0}}, amount{{OptOp::VECTORIZE, 1, 4}}, twice = vec;
  twice.push_back({OptOp::VECTORIZE, 0, 0});
  CHECK_THROWS_WITH(lower_kernel(ast, &outer), Catch::Contains("only the innermost loop vectorizes"));
  CHECK_THROWS_WITH(lower_kernel(ast, &amount), Catch::Contains("takes no amount"));
  CHECK_THROWS_WITH(lower_kernel(ast, &twice), Catch::Contains("the kernel has a VECTORIZE already"));
  Tensor a = Tensor::rand({8, 16}), b = Tensor::rand({16, 8});
  Tensor::realize_all({&a, &b});
  std::vector<Opt> over_reduce{{OptOp::VECTORIZE, 1, 0}};
  CHECK_THROWS_WITH(lower_kernel(a.matmul(b).schedule().back().ast, &over_reduce),
                    Catch::Contains("runs inside it"));
}

// A block of 4 x 4 outputs stored contiguously, each read from every other row and column (a
// Winograd transform's tiles): MERGE makes the loops one, which the load reads through a second
// view (dividing the loop by 4), and VECTORIZE runs it as lanes.
TEST_CASE("MERGE joins two loops over outputs, a load that cannot follow reading through a second view") {
  std::vector<double> data(8 * 8 * 8);
  std::mt19937 rng(5);
  for (auto& v : data)
    v = static_cast<double>(rng() % 1000) / 100 - 5;
  auto made_on = [&](const std::string& dev) { // out[i, r, c] = x[i, 2r, 2c] * 3
    Tensor x = Tensor::from_data(data, {8, 4, 2, 4, 2}, DType::Float32, dev);
    return x.shrink({{0, 8}, {0, 4}, {0, 1}, {0, 4}, {0, 1}})
        .reshape({8, 4, 4})
        .mul(Tensor::from_scalar(Scalar{3.0, DType::Float32}, x));
  };
  auto ast = made_on("CPU").schedule().back().ast;
  // the loops as scheduled: (32, 4), rows i and r one loop (the load's strides 64 and 16 join)
  std::vector<Opt> merged{{OptOp::MERGE, 0, 0}, {OptOp::VECTORIZE, 0, 0}};
  LoweredKernel k = lower_kernel(ast, &merged);
  REQUIRE(k.shape.full.size() == 1);
  CHECK(k.shape.full[0] == 128);
  CHECK(k.shape.kind[0] == kVector);
  std::vector<float> want(8 * 16);
  for (int64_t i = 0; i < 8; i++)
    for (int64_t r = 0; r < 4; r++)
      for (int64_t c = 0; c < 4; c++)
        want[(i * 4 + r) * 4 + c] = static_cast<float>(data[i * 64 + r * 16 + c * 2]) * 3;
  on_host_devices(made_on, merged, want);
  std::vector<Opt> amount{{OptOp::MERGE, 0, 4}}, last{{OptOp::MERGE, 1, 0}};
  CHECK_THROWS_WITH(lower_kernel(ast, &amount), Catch::Contains("takes no amount"));
  CHECK_THROWS_WITH(lower_kernel(ast, &last), Catch::Contains("is not a dim over outputs to join"));
  Tensor a = Tensor::rand({8, 16}), b = Tensor::rand({16, 8});
  Tensor::realize_all({&a, &b});
  std::vector<Opt> into_reduce{{OptOp::MERGE, 1, 0}};
  CHECK_THROWS_WITH(lower_kernel(a.matmul(b).schedule().back().ast, &into_reduce),
                    Catch::Contains("is not a dim over outputs to join"));
}

TEST_CASE("a reduce loop that updates a tile is left as written by the compiler, values unchanged") {
  const int64_t m = 16, k = 256, n = 32; // small enough that B is not packed
  std::vector<double> a(m * k), b(k * n);
  std::mt19937 rng(11);
  for (auto* v : {&a, &b})
    for (auto& x : *v)
      x = static_cast<double>(rng() % 200) / 100 - 1;
  std::vector<float> want(m * n, 0.0f);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t r = 0; r < k; r++)
        acc += a[i * k + r] * b[r * n + j];
      want[i * n + j] = static_cast<float>(acc);
    }
  // a 4x16 tile (64 accumulators) over 32 iterations of 8; a 2x16 tile over 8 iterations of 32;
  // no tile (the reduce's lanes: 8 accumulators)
  std::vector<Opt> tile{{OptOp::UPCAST, 1, 16}, {OptOp::UPCAST, 0, 4}, {OptOp::UNROLL, 0, 8}},
      short_loop{{OptOp::UPCAST, 1, 16}, {OptOp::UPCAST, 0, 2}, {OptOp::UNROLL, 0, 32}},
      lanes{{OptOp::UNROLL, 0, 8}};
  for (std::string dev : {"CPU", "LLVM"})
    for (auto* opts : {&tile, &short_loop, &lanes}) {
      INFO(dev << ", " << (opts == &tile ? "tile" : opts == &short_loop ? "short loop" : "lanes"));
      Tensor ta = Tensor::from_data(a, {m, k}, DType::Float32, dev);
      Tensor tb = Tensor::from_data(b, {k, n}, DType::Float32, dev);
      REQUIRE(ta.matmul(tb).schedule().size() == 1);
      KernelInfo info;
      std::vector<float> got = run_last(ta.matmul(tb), *opts, &info);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); i++)
        REQUIRE(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-5));
      bool marked = info.src.find(dev == "CPU" ? "#pragma clang loop unroll(disable)"
                                               : "llvm.loop.unroll.disable") != std::string::npos;
      CHECK(marked == (opts == &tile));
    }
}

TEST_CASE("the hand-coded opts are a list that replays to the same kernel") {
  for (auto& c : cases()) {
    INFO(c.name);
    auto items = c.t.schedule();
    LoweredKernel k = lower_kernel(items.back().ast);
    LoweredKernel again = lower_kernel(items.back().ast, &k.opts);
    CHECK(again.name == k.name);
    CHECK(again.opts == k.opts);
    CHECK(again.full_shape == k.full_shape);
  }
}

TEST_CASE("an illegal opt says which and why") {
  Tensor a = Tensor::rand({24, 40}), b = Tensor::rand({40, 36});
  Tensor::realize_all({&a, &b});
  auto items = a.matmul(b).schedule();
  auto err = [&](std::vector<Opt> opts) {
    try {
      lower_kernel(items.back().ast, &opts);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err({{OptOp::UPCAST, 0, 7}}) == "UPCAST(0, 7): the dim has 24 iterations, not a multiple of 7");
  CHECK(err({{OptOp::UNROLL, 3, 2}}).find("UNROLL(3, 2): axis 3 does not exist") == 0);
  CHECK(err({{OptOp::UPCAST, 0, 1}}).find("the amount must be 2 or more") != std::string::npos);
  CHECK(err({{OptOp::UPCAST, -1, 2}}).find("the axis must be 0 or more") != std::string::npos);
  CHECK(err({{OptOp::UPCAST, 1, 36}, {OptOp::UPCAST, 0, 24}, {OptOp::UNROLL, 0, 8}}) ==
        "UNROLL(0, 8): 6912 copies of the kernel body (at most 1024)");
  CHECK(err({{OptOp::SWAP, 1, 1}}) == "SWAP(1, 1): an axis cannot be swapped with itself");
  CHECK(err({{OptOp::SWAP, 0, 2}}) ==
        "SWAP(0, 2): axis 2 does not exist; the kernel has 2 dims over outputs");
  CHECK_THROWS_WITH(opt_op("TILE"), Catch::Contains("unknown opt 'TILE'"));
}
