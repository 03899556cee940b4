// Whose fault an error is (as Halide says it): a user's mistake, or a bug in the engine.
#pragma once
#include <stdexcept>
#include <string>

namespace mg {
// Bad input: wrong shapes, axes, dtypes. Becomes a Lua error naming what was wrong.
[[noreturn]] inline void user_error(const std::string& msg) { throw std::invalid_argument(msg); }
// Something the engine should never do.
[[noreturn]] inline void internal_error(const std::string& where) {
  throw std::logic_error("internal error: " + where);
}
} // namespace mg
