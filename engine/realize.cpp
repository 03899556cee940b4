#include "engine/realize.h"
#include "engine/roofline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

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
static void print_run(const ScheduleItem& item, const KernelInfo& info, double s, int64_t count) {
  std::string opts;
  for (auto& o : info.opts)
    opts += " " + o;
  auto point = roofline_of(info, s, settings().threads);
  // a copy between devices says so, as tinygrad's "copy 1024, CPU:1 <- CPU"
  std::string name = item.reason == boundary::copy
                         ? "copy " + item.bufs[1]->device + " -> " + item.bufs[0]->device
                         : info.name;
  std::printf("*** %-4s %4lld %-24s out %-16s %9.3f ms %8.2f GFLOPS %8.2f GB/s %-17s %s\n",
              info.device.c_str(), static_cast<long long>(count), name.c_str(),
              shape_str(info.out_shape).c_str(), s * 1e3, s > 0 ? info.flops / s * 1e-9 : 0.0,
              s > 0 ? info.bytes / s * 1e-9 : 0.0, point ? share_text(*point).c_str() : "",
              opts.empty() ? " (no opts)" : opts.c_str());
}

// The items' devices, in order of first use, where the items may run on one lane per device at
// once: two or more devices that all run concurrently (an item runs on the lane of the device it
// writes; a copy between devices reads the other's buffer in place), no Variables (their values go
// in a buffer made at launch), and a core per lane at least. Else empty.
static std::vector<std::string> concurrent_devices(const std::vector<ScheduleItem>& items, int threads) {
  std::vector<std::string> devs;
  if (threads < 2) return devs;
  for (auto& item : items) {
    const std::string& d = item.bufs.at(0)->device;
    if (!item.var_vals.empty() || item.host) return {};
    if (std::find(devs.begin(), devs.end(), d) == devs.end()) {
      if (!get_device(d).runs_concurrently()) return {};
      devs.push_back(d);
    }
  }
  if (devs.size() < 2) return {};
  return devs;
}

// For each item, the earlier items it must follow: the last writer of each buffer it touches, and
// where it writes a buffer, the readers of it since (an item writes bufs[0] and reads the rest).
// Kernels share nothing but buffers, so any order that keeps these gives the same values.
static std::vector<std::vector<size_t>> buffer_deps(const std::vector<ScheduleItem>& items) {
  std::unordered_map<const Buffer*, size_t> writer;
  std::unordered_map<const Buffer*, std::vector<size_t>> readers;
  std::vector<std::vector<size_t>> deps(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    const auto& bufs = items[i].bufs;
    for (auto& b : bufs)
      if (auto w = writer.find(b.get()); w != writer.end()) deps[i].push_back(w->second);
    for (size_t r : readers[bufs[0].get()])
      deps[i].push_back(r);
    for (size_t k = 1; k < bufs.size(); k++)
      readers[bufs[k].get()].push_back(i);
    writer[bufs[0].get()] = i;
    readers[bufs[0].get()].clear();
  }
  return deps;
}

// Runs each device's items on a lane of its own (the first on this thread), with an equal share
// of the threads; returns each item's seconds. A lane takes its first item, in schedule order,
// whose dependencies (buffer_deps) have run, so that one device's work never waits behind a copy
// from the other that the schedule happened to list first (a ring all-reduce lists one device's
// partial sum before the other's). Compiling and allocating happen here first: both may call back
// into the interpreter (BEAM's cache, the collector's hook).
static std::vector<double> run_lanes(const std::vector<ScheduleItem>& items,
                                     const std::vector<const CompiledKernel*>& cs,
                                     const std::vector<std::string>& devs, int threads) {
  for (auto& item : items)
    for (auto& b : item.bufs)
      b->ptr();
  int lanes = static_cast<int>(std::min<size_t>(devs.size(), static_cast<size_t>(threads)));
  int per_lane = std::max(1, threads / lanes);
  std::vector<std::vector<size_t>> todo(static_cast<size_t>(lanes)); // each lane's items, in order
  for (size_t i = 0; i < items.size(); i++) {
    auto at = std::find(devs.begin(), devs.end(), items[i].bufs[0]->device) - devs.begin();
    todo[static_cast<size_t>(at % lanes)].push_back(i);
  }
  auto deps = buffer_deps(items);
  std::vector<double> seconds(items.size());
  std::vector<std::exception_ptr> errors(static_cast<size_t>(lanes));
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> finished(items.size(), 0);
  bool failed = false; // a lane stopped: the others must not wait for its items
  auto run_lane = [&](int lane) {
    std::vector<size_t>& mine = todo[static_cast<size_t>(lane)];
    try {
      while (!mine.empty()) {
        size_t next = 0;
        {
          std::unique_lock<std::mutex> lock(m);
          auto ready = [&](size_t i) {
            return std::all_of(deps[i].begin(), deps[i].end(), [&](size_t j) { return finished[j] != 0; });
          };
          std::vector<size_t>::iterator it;
          cv.wait(lock, [&] {
            return failed || (it = std::find_if(mine.begin(), mine.end(), ready)) != mine.end();
          });
          if (failed) return;
          next = *it;
          mine.erase(it);
        }
        seconds[next] = run_program(*cs[next], items[next], per_lane, lane);
        {
          std::lock_guard<std::mutex> lock(m);
          finished[next] = 1;
        }
        cv.notify_all();
      }
    } catch (...) {
      errors[static_cast<size_t>(lane)] = std::current_exception();
      {
        std::lock_guard<std::mutex> lock(m);
        failed = true;
      }
      cv.notify_all();
    }
  };
  {
    std::vector<std::jthread> others;
    for (int lane = 1; lane < lanes; lane++)
      others.emplace_back(run_lane, lane);
    run_lane(0);
  } // joined
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return seconds;
}

void run_host_step(std::shared_ptr<const HostStep> step, std::vector<std::shared_ptr<Buffer>> bufs) {
  ScheduleItem item;
  item.bufs = std::move(bufs);
  item.reason = boundary::host_step;
  item.host = std::move(step);
  run_schedule({item});
  // it wrote bufs[0] in place (an all-reduce's result, a broadcast): values cached before may
  // have read it, as after any in-place write (schedule.cpp)
  UOp::mutation_epoch()++;
}

std::vector<KernelRun> run_schedule(const std::vector<ScheduleItem>& items) {
  std::vector<KernelRun> runs;
  auto& gc = global_counters();
  int threads = settings().threads;
  std::vector<std::string> devs = concurrent_devices(items, threads);
  // An asynchronous device's kernels are waited for one by one only where their times are shown.
  bool wait = settings().debug >= 2 || !kernel_logs().empty();
  std::vector<double> seconds;
  if (!devs.empty()) {
    std::vector<const CompiledKernel*> cs;
    for (auto& item : items)
      cs.push_back(&compiled_for(item));
    seconds = run_lanes(items, cs, devs, threads);
  }
  for (size_t i = 0; i < items.size(); i++) {
    const ScheduleItem& item = items[i];
    const KernelInfo* info = nullptr;
    double s = 0;
    if (item.host) {
      info = &item.host->info;
      auto t0 = std::chrono::steady_clock::now();
      item.host->run(item.bufs);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      const CompiledKernel& c = compiled_for(item);
      info = &c.info;
      s = devs.empty() ? run_program(c, item, threads, 0, wait) : seconds[i];
    }
    runs.push_back({info, s});
    for (KernelLog* log : kernel_logs()) {
      log->runs.emplace_back(*info, s);
      log->items.push_back(item);
    }
    gc.kernel_count++;
    gc.time_sum_s += s;
    gc.global_ops += info->flops;
    gc.global_mem += info->bytes;
    if (settings().debug >= 2) print_run(item, *info, s, gc.kernel_count);
  }
  return runs;
}

} // namespace mg
