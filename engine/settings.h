// Live settings: read from the environment at start-up, changed by the REPL or Context.
#pragma once
#include <string>

namespace mg {
struct Settings {
  int debug = 0;      // DEBUG
  int beam = 0;       // BEAM (not used yet)
  bool noopt = false; // NOOPT
  std::string device = "CPU";
  int threads = 1; // MG_THREADS, default: every core
};
Settings& settings();
} // namespace mg
