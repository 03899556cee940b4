// Running a schedule: each item's kernel from the kernel cache (engine/kernel_cache.h, compiled
// by engine/codegen/pipeline.h on a miss), launched on its buffers and timed.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/codegen/pipeline.h"
#include "engine/schedule.h"

namespace mg {

struct KernelRun {
  const KernelInfo* info;
  double seconds;
};

// Runs the items in order; returns one entry per kernel.
std::vector<KernelRun> run_schedule(const std::vector<ScheduleItem>& items);

// While one is alive, every kernel run is appended to it: what ran and how long it took (the
// REPL's :kernels), and the item itself (TinyJit's capture). Nested logs each see the runs of
// their own lifetime.
class KernelLog {
public:
  KernelLog();
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;
  std::vector<std::pair<KernelInfo, double>> runs; // info, seconds
  std::vector<ScheduleItem> items;
};
// Runs captured items again, each buffer in `swap` replaced by its partner (TinyJit's replay:
// the captured call's inputs become the new call's). Kernels may write buffers in place, so
// values cached in graph nodes expire (a new mutation epoch).
// `vars`: new values for the Variables the kernels take, by name (one compiled kernel serves all).
void replay(const std::vector<ScheduleItem>& items,
            const std::vector<std::pair<const Buffer*, std::shared_ptr<Buffer>>>& swap,
            const std::map<std::string, int64_t>& vars = {});

// Compiles the item with `opts` chosen by hand (an illegal one throws IllegalOpt, naming it; not
// into the kernel cache) and runs it `repeats` times on the item's buffers. Returns the best
// time; `info` receives what was built.
KernelRun try_opts(const ScheduleItem& item, const std::vector<Opt>& opts, int repeats, KernelInfo& info);

} // namespace mg
