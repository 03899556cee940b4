#include "engine/realize.h"
#include "engine/roofline.h"

#include <cstdio>

#include "engine/kernel_cache.h"
#include "engine/settings.h"
#include "engine/tensor.h"

namespace mg {

KernelRun try_opts(const ScheduleItem& item, const std::vector<Opt>& opts, int repeats, KernelInfo& info) {
  CompileOptions o = CompileOptions::from_settings();
  auto c = compile_kernel(item, o, opts);
  double best = 0;
  for (int i = 0; i < std::max(1, repeats); i++) {
    double s = run_program(*c, item, o.threads);
    best = i == 0 ? s : std::min(best, s);
  }
  info = c->info;
  return {&info, best};
}

static std::vector<KernelLog*>& kernel_logs() {
  static std::vector<KernelLog*> logs;
  return logs;
}
KernelLog::KernelLog() { kernel_logs().push_back(this); }
KernelLog::~KernelLog() { std::erase(kernel_logs(), this); }

void replay(const std::vector<ScheduleItem>& items,
            const std::vector<std::pair<const Buffer*, std::shared_ptr<Buffer>>>& swap,
            const std::map<std::string, int64_t>& vars) {
  std::vector<ScheduleItem> run = items;
  for (auto& it : run) {
    for (auto& b : it.bufs)
      for (auto& [from, to] : swap)
        if (b.get() == from) {
          b = to;
          break; // one swap per buffer: f(B, A) after f(A, B) must not swap back
        }
    for (auto& [var, value] : it.var_vals)
      if (auto v = vars.find(var->var().name); v != vars.end()) value = v->second;
  }
  run_schedule(run);
  UOp::mutation_epoch()++;
}

// DEBUG=2: one line per kernel run, with its share of the limit that binds it (engine/roofline.h)
// where the device has measured limits.
static void print_run(const KernelInfo& info, double s, int64_t count) {
  std::string opts;
  for (auto& o : info.opts)
    opts += " " + o;
  auto point = roofline_of(info, s, settings().threads);
  std::printf("*** %-4s %4lld %-24s out %-16s %9.3f ms %8.2f GFLOPS %8.2f GB/s %-17s %s\n",
              info.device.c_str(), static_cast<long long>(count), info.name.c_str(),
              shape_str(info.out_shape).c_str(), s * 1e3, s > 0 ? info.flops / s * 1e-9 : 0.0,
              s > 0 ? info.bytes / s * 1e-9 : 0.0, point ? share_text(*point).c_str() : "",
              opts.empty() ? " (no opts)" : opts.c_str());
}

std::vector<KernelRun> run_schedule(const std::vector<ScheduleItem>& items) {
  std::vector<KernelRun> runs;
  auto& gc = global_counters();
  for (auto& item : items) {
    const CompiledKernel& c = compiled_for(item);
    double s = run_program(c, item, settings().threads);
    runs.push_back({&c.info, s});
    for (KernelLog* log : kernel_logs()) {
      log->runs.emplace_back(c.info, s);
      log->items.push_back(item);
    }
    gc.kernel_count++;
    gc.time_sum_s += s;
    gc.global_ops += c.info.flops;
    gc.global_mem += c.info.bytes;
    if (settings().debug >= 2) print_run(c.info, s, gc.kernel_count);
  }
  return runs;
}

} // namespace mg
