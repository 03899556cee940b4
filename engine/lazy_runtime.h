// A device's runtime (a driver, a context, a queue) made on first use, so that creating the
// device, rendering and compiling for it need no hardware. A failure to start is kept and thrown
// again, with the same message, on every later use.
#pragma once
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace mg {

template <typename T> class LazyRuntime {
public:
  T& get() const {
    std::call_once(once_, [&] {
      try {
        value_ = std::make_unique<T>();
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    });
    if (!value_) throw std::runtime_error(error_);
    return *value_;
  }
  // Why the runtime cannot start here ("" when it can).
  std::string why_not() const {
    try {
      get();
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }

private:
  mutable std::once_flag once_;
  mutable std::unique_ptr<T> value_;
  mutable std::string error_;
};

} // namespace mg
