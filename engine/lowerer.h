// Kernel AST -> loops: merge dims where every view allows, give each dim a RANGE, turn each
// VIEW into index and validity math, and simplify it with the symbolic rules.
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {

struct LoweredKernel {
  std::string name;      // E_4_4 (elementwise) or r_16_4 (with a reduce), from the loop sizes
  Shape full_shape;      // loop sizes after merging
  Shape out_shape;       // full_shape with reduced dims as 1
  std::vector<std::string> opts; // optimisations applied, e.g. UPCAST(1, 4)
  UOpRef ast;            // the AST after dim merging
  UOpRef lowered;        // SINK with RANGE / INDEX / LOAD / REDUCE / STORE
  UOpRef simplified;     // after symbolic rules
  std::vector<UOpRef> linear; // the flat program the renderer prints
};

LoweredKernel lower_kernel(const UOpRef& ast);

// Orders a simplified SINK into a flat list with RANGE/ENDRANGE loop markers, accumulators
// (DEFINE_ACC / ASSIGN) for reductions, and loop-invariant work hoisted out of inner loops.
std::vector<UOpRef> linearize(const UOpRef& sink);

} // namespace mg
