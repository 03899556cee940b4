// Compiling one kernel, in the order the REPL shows it:
//   schedule item -> ast -> opts -> lowered -> simplified -> linear -> source -> program
// compile_kernel runs the steps; kernel_stages() is the one list of stage names and printers
// that DEBUG=4, :ir, the VIZ page and the docs read.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/codegen/lowerer.h"
#include "engine/device.h"
#include "engine/pattern.h"
#include "engine/schedule.h"

namespace mg {

// What the settings decide about compiling, passed down as a value (not read deep inside).
struct CompileOptions {
  bool noopt = false;      // NOOPT: no dim merging or opts, only value-preserving rewrites
  int beam = 0;            // BEAM: search width (0: the hand-coded opts)
  double beam_budget = 12; // BEAM_BUDGET: seconds one kernel's search may take
  int threads = 1;         // MG_THREADS: cores a kernel may be split across
  int debug = 0;           // DEBUG: 3 prints each kernel's source, 4 every stage
  static CompileOptions from_settings();
  // What makes the same AST compile differently: "", "noopt", "beam2".
  std::string variant() const;
};

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
  int shares = 0;                // the pieces it is split into (Launch::shares; 0: one per core)
  Shape global_size, local_size; // launch dims (a GPU's work-groups and their threads)
  std::vector<std::string> opts; // the opts it was lowered with, e.g. UPCAST(0, 16)
  bool host = false;             // host work between kernels (engine/realize.h: HostStep), no roofline
};

// Everything compiling one kernel produced, every stage kept for the printers.
struct CompiledKernel {
  UOpRef ast;                      // as scheduled (keeps the cache key alive)
  bool beam = false;               // its opts are BEAM's choice
  LoweredKernel k;                 // opts, lowered, simplified, linear, launch dims
  KernelInfo info;                 // name, device, source, estimate
  std::vector<std::string> passes; // the rewrite passes of the lowering, and the rules that fired
  std::vector<RewriteStep> steps;
  std::unique_ptr<Program> program;
  Device* device = nullptr; // what it was built for (devices live as long as the process)
};

// One stage of a kernel's compile: its name, what it is, and its text.
struct Stage {
  const char* name;
  const char* what;
  std::string (*text)(const CompiledKernel&);
};
// ast, opts, lowered, simplified, linear, source: in order. (The tensor graph before scheduling
// is stage "graph", printed per tensor, not per kernel.)
const std::vector<Stage>& kernel_stages();

// The steps. With `program` false the kernel is rendered but not compiled (for a device that
// cannot run here, or to show it). `opts`: lower with these instead of choosing (BEAM's, or a
// user's; an illegal one throws IllegalOpt).
std::unique_ptr<CompiledKernel> compile_kernel(const ScheduleItem& item, const CompileOptions& o,
                                               const std::optional<std::vector<Opt>>& opts = std::nullopt,
                                               bool program = true);
// The steps from the AST on, for `device`'s target and renderer (it need not run here when
// `program` is false); `bytes`: what the kernel's buffers hold, for the estimate.
std::unique_ptr<CompiledKernel> compile_for(const UOpRef& ast, Device& device, const CompileOptions& o,
                                            const std::optional<std::vector<Opt>>& opts, bool program,
                                            int64_t bytes = 0);

// Runs a compiled kernel once on the item's buffers; returns the seconds it took. `wait`: on an
// asynchronous device, until it has finished (else it is only queued, and 0 is returned).
double run_program(const CompiledKernel& c, const ScheduleItem& item, int threads, int lane = 0,
                   bool wait = true);

// The linear program as a listing, one line per UOp: its number, the op (indented two spaces per
// loop open, between RANGE and ENDRANGE), dtype, its sources by number, and its argument.
std::vector<std::string> linear_lines(const std::vector<UOpRef>& linear);

} // namespace mg
