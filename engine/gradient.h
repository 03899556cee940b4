// Reverse-mode autodiff as graph construction: the gradient of a tensor graph is another
// lazy tensor graph over the same ops, scheduled and fused like any other. One rule per
// primitive op (engine/gradient.cpp), as in tinygrad's gradient.py.
#pragma once
#include <optional>
#include <vector>

#include "engine/uop.h"

namespace mg {

// d(root)/d(target) for each target, given d(loss)/d(root) = root_grad (same shape as root).
// nullopt for a target the root does not depend on (through differentiable ops).
std::vector<std::optional<UOpRef>> gradient(const UOpRef& root, const UOpRef& root_grad,
                                            const std::vector<UOpRef>& targets);

} // namespace mg
