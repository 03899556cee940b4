#include "engine/codegen/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "engine/codegen/beam.h"
#include "engine/codegen/linearize.h"
#include "engine/counters.h"
#include "engine/settings.h"

namespace mg {

CompileOptions CompileOptions::from_settings() {
  const Settings& s = settings();
  return {s.noopt, s.noopt ? 0 : s.beam, s.beam_budget, s.threads, s.debug};
}

std::string CompileOptions::variant() const {
  return noopt ? "noopt" : beam > 0 ? "beam" + std::to_string(beam) : "";
}

std::vector<std::string> linear_lines(const std::vector<UOpRef>& lin) {
  // a source is named by its line, also one that comes later (DEFINE_ACC's RANGE)
  std::unordered_map<const UOp*, size_t> pos;
  for (size_t i = 0; i < lin.size(); i++)
    pos.emplace(lin[i].get(), i);
  std::vector<std::string> lines;
  size_t depth = 0; // loops open: each indents what it runs by two spaces
  for (size_t i = 0; i < lin.size(); i++) {
    const UOp* u = lin[i].get();
    if (u->op == Ops::ENDRANGE && depth > 0) depth--;
    char head[64];
    std::snprintf(head, sizeof head, "%4zu %s%-12s %-8s [", i, std::string(2 * depth, ' ').c_str(),
                  name(u->op), name(u->dtype));
    std::ostringstream os;
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
    os << "] " << u->arg_string();
    lines.push_back(os.str());
    if (u->op == Ops::RANGE) depth++;
  }
  return lines;
}

namespace {

std::string linear_text(const std::vector<UOpRef>& lin) {
  std::string s;
  for (auto& l : linear_lines(lin))
    s += l + "\n";
  return s;
}

std::string opts_text(const CompiledKernel& c) {
  const LoweredKernel& k = c.k;
  std::string s = "dims merged to " + shape_str(k.full_shape) + (c.beam ? "; BEAM's opts:" : "; opts:");
  for (auto& o : k.opts)
    s += " " + o.to_string();
  if (k.opts.empty()) s += " none";
  return s + "; launch: global " + shape_str(k.global_size) + ", local " + shape_str(k.local_size) + "\n" +
         print_tree(k.ast);
}

// Worth splitting across cores only when big: waking other threads costs microseconds.
bool worth_splitting(const LoweredKernel& k, const KernelInfo& info, int threads) {
  return threads > 1 && parallel_loop(k.linear) != nullptr && info.flops + info.bytes / 4 > (1 << 18);
}

// The shares a parallel kernel's outermost loop is cut into: up to 8 per core, each core owning
// its part of them and taking another's last ones once its own are done (cpu_device.cpp's
// ThreadPool), so that a core slowed by another process (a shared machine) runs fewer. Split one
// share per core, every kernel waited for the slow one. Intel Xeon model 85, the GPT step
// (scripts/09_transformer.lua, 30 steps) beside a busy loop on one of the 2 cores, in turns:
// 2 threads 184-244 ms a step with one share per core, 115-151 with these (1 thread: 95-136).
// One per core where loops over cache blocks surround the loop: each share runs every block, and
// more shares would read each block's operand more times.
int shares_of(const LoweredKernel& k, int threads) {
  const UOp* loop = parallel_loop(k.linear);
  if (!loop) return 0;
  for (auto& u : k.linear)
    if (u->op == Ops::RANGE && u->varg()[1] == kBlock) return threads;
  int64_t per = 8;
  if (loop->src[0]->op == Ops::CONST)
    per = std::clamp<int64_t>(static_cast<int64_t>(loop->src[0]->const_value()) / threads, 1, 8);
  return static_cast<int>(per) * threads;
}

// A kernel's source as DEBUG=3 prints it: the device's preamble blocks (declarations, helper
// functions) with the first kernel that has each, and left out of the kernels after it, so the
// kernel's own code is what one reads.
std::string source_to_print(const Device& d, const std::string& src) {
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

// DEBUG=3 and 4: what this kernel's compile produced.
void print_stages(const CompiledKernel& c, const Device& d, int debug) {
  for (const Stage& s : kernel_stages()) {
    bool source = std::string(s.name) == "source";
    if (debug >= 4) std::printf("--- %s\n", s.name);
    if (debug >= 4 || (debug >= 3 && source))
      std::printf("%s", source ? source_to_print(d, c.info.src).c_str() : s.text(c).c_str());
  }
}

} // namespace

const std::vector<Stage>& kernel_stages() {
  static const std::vector<Stage> stages{
      {"ast", "the kernel as the scheduler made it",
       [](const CompiledKernel& c) { return print_tree(c.ast); }},
      {"opts", "dims merged and opts applied (UPCAST, UNROLL, LOCAL, ...), launch dims chosen", opts_text},
      {"lowered", "loops (RANGE) or launch ids (SPECIAL), views turned into index math",
       [](const CompiledKernel& c) { return print_tree(c.k.lowered); }},
      {"simplified",
       "after the symbolic rules (constants folded, index math simplified) and the semantics rules",
       [](const CompiledKernel& c) { return print_tree(c.k.simplified); }},
      {"linear", "the program in order, as the renderer reads it",
       [](const CompiledKernel& c) { return linear_text(c.k.linear); }},
      {"source", "what the device's renderer wrote", [](const CompiledKernel& c) { return c.info.src; }},
  };
  return stages;
}

namespace {

// FLOPs (ALU ops on values, not index math) times the trip count of their loops and, on a GPU,
// the threads that run them (every launch dim).
int64_t estimate_flops(const std::vector<UOpRef>& linear) {
  std::unordered_set<const UOp*> index_math;
  for (auto& u : linear)
    if (u->op == Ops::INDEX)
      for (size_t i = 1; i < u->src.size(); i++)
        for (const UOp* d : toposort(u->src[i].get()))
          index_math.insert(d);
  int64_t trips = 1, flops = 0;
  std::vector<int64_t> stack;
  for (auto& u : linear) {
    if (u->op == Ops::SPECIAL)
      trips *= static_cast<int64_t>(u->src[0]->vmax());
    else if (u->op == Ops::RANGE)
      stack.push_back(trips), trips *= static_cast<int64_t>(u->src[0]->vmax()); // at a Variable's largest
    else if (u->op == Ops::ENDRANGE)
      trips = stack.back(), stack.pop_back();
    else if (is_elementwise(u->op) && u->op != Ops::CAST && !index_math.count(u.get()))
      flops += trips;
  }
  return flops;
}

// opts, lowered, simplified, linear: the kernel's IR stages, with the rules that fired (VIZ).
void lower_stages(CompiledKernel& c, const std::optional<std::vector<Opt>>& opts, const Target& target,
                  bool noopt) {
  RewriteTrace trace;
  c.k = apply_opts(c.ast, opts ? &*opts : nullptr, target, noopt);
  lower(c.k, target);
  simplify(c.k);
  linearize(c.k, target);
  c.passes = std::move(trace.passes);
  c.steps = std::move(trace.steps);
}

// What DEBUG=2 and :kernels show: name, launch, opts, the work it does, whether cores share it.
KernelInfo describe(const LoweredKernel& k, const std::string& device, int64_t bytes, int threads) {
  KernelInfo info;
  info.name = k.name;
  info.device = device;
  info.full_shape = k.full_shape;
  info.out_shape = k.out_shape;
  info.global_size = k.global_size;
  info.local_size = k.local_size;
  for (auto& op : k.opts)
    info.opts.push_back(op.to_string());
  info.flops = estimate_flops(k.linear);
  info.bytes = bytes;
  info.parallel = worth_splitting(k, info, threads);
  if (info.parallel) info.shares = shares_of(k, threads);
  return info;
}

std::unique_ptr<Program> build_program(Device& device, const KernelInfo& info) {
  int before = device.compile_count();
  auto p = device.compile(info.name, info.src);
  global_counters().kernels_compiled += device.compile_count() - before;
  return p;
}

} // namespace

std::unique_ptr<CompiledKernel> compile_for(const UOpRef& ast, Device& device, const CompileOptions& o,
                                            const std::optional<std::vector<Opt>>& opts, bool program,
                                            int64_t bytes) {
  auto c = std::make_unique<CompiledKernel>();
  c->ast = ast;
  c->device = &device;
  lower_stages(*c, opts, device.target(), o.noopt);                         // opts .. linear
  c->info = describe(c->k, device.name(), bytes, o.threads);                // launch, estimate
  c->info.src = device.render(c->info.name, c->k.linear, c->info.parallel); // source
  print_stages(*c, device, o.debug);
  if (program) c->program = build_program(device, c->info); // program
  return c;
}

std::unique_ptr<CompiledKernel> compile_kernel(const ScheduleItem& item, const CompileOptions& o,
                                               const std::optional<std::vector<Opt>>& opts, bool program) {
  const std::string& dev = item.bufs.at(0)->device;
  std::optional<std::vector<Opt>> chosen = opts;
  if (!chosen && o.beam > 0) chosen = beam_opts(item, o);
  int64_t bytes = 0;
  for (auto& b : item.bufs)
    bytes += static_cast<int64_t>(b->nbytes());
  auto c = compile_for(item.ast, get_device(dev), o, chosen, program, bytes);
  c->info.device = dev;
  c->beam = !opts && chosen.has_value(); // chosen here by BEAM, not given
  return c;
}

double run_program(const CompiledKernel& c, const ScheduleItem& item, int threads, int lane, bool wait) {
  std::vector<void*> ptrs;
  for (auto& b : item.bufs)
    ptrs.push_back(b->ptr());
  std::unique_ptr<Buffer> vars; // the Variables' values, one int32 slot each (lowerer.cpp, bind_vars)
  if (!c.k.vars.empty()) {
    std::vector<int32_t> v;
    for (auto& var : c.k.vars) {
      auto it = std::find_if(item.var_vals.begin(), item.var_vals.end(),
                             [&](auto& p) { return p.first->var().name == var.name; });
      if (it == item.var_vals.end())
        throw std::invalid_argument("kernel " + c.info.name + " needs a value for Variable " + var.name);
      if (it->second < var.lo || it->second > var.hi)
        throw std::out_of_range("Variable " + var.name + " = " + std::to_string(it->second) +
                                " is outside its range [" + std::to_string(var.lo) + ", " +
                                std::to_string(var.hi) + "]");
      v.push_back(static_cast<int32_t>(it->second));
    }
    vars = std::make_unique<Buffer>(item.bufs[0]->device, DType::Int32, v.size());
    vars->copyin(v.data());
    ptrs.push_back(vars->ptr());
  }
  auto t0 = std::chrono::steady_clock::now();
  Launch launch{c.info.parallel ? threads : 1, c.info.global_size, c.info.local_size, lane, c.info.shares};
  if (item.bufs[0]->size > 0) c.program->run(ptrs.data(), ptrs.size(), launch);
  if (c.device->asynchronous() && !wait) return 0;
  c.device->synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace mg
