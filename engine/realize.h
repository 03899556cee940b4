// Running a schedule: each item's kernel from the kernel cache (engine/kernel_cache.h, compiled
// by engine/codegen/pipeline.h on a miss), launched on its buffers and timed.
#pragma once
#include <functional>
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

// Work on the host between kernels that reads and writes buffers' memory: an MPI collective
// (interp/mgdist.cpp). As an item of its own it runs in order with the kernels, :kernels and
// DEBUG=2 list it, and TinyJit records it, so a replay runs it again on that replay's buffers.
struct HostStep {
  KernelInfo info; // what the logs show: name, device "host", out_shape, bytes
  std::function<void(const std::vector<std::shared_ptr<Buffer>>& bufs)> run;
};
// Runs `step` on `bufs` now (bufs[0] is the one it writes; the rest it reads), logged like a kernel.
void run_host_step(std::shared_ptr<const HostStep> step, std::vector<std::shared_ptr<Buffer>> bufs);

// Compiles the item with `opts` chosen by hand (an illegal one throws IllegalOpt, naming it; not
// into the kernel cache) and runs it `repeats` times on the item's buffers. Returns the best
// time; `info` receives what was built.
KernelRun try_opts(const ScheduleItem& item, const std::vector<Opt>& opts, int repeats, KernelInfo& info);

} // namespace mg
