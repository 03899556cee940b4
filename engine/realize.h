// Running a schedule: lower each AST to a program (cached per AST), compile it on its
// device (cached in memory and on disk), allocate buffers, launch, time.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/schedule.h"

namespace mg {

// One compiled kernel as DEBUG and :kernels show it.
struct KernelInfo {
  std::string name;
  std::string device;
  std::string src;
  Shape full_shape;
  Shape out_shape;
  int64_t flops = 0;             // estimate from the lowered program
  int64_t bytes = 0;             // bytes moved by loads and stores
  bool parallel = false;         // its outermost loop can be split across cores
  Shape global_size, local_size; // launch dims (a GPU's work-groups and their threads)
  std::vector<std::string> opts; // the opts it was lowered with, e.g. UPCAST(0, 16)
};

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
void replay(const std::vector<ScheduleItem>& items,
            const std::vector<std::pair<const Buffer*, std::shared_ptr<Buffer>>>& swap);

// Lowers the item with `opts` chosen by hand (an illegal one throws, naming it), compiles it
// (not into the per-AST cache) and runs it `repeats` times on the item's buffers. Returns the
// best time; `info` receives what was built.
KernelRun try_opts(const ScheduleItem& item, const std::vector<Opt>& opts, int repeats, KernelInfo& info);

// Lowers, renders and compiles (cached) without running.
const KernelInfo& kernel_for(const ScheduleItem& item);

// The opts the item's kernel is lowered with under the current settings: BEAM's choice (from its
// cache, or searched now) when BEAM is on, else nullopt (the hand-coded ones, or none under NOOPT).
std::optional<std::vector<Opt>> run_opts(const ScheduleItem& item);

// Forgets the kernels compiled for `device` (a Lua device whose functions were replaced).
void drop_compiled(const std::string& device);

// One kernel as another device would build it, without running it (or needing that device's
// hardware): lowered for its target, rendered, and what its compiler makes of the source where
// that is text (SPIR-V disassembly, PTX; "" otherwise, or when `compiled` is false).
struct RenderedKernel {
  std::string name, src, compiled, launch;
};
RenderedKernel render_on(const ScheduleItem& item, const std::string& device, bool compiled);

// Every IR stage for one AST, as DEBUG=4 prints them: "ast" (as scheduled), "opts" (dims merged,
// UPCAST/UNROLL applied), "lowered" (loops and index math), "simplified", "linear".
std::vector<std::pair<std::string, std::string>> ir_stages(const UOpRef& ast);

} // namespace mg
