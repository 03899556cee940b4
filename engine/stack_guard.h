#pragma once
// Guard for passes that recurse once per op of a chain. The scheduler's walk recurses through
// every elementwise op, so a long enough chain (x = x * 0.5 + 1, some 20,000 times, in the normal
// build; about half that under AddressSanitizer, whose frames are bigger) overflowed the thread's
// stack and crashed. check_stack() turns that into a clear error while some stack is still free.
#include <pthread.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace mg {

inline void check_stack(const char* what) {
  constexpr std::ptrdiff_t kReserve = 512 * 1024; // left for unwinding and the caller's error handling
  thread_local const char* low = [] {             // the lowest address of this thread's stack
    pthread_attr_t a;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      pthread_attr_getstack(&a, &addr, &size);
      pthread_attr_destroy(&a);
    }
    return static_cast<const char*>(addr);
  }();
  const char* here = static_cast<const char*>(__builtin_frame_address(0));
  if (low && here - low < kReserve)
    throw std::runtime_error(std::string(what) +
                             ": the expression graph is too deep for the stack (a chain of many thousand "
                             "ops); realize() part of it first");
}

} // namespace mg
