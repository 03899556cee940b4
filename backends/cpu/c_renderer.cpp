#include "backends/cpu/c_renderer.h"
#include "engine/codegen/cstyle.h"
#include "engine/codegen/opts.h"
#include "engine/errors.h"
#include "engine/machine.h"

#include "engine/codegen/linearize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace mg {

namespace {

// The libm functions kernels call, declared rather than included: clang knows them as builtins
// (sqrtf becomes an instruction), and parsing no system header keeps a compile to milliseconds.
const char* kPrelude =
    "float exp2f(float), log2f(float), sinf(float), sqrtf(float), powf(float, float), fmodf(float, float),\n"
    "  truncf(float), fminf(float, float), fmaxf(float, float);\n"
    "double exp2(double), log2(double), sin(double), sqrt(double), pow(double, double), fmod(double, "
    "double),\n"
    "  trunc(double);\n"
    "#define NAN __builtin_nanf(\"\")\n"
    "#define INFINITY __builtin_inff()\n";
// A tile's vectors (engine/codegen/slp.h): GCC's vector types, which C lets mix with scalars.
const char* kVectors = "typedef float mg_float2 __attribute__((vector_size(8)));\n"
                       "typedef float mg_float2u __attribute__((vector_size(8), aligned(4)));\n"
                       "typedef float mg_float4 __attribute__((vector_size(16)));\n"
                       "typedef float mg_float4u __attribute__((vector_size(16), aligned(4)));\n"
                       "typedef float mg_float8 __attribute__((vector_size(32)));\n"
                       "typedef float mg_float8u __attribute__((vector_size(32), aligned(4)));\n"
                       "typedef float mg_float16 __attribute__((vector_size(64)));\n"
                       "typedef float mg_float16u __attribute__((vector_size(64), aligned(4)));\n"
                       "typedef float mg_float32 __attribute__((vector_size(128)));\n"
                       "typedef float mg_float64 __attribute__((vector_size(256)));\n"
                       "typedef int mg_int8 __attribute__((vector_size(32)));\n"
                       "typedef int mg_int16 __attribute__((vector_size(64)));\n";
const char* kBf16 = "static inline float bf16_to_f32(unsigned short h) { union { unsigned int u; float f; } "
                    "x = { (unsigned int)h << 16 }; return x.f; }\n"
                    "static inline unsigned short f32_to_bf16(float f) { union { float f; unsigned int u; } "
                    "x = { f }; return (unsigned short)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16); }\n"
                    "static inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }\n";

// 2^x in float32 from arithmetic alone, so clang vectorizes the loops that use it: x = n + f with
// n an integer and |f| <= 1/2; 2^f by its Taylor series to degree 7 (truncation error 5e-9,
// below float32's rounding); 2^n by building the exponent bits, in two halves so that results
// down to the subnormals and up to inf come out right. Integer x gives exact powers of two.
// Below -150 (a masked attention score's -inf) 2^x rounds to 0, which is returned without
// computing it: the product would underflow, and on an Intel core each vector whose product
// underflows takes a microcode assist. A causal softmax's exponentials and their gradient (half
// the lanes masked), 1.3 -> 0.4 ms a kernel (Intel Xeon, family 6 model 85, 1 thread; the GPT
// step's kernels 140.5 -> 112.2 ms).
const char* kExp2 =
    "static inline float mg_exp2f(float x) {\n"
    "  int zero = x < -150.0f;\n"
    "  float c = zero ? 0.0f : fminf(x, 129.0f), n = __builtin_rintf(c), f = c - n;\n"
    "  float p = 1.0f + f * (0.693147181f + f * (0.240226507f + f * (0.0555041087f + f * (0.00961812911f\n"
    "    + f * (0.00133335581f + f * (0.000154035304f + f * 0.0000152527338f))))));\n"
    "  int e = (int)n, a = e >> 1, b = e - a;\n"
    "  union { unsigned int u; float f; } sa = { (unsigned int)(a + 127) << 23 }, sb = { (unsigned int)(b + "
    "127) << 23 };\n"
    "  return x != x ? x : zero ? 0.0f : p * sa.f * sb.f;\n"
    "}\n";

// log2 in float32 the same way: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), and log2(m) by the
// series in t = (m-1)/(m+1) (odd powers to t^9; truncation error 3e-10 for |t| <= 0.172).
// Subnormals are scaled into the normal range first; powers of two come out exact.
const char* kLog2 =
    "static inline float mg_log2f(float x) {\n"
    "  int sub = x < 1.17549435e-38f;\n"
    "  union { float f; unsigned int u; } v = { sub ? x * 8388608.0f : x };\n"
    "  int e = (int)((v.u >> 23) & 0xffu) - (sub ? 150 : 127);\n"
    "  v.u = (v.u & 0x007fffffu) | 0x3f800000u;\n"
    "  int big = v.f > 1.41421356f;\n"
    "  float m = big ? v.f * 0.5f : v.f, t = (m - 1.0f) / (m + 1.0f), t2 = t * t;\n"
    "  float p = t * (2.88539008f + t2 * (0.961796694f + t2 * (0.577078016f + t2 * (0.412198583f + t2 * "
    "0.320598898f))));\n"
    "  float r = (float)(e + big) + p;\n"
    "  return x > 0.0f && x < INFINITY ? r : x == 0.0f ? -INFINITY : x == INFINITY ? x : NAN;\n"
    "}\n";

// The C math function for a float op, computing half in float.
std::string fcall(const std::string& f, DType d, const std::vector<std::string>& a) {
  if (d == DType::Float32 && (f == "exp2" || f == "log2")) return "mg_" + f + "f(" + a[0] + ")";
  std::string args;
  bool narrow = d == DType::Float16;
  for (size_t i = 0; i < a.size(); i++)
    args += (i ? ", " : "") + (narrow ? "(float)" + a[i] : a[i]);
  std::string call = f + (d == DType::Float64 ? "" : "f") + "(" + args + ")";
  return narrow ? "((_Float16)" + call + ")" : call;
}

} // namespace

// The widest run of loads from consecutive addresses (base, base+1, ...) in a kernel with two or
// more accumulators (a tile, or a reduce's lanes): how wide the rows are that clang can load as
// vectors. 16 for a kernel with one accumulator or none.
int64_t tile_row_width(const std::vector<UOpRef>& linear, int64_t accumulators) {
  if (accumulators < 2) return 16;
  std::map<std::pair<const UOp*, const UOp*>, std::set<int64_t>> offsets; // (buffer, base) -> offsets
  for (auto& u : linear) {
    if (u->op != Ops::LOAD) continue;
    const UOp* buf = u->src[0]->src[0].get();
    const UOp* idx = u->src[0]->src[1].get();
    if (idx->op == Ops::ADD && idx->src[1]->op == Ops::CONST)
      offsets[{buf, idx->src[0].get()}].insert(static_cast<int64_t>(idx->src[1]->const_value()));
    else
      offsets[{buf, idx}].insert(0);
  }
  int64_t widest = 1;
  for (auto& [base, ks] : offsets)
    for (int64_t k : ks) {
      int64_t run = 1;
      while (ks.count(k + run))
        run++;
      widest = std::max(widest, run);
    }
  return widest;
}

// A reduce over a small window (a max-pool's 2x2): accumulators, a reduce loop left, and every
// reduce loop at most 4 long. Measured on Zen 4 with AVX-512: clang's AVX-512 code for such a kernel (its
// loads step by the window along the row) ran a 2x2 max-pool over 512x32x24x24 in 13.5 ms, its AVX2 code
// in 4.3 (the 8x8 one 2.2 against 0.6). Kernels of other kinds keep AVX-512: the AVX2 profile as a whole made
// an MNIST step slower (308 against 256 ms). So does a tile whose rows fill 512-bit vectors (a
// matmul over 32 channels unrolled by 8 leaves a reduce loop of 4: at 256 bits its 8x16 tile
// spilled, 3x slower).
// The vector width clang is told to prefer, in bits (0: its own choice). A tile of accumulators is
// packed into vectors along the rows it loads; where a row is narrower than a 512-bit vector,
// clang packs two rows into one and loads them with gathers (a 5x5 convolution with 8-wide rows
// ran 10x slower): 256. Where rows fill whole 512-bit vectors, with the AVX-512 profile, 512: the
// heuristic sizes such tiles for 16 lanes in 32 registers, and for an Intel core (the Xeon of
// 2026-11-26, Emerald Rapids) clang's own choice is 256-bit vectors, half the floats per
// register, so an 8x32 tile's accumulators spilled (132 stack accesses in a 256^3 matmul's loop,
// none at 512 bits: 0.48-0.71 -> 0.24 ms, 1 thread, in turns). AMD's Zen 4 took 512 bits
// unasked. Elementwise math with exp2, log2 or sin (no accumulators) is compiled for 512 bits
// too: on the Intel Xeon (family 6 model 85) GELU over 12x64x512 ran 0.60-0.69 -> 0.44-0.46 ms.
// Other kernels keep clang's choice: at 512 bits an elementwise kernel of the MNIST step ran 2x
// slower, and a 25-wide tile's 1.3x.
int preferred_vector_bits(const std::vector<UOpRef>& linear) {
  int64_t accumulators =
      std::count_if(linear.begin(), linear.end(), [](const UOpRef& u) { return u->op == Ops::DEFINE_ACC; });
  int64_t row = tile_row_width(linear, accumulators);
  if (row < 16) return 256;
  if (machine().simd.float_lanes < 16) return 0;
  if (accumulators == 0 && std::any_of(linear.begin(), linear.end(), [](const UOpRef& u) {
        return u->op == Ops::EXP2 || u->op == Ops::LOG2 || u->op == Ops::SIN;
      }))
    return 512;
  return accumulators >= 2 && row % 16 == 0 ? 512 : 0;
}

bool window_reduce(const std::vector<UOpRef>& linear) {
  bool acc = false, loop = false; // a fully unrolled reduce (no loop left) is not taken for a window
  for (auto& u : linear) {
    acc |= u->op == Ops::DEFINE_ACC;
    if (u->op != Ops::RANGE || u->varg()[1] != kReduce) continue;
    if (u->src[0]->op != Ops::CONST || u->src[0]->const_value() > 4) return false;
    loop = true;
  }
  return acc && loop;
}

const Dialect& c_dialect() {
  static const Dialect d = [] {
    Dialect d;
    d.name = "C";
    d.bitcast = [](DType from, DType to, const std::string& x) -> std::string {
      if (from == DType::BFloat16 || to == DType::BFloat16 || from == DType::Bool || to == DType::Bool)
        return "";
      return "((union { " + std::string(c_type(from)) + " f; " + c_type(to) + " t; }){ .f = " + x + " }).t";
    };
    d.type = [](DType t) { return std::string(c_type(t)); };
    d.load = [](DType t, const std::string& b, const std::string& i) {
      return t == DType::BFloat16 ? "bf16_to_f32(" + b + "[" + i + "])" : b + "[" + i + "]";
    };
    d.store = [](DType t, const std::string& b, const std::string& i, const std::string& v) {
      return b + "[" + i + "] = " + (t == DType::BFloat16 ? "f32_to_bf16(" + v + ")" : v) + ";";
    };
    d.cast = [](DType t, const std::string& x) {
      if (t == DType::BFloat16) return "bf16_round((float)" + x + ")";
      return "((" + std::string(c_type(t)) + ")" + x + ")";
    };
    d.math = fcall;
    d.reassociate = true;
    d.vector_loop = "#pragma clang loop vectorize(enable)";
    d.tile_loop = "#pragma clang loop unroll(disable)";
    d.scalar_loop = "#pragma clang loop vectorize(disable)";
    d.vector_lanes = [] {
      int lanes = machine().simd.float_lanes;
      return lanes == 8 || lanes == 16 ? lanes : 0;
    };
    d.header = [](const KernelParts& k) {
      std::ostringstream os;
      const std::vector<UOpRef>& linear = *k.linear;
      // The CPU device reads this line as a flag.
      int bits = preferred_vector_bits(linear);
      if (bits) os << kCompileFlagTag << "-mprefer-vector-width=" << bits << "\n";
      os << c_profile_flags();
      if (machine().simd.float_lanes >= 16 && window_reduce(linear) && bits != 512)
        os << kCompileFlagTag << "-mno-avx512f\n";
      bool bf16 = false; // in a value or a buffer (DEFINE_GLOBAL has the element dtype)
      for (auto& u : linear)
        bf16 |= u->dtype == DType::BFloat16;
      os << kPrelude << (k.body.find("mg_float") != std::string::npos ? kVectors : "") << (bf16 ? kBf16 : "")
         << (k.body.find("mg_exp2f(") != std::string::npos ? kExp2 : "")
         << (k.body.find("mg_log2f(") != std::string::npos ? kLog2 : "");
      // The buffers arrive as parameters marked restrict: clang takes restrict on a parameter
      // as "no other pointer reaches this memory", but not on a local copied from bufs[i], and
      // without it gave up vectorizing any loop whose loads it could not bound (an index with
      // x / 2 in it: a pool's gradient ran one scalar at a time).
      std::string params, args;
      for (auto& [i, t] : k.globals) {
        if (t == DType::Void) continue;
        std::string type = t == DType::BFloat16 ? "unsigned short" : c_type(t);
        params += (i == 0 ? "" : "const ") + type + "* restrict data" + std::to_string(i) + ", ";
        args += "bufs[" + std::to_string(i) + "], ";
      }
      os << "static inline __attribute__((always_inline)) void " << k.fn << "_body(" << params
         << "int core, int ncores) {\n"
         << k.body << "}\n"
         << "void " << k.fn << "(void** bufs, int core, int ncores) { " << k.fn << "_body(" << args
         << "core, ncores); }\n";
      return os.str();
    };
    return d;
  }();
  return d;
}

std::vector<std::string> c_preamble() { return {kPrelude, kVectors, kBf16, kExp2, kLog2}; }

// The vector unit the opts were sized for, no wider: under MG_VECTOR_WIDTH=8 on an AVX-512 CPU,
// clang would otherwise still use 32 registers and so hide a tile that spills on AVX2.
std::string c_profile_flags() {
  std::string flags;
  if (machine().simd.float_lanes < 16) flags += std::string(kCompileFlagTag) + "-mno-avx512f\n";
  if (machine().simd.float_lanes < 8) flags += std::string(kCompileFlagTag) + "-mno-avx\n";
  return flags;
}

std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel) {
  return render_cstyle(c_dialect(), fn, linear, parallel);
}

} // namespace mg
