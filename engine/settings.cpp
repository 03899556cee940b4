#include "engine/settings.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

namespace mg {
namespace {
int env_int(const char* k, int dflt) {
  const char* v = std::getenv(k);
  if (!v || !*v) return dflt;
  try {
    return std::stoi(v);
  } catch (...) {
    return dflt;
  }
}
} // namespace

Settings& settings() {
  static Settings s = [] {
    Settings t;
    t.debug = env_int("DEBUG", 0);
    t.beam = env_int("BEAM", 0);
    t.noopt = env_int("NOOPT", 0) != 0;
    if (const char* d = std::getenv("DEV"); d && *d) {
      t.device = d;
      std::transform(t.device.begin(), t.device.end(), t.device.begin(), ::toupper); // DEV=cpu works
    }
    if (env_int("CLANG", 0)) t.device = "CPU";
    t.threads = std::max(1, env_int("MG_THREADS", static_cast<int>(std::thread::hardware_concurrency())));
    return t;
  }();
  return s;
}

} // namespace mg
