// Kernel AST -> loops: merge dims where every view allows, give each dim a RANGE, turn each
// VIEW into index and validity math, and simplify it with the symbolic rules.
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {

struct LoweredKernel {
  std::string name;              // E_4_4 (elementwise) or r_16_4 (with a reduce), from the loop sizes
  Shape full_shape;              // loop sizes after merging
  Shape out_shape;               // the output as the scheduler shaped it (reduced dims as 1)
  std::vector<std::string> opts; // optimisations applied, e.g. UPCAST(1, 4)
  UOpRef ast;                    // the AST after dim merging
  UOpRef lowered;                // SINK with RANGE / INDEX / LOAD / REDUCE / STORE
  UOpRef simplified;             // after symbolic rules
  std::vector<UOpRef> linear;    // the flat program the renderer prints
};

LoweredKernel lower_kernel(const UOpRef& ast);

// Orders a simplified SINK into a flat list with RANGE/ENDRANGE loop markers, accumulators
// (DEFINE_ACC / ASSIGN) for reductions, and loop-invariant work hoisted out of inner loops.
std::vector<UOpRef> linearize(const UOpRef& sink);

// The outermost loop if its iterations can run on different cores: a loop over outputs that
// encloses every store. nullptr if there is none (a full reduction stores once, outside loops).
const UOp* parallel_loop(const std::vector<UOpRef>& linear);

} // namespace mg
