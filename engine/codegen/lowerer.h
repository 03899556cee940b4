// Kernel AST -> a flat program, in the steps the REPL shows (engine/codegen/pipeline.h lists
// them): opts (merge dims, apply opts), lowered (a RANGE or launch id per dim, views turned into
// index math), simplified (the symbolic rules, then the semantics rules), linear.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/uop.h"

namespace mg {

struct LoweredKernel {
  std::string name;                 // E_4_4 (elementwise) or r_16_4 (with a reduce), from the loop sizes
  Shape full_shape;                 // loop sizes after merging
  Shape out_shape;                  // the output as the scheduler shaped it (reduced dims as 1)
  std::vector<Opt> opts;            // optimisations applied, e.g. UPCAST(1, 4)
  KernelShape shape;                // each loop dim's size and kind after the opts
  DType index_dtype = DType::Int32; // int64 where some view reaches past 2^31
  UOpRef ast;                       // the AST after dim merging and opts
  Shape global_size, local_size;    // launch dims: sizes of gidx0.. and of the work-groups (lidx0..)
  UOpRef lowered;                   // SINK with SPECIAL / RANGE / INDEX / LOAD / REDUCE / STORE
  std::vector<std::pair<UOpRef, UOpRef>> cpu_loops; // on a CPU: the RANGE run for each SPECIAL
  UOpRef simplified;                                // after the symbolic and semantics rules
  std::vector<UOpRef> linear;                       // the flat program the renderer prints
  std::vector<VarArg> vars; // the Variables it takes, in the order of their slots in the last buffer
  bool noopt = false;       // NOOPT: only value-preserving rules simplify it
};

// opts: with `opts`, those are applied (an illegal one throws IllegalOpt, naming it); without,
// the hand-coded heuristic picks them, or none under noopt.
LoweredKernel apply_opts(const UOpRef& ast, const std::vector<Opt>* opts, const Target& target, bool noopt);
// lowered: the loop nest and launch ids, x*(1/y) as a true division, each UPCAST or UNROLL copy
// simplified as it is made; a launch the target cannot run throws IllegalOpt.
void lower(LoweredKernel& k, const Target& target);
// simplified: the symbolic rules (only value-preserving ones under k.noopt), then what each op
// means where dialects differ (engine/codegen/semantics.h).
void simplify(LoweredKernel& k);
// linear: the program in order; more loop iterations than the target allows throws IllegalOpt.
void linearize(LoweredKernel& k, const Target& target);

// The four steps at once (noopt: NOOPT's setting unless given).
LoweredKernel lower_kernel(const UOpRef& ast, const std::vector<Opt>* opts = nullptr,
                           const Target& target = {}, std::optional<bool> noopt = std::nullopt);

} // namespace mg
