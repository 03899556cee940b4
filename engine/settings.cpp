#include "engine/settings.h"

#include <sys/stat.h>

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
    if (const char* b = std::getenv("BEAM_BUDGET"); b && *b) t.beam_budget = std::max(0.1, std::atof(b));
    t.noopt = env_int("NOOPT", 0) != 0;
    t.viz = env_int("VIZ", 0) != 0;
    t.wino = env_int("WINO", 1) != 0;
    t.scache = env_int("SCACHE", 1) != 0;
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

std::string xdg_dir(const char* var, const char* home_subdir) {
  if (const char* x = std::getenv(var); x && *x) return x;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/" + home_subdir;
  return "";
}

std::string cache_root() {
  std::string base = xdg_dir("XDG_CACHE_HOME", ".cache");
  return (base.empty() ? "/tmp" : base) + "/moongrad";
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

} // namespace mg
