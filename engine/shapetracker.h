// View and ShapeTracker: movement ops as metadata. A View maps an index in its shape to
// an offset in memory (or to "invalid" outside its mask); a ShapeTracker stacks Views when
// one View cannot express the composition.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/uop.h"

namespace mg {

using Mask = std::vector<std::pair<int64_t, int64_t>>; // per dim [lo, hi)

// With a symbolic dim, a buffer is laid out for the dim's largest value (strides stay numbers) and
// only the part the variable's value covers is read or written; the offset may be symbolic
// (a slice that starts at a variable).
struct View {
  Shape shape;
  std::vector<int64_t> strides;
  sint offset = 0;
  std::optional<Mask> mask;
  bool contiguous = false;

  // Canonical form: size-1 dims get stride 0, a full mask is dropped, an empty mask zeroes all.
  static View create(Shape shape, std::optional<std::vector<int64_t>> strides = std::nullopt, sint offset = 0,
                     std::optional<Mask> mask = std::nullopt);
  bool operator==(const View&) const = default;

  std::optional<View> reshape(const Shape& new_shape) const; // nullopt: needs a second view
  std::optional<View> reshape_masked(const Shape& new_shape) const;
  View permute(const std::vector<int64_t>& order) const;
  View expand(const Shape& new_shape) const;
  View pad(const std::vector<std::pair<int64_t, int64_t>>& arg) const;
  View shrink(const std::vector<std::pair<sint, sint>>& arg) const;
  View flip(const std::vector<bool>& axes) const;
  int64_t size() const; // elements at each dim's largest value
  std::string to_string() const;
};

// Row-major strides (a symbolic dim counts at its largest value).
std::vector<int64_t> strides_for_shape(const Shape& shape);

struct ShapeTracker {
  std::vector<View> views; // views.back() is what the user sees

  static ShapeTracker contiguous(const Shape& shape) { return {{View::create(shape)}}; }
  const Shape& shape() const { return views.back().shape; }
  int64_t size() const; // elements at each dim's largest value
  bool is_contiguous() const { return views.size() == 1 && views[0].contiguous; }
  bool operator==(const ShapeTracker&) const = default;
  size_t hash() const;

  ShapeTracker reshape(const Shape& s) const;
  ShapeTracker permute(const std::vector<int64_t>& order) const;
  ShapeTracker expand(const Shape& s) const;
  ShapeTracker pad(const std::vector<std::pair<int64_t, int64_t>>& arg) const;
  ShapeTracker shrink(const std::vector<std::pair<sint, sint>>& arg) const;
  ShapeTracker flip(const std::vector<bool>& axes) const;
  // Applies a movement UOp's op and arg.
  ShapeTracker apply(Ops op, const Arg& arg) const;
  // Merges the last two views when the result is one view.
  ShapeTracker simplify() const;

  // Index expression (of dtype `it`) and validity (bool UOp) for one index per dim of shape().
  std::pair<UOpRef, UOpRef> to_indexed(const std::vector<UOpRef>& idxs, DType it = DType::Int32) const;
  // The largest value any index computation for this tracker can reach (to choose int32 or int64).
  int64_t max_index_value() const;
  // Reference semantics for tests: memory offset of a concrete index, or -1 if invalid.
  int64_t offset_of(const std::vector<int64_t>& idx) const;
  std::string to_string() const;
};

// The VIEW UOp a kernel AST uses to say how a LOAD, STORE or CONST is indexed.
UOpRef view_uop(const ShapeTracker& st);

// Movement-op args in the flat form UOps carry: pairs are [a0, b0, a1, b1, ...].
std::vector<std::pair<sint, sint>> unflatten_pairs(const Shape& v);
std::vector<std::pair<int64_t, int64_t>>
int_pairs(const std::vector<std::pair<sint, sint>>& p); // throws when symbolic

} // namespace mg
