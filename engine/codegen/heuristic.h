// The hand-coded choice of opts for a kernel, as tinygrad's heuristic.py: what runs when
// neither NOOPT nor a list of opts given by hand (show.opts) says otherwise.
#pragma once
#include <unordered_map>
#include <vector>

#include "engine/codegen/opts.h"

namespace mg {

// Applies the opts it picks to ks and sts and returns them, in order. `loaded`: the views that
// are loaded from buffers, with the type loaded; `reduce_op`: the kernel's reduction (SINK for none).
// A GPU target gets a GPU's choice: work-groups, and few copies per thread.
// A CPU's tiles and cache blocks are sized by machine() (engine/machine.h): its float lanes,
// vector registers, L2 and L3.
// `stored`: the view the kernel stores through, `value` the value it stores (nullptr: unknown).
std::vector<Opt> hand_coded_opts(KernelShape& ks, ViewList& sts,
                                 const std::unordered_map<const UOp*, DType>& loaded, Ops reduce_op,
                                 const Target& target = {}, const UOp* stored = nullptr,
                                 const UOp* value = nullptr);

// The widths a CPU tile's row along an n-long dim may take, best first (the first that divides n
// and is legal wins); engine/pack.cpp makes panels of the width the row will have.
std::vector<int64_t> row_widths(int64_t n);
std::vector<int64_t> row_widths(int64_t n, int64_t lanes); // for a vector of `lanes` floats

} // namespace mg
