#include "engine/codegen/heuristic.h"

#include <stdexcept>

namespace mg {

// tinygrad-style hand-coded optimisations for a CPU: in a reduction, compute a tile of outputs
// per loop iteration along dims where an input is broadcast (each loaded value is reused
// across the tile, kept in registers), and unroll the innermost reduce loop.
std::vector<Opt> hand_coded_opts(KernelShape& ks, ViewList& sts, const std::unordered_set<const UOp*>& loaded,
                                 Ops reduce_op) {
  std::vector<Opt> applied;
  // Applies the opt on loop dim d when it is legal; the divisibility test first skips most
  // illegal ones without an exception.
  auto try_split = [&](KernelShape& ks, ViewList& sts, size_t d, int64_t amount) {
    if (ks.full[d] % amount != 0) return false;
    Opt o = opt_at(ks, ks.reduces(d) ? OptOp::UNROLL : OptOp::UPCAST, d, amount);
    try {
      apply_opt(ks, sts, o);
    } catch (const std::invalid_argument&) {
      return false;
    }
    applied.push_back(o);
    return true;
  };
  bool has_reduce = false;
  for (size_t d = 0; d < ks.full.size(); d++)
    has_reduce |= ks.reduces(d);
  if (!has_reduce) return applied;
  auto broadcast_in_some_view = [&](size_t d) {
    for (auto& [u, st] : sts)
      if (loaded.count(u) && st.shape() == ks.full && st.views.back().strides[d] == 0) return true;
    return false;
  };
  // The output tile: up to 16 wide on the innermost broadcast dim (one AVX-512 vector of
  // float32), up to 8 on the next; the reduce loop unrolled by up to 8. Smaller where the
  // sizes do not divide.
  // 5 and 3 fit the kernel windows of convolutions (their weight gradients reduce over the
  // whole batch for a 5x5 or 3x3 output: a tile over the window reuses each gradient load).
  // Failing those, the largest divisor that fits (13 of a 26-wide image).
  const std::vector<int64_t> tile[2] = {{16, 8, 5, 4, 3}, {8, 5, 4, 3, 2}};
  int upcasts = 0;
  int64_t tile_size = 1, row = 1; // row: the innermost upcast
  for (size_t d = ks.full.size(); d-- > 0 && upcasts < 2;) {
    if (ks.kind[d] != kGlobal || !broadcast_in_some_view(d)) continue;
    std::vector<int64_t> amts = tile[upcasts];
    for (int64_t a = amts.front(); a > 2; a--)
      if (ks.full[d] % a == 0) {
        amts.push_back(a);
        break;
      }
    for (int64_t amt : amts)
      if (try_split(ks, sts, d, amt)) {
        if (upcasts++ == 0) row = amt;
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
  for (auto& [u, st] : sts)
    loads_in_reduce |= loaded.count(u) && st.shape() == ks.full;
  // A sum with no tile stays one plain loop: the renderer lets its additions be reordered and
  // clang vectorizes it whole, which it fails to do for unrolled copies of a long term.
  if (reduce_op == Ops::ADD && tile_size == 1) loads_in_reduce = false;
  for (size_t d = ks.full.size(); d-- > 0 && loads_in_reduce;)
    if (ks.kind[d] == kReduce) {
      for (int64_t amt : {8, 4, 2})
        if (try_split(ks, sts, d, amt)) {
          break;
        }
      break;
    }
  return applied;
}

} // namespace mg
