// Printing floats as numpy prints arrays (numpy's FloatingFormat, at its default options): each
// value as the shortest decimal that reads back as the same value of its dtype, with at most 8
// digits after the point (numpy's precision), and one format for all the values shown together.
#pragma once
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace mg {

// The shortest digits that read back (rounded to dtype d) as finite, nonzero x:
// |x| ~ digits[0].digits[1..] x 10^exp10. No trailing zeros.
struct Decimal {
  bool negative = false;
  std::string digits;
  int exp10 = 0;
};
Decimal shortest_decimal(double x, DType d);

class FloatFormat {
public:
  // `shown`: the values that will be printed (numpy looks at the shown ones only).
  FloatFormat(const std::vector<double>& shown, DType d);
  std::string operator()(double v) const;

private:
  DType dtype_;
  bool scientific_ = false;
  int precision_ = 8;  // digits after the point at most (scientific: of the mantissa)
  int pad_left_ = 0;   // width of the part before the point
  int pad_right_ = 0;  // positional: width after the point; scientific: all after the int part
  int exp_digits_ = 0; // scientific: the exponent's digits
};

} // namespace mg
