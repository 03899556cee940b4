// The last codegen step: a simplified SINK becomes a flat list of UOps the renderers walk.
#pragma once
#include <unordered_set>
#include <vector>

#include "engine/uop.h"

namespace mg {

// Orders a simplified SINK into a flat list with RANGE/ENDRANGE loop markers, accumulators
// (DEFINE_ACC / ASSIGN) for reductions, and loop-invariant work hoisted out of inner loops.
std::vector<UOpRef> linearize(const UOpRef& sink);

// The outermost loop if its iterations can run on different cores: a loop over outputs that
// encloses every store. nullptr if there is none (a full reduction stores once, outside loops).
const UOp* parallel_loop(const std::vector<UOpRef>& linear);

// Reduce loops whose body updates a tile of accumulators (16 or more) and that run 16 times or
// more: the renderers ask the compiler not to unroll them again (clang's loop pragma, LLVM's loop
// metadata).
std::unordered_set<const UOp*> tile_loops(const std::vector<UOpRef>& linear);

// Innermost loops over outputs that load with a stride of more than 8 elements (or an index not
// linear in the loop): gathers if vectorized, so the renderers ask the compiler not to.
std::unordered_set<const UOp*> gather_loops(const std::vector<UOpRef>& linear);

} // namespace mg
