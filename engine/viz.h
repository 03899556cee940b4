// VIZ: the UOp graph at every stage, in one self-contained HTML page (no network): the tensor
// graph, the schedule (each kernel boxed with the reason it is a kernel), then for each kernel
// its AST, the AST with opts applied, the lowered and the simplified IR, and the linear
// program (a listing: one line per UOp, loops indented, unrolled repetition folded). Each rewrite step that
// ran on the way is listed with the rule that fired. Layout comes from Graphviz (`dot -Tsvg`); the page steps
// through the stages with buttons or arrow keys, and checks itself on load (each graph's node count, script
// errors) into #selftest.
#pragma once
#include <string>
#include <vector>

#include "engine/realize.h"
#include "engine/schedule.h"
#include "engine/uop.h"

namespace mg {

// A graph larger than this is shown as text: Graphviz would take minutes to lay it out.
inline constexpr size_t kVizMaxNodes = 1500, kVizMaxEdges = 3000;
// Graphviz's dot runs at most this long for one graph (that graph is then shown as text), and the
// layouts of one page (of one realize, for VIZ=1) take at most kVizDotPageSeconds together.
inline constexpr double kVizDotSeconds = 10, kVizDotPageSeconds = 20;

// The page for graphs `outs` and the schedule that realizes them, titled `title`.
std::string viz_page(const std::vector<UOpRef>& outs, const std::vector<ScheduleItem>& items,
                     const std::string& title);

// Writes the page for `outs` (scheduled without realizing) to a new file; returns its path.
std::string viz_write(const std::vector<UOpRef>& outs, const std::string& title);

// VIZ=1: each realize is added to one page (the first kVizMaxRealizes of them), rewritten after
// each; its path is printed the first time. Errors (no Graphviz) are printed once, never thrown.
inline constexpr int kVizMaxRealizes = 20;
// `runs`: each kernel's time (run_schedule's answer), shown with its share of the machine's
// limit (engine/roofline.h); empty where the kernels did not run.
void viz_record(const std::vector<UOpRef>& outs, const std::vector<ScheduleItem>& items,
                const std::vector<KernelRun>& runs);

} // namespace mg
