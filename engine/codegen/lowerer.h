// Kernel AST -> loops: merge dims where every view allows, give each dim a RANGE, turn each
// VIEW into index and validity math, and simplify it with the symbolic rules.
#pragma once
#include <string>
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/uop.h"

namespace mg {

struct LoweredKernel {
  std::string name;              // E_4_4 (elementwise) or r_16_4 (with a reduce), from the loop sizes
  Shape full_shape;              // loop sizes after merging
  Shape out_shape;               // the output as the scheduler shaped it (reduced dims as 1)
  std::vector<Opt> opts;         // optimisations applied, e.g. UPCAST(1, 4)
  UOpRef ast;                    // the AST after dim merging
  Shape global_size, local_size; // launch dims: sizes of gidx0.. (SPECIAL) and of the work-groups
  UOpRef lowered;                // SINK with SPECIAL / RANGE / INDEX / LOAD / REDUCE / STORE
  UOpRef simplified;             // after symbolic rules
  std::vector<UOpRef> linear;    // the flat program the renderer prints
};

// With `opts`, those are applied (an illegal one throws, naming it); without, the hand-coded
// heuristic picks them, or none under NOOPT. A launch the target cannot run throws too.
LoweredKernel lower_kernel(const UOpRef& ast, const std::vector<Opt>* opts = nullptr,
                           const Target& target = {});

} // namespace mg
