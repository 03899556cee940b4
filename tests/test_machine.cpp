// The machine the heuristic sizes its tiles by (engine/machine.h): the sysfs reader on a fake
// tree, the MG_* overrides, and the hand-coded opts of a float32 elementwise kernel and a matmul
// under the AVX2 and AVX-512 profiles, each run and held to a plain C++ loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/codegen/lowerer.h"
#include "engine/device.h"
#include "engine/machine.h"
#include "engine/realize.h"
#include "engine/settings.h"
#include "engine/tensor.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

// A directory under the system temp dir, removed when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One cache as sysfs lists it: cache/indexN/{level,type,size,shared_cpu_list}.
void fake_cache(const fs::path& dir, int index, const std::string& level, const std::string& type,
                const std::string& size, const std::string& shared) {
  fs::path p = dir / ("index" + std::to_string(index));
  fs::create_directories(p);
  std::ofstream(p / "level") << level << "\n";
  std::ofstream(p / "type") << type << "\n";
  std::ofstream(p / "size") << size << "\n";
  std::ofstream(p / "shared_cpu_list") << shared << "\n";
}

// The caches of the machine the heuristic was tuned on, as sysfs lists them there.
void fake_tuning_machine(const fs::path& dir) {
  fake_cache(dir, 0, "1", "Data", "32K", "0");
  fake_cache(dir, 1, "1", "Instruction", "32K", "0");
  fake_cache(dir, 2, "2", "Unified", "1024K", "0");
  fake_cache(dir, 3, "3", "Unified", "32768K", "0-1");
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* k) -> const char* {
    auto it = vars.find(k);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// The tuning machine's caches with the SIMD profile of `lanes` float lanes.
Machine profile(int lanes, std::map<std::string, std::string> more = {}) {
  TempDir dir("mg-machine-profile");
  fake_tuning_machine(dir.path);
  more["MG_VECTOR_WIDTH"] = std::to_string(lanes);
  return probe_machine(dir.path.string(), env_of(more));
}

std::vector<double> counting(size_t n, double scale) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = std::fmod(static_cast<double>(i) * 0.37, 5.0) * scale - 1.0;
  return v;
}

// The hand-coded opts of t's last kernel, then that kernel run with them (earlier kernels first).
struct Ran {
  std::vector<Opt> opts;
  std::vector<float> values;
};
Ran lower_and_run(const Tensor& t) {
  auto items = t.schedule();
  REQUIRE(!items.empty());
  run_schedule({items.begin(), items.end() - 1});
  Ran r;
  r.opts = lower_kernel(items.back().ast).opts;
  KernelInfo info;
  try_opts(items.back(), r.opts, 1, info);
  Buffer& out = *items.back().bufs[0];
  r.values.resize(out.size);
  out.copyout(r.values.data());
  return r;
}

bool has_opt(const std::vector<Opt>& opts, OptOp op, int64_t amount) {
  for (auto& o : opts)
    if (o.op == op && o.amount == amount) return true;
  return false;
}

std::string list(const std::vector<Opt>& opts) {
  std::string s;
  for (auto& o : opts)
    s += o.to_string() + " ";
  return s;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); i++) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-5));
  }
}

// a (M x K) @ b (K x N) in float32, as the kernel rounds its inputs
std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, int M, int K,
                               int N) {
  std::vector<double> want(static_cast<size_t>(M * N), 0.0);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = 0;
      for (int k = 0; k < K; k++)
        acc += static_cast<float>(a[i * K + k]) * static_cast<float>(b[k * N + j]);
      want[i * N + j] = acc;
    }
  return want;
}

// A float32 M x K by K x N matmul of counting values (steps sa and sb), realized, and its
// product from the loop above.
struct MatmulCase {
  Tensor a, b;
  std::vector<double> want;
};
MatmulCase matmul_case(int M, int K, int N, double sa, double sb) {
  std::vector<double> a = counting(M * K, sa), b = counting(K * N, sb);
  MatmulCase c{Tensor::from_data(a, {M, K}, DType::Float32), Tensor::from_data(b, {K, N}, DType::Float32),
               matmul_ref(a, b, M, K, N)};
  Tensor::realize_all({&c.a, &c.b});
  return c;
}

} // namespace

TEST_CASE("sysfs caches: levels, sizes and sharing from a fake tree") {
  TempDir dir("mg-machine-sysfs");
  fake_cache(dir.path, 0, "1", "Data", "48K", "0,8");
  fake_cache(dir.path, 1, "1", "Instruction", "32K", "0,8");
  fake_cache(dir.path, 2, "2", "Unified", "2048K", "0,8");
  fake_cache(dir.path, 3, "3", "Unified", "96M", "0-7,16-23");
  fs::create_directories(dir.path / "uevent_like_entry"); // not an index*: ignored
  CacheSizes c = read_cache_sizes(dir.path.string());
  CHECK(c.found);
  CHECK(c.l1d.bytes == 48 << 10);
  CHECK(c.l1d.shared_by == 2);
  CHECK(c.l2.bytes == 2 << 20);
  CHECK(c.l3.bytes == int64_t(96) << 20);
  CHECK(c.l3.shared_by == 16);

  Machine m = probe_machine(dir.path.string(), env_of({{"MG_VECTOR_WIDTH", "16"}}));
  CHECK(m.caches_from_sysfs);
  CHECK(
      m.describe().find("AVX-512: 16 float lanes, 32 registers; L1d 48 KiB, L2 2 MiB, L3 96 MiB shared by 16 "
                        "cores") == 0);
}

TEST_CASE("sysfs caches: no tree gives the stated defaults, a tree without L3 gives none") {
  TempDir dir("mg-machine-empty");
  CHECK_FALSE(read_cache_sizes((dir.path / "missing").string()).found);
  Machine m = probe_machine((dir.path / "missing").string(), env_of({}));
  CacheSizes d = default_cache_sizes();
  CHECK_FALSE(m.caches_from_sysfs);
  CHECK(m.l1d.bytes == d.l1d.bytes);
  CHECK(m.l2.bytes == d.l2.bytes);
  CHECK(m.l3.bytes == d.l3.bytes);
  CHECK(m.describe().find("(defaults: no cache sizes in sysfs)") != std::string::npos);

  fake_cache(dir.path, 0, "1", "Data", "32K", "0");
  fake_cache(dir.path, 1, "2", "Unified", "512K", "0");
  Machine no_l3 = probe_machine(dir.path.string(), env_of({}));
  CHECK(no_l3.l2.bytes == 512 << 10);
  CHECK(no_l3.l3.bytes == 0);
  CHECK(no_l3.describe().find("no L3") != std::string::npos);
}

TEST_CASE("machine: the SIMD profile comes from cpuid, MG_VECTOR_WIDTH and MG_*_KB override it") {
  SimdProfile detected = detect_simd();
  CHECK(detected.float_lanes >= 1);
  CHECK(detected.vector_registers >= 1);
  CHECK(machine().cores >= 1);
  INFO(machine().describe());

  Machine avx2 = profile(8, {{"MG_L2_KB", "512"}, {"MG_L3_KB", "8192"}});
  CHECK(avx2.simd.isa == "AVX2");
  CHECK(avx2.simd.float_lanes == 8);
  CHECK(avx2.simd.vector_registers == 16);
  CHECK(avx2.l2.bytes == 512 << 10);
  CHECK(avx2.l3.bytes == 8 << 20);
  CHECK(avx2.describe() == "AVX2: 8 float lanes, 16 registers; L1d 32 KiB, L2 512 KiB, L3 8 MiB shared by 2 "
                           "cores; " +
                               std::to_string(avx2.cores) + (avx2.cores == 1 ? " core" : " cores") +
                               " [MG_VECTOR_WIDTH=8 MG_L2_KB=512 MG_L3_KB=8192]");
  Machine avx512 = profile(16);
  CHECK(avx512.simd.isa == "AVX-512");
  CHECK(avx512.simd.float_lanes == 16);
  CHECK(avx512.simd.vector_registers == 32);
  CHECK(profile(4).simd.float_lanes == 4);

  // through the process environment, as machine() reads it
  ::setenv("MG_VECTOR_WIDTH", "8", 1);
  Machine from_env = probe_machine("/nonexistent", [](const char* k) { return std::getenv(k); });
  ::unsetenv("MG_VECTOR_WIDTH");
  CHECK(from_env.simd.float_lanes == 8);

  CHECK_THROWS_WITH(profile(7), Catch::Contains("MG_VECTOR_WIDTH=7"));
  CHECK_THROWS_WITH(probe_machine("/nonexistent", env_of({{"MG_VECTOR_WIDTH", "wide"}})),
                    Catch::Contains("MG_VECTOR_WIDTH=wide"));
  CHECK_THROWS_WITH(probe_machine("/nonexistent", env_of({{"MG_L2_KB", "1M"}})),
                    Catch::Contains("MG_L2_KB=1M"));

  // ScopedMachine stands in for machine() while it lives
  std::string was = machine().describe();
  {
    ScopedMachine scoped(avx2);
    CHECK(machine().simd.float_lanes == 8);
  }
  CHECK(machine().describe() == was);
}

TEST_CASE("hand-coded opts: an elementwise kernel's strided copy under each profile, values right") {
  settings().device = "CPU";
  // (12, 6) + a row broadcast down it: the inner loop (6) is under a vector either way; the outer
  // loop (12, strided in both loads) is a vector long at 8 lanes only, so only the AVX2 profile
  // takes four copies of it (against clang's gathers).
  std::vector<double> x = counting(12 * 6, 1.0), b = counting(6, 0.5);
  Tensor tx = Tensor::from_data(x, {12, 6}, DType::Float32),
         tb = Tensor::from_data(b, {1, 6}, DType::Float32);
  Tensor::realize_all({&tx, &tb});
  std::vector<double> want(12 * 6);
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 6; j++)
      want[i * 6 + j] = static_cast<float>(x[i * 6 + j]) * 2.0f + static_cast<float>(b[j]);
  for (int lanes : {8, 16}) {
    ScopedMachine scoped(profile(lanes));
    Ran r = lower_and_run(tx.mul(Tensor::from_scalar({2.0, DType::Float32}, tx)).add(tb));
    INFO(lanes << " lanes, opts: " << list(r.opts));
    if (lanes == 8)
      CHECK(r.opts == std::vector<Opt>{{OptOp::UPCAST, 0, 4}});
    else
      CHECK(r.opts.empty());
    check_close(r.values, want);
  }
}

TEST_CASE("hand-coded opts: a matmul's register tile under each profile, values right") {
  settings().device = "CPU";
  MatmulCase m = matmul_case(32, 48, 32, 0.25, 0.5);
  for (int lanes : {8, 16}) {
    ScopedMachine scoped(profile(lanes));
    Ran r = lower_and_run(m.a.matmul(m.b));
    INFO(lanes << " lanes, opts: " << list(r.opts));
    // the row: the 32 outputs along N whole (two vectors) at 16 lanes, one vector at 8; then
    // 8 rows of it, within half the registers (256 and 64 accumulators)
    if (lanes == 16) {
      CHECK(has_opt(r.opts, OptOp::UPCAST, 32));
      CHECK(has_opt(r.opts, OptOp::UPCAST, 8));
    } else {
      CHECK_FALSE(has_opt(r.opts, OptOp::UPCAST, 32));
      CHECK(r.opts.at(0) == Opt{OptOp::UPCAST, 1, 8});
      CHECK(r.opts.at(1) == Opt{OptOp::UPCAST, 0, 8});
    }
    check_close(r.values, m.want);
  }
}

TEST_CASE(
    "hand-coded opts: a row of 25 (a 5x5 window's taps) is taken whole under each profile, values right") {
  settings().device = "CPU";
  // no whole vector divides 25: at 16 lanes it fits two vectors, at 8 it fits four (up to 32
  // floats), where its largest divisor, 5, left each row a ragged part of a vector
  MatmulCase m = matmul_case(16, 64, 25, 0.25, 0.5);
  for (int lanes : {8, 16}) {
    ScopedMachine scoped(profile(lanes));
    Ran r = lower_and_run(m.a.matmul(m.b));
    INFO(lanes << " lanes, opts: " << list(r.opts));
    CHECK(r.opts.at(0) == Opt{OptOp::UPCAST, 1, 25});
    check_close(r.values, m.want);
  }
}

TEST_CASE("hand-coded opts: the cache sizes decide BLOCK, values right") {
  settings().device = "CPU";
  const int M = 64, K = 512, N = 64; // 128 KiB per input
  std::vector<double> a = counting(M * K, 0.125), b = counting(K * N, 0.25);
  Tensor ta = Tensor::from_data(a, {M, K}, DType::Float32), tb = Tensor::from_data(b, {K, N}, DType::Float32);
  Tensor::realize_all({&ta, &tb});
  std::vector<double> want = matmul_ref(a, b, M, K, N);
  auto blocked = [](const Ran& r) {
    for (auto& o : r.opts)
      if (o.op == OptOp::BLOCK) return true;
    return false;
  };
  {
    ScopedMachine scoped(profile(16)); // inputs fit: no remedy
    Ran r = lower_and_run(ta.matmul(tb));
    INFO("opts: " << list(r.opts));
    CHECK_FALSE(blocked(r));
    check_close(r.values, want);
  }
  {
    // a 64 KiB L2 and 128 KiB L3: the inputs outgrow the cache, so the reduce runs in blocks whose
    // slices of B (read again for every tile of A's rows) fill half the L2: after UNROLL 8 each
    // step of the reduce loop reads 8 rows of B, 2 KiB, so 32 KiB / 2 KiB = 16 steps a block (a
    // tile's rows of A, 16 KiB, are read again from L1 and need no room)
    ScopedMachine scoped(profile(16, {{"MG_L2_KB", "64"}, {"MG_L3_KB", "128"}}));
    Ran r = lower_and_run(ta.matmul(tb));
    INFO("opts: " << list(r.opts));
    CHECK(has_opt(r.opts, OptOp::BLOCK, 16));
    check_close(r.values, want);
  }
}

TEST_CASE(
    "hand-coded opts: an input re-read from L3 is blocked so its slices fill half the L2, values right") {
  settings().device = "CPU";
  const int M = 64, K = 2048, N = 64; // 512 KiB per input
  std::vector<double> a = counting(M * K, 1.0 / 64), b = counting(K * N, 1.0 / 32);
  Tensor ta = Tensor::from_data(a, {M, K}, DType::Float32), tb = Tensor::from_data(b, {K, N}, DType::Float32);
  Tensor::realize_all({&ta, &tb});
  std::vector<double> want = matmul_ref(a, b, M, K, N);
  auto block = [](const Ran& r) {
    for (auto& o : r.opts)
      if (o.op == OptOp::BLOCK) return o.amount;
    return int64_t{0};
  };
  // B (512 KiB) outgrows a 256 KiB L2: each pass over A's rows streams it from L3, so the reduce
  // runs in blocks of 64 iterations (2 KiB of B each: 128 KiB, half the L2)
  {
    ScopedMachine scoped(profile(16, {{"MG_L2_KB", "256"}, {"MG_L3_KB", "4096"}}));
    Ran r = lower_and_run(ta.matmul(tb));
    INFO("opts: " << list(r.opts));
    CHECK(block(r) == 64);
    check_close(r.values, want);
  }
  // with a 1 MiB L2 B fits it: no blocks
  {
    ScopedMachine scoped(profile(16, {{"MG_L2_KB", "1024"}, {"MG_L3_KB", "4096"}}));
    Ran r = lower_and_run(ta.matmul(tb));
    INFO("opts: " << list(r.opts));
    CHECK(block(r) == 0);
    check_close(r.values, want);
  }
}

TEST_CASE("hand-coded opts: a sum reading a value repeated along its inner loop is unrolled by a multiple of "
          "the repeat, values right") {
  settings().device = "CPU";
  // a (4, 6, 24) input times a (4, 6, 12) one brought to 24 along the last dim (x / 2, as a
  // 2x pool's gradient), summed over all but the middle dim
  const int A = 4, C = 6, W = 24;
  std::vector<double> a = counting(A * C * W, 0.25), b = counting(A * C * W / 2, 0.5);
  Tensor ta = Tensor::from_data(a, {A, C, W}, DType::Float32);
  Tensor tb = Tensor::from_data(b, {A, C, W / 2}, DType::Float32);
  Tensor::realize_all({&ta, &tb});
  Tensor up = tb.reshape({A, C, W / 2, 1}).expand({A, C, W / 2, 2}).reshape({A, C, W});
  std::vector<double> want(C, 0.0);
  for (int c = 0; c < C; c++) {
    float acc = 0;
    for (int i = 0; i < A; i++)
      for (int x = 0; x < W; x++)
        acc +=
            static_cast<float>(a[(i * C + c) * W + x]) * static_cast<float>(b[(i * C + c) * (W / 2) + x / 2]);
    want[c] = acc;
  }
  for (int lanes : {8, 16}) {
    ScopedMachine scoped(profile(lanes));
    Ran r = lower_and_run(ta.mul(up).sum(std::vector<int64_t>{0, 2}));
    INFO(lanes << " lanes, opts: " << list(r.opts));
    // 24 splits by 8 under both profiles (16 does not divide it); a plain view would stay one loop
    CHECK(has_opt(r.opts, OptOp::UNROLL, 8));
    check_close(r.values, want);
  }
  ScopedMachine scoped(profile(16));
  Ran plain = lower_and_run(ta.mul(ta).sum(std::vector<int64_t>{0, 2}));
  CHECK(plain.opts.empty());
}

TEST_CASE(
    "hand-coded opts: a sum of windows padded along a short inner loop upcasts it whole, values right") {
  settings().device = "CPU";
  // the fold of a conv's input gradient in one dim: three 8-wide slices, each padded into place
  // on a 10-wide row and summed; a single padded copy keeps its loop
  const int R = 20, O = 8, K = 3;
  std::vector<double> a = counting(R * K * O, 0.25);
  Tensor ta = Tensor::from_data(a, {R, K, O}, DType::Float32);
  Tensor::realize_all({&ta});
  std::optional<Tensor> sum;
  std::vector<double> want(R * (O + K - 1), 0.0);
  for (int k = 0; k < K; k++) {
    Tensor part = ta.shrink({{0, R}, {k, k + 1}, {0, O}}).reshape({R, O}).pad({{0, 0}, {k, K - 1 - k}});
    sum = sum ? sum->add(part) : part;
    for (int r = 0; r < R; r++)
      for (int o = 0; o < O; o++)
        want[r * (O + K - 1) + o + k] += static_cast<float>(a[(r * K + k) * O + o]);
  }
  for (int lanes : {8, 16}) {
    ScopedMachine scoped(profile(lanes));
    Ran r = lower_and_run(*sum);
    INFO(lanes << " lanes, opts: " << list(r.opts));
    CHECK(has_opt(r.opts, OptOp::UPCAST, O + K - 1));
    check_close(r.values, want);
    Ran copy =
        lower_and_run(ta.shrink({{0, R}, {0, 1}, {0, O}}).reshape({R, O}).pad({{0, 0}, {1, 1}}).contiguous());
    CHECK_FALSE(has_opt(copy.opts, OptOp::UPCAST, O + 2));
  }
}

TEST_CASE("hand-coded opts: a transpose whose inner loops touch more lines than 4 L1s moves the input's "
          "contiguous dim inward (LOCAL), a smaller one stores whole lines with that dim innermost, values "
          "right") {
  settings().device = "CPU";
  // out[c][p] = in[p][c]: 32 channels by P positions; the loop over c runs outside the one over p,
  // whose P loads of one channel each lie on a line of their own
  const int C = 32;
  // 2304 lines of 64 bytes: 144 KiB, over 4 L1s of the profile (32 KiB); 768 and 128 (48 and 8
  // KiB), where the positions are upcast by a line's 16 floats and the channel loop goes inside
  // theirs (SWAP); 64: 4 KiB, as it is
  for (int P : {2304, 768, 128, 64}) {
    std::vector<double> in = counting(static_cast<size_t>(P) * C, 0.5);
    Tensor t = Tensor::from_data(in, {P, C}, DType::Float32);
    t.realize();
    std::vector<double> want(in.size());
    for (int c = 0; c < C; c++)
      for (int p = 0; p < P; p++)
        want[static_cast<size_t>(c) * P + p] = static_cast<float>(in[static_cast<size_t>(p) * C + c]);
    for (int lanes : {8, 16}) {
      ScopedMachine scoped(profile(lanes));
      Ran r = lower_and_run(t.permute({1, 0}).contiguous());
      INFO(P << " positions, " << lanes << " lanes, opts: " << list(r.opts));
      CHECK(has_opt(r.opts, OptOp::LOCAL, C) == (P == 2304));
      bool swapped =
          std::any_of(r.opts.begin(), r.opts.end(), [](const Opt& o) { return o.op == OptOp::SWAP; });
      CHECK((has_opt(r.opts, OptOp::UPCAST, 16) && swapped) == (P == 768 || P == 128));
      check_close(r.values, want);
    }
  }
}

TEST_CASE("hand-coded opts: a pack reading a line of each row upcasts the panels so it reads 256 bytes in a "
          "row, values right") {
  settings().device = "CPU";
  // B (K, N) packed into panels of 16 columns, (N / 16, K, 16), as a matmul's pack: the inner loop
  // reads one line (16 floats) of a row, the panel loop continues it
  const int K = 1024, N = 512; // 2 MiB, over the profile's 1 MiB L2; 64 rows (128 KiB) stay in it
  for (int k : {K, 64}) {
    std::vector<double> in = counting(static_cast<size_t>(k) * N, 0.25);
    Tensor b = Tensor::from_data(in, {k, N}, DType::Float32);
    b.realize();
    std::vector<double> want(in.size());
    for (int j = 0; j < N / 16; j++)
      for (int r = 0; r < k; r++)
        for (int l = 0; l < 16; l++)
          want[(static_cast<size_t>(j) * k + r) * 16 + l] =
              static_cast<float>(in[static_cast<size_t>(r) * N + j * 16 + l]);
    for (int lanes : {8, 16}) {
      ScopedMachine scoped(profile(lanes));
      Ran r = lower_and_run(b.reshape({k, N / 16, 16}).permute({1, 0, 2}).contiguous());
      INFO(k << " rows, " << lanes << " lanes, opts: " << list(r.opts));
      CHECK(has_opt(r.opts, OptOp::UPCAST, 4) == (k == K)); // a small B stays in L2 in any order
      check_close(r.values, want);
    }
  }
}
