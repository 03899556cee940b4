// The last codegen step: a simplified SINK becomes a flat list of UOps the renderers walk.
#pragma once
#include <vector>

#include "engine/uop.h"

namespace mg {

// Orders a simplified SINK into a flat list with RANGE/ENDRANGE loop markers, accumulators
// (DEFINE_ACC / ASSIGN) for reductions, and loop-invariant work hoisted out of inner loops.
std::vector<UOpRef> linearize(const UOpRef& sink);

// The outermost loop if its iterations can run on different cores: a loop over outputs that
// encloses every store. nullptr if there is none (a full reduction stores once, outside loops).
const UOp* parallel_loop(const std::vector<UOpRef>& linear);

} // namespace mg
