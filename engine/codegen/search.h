// BEAM search over opts, as tinygrad's search.py: start from the hand-coded list's prefixes, try
// every legal opt on each of the N best lists so far, keep the N fastest, and stop when a round
// improves nothing by 1% or the time budget runs out. The hand-coded list competes too, so the
// result is never slower than it. Results live in one SQLite file shared by every process.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/codegen/opts.h"

namespace mg {

// One candidate made ready on the caller's thread (lowered and rendered: that touches the
// shared UOp table). `compile` may then run on a worker thread, beside other candidates';
// `time` runs on the caller's thread and returns the seconds of one run on scratch buffers.
struct Trial {
  std::function<void()> compile;
  std::function<double()> time;
};
// Throws std::invalid_argument for a list the kernel cannot take.
using PrepareOpts = std::function<Trial(const std::vector<Opt>&)>;

struct BeamResult {
  std::vector<Opt> opts;
  double seconds = 0;      // with opts
  double hand_seconds = 0; // with the hand-coded opts
  int tried = 0;           // candidates compiled and timed
  bool cached = false;     // found in the cache: nothing was tried
};

// `key` identifies the kernel (its AST, device, renderer and threads); `legal` tells whether a
// list lowers (no compile, but a whole lowering); `gpu`: the opts a GPU can take. Candidates compile on
// `threads` threads, then are timed one at a time. Prints a live progress line at debug >= 1.
BeamResult beam_search(const std::string& key, const std::string& name, int width, double budget_s,
                       int threads, bool gpu, int debug, const std::vector<Opt>& hand,
                       const std::function<bool(const std::vector<Opt>&)>& legal, const PrepareOpts& prepare);

// The cache file, and how many kernels it holds (-1 when it cannot be read).
std::string beam_cache_path();
int64_t beam_cache_entries();

// Opts as the cache stores them ("UPCAST 1 8;UNROLL 0 4"), and back (nullopt if malformed).
std::string opts_text(const std::vector<Opt>& opts);
std::optional<std::vector<Opt>> parse_opts_text(const std::string& s);

} // namespace mg
