// sint: a size, index or offset that is a number, or an integer expression of Variables
// (tinygrad's `sint`). A symbolic shape keeps one compiled kernel for every value of a variable:
// the value is bound at run time and passed to the kernel, never compiled in.
//
// A sint converts to int64_t where a number is needed; when it is symbolic that throws, naming
// the expression, so code that has not learnt about variables fails loudly instead of guessing.
// +, - and * keep expressions symbolic; == compares them structurally (UOps are hash-consed).
#pragma once
#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace mg {

struct UOp;
using UOpRef = std::__shared_ptr<const UOp, __gnu_cxx::_S_single>;

class sint {
public:
  sint() = default;
  template <std::integral T> sint(T v) : c_(static_cast<int64_t>(v)) {}
  // An int32 expression of DEFINE_VARs (or BINDs); a CONST folds to a number.
  explicit sint(UOpRef e);

  bool is_const() const { return !e_; }
  int64_t value() const; // the number; throws when symbolic
  operator int64_t() const { return value(); }
  const UOpRef& expr() const { return e_; }
  // The value as a UOp of dtype `dt`: a CONST, or the expression (cast when dt is not int32).
  UOpRef uop(DType dt = DType::Int32) const;
  // The proven range: the number itself, or the expression's [vmin, vmax].
  int64_t vmin() const;
  int64_t vmax() const;
  std::string str() const; // "5", "start_pos", "(start_pos+1)"
  size_t hash() const;

  friend bool operator==(const sint& a, const sint& b) { return a.e_ == b.e_ && (a.e_ || a.c_ == b.c_); }
  template <std::integral T> friend bool operator==(const sint& a, T b) {
    return !a.e_ && a.c_ == static_cast<int64_t>(b);
  }

private:
  int64_t c_ = 0;
  UOpRef e_; // null: the number c_
};

sint operator+(const sint& a, const sint& b);
sint operator-(const sint& a, const sint& b);
sint operator*(const sint& a, const sint& b);
template <std::integral T> sint operator+(const sint& a, T b) { return a + sint(b); }
template <std::integral T> sint operator+(T a, const sint& b) { return sint(a) + b; }
template <std::integral T> sint operator-(const sint& a, T b) { return a - sint(b); }
template <std::integral T> sint operator-(T a, const sint& b) { return sint(a) - b; }
template <std::integral T> sint operator*(const sint& a, T b) { return a * sint(b); }
template <std::integral T> sint operator*(T a, const sint& b) { return sint(a) * b; }
using Shape = std::vector<sint>;
bool is_symbolic(const Shape& s);
// The elements at each dim's largest value (what a buffer for the shape must hold).
int64_t max_numel(const Shape& s);
std::vector<int64_t> to_ints(const Shape& s); // throws when a dim is symbolic
Shape to_shape(const std::vector<int64_t>& v);
int64_t prod(const Shape& s); // throws when a dim is symbolic
sint sprod(const Shape& s);   // symbolic product

} // namespace mg
