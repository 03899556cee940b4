// Tensor: a handle on a lazy UOp graph. Nothing runs until realize(). Everything above the
// primitive ops (see ops.h) is composed from them, as the seeds teach.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/counters.h"
#include "engine/dtype.h"
#include "engine/schedule.h"
#include "engine/uop.h"

namespace mg {

// A Lua/Python number or boolean about to meet a tensor: its kind decides the result dtype
// (an int scalar takes the tensor's dtype, a float scalar makes an int tensor float).
struct Scalar {
  double v;
  DType kind; // Int32 for integers, Float32 for floats, Bool for booleans
};

// One entry of basic slicing: an index, or start:stop:step (nullopt = default).
struct Slice {
  bool is_index = false;
  int64_t index = 0;
  std::optional<int64_t> start, stop, step;
};

using Axes = std::optional<std::vector<int64_t>>; // nullopt: all axes

class Tensor {
public:
  UOpRef uop;

  explicit Tensor(UOpRef u) : uop(std::move(u)) {}

  // ---- creation
  static Tensor from_data(const std::vector<double>& data, const Shape& shape, DType dtype,
                          const std::string& device = "");
  // Integers exactly (wrapped into the dtype's width); a float dtype takes them as values.
  static Tensor from_ints(const std::vector<int64_t>& data, const Shape& shape, DType dtype,
                          const std::string& device = "");
  static Tensor from_scalar(Scalar s, const Tensor& like); // a 0-d const with tinygrad's dtype rule
  static Tensor empty(const Shape& shape, DType dtype = default_float, const std::string& device = "");
  static Tensor full(const Shape& shape, double value, DType dtype, const std::string& device = "");
  static Tensor zeros(const Shape& shape, DType dtype = default_float) { return full(shape, 0, dtype); }
  static Tensor ones(const Shape& shape, DType dtype = default_float) { return full(shape, 1, dtype); }
  static Tensor arange(double start, double stop, double step = 1, std::optional<DType> dtype = std::nullopt);
  static Tensor eye(int64_t n, DType dtype = default_float);
  static void manual_seed(uint64_t seed);
  static Tensor rand(const Shape& shape, DType dtype = default_float);
  static Tensor randn(const Shape& shape, DType dtype = default_float);

  // ---- properties
  const Shape& shape() const { return uop->shape; }
  DType dtype() const { return uop->dtype; }
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t numel() const { return uop->numel(); }
  int64_t max_numel() const { return uop->max_numel(); }
  std::string device() const;
  // The device of the first buffer or copy below the root; nullopt for a constant (no buffer).
  std::optional<std::string> home() const;

  // ---- elementwise (broadcasting binary ops)
  Tensor neg() const;
  Tensor add(const Tensor& b) const;
  Tensor sub(const Tensor& b) const;
  Tensor mul(const Tensor& b) const;
  Tensor div(const Tensor& b) const;  // true division: ints become float
  Tensor idiv(const Tensor& b) const; // floor division (Lua's and Python's //)
  Tensor pow(const Tensor& b) const;
  Tensor maximum(const Tensor& b) const;
  Tensor minimum(const Tensor& b) const;
  Tensor lt(const Tensor& b) const;
  Tensor le(const Tensor& b) const;
  Tensor gt(const Tensor& b) const;
  Tensor ge(const Tensor& b) const;
  Tensor eq(const Tensor& b) const;
  Tensor ne(const Tensor& b) const;
  Tensor where(const Tensor& a, const Tensor& b) const; // self is the condition
  Tensor logical_not() const;
  Tensor bitwise_not() const; // ~x on ints; logical not on bools
  Tensor bitwise_and(const Tensor& b) const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor square() const { return mul(*this); }
  Tensor cast(DType d) const;

  // ---- reductions (axes may be negative; keepdim keeps reduced dims as 1)
  Tensor sum(Axes axes = std::nullopt, bool keepdim = false) const;
  Tensor max(Axes axes = std::nullopt, bool keepdim = false) const;
  Tensor min(Axes axes = std::nullopt, bool keepdim = false) const;
  Tensor mean(Axes axes = std::nullopt, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> axis = std::nullopt, bool keepdim = false) const;
  Tensor cumsum(int64_t axis = 0) const;

  // ---- movement (metadata only; -1 in reshape is inferred)
  Tensor reshape(const Shape& s) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor transpose(int64_t a = 1, int64_t b = 0) const;
  Tensor T() const { return transpose(1, 0); }
  Tensor expand(const Shape& s) const; // -1 keeps a dim
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& p, double value = 0) const;
  Tensor shrink(const std::vector<std::pair<sint, sint>>& s) const; // bounds may be symbolic
  Tensor flip(const std::vector<int64_t>& axes) const;
  Tensor squeeze(std::optional<int64_t> axis = std::nullopt) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor slice(const std::vector<Slice>& idx) const; // basic indexing a[1:3, ::2] / a[0]

  // ---- composed
  Tensor matmul(const Tensor& b) const;
  Tensor dot(const Tensor& b) const { return matmul(b); }
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  Tensor contiguous() const;
  Tensor detach() const; // the same values, with no gradient flowing back through it
  // The same values on another device: a COPY node, done lazily by a kernel of that device after
  // x's own, where both devices' buffers are host memory (Device::host_memory); x itself where it
  // is there already (a constant, which reads no buffer, is on the default device). nullopt for
  // any other device: the caller copies through host memory.
  // Gradients flow back through the copy.
  std::optional<Tensor> copy_to(const std::string& device) const;
  // This tensor now stands for v (same shape; cast to this dtype). When this tensor is a
  // realized buffer, the next realize writes v into that same buffer (in place), so the buffer
  // keeps its identity across optimizer steps (TinyJit replays kernels on it).
  Tensor& assign(const Tensor& v);

  // ---- running
  // `why` is the kernel-boundary reason the outputs' kernels record (boundary:: in schedule.h);
  // nullptr: an explicit realize.
  Tensor& realize(const char* why = nullptr);
  static void realize_all(const std::vector<Tensor*>& ts, const char* why = nullptr);
  // The kernels realize() would run, without running them.
  std::vector<ScheduleItem> schedule() const;
  // Realizes and returns the elements, row-major, as doubles.
  std::vector<double> data();
  // An integer or bool tensor's elements exactly (64-bit values do not fit a double): sign-
  // extended when signed, zero-extended when not (a uint64 above 2^63 reads negative here).
  std::vector<int64_t> int_data();
  // The raw little-endian bytes, row-major (realizes a contiguous copy if needed), and back.
  std::string to_bytes();
  static Tensor from_bytes(const void* data, size_t nbytes, const Shape& shape, DType dtype,
                           const std::string& device = "");
  double item();
  std::string to_string(); // numpy-like; realizes

  int64_t resolve_axis(int64_t axis) const; // negative axes count from the end; throws if out of range

private:
  Tensor binop(Ops op, const Tensor& b, bool to_float = false) const;
  Tensor unop(Ops op) const;
  Tensor reduce(Ops op, Axes axes, bool keepdim) const;
  Tensor movement(Ops op, Arg arg) const;
};

// The number of elements of a shape; throws for a negative dim or more than 2^48 elements.
int64_t checked_numel(const Shape& s);

// Broadcasts two tensors to one shape and promotes them to one dtype.
std::pair<Tensor, Tensor> broadcasted(const Tensor& a, const Tensor& b);
Shape broadcast_shape(const Shape& a, const Shape& b);

// A region assign (an assign into a view of `buffer`) not realized yet: a later realize whose
// graph reads the buffer itself runs it first, as a view written in PyTorch shows through, even
// for a graph built before the assign (tensor.cpp).
void note_region_assign(const UOpRef& assign, const std::shared_ptr<Buffer>& buffer);

} // namespace mg
