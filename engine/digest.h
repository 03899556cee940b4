// A 128-bit digest of a string (two FNV-1a variants) as 32 hex digits: cache keys that cannot
// realistically collide. Not for security.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace mg {

inline std::string digest(const std::string& s) {
  uint64_t a = 1469598103934665603ULL, b = 0x84222325cbf29ce4ULL;
  for (unsigned char c : s) {
    a = (a ^ c) * 1099511628211ULL;
    b = (b ^ c) * 0x100000001b3ULL + 0x9e37;
  }
  char out[40];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return out;
}

} // namespace mg
