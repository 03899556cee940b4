#include "engine/codegen/heuristic.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "engine/dtype.h"
#include "engine/machine.h"

namespace mg {

namespace {

// Applies `op` on loop dim d when it is legal, recording it; the divisibility test (not for
// PADTO, which makes a dim divisible) first skips most illegal ones without an exception.
bool try_apply(KernelShape& ks, ViewList& sts, std::vector<Opt>& applied, OptOp op, size_t d,
               int64_t amount) {
  if (op != OptOp::PADTO && amount != 0 && ks.full[d] % amount != 0) return false;
  Opt o = opt_at(ks, op, d, amount);
  try {
    apply_opt(ks, sts, o);
  } catch (const std::invalid_argument&) {
    return false;
  }
  applied.push_back(o);
  return true;
}

// A GPU's choice, after tinygrad's: a long reduce with few outputs is shared by the threads of a
// work-group (GROUPTOP), each thread computes a small tile of outputs along dims where an input
// is broadcast, the reduce is unrolled, and local dims are taken from the innermost outward, up
// to 256 threads a work-group. A dim still too long for the launch gets more copies per thread.
std::vector<Opt> gpu_opts(KernelShape& ks, ViewList& sts, const std::unordered_map<const UOp*, DType>& loaded,
                          const Target& target) {
  std::vector<Opt> applied;
  auto try_opt = [&](OptOp op, size_t d, int64_t amount) {
    return try_apply(ks, sts, applied, op, d, amount);
  };
  auto broadcast = [&](size_t d) {
    for (auto& [u, st] : sts)
      if (loaded.count(u) && st.shape() == ks.full && st.views.back().strides[d] == 0) return true;
    return false;
  };
  int64_t outputs = 1;
  for (size_t d = 0; d < ks.full.size(); d++)
    if (!ks.reduces(d)) outputs *= ks.full[d];
  size_t r = std::find(ks.kind.begin(), ks.kind.end(), kReduce) - ks.kind.begin();
  int64_t threads = 1, reduce = 1;
  for (size_t d = 0; d < ks.full.size(); d++)
    if (ks.reduces(d)) reduce *= ks.full[d];
  // A reduce longer than a thread may loop (lavapipe) is shared by a work-group whatever the
  // outputs: on its longest dim, the fewest threads that bring it under the limit.
  int64_t limit = target.max_thread_iterations / 2;
  bool too_long = limit > 0 && reduce > limit;
  if (too_long)
    for (size_t d = 0; d < ks.full.size(); d++)
      if (ks.kind[d] == kReduce && ks.full[d] > ks.full[r]) r = d;
  if (r < ks.full.size() && too_long)
    for (int64_t most = std::min<int64_t>(256, target.max_local), amt = 2; amt <= most; amt++)
      if ((reduce / amt <= limit || amt == most) && try_opt(OptOp::GROUPTOP, r, amt)) { // the fewest threads
        threads = amt;
        break;
      }
  if (threads == 1 && r < ks.full.size() && outputs <= 2048 && ks.full[r] >= 256)
    for (int64_t amt : {256, 128, 64, 32, 16})
      if (amt <= target.max_local && try_opt(OptOp::GROUPTOP, r, amt)) {
        threads = amt;
        break;
      }
  // a tile of 16 partial results per thread of a group must fit the shared memory (8-byte values)
  int upcasts = threads * 16 * 8 <= target.max_shared ? 0 : 2;
  for (size_t d = ks.full.size(); d-- > 0 && upcasts < 2;)
    if (ks.kind[d] == kGlobal && ks.full[d] >= 16 && broadcast(d) && try_opt(OptOp::UPCAST, d, 4)) upcasts++;
  for (size_t d = ks.full.size(); d-- > 0;)
    if (ks.kind[d] == kReduce) {
      try_opt(OptOp::UNROLL, d, 4);
      break;
    }
  int dims = 0;
  for (size_t d = ks.full.size(); d-- > 0 && dims < 2;) {
    if (ks.kind[d] != kGlobal || ks.full[d] == 1) continue;
    for (int64_t amt : {256, 128, 64, 32, 16, 8, 4, 2})
      if (threads * amt <= std::min<int64_t>(256, target.max_local) && (dims == 0 || amt <= 16) &&
          try_opt(OptOp::LOCAL, d, amt)) {
        threads *= amt;
        break;
      }
    dims++;
  }
  // A dim still longer than the launch allows: more outputs per thread, the dim padded up to a
  // multiple of the copies where it does not divide (PADTO: the extra ones store nothing).
  for (size_t d = 0; d < ks.full.size(); d++)
    if (ks.kind[d] == kGlobal && ks.full[d] > target.max_groups)
      for (int64_t amt : {16, 8, 4, 2})
        if ((ks.full[d] + amt - 1) / amt <= target.max_groups) {
          if (ks.full[d] % amt != 0 && !try_apply(ks, sts, applied, OptOp::PADTO, d, amt)) continue;
          if (try_opt(OptOp::UPCAST, d, amt)) break;
        }
  return applied;
}

// ---------------------------------------------------------------- the CPU's choice
//
// tinygrad-style, sized by the machine (engine/machine.h): in a reduction, a tile of outputs per
// loop iteration along dims where an input is broadcast (each loaded value is reused across the
// tile, whose accumulators stay in vector registers), the innermost reduce loop unrolled, and the
// reduce blocked or the output loops reordered where the inputs outgrow the cache. The constants'
// reasons were measured on a 2-core AVX-512 AMD EPYC (16 float lanes, 32 registers, L2 1 MiB per core,
// L3 32 MiB shared by 2), where these functions reproduce the numbers once written in.

// The kernel the CPU heuristic is choosing opts for, with the opts applied so far.
struct CpuKernel {
  KernelShape& ks;
  ViewList& sts;
  const std::unordered_map<const UOp*, DType>& loaded;
  std::vector<Opt> applied;

  size_t dims() const { return ks.full.size(); }
  bool has_reduce() const {
    for (size_t d = 0; d < dims(); d++)
      if (ks.reduces(d)) return true;
    return false;
  }
  // An UPCAST of a dim over outputs, an UNROLL of a reduce dim, where legal.
  bool split(size_t d, int64_t amount) {
    return try_apply(ks, sts, applied, ks.reduces(d) ? OptOp::UNROLL : OptOp::UPCAST, d, amount);
  }
  // Applies an opt the caller knows to be legal.
  void apply(OptOp op, size_t d, int64_t amount) {
    Opt o = opt_at(ks, op, d, amount);
    apply_opt(ks, sts, o);
    applied.push_back(o);
  }
  // A view loaded from a buffer over the kernel's full loop shape (not the output's view).
  bool full_load(const ViewList::value_type& e) const {
    return loaded.count(e.first) && e.second.shape() == ks.full;
  }
  // The store's view where it spans the kernel's full loop shape (an elementwise kernel's), else null.
  const ShapeTracker* full_store(const UOp* stored) const {
    for (auto& e : sts)
      if (e.first == stored && e.second.shape() == ks.full) return &e.second;
    return nullptr;
  }
  bool loads_any() const {
    for (auto& e : sts)
      if (full_load(e)) return true;
    return false;
  }
  // The loaded full-shaped views broadcast along dim d (stride 0): each of their loads is reused
  // across a tile over d.
  std::vector<size_t> broadcast_views(size_t d) const {
    std::vector<size_t> vs;
    for (size_t k = 0; k < sts.size(); k++)
      if (full_load(sts[k]) && sts[k].second.views.back().strides[d] == 0) vs.push_back(k);
    return vs;
  }
  // A dim over outputs that a tile may take: longer than 1, some load reused along it.
  bool tileable(size_t d) const {
    return ks.kind[d] == kGlobal && ks.full[d] > 1 && !broadcast_views(d).empty();
  }
  // Whether a row along d would make a load that streams along the innermost reduce loop a
  // gather (clang packs a row's lanes from values `stride` apart, or gives up and computes the
  // tile one scalar at a time) while the loads it reuses are small enough to come from L1 or L2
  // anyway (under 4 L1s): attention's causal mask, a LayerNorm's weight, a 64x128 position
  // embedding (a 12-wide row over the batch made its sum 2x slower); not a product's other
  // operand (a weight gradient's input windows, 200 KiB: a tile over them ran 1.8x faster).
  bool breaks_stream(size_t d) const {
    for (size_t v : broadcast_views(d))
      if (bytes(sts[v].second, loaded.at(sts[v].first)) >= 4 * machine().l1d.bytes) return false;
    size_t r = dims();
    for (size_t e = 0; e < dims(); e++)
      if (ks.kind[e] == kReduce) r = e;
    if (r == dims()) return false;
    for (auto& e : sts) {
      if (!full_load(e) || e.second.views.size() != 1) continue;
      const std::vector<int64_t>& st = e.second.views[0].strides;
      if (st[r] == 1 && st[d] != 0 && st[d] != 1) return true;
    }
    return false;
  }
  // A reduce over small windows only (every reduce dim at most 4 long, more than one of them or one
  // of 3, which unroll_reduce leaves as a loop): the C renderer compiles it without AVX-512
  // (backends/cpu/c_renderer.cpp, window_reduce).
  bool window_reduce() const {
    int dims_over_1 = 0;
    bool three = false;
    for (size_t d = 0; d < dims(); d++) {
      if (!ks.reduces(d) || ks.full[d] == 1) continue;
      if (!ks.full[d].is_const() || ks.full[d].value() > 4) return false;
      dims_over_1++;
      three |= ks.full[d].value() == 3;
    }
    return dims_over_1 > 1 || three;
  }
  // The distinct bytes a view reads (over the loops from `from` in).
  int64_t bytes(const ShapeTracker& st, DType t, size_t from = 0) const {
    int64_t n = itemsize(t);
    for (size_t d = from; d < dims(); d++)
      if (st.views.back().strides[d] != 0) n *= ks.full[d];
    return n;
  }
};

// The output tile: its accumulators (size), its innermost dim (row_dim, `row` wide) and the views
// whose loads the row reuses.
struct Tile {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  int64_t size = 1, row = 1;
  size_t row_dim = kNone;
  std::vector<size_t> reused;
};

// A copy (no reduce) whose innermost loops are shorter than a vector (an im2col copy: channels,
// then a 3x3 window): clang unrolls them whole and vectorizes the loop outside, once that loop is
// a vector long, with a gather for every load that is strided along it. Four copies of the body
// on that loop instead made a conv's window copy 5x faster. Not where a load is contiguous along
// it (a transpose's vectors).
void upcast_strided_copy(CpuKernel& k, const Machine& m) {
  const int64_t lanes = m.simd.float_lanes;
  size_t n = k.dims();
  if (n < 2 || k.ks.full[n - 1] >= lanes) return;
  for (size_t d = n - 1; d-- > 0;) {
    if (k.ks.full[d] < lanes) continue;
    bool strided = false, contiguous = false;
    for (auto& e : k.sts) {
      if (!k.full_load(e)) continue;
      const ShapeTracker& st = e.second;
      // one step along d from the origin (a pooled view has two views: no single stride)
      std::vector<int64_t> at(n, 0);
      int64_t o0 = st.offset_of(at);
      at[d] = 1;
      int64_t o1 = st.offset_of(at);
      if (o0 < 0 || o1 < 0) continue; // the origin lies in padding: no stride to read there
      int64_t stride = o1 - o0;
      contiguous |= stride == 1;
      strided |= stride > 1;
    }
    if (strided && !contiguous) k.split(d, 4);
    return;
  }
}

// The cache lines the loops inside d touch in the loaded views that are contiguous along d, a line
// per element (they stride along those loops); each slice of one buffer counts apart.
int64_t lines_inside(const CpuKernel& k, size_t d) {
  int64_t lines = 0;
  for (auto& e : k.sts) {
    const std::vector<int64_t>& st = e.second.views.back().strides;
    if (!k.full_load(e) || st[d] != 1) continue;
    int64_t n = 1;
    for (size_t i = d + 1; i < k.dims(); i++)
      if (st[i] != 0) n *= k.ks.full[i].value();
    lines += n;
  }
  return lines;
}

// Whether every offset and size of a view is a number (no Variable): offset_of needs them.
bool numeric(const ShapeTracker& st) {
  for (auto& v : st.views)
    if (!v.offset.is_const() || is_symbolic(v.shape)) return false;
  return true;
}

// Sets the upcast dims of `at` to copy c (in order, the first dim fastest); false past the last.
bool at_copy(const CpuKernel& k, int64_t c, std::vector<int64_t>& at) {
  for (size_t u = 0; u < k.dims(); u++)
    if (k.ks.kind[u] == kUpcast) {
      at[u] = c % k.ks.full[u].value();
      c /= k.ks.full[u].value();
    }
  return c == 0;
}

// The index (0 along every loop, the upcast dims at some copy) of the first copy where a loaded
// view is read: a stacked piece is masked off in the others. Empty where no copy reads it.
std::vector<int64_t> copy_read(const CpuKernel& k, const ShapeTracker& st) {
  std::vector<int64_t> at(k.dims(), 0);
  for (int64_t c = 0; at_copy(k, c, at); c++)
    if (st.offset_of(at) >= 0) return at;
  return {};
}

// Whether the C renderer's packs (slp.h) can take the copies of an upcast along dims `ds`: each
// value that varies along them (through a load whose view steps along one) is made of float32
// loads, constants and the ops packs take. A value the same in every copy (a channel's scale, any
// op) stays a scalar. `value`: what the kernel stores (nullptr where the renderer packs nothing).
bool packable(const CpuKernel& k, const UOp* value, const std::vector<size_t>& ds) {
  if (!value) return false;
  auto steps = [&](const UOp* view) {
    for (auto& e : k.sts) {
      if (e.first != view) continue;
      if (!numeric(e.second)) return true;
      std::vector<int64_t> at = copy_read(k, e.second);
      if (at.empty()) return false;
      const int64_t o = e.second.offset_of(at);
      for (size_t d : ds) {
        std::vector<int64_t> next = at;
        next[d] = 1;
        if (e.second.offset_of(next) != o) return true;
      }
      return false;
    }
    return true;
  };
  std::unordered_map<const UOp*, int> memo; // -1: no pack takes it, 0: the same in every copy, 1: varies
  std::function<int(const UOp*)> visit = [&](const UOp* u) -> int {
    if (auto it = memo.find(u); it != memo.end()) return it->second;
    int v = 0;
    if (u->op == Ops::LOAD) {
      v = steps(u->src[1].get()) ? 1 : 0;
    } else if (u->op != Ops::CONST && u->op != Ops::VIEW && u->op != Ops::DEFINE_GLOBAL) {
      for (auto& s : u->src) {
        int r = visit(s.get());
        if (r < 0) return memo[u] = -1;
        v = std::max(v, r);
      }
    }
    if (v == 1) {
      const bool compare = u->op == Ops::CMPLT || u->op == Ops::CMPNE;
      const bool alu = u->op == Ops::ADD || u->op == Ops::SUB || u->op == Ops::MUL || u->op == Ops::FDIV ||
                       u->op == Ops::NEG || u->op == Ops::WHERE || u->op == Ops::LOAD;
      if (!(compare ? u->dtype == DType::Bool : alu && u->dtype == DType::Float32)) v = -1;
    }
    return memo[u] = v;
  };
  return visit(value) == 1;
}

// A transpose too small for order_for_transpose: each line of a loaded view holds a run of values
// along d, but the loops inside d stride across rows, so the value after each comes back only a
// row-walk later. The store's contiguous dim (the innermost loop) is upcast by a line's worth of
// elements and d's loop moves innermost: each step reads one value from each of a line's worth of
// rows, lines that stay in L1 while d walks along them (as many streams as a prefetcher follows),
// and stores one whole line. Measured on an Intel Xeon (family 6 model 85), 1 thread: the GPT's
// dY (12x64x512) copied with its 768 rows innermost 1.0 -> 0.28-0.31 ms; transposes of 128x512
// 0.158 -> 0.033, 512x768 1.1 -> 0.38-0.6, 1024x1024 4.9 -> 2.1-2.5. Where the store's dim is no
// multiple of a line, and the rows walked overflow L1, d is upcast by a line instead (each line
// read whole, the stores scattered over a line's worth of rows): on a Zen 3 that copy of dY
// 1.25-1.40 -> 0.14 ms, on that Xeon 1.0 ms; a 760x512 transpose there 1.2 -> 0.94. Where the
// C renderer packs the copies (`packs`), d is upcast by 4 instead of moving innermost: each step
// moves a block of a line's rows by 4 columns, each row's 4 floats one short vector load and the
// block transposed by shuffles (slp.h's LoadGroup), each column's line one vector store. Xeon, 1
// thread, in turns: U5's copy of 36 planes' (16, 36) blocks 8.4-8.5 -> 2.8-3.3 ms (as BEAM picked,
// 2.5); transposes of 128x512 0.050-0.057 -> 0.023-0.032 ms, 512x768 0.40-0.52 -> 0.23-0.24,
// 1024x1024 3.3-3.7 -> 2.8-3.0, 768x512 0.39 -> 0.41-0.54.
void upcast_transposed_line(CpuKernel& k, size_t inner, const std::vector<int64_t>& ws, const Machine& m,
                            const UOp* value) {
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    const std::vector<int64_t>& st = e.second.views.back().strides;
    if (st[inner] == 1 || st[inner] == 0) continue;
    int64_t line = 64 / itemsize(k.loaded.at(e.first));
    const bool piece = e.second.views.back().mask.has_value(); // of a concatenation: its loads gated
    bool whole_stores =
        ws[inner] == 1 && k.ks.full[inner].is_const() && k.ks.full[inner].value() % line == 0 && !piece;
    for (size_t d = 0; d < inner; d++) {
      if (k.ks.kind[d] != kGlobal || !k.ks.full[d].is_const() || st[d] != 1 || ws[d] == 1) continue;
      int64_t bytes = lines_inside(k, d) * 64;
      if (whole_stores && bytes > m.l1d.bytes / 8 && k.split(inner, line)) {
        if (k.ks.full[d].value() % 4 == 0 && packable(k, value, {inner, d}) && k.split(d, 4)) return;
        k.apply(OptOp::SWAP, d, opt_at(k.ks, OptOp::SWAP, inner, 0).axis);
        return;
      }
      if (!whole_stores && bytes > (piece ? m.l1d.bytes / 8 : m.l1d.bytes) &&
          k.ks.full[d].value() % line == 0 && k.split(d, line))
        return;
    }
  }
}

// An elementwise kernel that transposes: a big loaded view is contiguous along an output dim d
// whose loop runs outside loops that stride through that view, while the store is contiguous
// along another dim. Where the loops inside d touch more of the view's cache lines than come from
// L1 or L2 anyway (4 L1s, as breaks_stream), each line has gone far before d's next step reads
// its next value: the loop over d moves innermost among the loops over outputs (LOCAL, a plain
// loop on the CPU), up to 32 of it, so each line loaded is used whole while the stores keep their
// unit-stride runs inside it. Measured on the Xeon (48 KiB L1), 1 thread, in turns: U5's window
// gradient B dU B^T (64x32x6x6x6x6 from a channels-last dU, 297 KiB of lines) 3.46 -> 2.25 ms,
// as BEAM picked; the MNIST CNN's (512x32x4x6x4x6, 132 KiB) 10.4-10.8 -> 11.0-11.3 ms, so it is
// left out; a 32-wide transpose (2 KiB) 1.8 -> 3.1 ms.
void order_for_transpose(CpuKernel& k, const UOp* stored, const Machine& m, const UOp* value) {
  const ShapeTracker* out = k.full_store(stored);
  if (!out) return;
  const std::vector<int64_t>& ws = out->views.back().strides;
  size_t inner = k.dims(); // the innermost loop over outputs
  for (size_t d = 0; d < k.dims(); d++)
    if (k.ks.kind[d] == kGlobal && k.ks.full[d] > 1) inner = d;
  if (inner == k.dims()) return;
  int64_t best_bytes = 4 * m.l1d.bytes; // smaller inputs stay in L1 in any order
  size_t pick = k.dims();
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    const std::vector<int64_t>& st = e.second.views.back().strides;
    if (st[inner] == 1 || st[inner] == 0) continue; // already streams along the innermost loop
    int64_t b = k.bytes(e.second, k.loaded.at(e.first));
    for (size_t d = 0; d < inner; d++) {
      if (k.ks.kind[d] != kGlobal || k.ks.full[d] == 1 || st[d] != 1 || ws[d] == 1 || b <= best_bytes)
        continue;
      if (lines_inside(k, d) * 64 > 4 * m.l1d.bytes) best_bytes = b, pick = d;
    }
  }
  if (pick == k.dims()) {
    upcast_transposed_line(k, inner, ws, m, value);
    return;
  }
  int64_t n = k.ks.full[pick].value();
  for (int64_t amt = std::min<int64_t>(n, 32); amt >= 8; amt--)
    if (n % amt == 0 && try_apply(k.ks, k.sts, k.applied, OptOp::LOCAL, pick, amt)) return;
}

// A copy whose innermost loop reads a big view one cache line at a time (a matmul's pack of B:
// 16 floats of each of 1024 rows, then the next 16), where an outer loop d continues that run
// in memory (the view's stride along d is the run's length) but loops between them jump away:
// each line is a stream of its own, which a cold cache (the view read from memory) serves badly.
// d is upcast so each step reads 256 bytes in a row. Measured on a Zen 3, the pack of a 1024x1024
// B after 128 MiB through the caches, best and median of 8: 1.37 / 1.44 -> 0.85 / 1.02 ms at 1
// thread, 0.76 / 0.83 -> 0.48 / 0.58 at 2 (4 runs of a line: 0.92-0.96 / 1.01 with 8 or 16).
void lengthen_line_runs(CpuKernel& k, const UOp* stored, const Machine& m) {
  size_t n = k.dims();
  const ShapeTracker* out = k.full_store(stored);
  if (n < 3 || !out || !k.ks.full[n - 1].is_const()) return;
  const int64_t run = k.ks.full[n - 1].value();
  for (auto& e : k.sts) {
    if (!k.full_load(e) || e.second.views.size() != 1) continue;
    const std::vector<int64_t>& st = e.second.views[0].strides;
    int64_t line = run * itemsize(k.loaded.at(e.first));
    if (st[n - 1] != 1 || line > 64 || k.bytes(e.second, k.loaded.at(e.first)) <= m.l2.bytes) continue;
    for (size_t d = 0; d + 2 < n; d++) {
      if (k.ks.kind[d] != kGlobal || !k.ks.full[d].is_const() || st[d] != run ||
          out->views.back().strides[d] == 1)
        continue;
      int64_t amt = std::max<int64_t>(2, 256 / line);
      if (k.ks.full[d].value() % amt == 0 && k.split(d, amt)) return;
    }
  }
}

// The step a view takes along dim d where it is the same at every index of d, from the origin
// and from the far corner of the upcast dims (a view of several views: a pool's gradient split
// by its repeat, whose x / 2 folded away); -1 where it varies or an index lies in padding.
int64_t uniform_step(const CpuKernel& k, const ShapeTracker& st, size_t d) {
  int64_t step = -1;
  if (!numeric(st)) return step;
  for (bool corner : {false, true}) {
    std::vector<int64_t> at(k.dims(), 0);
    if (corner)
      for (size_t e = 0; e < k.dims(); e++)
        if (k.ks.kind[e] == kUpcast) at[e] = k.ks.full[e].value() - 1;
    int64_t prev = st.offset_of(at);
    for (int64_t i = 1; i < k.ks.full[d].value(); i++) {
      at[d] = i;
      int64_t o = st.offset_of(at);
      if (prev < 0 || o < 0 || (step >= 0 && o - prev != step)) return -1;
      step = o - prev;
      prev = o;
    }
  }
  return step;
}

// A kernel with no reduce whose innermost loop is short (4 to two vectors), loads along it
// contiguously while its store strides by s, and has an upcast dim of s copies that fills each
// gap (a Winograd output transform: 6 tiles a row, each storing its 4 outputs): clang's cost
// model leaves that loop scalar, as it sees only 6 iterations; vectorized, each load is a vector
// and the copies' stores interleave into whole ones. Measured on the Xeon (16 lanes, 1 thread),
// U5's forward output transform (64x64x6x4x6x4, 36 planes read): 5.0 -> 3.0 ms. Not where a
// load strides along it: the transform of the output's gradient (each tile 4 floats apart,
// stored contiguously) ran 4.4 -> 10.6 ms vectorized.
void vectorize_interleaved_store(CpuKernel& k, const UOp* stored, const Machine& m) {
  const ShapeTracker* out = k.full_store(stored);
  if (!out || out->views.size() != 1) return;
  size_t d = k.dims();
  for (size_t e = 0; e < k.dims(); e++)
    if (k.ks.kind[e] != kUpcast && k.ks.full[e] > 1) d = e;
  if (d == k.dims() || k.ks.kind[d] != kGlobal) return;
  const int64_t n = k.ks.full[d].value();
  if (n < 4 || n > 2 * m.simd.float_lanes) return;
  const std::vector<int64_t>& ws = out->views[0].strides;
  size_t fill = k.dims(); // the upcast dim whose copies fill the store's gaps
  for (size_t e = 0; e < k.dims(); e++)
    if (k.ks.kind[e] == kUpcast && ws[e] == 1 && k.ks.full[e] == ws[d]) fill = e;
  if (ws[d] < 2 || fill == k.dims()) return;
  auto step = [&](const ShapeTracker& st, size_t e) {
    return st.views.size() == 1 ? st.views[0].strides[e] : uniform_step(k, st, e);
  };
  // each load contiguous along the loop, or interleaved as the store is (filled by the same copies)
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    int64_t stride = step(e.second, d);
    if (stride != 0 && stride != 1 && !(stride == ws[d] && step(e.second, fill) == 1)) return;
  }
  try_apply(k.ks, k.sts, k.applied, OptOp::VECTORIZE, d, 0);
}

// An elementwise kernel whose two innermost loops (over outputs, not copies) store one contiguous
// run of a vector or two while some load strides across them within a few cache lines: a
// Winograd transform's block of b tiles (4 x 4 with 16 lanes, 2 x 4 with 8), each tile's 2 x 2 of
// the output gradient read 2 floats apart in rows 16 apart. The two loops become one (MERGE), run
// as vector lanes (VECTORIZE): each load a gather from the few lines of the block, each of the 36
// planes a whole vector store where the two short loops stored a float at a time (clang took the
// 4-long inner loop with 4-lane gathers). Measured on the Xeon (16 lanes, 1 thread), the MNIST
// CNN's F(2x2, 5x5) output-gradient transform alone in a C harness: 46-57 -> 29-35 ms. Not where
// a load spans more than 4 lines across the block (U5's blocks of 16 images, a plane apart each).
// Where the C renderer packs the copies, the merged loop is upcast whole instead: each load's
// block read as up to 4 whole vectors and picked apart by shuffles (slp.h's spans), no gathers;
// the MNIST transform in the pipeline 38.7-46.1 -> 25.5-27.2 ms (same Xeon, 1 thread).
void vectorize_tile_block(CpuKernel& k, const UOp* stored, const Machine& m, const UOp* value) {
  if (std::count(k.ks.kind.begin(), k.ks.kind.end(), kVector)) return;
  const ShapeTracker* out = k.full_store(stored);
  if (!out || out->views.size() != 1) return;
  std::vector<size_t> loops; // loops over outputs longer than 1
  for (size_t e = 0; e < k.dims(); e++)
    if (k.ks.kind[e] != kUpcast && k.ks.full[e] > 1) loops.push_back(e);
  if (loops.size() < 2) return;
  const size_t d1 = loops.back(), d0 = loops[loops.size() - 2];
  if (d0 + 1 != d1 || k.ks.kind[d0] != kGlobal || k.ks.kind[d1] != kGlobal) return;
  if (!k.ks.full[d0].is_const() || !k.ks.full[d1].is_const()) return;
  const int64_t inner = k.ks.full[d1].value(), n = k.ks.full[d0].value() * inner;
  if (n != m.simd.float_lanes && n != 2 * m.simd.float_lanes) return;
  const std::vector<int64_t>& ws = out->views[0].strides;
  if (ws[d1] != 1 || ws[d0] != inner) return;
  bool strided = false;
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    if (!numeric(e.second)) return;
    std::vector<int64_t> at = copy_read(k, e.second);
    if (at.empty()) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN, first = -1;
    for (int64_t i = 0; i < n; i++) {
      at[d0] = i / inner;
      at[d1] = i % inner;
      int64_t o = e.second.offset_of(at);
      if (o < 0) continue;
      if (first < 0) first = o - i;
      strided |= o != first + i;
      lo = std::min(lo, o);
      hi = std::max(hi, o);
    }
    if (first >= 0 && (hi - lo + 1) * itemsize(k.loaded.at(e.first)) > 4 * 64) return;
  }
  if (!strided) return;
  // packed, each load's block is read as up to 4 whole vectors (slp.h's spans): from the first
  // element any copy reads to the last
  bool packs = packable(k, value, {d0, d1});
  for (auto& e : k.sts) {
    if (!packs || !k.full_load(e)) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    std::vector<int64_t> at(k.dims(), 0);
    for (int64_t c = 0; at_copy(k, c, at); c++)
      for (int64_t i = 0; i < n; i++) {
        at[d0] = i / inner;
        at[d1] = i % inner;
        if (int64_t o = e.second.offset_of(at); o >= 0) lo = std::min(lo, o), hi = std::max(hi, o);
      }
    packs = lo > hi || hi - lo + 1 <= 4 * m.simd.float_lanes;
  }
  if (!try_apply(k.ks, k.sts, k.applied, OptOp::MERGE, d0, 0)) return;
  // the merged loop is the innermost, with no VECTORIZE yet: it takes one, or where the renderer
  // packs the copies it is upcast whole, each load's block read as a few whole vectors
  if (!packs || !try_apply(k.ks, k.sts, k.applied, OptOp::UPCAST, d0, n))
    try_apply(k.ks, k.sts, k.applied, OptOp::VECTORIZE, d0, 0);
}

// An elementwise kernel whose innermost loop over outputs stores contiguously while some load
// strides along it, read in runs by the kernel's copies (a Winograd transform of the output's
// gradient in blocks of the same tile of 16 images: each tile's 4 x 4 floats from each image, 576
// floats apart, stored images innermost). clang's vectorizer would take each load as a gather
// (one per value, and slow on a Zen 3), so the loop stays scalar. Upcast by a vector's lanes, the
// copies become the C renderer's packs (slp.h): each lane's run one short vector load, transposed
// by shuffles. Measured on the Xeon (16 lanes, 1 thread), U5's output-gradient transform in a C
// harness 14-18 -> 8.0-8.6 ms (a gather per column instead of the runs: 9.5-11.4), in the
// pipeline 14.0-17.6 -> 10.4-11.5.
void upcast_gathered_lanes(CpuKernel& k, const UOp* stored, const Machine& m, const UOp* value) {
  if (std::count(k.ks.kind.begin(), k.ks.kind.end(), kVector)) return;
  const ShapeTracker* out = k.full_store(stored);
  if (!out || out->views.size() != 1) return;
  size_t d = k.dims();
  bool copies = false;
  for (size_t e = 0; e < k.dims(); e++) {
    if (k.ks.kind[e] == kUpcast)
      copies = true;
    else if (k.ks.full[e] > 1)
      d = e;
  }
  const int64_t lanes = m.simd.float_lanes;
  if (!copies || d == k.dims() || k.ks.kind[d] != kGlobal || !k.ks.full[d].is_const() || lanes < 8) return;
  if (k.ks.full[d].value() % lanes != 0 || out->views[0].strides[d] != 1) return;
  bool strided = false;
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    if (k.loaded.at(e.first) != DType::Float32 || !numeric(e.second)) return;
    std::vector<int64_t> at = copy_read(k, e.second);
    if (at.empty()) continue;
    // the step along d, the same at each index of it (and no index in padding)
    const int64_t o0 = e.second.offset_of(at);
    at[d] = 1;
    const int64_t step = e.second.offset_of(at) - o0;
    for (int64_t i = 2; i < k.ks.full[d].value(); i++) {
      at[d] = i;
      if (e.second.offset_of(at) != o0 + i * step) return;
    }
    strided |= step > 1;
  }
  if (strided && packable(k, value, {d})) try_apply(k.ks, k.sts, k.applied, OptOp::UPCAST, d, lanes);
}

// How many steps along dim d a loaded view stays on one element: 2 for a pool's gradient brought
// back to the input's size (index x / 2), 1 for a plain view (or one whose first steps lie in
// padding).
int64_t repeat_along(const CpuKernel& k, const ShapeTracker& st, size_t d) {
  if (!numeric(st) || !k.ks.full[d].is_const()) return 1;
  std::vector<int64_t> at(k.dims(), 0);
  int64_t o0 = st.offset_of(at);
  if (o0 < 0) return 1;
  for (int64_t i = 1; i < std::min<int64_t>(k.ks.full[d], 9); i++) {
    at[d] = i;
    if (st.offset_of(at) != o0) return i;
  }
  return 1;
}

// A reduce with no output tile whose innermost loop reads some input with each value repeated r
// times (x / 2: a pool's gradient brought back to the input's size, inside a batch norm's
// gradient sums) is split into copies, a multiple of r and up to a vector: clang then loads the
// repeated values once per group and packs the copies into vectors, where the plain loop's index
// defeated its vectorizer. Measured with 16 lanes, a sum over 512x24x24 of 32 channels: 9.0 ->
// 3.7 ms split by 8 (by 2: 5.8 ms, by 24: 6.7 ms); MNIST's 64-channel ones 30 -> 16 ms together.
// Not for elementwise kernels: the same split made MNIST's pool gradient itself 14 -> 26 ms.
// Returns whether it split.
bool split_repeated_loads(CpuKernel& k, const Machine& m) {
  if (k.dims() == 0) return false;
  size_t d = k.dims() - 1;
  if (k.ks.full[d] < 4) return false;
  int64_t r = 1;
  for (auto& e : k.sts)
    if (k.full_load(e)) r = std::max(r, repeat_along(k, e.second, d));
  if (r == 1) return false;
  for (int64_t amt : {static_cast<int64_t>(m.simd.float_lanes), int64_t{8}, int64_t{4}})
    if (amt % r == 0 && amt < k.ks.full[d] && k.ks.full[d] % amt == 0 && k.split(d, amt)) return true;
  return false;
}

// An elementwise kernel whose innermost loop reads some input with each value repeated r times
// (x / 2: a 2x2 max-pool's gradient brought back to the input's size, a nearest upsample) is
// split into r copies: each copy's index x / 2 folds to the loop's own, so the loop left reads
// those inputs contiguously and the copies' stores interleave (then VECTORIZE, as a Winograd
// output transform). The loop as it was, clang's cost model left scalar on a Zen 3 (gathers).
// Measured there, 1 thread: the MNIST CNN's pool gradient (512x32x24x24, a batch norm
// recomputed inside) 59-65 -> 8.7-9.8 ms. Only where the copies are few: split by 8 or 16 (a
// vector's worth, as split_repeated_loads) the same kernel ran 14 -> 26 ms with AVX-512.
bool upcast_repeated_row(CpuKernel& k) {
  if (k.dims() == 0) return false;
  size_t d = k.dims() - 1;
  if (k.ks.kind[d] != kGlobal || !k.ks.full[d].is_const()) return false;
  int64_t r = 1;
  for (auto& e : k.sts)
    if (k.full_load(e)) r = std::max(r, repeat_along(k, e.second, d));
  if (r < 2 || r > 4 || k.ks.full[d].value() % r != 0 || k.ks.full[d].value() / r < 4) return false;
  return k.split(d, r);
}

// A kernel with no reduce whose innermost loop is short (up to two vectors) and sums several
// loads padded along it: that loop is upcast whole, so each copy's bounds test is a constant
// that folds away, where in the loop every lane tested every load. Measured on the fold of a 5x5
// conv's input gradient (25 padded windows summed onto 12x12 pixels): 46 -> 10.8 ms with 16
// lanes (whose strided-copy rule had split the channels by 4), 25.8 -> 11.2 ms with 8. Not a
// plain padded copy: a 16-wide one ran 1.3 -> 12 ms upcast.
bool upcast_masked_row(CpuKernel& k, const Machine& m) {
  if (k.dims() == 0) return false;
  size_t d = k.dims() - 1;
  if (k.ks.full[d] < 2 || k.ks.full[d] > 2 * m.simd.float_lanes) return false;
  int masked = 0;
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    const std::optional<Mask>& mask = e.second.views.back().mask;
    masked += mask && ((*mask)[d].first > 0 || (*mask)[d].second < k.ks.full[d]);
  }
  return masked >= 2 && k.split(d, k.ks.full[d]);
}

// A kernel with no reduce that joins many pieces along a dim (a stack: each piece's loads masked
// to its own index, as the 36 positions of a Winograd transform) is upcast whole along it: each
// copy keeps only its own piece's loads, where the loop tested every piece's masks at every index.
// Measured with 16 lanes, the 36 transformed 6x6 windows of a 3x3 conv over 64x32x26x26: 547 ->
// 2.6 ms. Dims that at least 2 pieces share (a 3x3 weight gradient's rows: 0.21 -> 0.01 ms; F(2x2,
// 5x5)'s two output rows), each piece a few indices, up to 64 copies in all; before the padded-row
// rule, which would take only the innermost of a tile's two joined dims.
bool upcast_joined_dims(CpuKernel& k) {
  std::vector<size_t> joined;
  int64_t copies = 1;
  for (size_t d = k.dims(); d-- > 0;) {
    const int64_t n = k.ks.full[d].value();
    if (k.ks.kind[d] != kGlobal || n < 2 || copies * n > 64) continue;
    int64_t pieces = stack_pieces(k.ks, k.sts, d);
    if (pieces >= 2 && pieces * 2 >= n) {
      joined.push_back(d);
      copies *= n;
    }
  }
  bool any = false;
  for (size_t d : joined)
    any |= k.split(d, k.ks.full[d].value()); // innermost first: indices stay valid
  return any;
}

// A kernel with no reduce that joins a few long pieces along a dim (a concatenation: the GPT's q,
// k and v gradients, 3 x 128 of 384): the dim is split into the pieces (upcast) and a loop along
// each (LOCAL, a plain loop on the CPU), so each copy keeps only its own piece's loads, ungated,
// where the loop tested each piece's gate at every index (and read each piece's view through
// divisions that only fold inside the piece). Pieces of equal length at multiples of it, 2 to 8
// of them. Measured on an Intel Xeon (family 6 model 85), 1 thread, show.try_opts: the GPT's join
// of q, k (heads merged) and v (transposed) 1.8-2.2 ms -> 0.46 ms.
bool split_joined_pieces(CpuKernel& k) {
  for (size_t d = k.dims(); d-- > 0;) {
    if (k.ks.kind[d] != kGlobal || !k.ks.full[d].is_const()) continue;
    const int64_t n = k.ks.full[d].value();
    const std::vector<std::pair<int64_t, int64_t>> pieces = stack_ranges(k.ks, k.sts, d);
    const int64_t count = static_cast<int64_t>(pieces.size());
    if (count < 2 || count > 8 || n % count != 0) continue;
    const int64_t len = n / count;
    bool aligned = true;
    for (auto& [lo, hi] : pieces)
      aligned &= lo % len == 0 && hi - lo == len;
    if (!aligned || len < 2) continue;
    if (!try_apply(k.ks, k.sts, k.applied, OptOp::LOCAL, d, len)) continue;
    return k.split(d, count);
  }
  return false;
}

// The row: the innermost broadcast dim (not one that breaks_stream), whole when it is over half
// a vector and fits two (a 24- or 26-wide image row on AVX-512; a 12-wide one: the input
// gradient of a 5x5 conv onto 12x12 ran 140 -> 98 ms as 12 x 8 channels, against 4x4x4), else
// two vectors (from three rows of two up), one, 8, 5, 4 or 3 wide, else its largest divisor under
// two vectors. 5 and 3 fit the kernel windows of convolutions (their weight gradients reduce over
// the whole batch for a 5x5 or 3x3 output: a tile over the window reuses each gradient load).
// Measured with 16 lanes: a 1024 matmul's 8x32 tile ran 1.7x faster than 8x16, a conv's 24-wide
// row 2x faster than 8x8 pixels; two 32-wide tiles (a 64-wide matmul) made clang spill its
// accumulators, 15x slower. A row of up to 32 floats that no whole vector divides is taken whole
// on narrower units too (up to four AVX2 vectors): the MNIST CNN's conv1 weight gradient (25
// taps by 32 channels) ran 48-50 -> 20-22 ms at 1 thread as 25-wide rows on a Zen 3 (AVX2), where
// its largest divisor, 5, left each row a ragged part of a vector.
Tile tile_row(CpuKernel& k, const Machine& m) {
  Tile t;
  for (size_t d = k.dims(); d-- > 0;) {
    if (!k.tileable(d) || k.breaks_stream(d)) continue;
    t.reused = k.broadcast_views(d);
    for (int64_t amt : row_widths(k.ks.full[d].value(), m.simd.float_lanes))
      if (k.split(d, amt)) {
        t.row = t.size = amt;
        t.row_dim = d;
        return t;
      }
  }
  return t;
}

// The second tile dim: one where a view the row does not reuse is broadcast (tinygrad's rule:
// each tile dim gives some load reuse it lacked), else any broadcast dim; a row narrower than 8
// (a window's 3 or 5) takes the next broadcast dim whatever it reuses. The accumulators may take
// half the vector registers when rows fill whole vectors (the rest hold the loaded row and the
// broadcast values); a ragged row costs clang extra registers, so then a quarter. Measured with
// 16 lanes and 32 registers (256 and 128 accumulators): a 24-wide conv row 4 rows deep ran 1.3x
// faster than 8.
void tile_second_dim(CpuKernel& k, Tile& t, const Machine& m) {
  if (t.row_dim == Tile::kNone) return;
  const int64_t lanes = m.simd.float_lanes, regs = m.simd.vector_registers;
  int64_t budget = (t.row % lanes == 0 ? regs / 2 : regs / 4) * lanes;
  auto new_reuse = [&](size_t d) {
    for (size_t v : k.broadcast_views(d))
      if (std::find(t.reused.begin(), t.reused.end(), v) == t.reused.end()) return true;
    return false;
  };
  size_t pick = Tile::kNone;
  for (int pass = 0; pass < 2 && pick == Tile::kNone; pass++)
    for (size_t d = t.row_dim; d-- > 0;)
      if (k.tileable(d) && (pass == 1 || t.row < 8 || new_reuse(d))) {
        pick = d;
        break;
      }
  if (pick == Tile::kNone) return;
  for (int64_t amt : {8, 5, 4, 3, 2})
    if (t.size * amt <= budget && k.split(pick, amt)) {
      t.size *= amt;
      return;
    }
}

// A small tile (a 3x3 window, or 4x4 of a 12-wide image) reuses each load a few times only:
// widen it along one more broadcast dim, as a weight gradient's output channels. The limits
// count loads reused, not registers (72 accumulators fit either profile). Measured: 4x4 ->
// 4x4x4 halved a transposed 5x5 conv; 13x2 -> 13x2x2 made one 60% slower.
void widen_small_tile(CpuKernel& k, Tile& t) {
  auto small = [&] { return t.size < 16 || (t.size < 32 && t.row < 8); };
  for (size_t d = k.dims(); d-- > 0 && small();) {
    if (!k.tileable(d) || k.breaks_stream(d)) continue;
    for (int64_t amt : {8, 4, 2})
      if (t.size * amt <= 72 && k.split(d, amt)) {
        t.size *= amt;
        break;
      }
  }
}

// The innermost reduce loop unrolled by up to 8. Not a reduce over constants (arange: it folds
// away), and not a sum with no tile: that stays one plain loop, whose additions the renderer
// lets be reordered, so clang vectorizes it whole, which it fails to do for unrolled copies of a
// long term.
void unroll_reduce(CpuKernel& k, const Tile& t, Ops reduce_op) {
  if (!k.loads_any() || (reduce_op == Ops::ADD && t.size == 1)) return;
  for (size_t d = k.dims(); d-- > 0;)
    if (k.ks.kind[d] == kReduce) {
      for (int64_t amt : {8, 4, 2})
        if (k.split(d, amt)) break;
      return;
    }
}

// Inputs bigger than the cache that the loops over outputs read again and again (a tall matmul's)
// come from memory each time: block_reduce, else order_outer_loops, remedies that.

// The bytes of inputs that stay cached between two passes of an output loop: half this core's
// share of the L3, at least its L2. Measured: a 1024 matmul's 4 MiB inputs keep their loop order
// and speed; a weight gradient's 9 and 42 MiB inputs (64x36864 by 36864x288) are re-read from
// memory. The share is at most 8 L2s: a virtual machine's sysfs names the whole socket's L3 but
// only its own cores (an Intel Xeon's 300 MiB "shared by 2 cores", 64 cores' worth), so that
// weight gradient counted as cached there: 62 ms at 22 GFLOPS, 46 ms in blocks (1 thread, with
// another process on the machine). An AMD Zen 4 (1 MiB L2, 32 MiB L3 shared by 2): 4 MiB, where
// it was 8, with the same choices for those inputs.
int64_t cached_bytes(const Machine& m) {
  int64_t l2 = m.l2.bytes / m.l2.shared_by;
  return m.l3.bytes > 0 ? std::max(std::min(m.l3.bytes / m.l3.shared_by, 8 * l2) / 2, l2) : l2;
}

// The loops over outputs with more than one iteration.
std::vector<size_t> outer_loops(const CpuKernel& k) {
  std::vector<size_t> outer;
  for (size_t d = 0; d < k.dims(); d++)
    if (k.ks.kind[d] == kGlobal && k.ks.full[d] > 1) outer.push_back(d);
  return outer;
}

// BLOCK: the reduce in blocks, each over all the outputs, sized so that one block's slices of the
// inputs read again (each pass of an output loop re-reads what does not depend on it) fill half of
// one core's L2; an input re-read within L1 (a matmul tile's 8 rows of A, read again for every
// column panel) needs no room there. Measured: a weight gradient (64x36864 by 36864x288) 9.1 ->
// 6.7 ms against the loop order of order_outer_loops, at 1 thread and at 2; 16 -> 8 ms against
// no remedy.
//
// A block stores and reloads its outputs' partial sums, which 16 iterations of a tiled reduce
// loop pay for. Matmul 1024 (its packed B of 4 MiB streamed from L3 once per 8 rows of A): on an
// Intel Xeon with 2 MiB L2, 4 blocks of 256 of K, 69-84 -> 78-113 GFLOPS at 1 thread, 117-145 ->
// 133-197 at 2 (in turns with the unblocked kernel). On an Intel Xeon with 1 MiB L2 (family 6
// model 85, AVX-512), where the inputs' slices together had found no block of 64 iterations or
// more, 8 blocks of 128 of K: 67-70 -> 74-82 GFLOPS at 1 thread, and the weight gradient above
// 39-41 -> 40-49; under the AVX2 profile with a 512 KiB L2 on that machine, the MNIST step's
// Winograd weight gradient (36 matmuls reading 9 MiB again) 55-58 -> 47 ms. Blocks of twice
// the L2 (a Zen 3's 512 KiB, AVX2's 4x16 tile, 256 of K) had run 56 -> 52 GFLOPS.
bool block_reduce(CpuKernel& k, const std::vector<size_t>& outer, const Machine& m) {
  size_t r = std::find(k.ks.kind.begin(), k.ks.kind.end(), kReduce) - k.ks.kind.begin();
  if (!k.ks.stores_reduce || r >= k.dims() || outer.empty()) return false;
  const int64_t block = m.l2.bytes / m.l2.shared_by;
  int64_t step = 0;   // bytes per iteration of that reduce loop of the inputs read again
  int64_t reread = 0; // the most bytes one pass of an output loop reads again
  for (auto& e : k.sts) {
    if (!k.full_load(e)) continue;
    auto& [u, st] = e;
    // what one pass of loop o reads again: the loops inside it (a batched matmul's batch loop,
    // outside, reads another slice each time: 36 Winograd matmuls of 0.6 MiB are no 21 MiB input)
    int64_t again = 0;
    for (size_t o : outer)
      if (st.views.back().strides[o] == 0) again = std::max(again, k.bytes(st, k.loaded.at(u), o + 1));
    reread = std::max(reread, again);
    if (st.views.back().strides[r] != 0 && again > m.l1d.bytes) step += again / k.ks.full[r];
  }
  if (reread <= block || step <= 0) return false;
  for (int64_t amt = std::min(k.ks.full[r] / 2, block / 2 / step); amt >= 16; amt--)
    if (k.ks.full[r] % amt == 0) {
      k.apply(OptOp::BLOCK, r, amt);
      return true;
    }
  return false;
}

// Loop order: each iteration of the outer loop over outputs re-reads the inputs that do not depend
// on it. With two such loops, the order that re-reads fewer bytes past the cache goes outside
// (by a margin of 30%). Measured: the weight gradient above ran 1.7x faster with its 288 loop
// outside; a 1024 matmul (inputs that fit) keeps its order.
void order_outer_loops(CpuKernel& k, const std::vector<size_t>& outer, const Machine& m) {
  if (outer.size() != 2) return;
  const int64_t cached = cached_bytes(m);
  auto traffic = [&](size_t o) { // bytes read from memory with loop o outermost
    int64_t total = 0;
    for (auto& e : k.sts) {
      if (!k.full_load(e)) continue;
      auto& [u, st] = e;
      int64_t n = k.bytes(st, k.loaded.at(u));
      total += st.views.back().strides[o] == 0 && n > cached ? n * k.ks.full[o].value() : n;
    }
    return total;
  };
  if (traffic(outer[1]) * 10 < traffic(outer[0]) * 7)
    k.apply(OptOp::SWAP, outer[0], opt_at(k.ks, OptOp::SWAP, outer[1], 0).axis);
}

// A batched matmul whose batch loop is not the outermost loop over outputs (Winograd's forward,
// stored (Cout, 36, T) so that its output transform reads the 36 planes 9 KiB apart rather than
// 576 KiB, which share cache sets): each iteration of the loop outside re-reads an input that does
// not depend on it, and where that input outgrows L2 it comes from L3 each time. The batch loop,
// on which every input depends, goes outermost. Measured on the Xeon, 1 thread: 36 matmuls of
// 64x32 by 32x2304, 4.5 -> 3.0 ms (as stored (36, Cout, T)).
bool batch_loop_first(CpuKernel& k, const std::vector<size_t>& outer, const Machine& m) {
  if (outer.size() < 3) return false;
  const int64_t l2 = m.l2.bytes / m.l2.shared_by;
  auto independent = [&](size_t d, int64_t min_bytes) { // a big input that does not depend on d
    for (auto& e : k.sts)
      if (k.full_load(e) && e.second.views.back().strides[d] == 0 &&
          k.bytes(e.second, k.loaded.at(e.first)) > min_bytes)
        return true;
    return false;
  };
  if (!independent(outer[0], l2)) return false;
  for (size_t i = 1; i < outer.size(); i++)
    if (!independent(outer[i], 0)) {
      k.apply(OptOp::SWAP, outer[0], opt_at(k.ks, OptOp::SWAP, outer[i], 0).axis);
      return true;
    }
  return false;
}

// The machine as a kernel compiled for AVX2 sees it: where the renderer leaves out AVX-512 for a
// window reduce, a tile sized for 32 registers of 16 lanes spills. Measured on the Xeon, 1 thread,
// in turns (show.try_opts): the 3x3 convolution of 64x1x28x28 by 32 filters (U5's conv1), a row
// of 26 outputs by 4 channels (104 accumulators), 1.13 ms; 13 by 2 as sized here, 0.56 ms.
const Machine& avx2_like(const Machine& m) {
  if (m.simd.float_lanes < 16) return m;
  static const Machine narrow = [&] {
    Machine n = m;
    n.simd = {"AVX2", 8, 16};
    return n;
  }();
  return narrow;
}

} // namespace

std::vector<int64_t> row_widths(int64_t n) { return row_widths(n, machine().simd.float_lanes); }

std::vector<int64_t> row_widths(int64_t n, int64_t lanes) {
  const int64_t two = 2 * lanes;
  std::vector<int64_t> amts = {two, lanes, 8, 5, 4, 3};
  std::sort(amts.rbegin(), amts.rend());
  amts.erase(std::unique(amts.begin(), amts.end()), amts.end());
  std::erase_if(amts, [](int64_t a) { return a < 2; });
  if (n < 3 * two) std::erase(amts, two);
  if (2 * n > lanes && (n <= two || (n <= 32 && n % lanes != 0))) amts.insert(amts.begin(), n);
  for (int64_t a = two - 1; a > 2; a--)
    if (n % a == 0) {
      amts.push_back(a);
      break;
    }
  return amts;
}

std::vector<Opt> hand_coded_opts(KernelShape& ks, ViewList& sts,
                                 const std::unordered_map<const UOp*, DType>& loaded, Ops reduce_op,
                                 const Target& target, const UOp* stored, const UOp* value) {
  if (target.gpu) return gpu_opts(ks, sts, loaded, target);
  CpuKernel k{ks, sts, loaded, {}};
  const Machine& m = k.window_reduce() ? avx2_like(machine()) : machine();
  if (!k.has_reduce()) {
    // the stored value, where the renderer can write copies as vectors (the C renderer's packs)
    const UOp* packed = target.vector_packs ? value : nullptr;
    if (!upcast_joined_dims(k) && !split_joined_pieces(k) && !upcast_masked_row(k, m) &&
        !upcast_repeated_row(k))
      upcast_strided_copy(k, m);
    if (k.applied.empty()) lengthen_line_runs(k, stored, m);
    order_for_transpose(k, stored, m, packed);
    vectorize_interleaved_store(k, stored, m);
    vectorize_tile_block(k, stored, m, packed);
    upcast_gathered_lanes(k, stored, m, packed);
    return k.applied;
  }
  Tile t = tile_row(k, m);
  tile_second_dim(k, t, m);
  widen_small_tile(k, t);
  if (t.size > 1 || !split_repeated_loads(k, m)) unroll_reduce(k, t, reduce_op);
  std::vector<size_t> outer = outer_loops(k);
  if (!block_reduce(k, outer, m) && !batch_loop_first(k, outer, m)) order_outer_loops(k, outer, m);
  return k.applied;
}

} // namespace mg
