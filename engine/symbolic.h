// Algebraic simplification as pattern tables: constant folding, identities, chain folding,
// and div/mod/compare decided from each node's proven [vmin, vmax] range.
#pragma once
#include "engine/pattern.h"

namespace mg {
// Constant folding and identities that never change a value (used even with NOOPT).
const PatternMatcher& symbolic_simple();
// Everything: the above plus range-based div/mod/compare folding and chain canonicalisation.
const PatternMatcher& symbolic();
// Splits an ADD chain into its terms.
std::vector<UOpRef> split_add(const UOpRef& x);
} // namespace mg
