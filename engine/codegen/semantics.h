// What an op means where the hardware or a language leaves it open, decided once for every
// backend: each rule rewrites the op into ops whose result every dialect agrees on, so the
// renderers print plain operators and the host's constant folding (exec_alu) gives the same.
//   integer x // 0 and x % 0 are 0; x // -1 is -x (wrapping) and x % -1 is 0
//   float MAX is NaN when either side is NaN
//   a shift by n outside [0, bits) gives what shifting one bit at a time would: 0, or the sign
//   float -> integer CAST saturates at the integer's limits; NaN becomes 0
#pragma once
#include "engine/pattern.h"

namespace mg {

// The table of rules above.
const PatternMatcher& pm_semantics();
// Applies pm_semantics once to every node of the graph (the replacements contain the op they
// replace, made safe, so they must not be rewritten again).
UOpRef apply_semantics(const UOpRef& root);

} // namespace mg
