// Reverse-mode autodiff as graph construction: the gradient of a tensor graph is another
// lazy tensor graph over the same ops, scheduled and fused like any other. One rule per
// primitive op (engine/gradient.cpp), as in tinygrad's gradient.py.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "engine/uop.h"

namespace mg {

// d(root)/d(target) for each target, given d(loss)/d(root) = root_grad (same shape as root).
// nullopt for a target the root does not depend on (through differentiable ops).
std::vector<std::optional<UOpRef>> gradient(const UOpRef& root, const UOpRef& root_grad,
                                            const std::vector<UOpRef>& targets);

class Tensor;

// A gradient written by hand for a composite op, where the one its primitive ops imply runs
// badly (a convolution's input gradient: one transposed convolution instead of a fold of
// every window back onto the input). `custom_grad(value, inputs, id)` is `value` wherever it
// is computed; backward calls function `id` with the incoming gradient and `inputs`. An input
// it returns nullopt for gets the gradient `value`'s own ops imply.
using CustomGradFn =
    std::function<std::vector<std::optional<Tensor>>(const Tensor& g, const std::vector<Tensor>& inputs)>;
int register_custom_grad(CustomGradFn fn);
UOpRef custom_grad(const UOpRef& value, const std::vector<UOpRef>& inputs, int id);

} // namespace mg
