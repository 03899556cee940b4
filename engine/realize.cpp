#include "engine/realize.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "engine/codegen/linearize.h"
#include "engine/codegen/lowerer.h"
#include "engine/codegen/search.h"
#include "engine/device.h"
#include "engine/digest.h"
#include "engine/settings.h"
#include "engine/tensor.h"

namespace mg {

namespace {

struct Compiled {
  UOpRef ast; // keeps the key alive: ASTs are hash-consed, so equal ASTs share a kernel
  KernelInfo info;
  std::unique_ptr<Program> program;
};

std::unordered_map<std::string, std::unordered_map<const UOp*, std::unique_ptr<Compiled>>>& cache() {
  static auto* c =
      new std::unordered_map<std::string, std::unordered_map<const UOp*, std::unique_ptr<Compiled>>>();
  return *c;
}

std::string linear_string(const std::vector<UOpRef>& lin) {
  std::unordered_map<const UOp*, size_t> pos;
  std::ostringstream os;
  for (size_t i = 0; i < lin.size(); i++) {
    const UOp* u = lin[i].get();
    pos[u] = i;
    char head[64];
    std::snprintf(head, sizeof head, "%4zu %-12s %-8s [", i, name(u->op), name(u->dtype));
    os << head;
    bool first = true;
    for (auto& s : u->src) {
      os << (first ? "" : ", ");
      first = false;
      if (auto it = pos.find(s.get()); it != pos.end())
        os << it->second;
      else if (s->op == Ops::CONST)
        os << s->const_value();
      else
        os << "?";
    }
    os << "] " << u->arg_string() << "\n";
  }
  return os.str();
}

// FLOPs (ALU ops on values, not index math) times the trip count of their loops; bytes moved.
void estimate(const LoweredKernel& k, KernelInfo& info, const ScheduleItem& item) {
  std::unordered_set<const UOp*> index_math;
  for (auto& u : k.linear)
    if (u->op == Ops::INDEX)
      for (size_t i = 1; i < u->src.size(); i++)
        for (const UOp* d : toposort(u->src[i].get()))
          index_math.insert(d);
  int64_t trips = 1, flops = 0;
  std::vector<int64_t> stack;
  for (auto& u : k.linear) {
    if (u->op == Ops::RANGE)
      stack.push_back(trips), trips *= static_cast<int64_t>(u->src[0]->const_value());
    else if (u->op == Ops::ENDRANGE)
      trips = stack.back(), stack.pop_back();
    else if (is_elementwise(u->op) && u->op != Ops::CAST && !index_math.count(u.get()))
      flops += trips;
  }
  info.flops = flops;
  info.bytes = 0;
  for (auto& b : item.bufs)
    info.bytes += static_cast<int64_t>(b->nbytes());
}

std::vector<std::pair<std::string, std::string>> stages_of(const UOpRef& ast, const LoweredKernel& k) {
  std::string opts = "dims merged to " + shape_str(k.full_shape) + (k.opts.empty() ? "" : ", opts:");
  for (auto& o : k.opts)
    opts += " " + o.to_string();
  opts += "; launch: global " + shape_str(k.global_size) + ", local " + shape_str(k.local_size);
  return {{"ast", print_tree(ast)},
          {"opts", opts + "\n" + print_tree(k.ast)},
          {"lowered", print_tree(k.lowered)},
          {"simplified", print_tree(k.simplified)},
          {"linear", linear_string(k.linear)}};
}

} // namespace

std::vector<std::pair<std::string, std::string>> ir_stages(const UOpRef& ast) {
  return stages_of(ast, lower_kernel(ast));
}

RenderedKernel render_on(const ScheduleItem& item, const std::string& device, bool compiled) {
  Device& d = get_device(device);
  Target target = d.target();
  LoweredKernel k = lower_kernel(item.ast, nullptr, target);
  RenderedKernel r{k.name, d.render(k.name, k.linear, false), "", ""};
  if (compiled) r.compiled = d.compiled_text(k.name, r.src);
  r.launch = target.gpu ? "global " + shape_str(k.global_size) + ", local " + shape_str(k.local_size)
                        : "loops on the CPU";
  return r;
}

static Target target_of(const ScheduleItem& item) { return get_device(item.bufs.at(0)->device).target(); }

// Worth splitting across cores only when big: waking other threads costs microseconds.
static bool worth_splitting(const LoweredKernel& k, const KernelInfo& info) {
  return settings().threads > 1 && parallel_loop(k.linear) != nullptr &&
         info.flops + info.bytes / 4 > (1 << 18);
}

// MG_CROSS_COMPILE=DEVICE:DIR builds every kernel this process compiles for DEVICE as well,
// without running it, and writes its source and compiled text (PTX, SPIR-V) to DIR, or the
// error to a .error file there: the CUDA test compiles the whole op suite this way.
static void cross_compile(const ScheduleItem& item) {
  static const char* spec = std::getenv("MG_CROSS_COMPILE");
  if (!spec) return;
  std::string s = spec;
  size_t colon = s.find(':');
  std::string dev = s.substr(0, colon), dir = colon == std::string::npos ? "." : s.substr(colon + 1);
  make_dirs(dir);
  std::string base = dir + "/" + digest(print_tree(item.ast));
  try {
    RenderedKernel k = render_on(item, dev, true);
    std::ofstream(base + ".src") << k.src;
    std::ofstream(base + ".out") << k.compiled;
  } catch (const std::exception& e) {
    std::ofstream(base + ".error") << e.what();
  }
}

// A kernel's source as DEBUG=3 prints it: the device's preamble blocks (declarations, helper
// functions) with the first kernel that has each, and left out of the kernels after it, so the
// kernel's own code is what one reads.
static std::string source_to_print(const Device& d, const std::string& src) {
  static std::set<std::string> shown; // once per process, across devices
  std::string out = src;
  bool left_out = false;
  for (const std::string& block : d.preamble()) {
    size_t at = block.empty() ? std::string::npos : out.find(block);
    if (at == std::string::npos || shown.insert(block).second) continue;
    out.erase(at, block.size());
    left_out = true;
  }
  if (!left_out) return out;
  // after any compiler-flag lines, which come first
  size_t at = 0;
  while (out.compare(at, 2, "//") == 0 && out.find('\n', at) != std::string::npos)
    at = out.find('\n', at) + 1;
  return out.insert(at, "// (the preamble printed with an earlier kernel goes here)\n");
}

// Renders and compiles a lowered kernel for the item's device.
static std::unique_ptr<Compiled> compile_lowered(const ScheduleItem& item, const LoweredKernel& k) {
  cross_compile(item);
  const std::string& dev = item.bufs.at(0)->device;
  Device& d = get_device(dev);
  int dbg = settings().debug;
  if (dbg >= 4) {
    for (auto& [stage, text] : stages_of(item.ast, k))
      std::printf("--- %s\n%s", stage.c_str(), text.c_str());
  }
  auto c = std::make_unique<Compiled>();
  c->ast = item.ast;
  c->info.name = k.name;
  c->info.device = dev;
  c->info.full_shape = k.full_shape;
  c->info.out_shape = k.out_shape;
  c->info.global_size = k.global_size;
  c->info.local_size = k.local_size;
  for (auto& o : k.opts)
    c->info.opts.push_back(o.to_string());
  estimate(k, c->info, item);
  c->info.parallel = worth_splitting(k, c->info);
  c->info.src = d.render(k.name, k.linear, c->info.parallel);
  if (dbg >= 3) std::printf("%s", source_to_print(d, c->info.src).c_str());
  int before = d.compile_count();
  c->program = d.compile(k.name, c->info.src);
  global_counters().kernels_compiled += d.compile_count() - before;
  return c;
}

static double run_compiled(const Compiled& c, const ScheduleItem& item) {
  std::vector<void*> ptrs;
  for (auto& b : item.bufs)
    ptrs.push_back(b->ptr());
  auto t0 = std::chrono::steady_clock::now();
  Launch launch{c.info.parallel ? settings().threads : 1, c.info.global_size, c.info.local_size};
  if (item.bufs[0]->size > 0) c.program->run(ptrs.data(), ptrs.size(), launch);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// BEAM's choice of opts for the item's kernel. Candidates run on zeroed scratch buffers of the
// same sizes, never on the user's data; each is timed as the best of 3 runs.
static std::vector<Opt> beam_opts(const ScheduleItem& item, int width) {
  const std::string& dev = item.bufs.at(0)->device;
  Target target = target_of(item);
  LoweredKernel hand = lower_kernel(item.ast, nullptr, target);
  std::string key =
      digest(print_tree(item.ast) + "\n" + kOptsVersion + "\ndevice " + get_device(dev).fingerprint() +
             "\nthreads " + std::to_string(settings().threads) + "\nbeam " + std::to_string(width));
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
  auto legal = [&](const std::vector<Opt>& opts) {
    try {
      lower_kernel(item.ast, &opts, target);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  Device& d = get_device(dev);
  auto prepare = [&](const std::vector<Opt>& opts) {
    make_scratch();
    LoweredKernel k = lower_kernel(item.ast, &opts, target);
    auto c = std::make_shared<Compiled>();
    c->info.name = k.name;
    c->info.global_size = k.global_size;
    c->info.local_size = k.local_size;
    estimate(k, c->info, scratch);
    c->info.parallel = worth_splitting(k, c->info);
    c->info.src = d.render(k.name, k.linear, c->info.parallel);
    return Trial{[c, &d] { c->program = d.compile_trial(c->info.name, c->info.src); },
                 [c, &scratch] { return run_compiled(*c, scratch); }};
  };
  int before = d.compile_count();
  auto r = beam_search(key, hand.name, width, settings().beam_budget, settings().threads, target.gpu,
                       hand.opts, legal, prepare);
  global_counters().kernels_compiled += d.compile_count() - before;
  return r.opts;
}

std::optional<std::vector<Opt>> run_opts(const ScheduleItem& item) {
  int beam = settings().noopt ? 0 : settings().beam;
  if (beam > 0) return beam_opts(item, beam);
  return std::nullopt;
}

void drop_compiled(const std::string& device) {
  std::erase_if(cache(),
                [&](const auto& kv) { return kv.first == device || kv.first.rfind(device + "/", 0) == 0; });
}

static Compiled& compiled_for(const ScheduleItem& item) {
  const std::string& dev = item.bufs.at(0)->device;
  int beam = settings().noopt ? 0 : settings().beam;
  // NOOPT and BEAM lower the same AST differently
  auto& per_dev =
      cache()[dev + (settings().noopt ? "/noopt" : "") + (beam > 0 ? "/beam" + std::to_string(beam) : "")];
  if (auto it = per_dev.find(item.ast.get()); it != per_dev.end()) return *it->second;
  if (beam > 0) {
    std::vector<Opt> opts = beam_opts(item, beam);
    return *(per_dev[item.ast.get()] = compile_lowered(item, lower_kernel(item.ast, &opts, target_of(item))));
  }
  return *(per_dev[item.ast.get()] = compile_lowered(item, lower_kernel(item.ast, nullptr, target_of(item))));
}

KernelRun try_opts(const ScheduleItem& item, const std::vector<Opt>& opts, int repeats, KernelInfo& info) {
  auto c = compile_lowered(item, lower_kernel(item.ast, &opts, target_of(item)));
  double best = 0;
  for (int i = 0; i < std::max(1, repeats); i++) {
    double s = run_compiled(*c, item);
    best = i == 0 ? s : std::min(best, s);
  }
  info = c->info;
  return {&info, best};
}

const KernelInfo& kernel_for(const ScheduleItem& item) { return compiled_for(item).info; }

static std::vector<KernelLog*>& kernel_logs() {
  static std::vector<KernelLog*> logs;
  return logs;
}
KernelLog::KernelLog() { kernel_logs().push_back(this); }
KernelLog::~KernelLog() { std::erase(kernel_logs(), this); }

void replay(const std::vector<ScheduleItem>& items,
            const std::vector<std::pair<const Buffer*, std::shared_ptr<Buffer>>>& swap) {
  std::vector<ScheduleItem> run = items;
  for (auto& it : run)
    for (auto& b : it.bufs)
      for (auto& [from, to] : swap)
        if (b.get() == from) {
          b = to;
          break; // one swap per buffer: f(B, A) after f(A, B) must not swap back
        }
  run_schedule(run);
  UOp::mutation_epoch()++;
}

std::vector<KernelRun> run_schedule(const std::vector<ScheduleItem>& items) {
  std::vector<KernelRun> runs;
  auto& gc = global_counters();
  for (auto& item : items) {
    Compiled& c = compiled_for(item);
    double s = run_compiled(c, item);
    runs.push_back({&c.info, s});
    for (KernelLog* log : kernel_logs()) {
      log->runs.emplace_back(c.info, s);
      log->items.push_back(item);
    }
    gc.kernel_count++;
    gc.time_sum_s += s;
    gc.global_ops += c.info.flops;
    gc.global_mem += c.info.bytes;
    if (settings().debug >= 2) {
      std::string opts;
      for (auto& o : c.info.opts)
        opts += " " + o;
      std::printf("*** %-4s %4lld %-24s out %-16s %9.3f ms %8.2f GFLOPS %8.2f GB/s %s\n",
                  c.info.device.c_str(), static_cast<long long>(gc.kernel_count), c.info.name.c_str(),
                  shape_str(c.info.out_shape).c_str(), s * 1e3, s > 0 ? c.info.flops / s * 1e-9 : 0.0,
                  s > 0 ? c.info.bytes / s * 1e-9 : 0.0, opts.empty() ? " (no opts)" : opts.c_str());
    }
  }
  return runs;
}

} // namespace mg
