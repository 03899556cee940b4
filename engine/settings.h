// Live settings: read from the environment at start-up, changed by the REPL or Context.
#pragma once
#include <string>

namespace mg {
struct Settings {
  int debug = 0;           // DEBUG
  int beam = 0;            // BEAM: search width (0: the hand-coded opts)
  double beam_budget = 12; // BEAM_BUDGET: seconds one kernel's search may take
  bool noopt = false;      // NOOPT
  bool viz = false;        // VIZ: every realize's graphs into one HTML page (engine/viz.h)
  bool wino = true;        // WINO: 3x3 and 5x5 convolutions as Winograd (stdlib/winograd.lua)
  bool scache = true;      // SCACHE: the schedule cache (engine/schedule_cache.h)
  std::string device = "CPU";
  int threads = 1; // MG_THREADS, default: every core
};
Settings& settings();

// An XDG base directory: $var, else $HOME/home_subdir; "" when neither is set.
std::string xdg_dir(const char* var, const char* home_subdir);
// Where moongrad keeps its caches: $XDG_CACHE_HOME/moongrad, else ~/.cache/moongrad, else /tmp.
std::string cache_root();
// mkdir -p; failures are left to whoever then opens a file there.
void make_dirs(const std::string& path);
} // namespace mg
