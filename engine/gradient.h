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

// Whether gradients may be asked for (Tensor.no_grad in Lua is its negation). Off, realizing a
// tensor keeps no graph for backward.
bool& grad_enabled();

// Whether a gradient could flow from `graph` back to a buffer that some tensor with
// requires_grad holds (Buffer::requires_grad), through ops that pass gradients.
bool needs_grad(const UOpRef& graph);

// What a tensor whose graph was just realized into `view` becomes: `view`, or, where backward
// may still need the graph (grad enabled, needs_grad), REALIZED(view, graph). The scheduler
// reads a REALIZED node as its buffer view (UOp::cached), so nothing is computed again;
// gradients flow into the graph. As in PyTorch, reading a value (item, print) does not cut
// the gradient. An assign's result is its buffer only.
UOpRef keep_for_grad(const UOpRef& graph, const UOpRef& view);

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
