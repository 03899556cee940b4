// The scheduler: decides which graph nodes become buffers and groups the rest into kernels.
// Elementwise chains fuse, elementwise work fuses into the reduce that consumes it, movement
// ops become ShapeTracker views on loads, and a reduce seen through a non-trivial view
// (broadcast back, as in softmax) is realized first.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {

struct Buffer;

struct ScheduleItem {
  UOpRef ast;                                // SINK(STORE(DEFINE_GLOBAL 0, VIEW, value))
  std::vector<std::shared_ptr<Buffer>> bufs; // bufs[i] is DEFINE_GLOBAL i; bufs[0] is the output
  std::string to_string() const;
};

// Schedules the graphs of `outs`; `views` (if given) receives the buffer view each out holds
// afterwards. Realized nodes are cached, so later graphs that share them read the buffer
// instead of recomputing (until the next in-place write).
std::vector<ScheduleItem> create_schedule(const std::vector<UOpRef>& outs,
                                          std::vector<UOpRef>* views = nullptr);

// Same, but records nothing: for printing what a realize would do.
std::vector<ScheduleItem> preview_schedule(const std::vector<UOpRef>& outs);

// Rewrites a graph so realized nodes become their buffer views.
UOpRef resolve_realized(const UOpRef& u);

} // namespace mg
