#include "engine/codegen/beam.h"

#include <memory>

#include "engine/codegen/pipeline.h"
#include "engine/codegen/search.h"
#include "engine/counters.h"
#include "engine/digest.h"

namespace mg {

std::vector<Opt> beam_opts(const ScheduleItem& item, const CompileOptions& o) {
  const std::string& dev = item.bufs.at(0)->device;
  Device& d = get_device(dev);
  Target target = d.target();
  CompileOptions quiet = o; // candidates print nothing, and the hand-coded list is the start
  quiet.debug = 0, quiet.beam = 0;
  LoweredKernel hand = lower_kernel(item.ast, nullptr, target, o.noopt);
  std::string key = digest(print_tree(item.ast) + "\n" + kOptsVersion + "\ndevice " + d.fingerprint() +
                           "\nthreads " + std::to_string(o.threads) + "\nbeam " + std::to_string(o.beam));
  // scratch buffers only once a candidate needs them: a cache hit (the usual case) takes none
  ScheduleItem scratch = item;
  bool scratch_made = false;
  auto make_scratch = [&] {
    if (scratch_made) return;
    for (auto& b : scratch.bufs) {
      b = std::make_shared<Buffer>(b->device, b->dtype, b->size);
      std::vector<unsigned char> zeros(b->nbytes());
      b->copyin(zeros.data());
    }
    scratch_made = true;
  };
  // Only the opts applied to the kernel's shape, which refuses most illegal lists: lowering each
  // one here as well took a fused Winograd transform's search 16-64 s before any was timed. A
  // list that lowering refuses later is skipped when it is prepared.
  auto legal = [&](const std::vector<Opt>& opts) {
    try {
      apply_opts(item.ast, &opts, target, o.noopt);
      return true;
    } catch (const IllegalOpt&) {
      return false;
    }
  };
  auto prepare = [&](const std::vector<Opt>& opts) {
    make_scratch();
    std::shared_ptr<CompiledKernel> c;
    try {
      c = compile_for(item.ast, d, quiet, opts, false);
    } catch (const IllegalOpt&) {
      throw;
    } catch (const std::exception& e) { // a compiler bug, not a bad candidate: say which
      throw std::runtime_error("BEAM: kernel " + hand.name + " with opts " + opts_text(opts) +
                               " failed to compile: " + e.what());
    }
    return Trial{[c, &d] { c->program = d.compile_trial(c->info.name, c->info.src); },
                 [c, &scratch, threads = o.threads] { return run_program(*c, scratch, threads); }};
  };
  int before = d.compile_count();
  auto r = beam_search(key, hand.name, o.beam, o.beam_budget, o.threads, target.gpu, o.debug, hand.opts,
                       legal, prepare);
  global_counters().kernels_compiled += d.compile_count() - before;
  return r.opts;
}

} // namespace mg
