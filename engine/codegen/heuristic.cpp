#include "engine/codegen/heuristic.h"

#include <algorithm>
#include <stdexcept>

#include "engine/dtype.h"

namespace mg {

namespace {

// Applies `op` on loop dim d when it is legal, recording it; the divisibility test (not for
// PADTO, which makes a dim divisible) first skips most illegal ones without an exception.
bool try_apply(KernelShape& ks, ViewList& sts, std::vector<Opt>& applied, OptOp op, size_t d,
               int64_t amount) {
  if (op != OptOp::PADTO && ks.full[d] % amount != 0) return false;
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

} // namespace

// tinygrad-style hand-coded optimisations for a CPU: in a reduction, compute a tile of outputs
// per loop iteration along dims where an input is broadcast (each loaded value is reused
// across the tile, kept in registers), and unroll the innermost reduce loop.
std::vector<Opt> hand_coded_opts(KernelShape& ks, ViewList& sts,
                                 const std::unordered_map<const UOp*, DType>& loaded, Ops reduce_op,
                                 const Target& target) {
  if (target.gpu) return gpu_opts(ks, sts, loaded, target);
  std::vector<Opt> applied;
  // an UPCAST of a dim over outputs, an UNROLL of a reduce dim
  auto try_split = [&](KernelShape& ks, ViewList& sts, size_t d, int64_t amount) {
    return try_apply(ks, sts, applied, ks.reduces(d) ? OptOp::UNROLL : OptOp::UPCAST, d, amount);
  };
  // A view loaded from a buffer over the kernel's full loop shape (not the output's view)
  auto full_load = [&](const std::pair<const UOp*, ShapeTracker>& e) {
    return loaded.count(e.first) && e.second.shape() == ks.full;
  };
  bool has_reduce = false;
  for (size_t d = 0; d < ks.full.size(); d++)
    has_reduce |= ks.reduces(d);
  if (!has_reduce) {
    // A copy whose innermost loops are short (an im2col copy: channels, then a 3x3 window):
    // clang unrolls them whole and vectorizes the loop outside, with a gather for every load
    // that is strided along it. Four copies of the body on that loop instead made a conv's
    // window copy 5x faster. Not where a load is contiguous along it (a transpose's vectors).
    size_t n = ks.full.size();
    if (n < 2 || ks.full[n - 1] >= 16) return applied;
    for (size_t d = n - 1; d-- > 0;) {
      if (ks.full[d] < 16) continue;
      bool strided = false, contiguous = false;
      for (auto& e : sts) {
        if (!full_load(e)) continue;
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
      if (strided && !contiguous) try_split(ks, sts, d, 4);
      break;
    }
    return applied;
  }
  // The loaded full-shaped views broadcast along dim d (stride 0): each of their loads is reused
  // across a tile over d.
  auto broadcast_views = [&](size_t d) {
    std::vector<size_t> vs;
    for (size_t k = 0; k < sts.size(); k++)
      if (full_load(sts[k]) && sts[k].second.views.back().strides[d] == 0) vs.push_back(k);
    return vs;
  };
  auto broadcast_in_some_view = [&](size_t d) { return !broadcast_views(d).empty(); };
  // The row: the innermost broadcast dim, whole when it fits two AVX-512 vectors of float32 (a
  // 24- or 26-wide image row), else 32 (from 96 up), 16, 8, 5, 4 or 3 wide, else its largest
  // divisor under 32.
  // 5 and 3 fit the kernel windows of convolutions (their weight gradients reduce over the
  // whole batch for a 5x5 or 3x3 output: a tile over the window reuses each gradient load).
  // Measured: a 1024 matmul's 8x32 tile ran 1.7x faster than 8x16, a conv's 24-wide row 2x
  // faster than 8x8 pixels.
  int64_t tile_size = 1, row = 1;
  std::vector<size_t> reused; // views the row reuses
  size_t row_dim = ks.full.size();
  for (size_t d = ks.full.size(); d-- > 0;) {
    if (ks.kind[d] != kGlobal || ks.full[d] == 1 || !broadcast_in_some_view(d)) continue;
    std::vector<int64_t> amts = {32, 16, 8, 5, 4, 3};
    // Two 32-wide tiles (a 64-wide matmul) made clang spill its accumulators, 15x slower
    if (ks.full[d] < 96) amts.erase(amts.begin());
    if (ks.full[d] > 16 && ks.full[d] <= 32) amts.insert(amts.begin(), ks.full[d]);
    for (int64_t a = 31; a > 2; a--)
      if (ks.full[d] % a == 0) {
        amts.push_back(a);
        break;
      }
    reused = broadcast_views(d);
    for (int64_t amt : amts)
      if (try_split(ks, sts, d, amt)) {
        row = tile_size = amt;
        row_dim = d;
        break;
      }
    if (row_dim < ks.full.size()) break;
  }
  // The second tile dim: one where a view the row does not reuse is broadcast (tinygrad's rule:
  // each tile dim gives some load reuse it lacked), else any broadcast dim. Up to 8 rows of
  // accumulators when rows fill whole vectors; a ragged row costs clang extra registers, so
  // then at most 128 (measured: a 24-wide conv row 4 rows deep ran 1.3x faster than 8).
  if (row_dim < ks.full.size()) {
    int64_t budget = row % 16 == 0 ? 256 : 128;
    auto new_reuse = [&](size_t d) {
      for (size_t k : broadcast_views(d))
        if (std::find(reused.begin(), reused.end(), k) == reused.end()) return true;
      return false;
    };
    size_t pick = ks.full.size();
    for (int pass = 0; pass < 2 && pick == ks.full.size(); pass++)
      for (size_t d = row_dim; d-- > 0;)
        if (ks.kind[d] == kGlobal && ks.full[d] > 1 && broadcast_in_some_view(d) &&
            (pass == 1 || row < 8 || new_reuse(d))) {
          pick = d;
          break;
        }
    if (pick < ks.full.size())
      for (int64_t amt : {8, 5, 4, 3, 2})
        if (tile_size * amt <= budget && try_split(ks, sts, pick, amt)) {
          tile_size *= amt;
          break;
        }
  }
  // A small tile (a 3x3 window, or 4x4 of a 12-wide image) reuses each load a few times only:
  // widen it along one more broadcast dim, as a weight gradient's output channels. Measured:
  // 4x4 -> 4x4x4 halved a transposed 5x5 conv; 13x2 -> 13x2x2 made one 60% slower.
  auto small = [&] { return tile_size < 16 || (tile_size < 32 && row < 8); };
  for (size_t d = ks.full.size(); d-- > 0 && small();) {
    if (ks.kind[d] != kGlobal || ks.full[d] == 1 || !broadcast_in_some_view(d)) continue;
    for (int64_t amt : {8, 4, 2})
      if (tile_size * amt <= 72 && try_split(ks, sts, d, amt)) {
        tile_size *= amt;
        break;
      }
  }
  bool loads_in_reduce = false; // a reduce over constants (arange) folds away: nothing to unroll
  for (auto& e : sts)
    loads_in_reduce |= full_load(e);
  // A sum with no tile stays one plain loop: the renderer lets its additions be reordered and
  // clang vectorizes it whole, which it fails to do for unrolled copies of a long term.
  if (reduce_op == Ops::ADD && tile_size == 1) loads_in_reduce = false;
  for (size_t d = ks.full.size(); d-- > 0 && loads_in_reduce;)
    if (ks.kind[d] == kReduce) {
      for (int64_t amt : {8, 4, 2})
        if (try_split(ks, sts, d, amt)) break;
      break;
    }
  // Inputs bigger than the cache that the loops over outputs read again and again (a tall
  // matmul's) come from memory each time. Two remedies, the first that applies:
  std::vector<size_t> outer; // loops over outputs with more than one iteration
  for (size_t d = 0; d < ks.full.size(); d++)
    if (ks.kind[d] == kGlobal && ks.full[d] > 1) outer.push_back(d);
  constexpr int64_t kCacheBytes = 8 << 20;            // a share of this machine's 32 MiB L3
  constexpr int64_t kBlockBytes = 1 << 20;            // half its 2 MiB L2
  auto bytes = [&](const ShapeTracker& st, DType t) { // the distinct elements a view reads
    int64_t n = itemsize(t);
    for (size_t d = 0; d < ks.full.size(); d++)
      if (st.views.back().strides[d] != 0) n *= ks.full[d];
    return n;
  };
  auto reread = [&](const ShapeTracker& st, DType t) { // outgrows the cache, read per output loop
    if (bytes(st, t) <= kCacheBytes) return false;
    for (size_t o : outer)
      if (st.views.back().strides[o] == 0) return true;
    return false;
  };
  // 1. BLOCK: the reduce in blocks, each over all the outputs, sized so that the inputs' slices
  //    of one block stay in L2. Measured: a weight gradient (64x36864 by 36864x288) 9.1 ->
  //    6.7 ms against the loop order below, at 1 thread and at 2.
  size_t r = std::find(ks.kind.begin(), ks.kind.end(), kReduce) - ks.kind.begin();
  int64_t step = 0; // bytes of the inputs per iteration of that reduce loop
  bool blocks = ks.stores_reduce && r < ks.full.size() && !outer.empty();
  bool any_reread = false;
  for (auto& e : sts) {
    if (!full_load(e)) continue;
    auto& [u, st] = e;
    if (blocks && st.views.back().strides[r] != 0) step += bytes(st, loaded.at(u)) / ks.full[r];
    any_reread |= reread(st, loaded.at(u));
  }
  if (blocks && any_reread && step > 0) {
    for (int64_t amt = std::min(ks.full[r] / 2, kBlockBytes / step); amt >= 16; amt--)
      if (ks.full[r] % amt == 0) {
        Opt o = opt_at(ks, OptOp::BLOCK, r, amt);
        apply_opt(ks, sts, o);
        applied.push_back(o);
        return applied;
      }
  }
  // 2. Loop order: each iteration of the outer loop over outputs re-reads the inputs that do
  //    not depend on it. With two such loops, the order that re-reads fewer bytes goes outside.
  //    Measured: the weight gradient above ran 1.7x faster with its 288 loop outside; a 1024
  //    matmul (inputs that fit) keeps its order.
  if (outer.size() == 2) {
    auto traffic = [&](size_t o) { // bytes read from memory with loop o outermost
      int64_t total = 0;
      for (auto& e : sts) {
        if (!full_load(e)) continue;
        auto& [u, st] = e;
        int64_t n = bytes(st, loaded.at(u));
        total += st.views.back().strides[o] == 0 && n > kCacheBytes ? n * ks.full[o] : n;
      }
      return total;
    };
    if (traffic(outer[1]) * 10 < traffic(outer[0]) * 7) {
      Opt o = opt_at(ks, OptOp::SWAP, outer[0], opt_at(ks, OptOp::SWAP, outer[1], 0).axis);
      apply_opt(ks, sts, o);
      applied.push_back(o);
    }
  }
  return applied;
}

} // namespace mg
