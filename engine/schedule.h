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
struct HostStep;

// Why a node became a kernel of its own (a kernel boundary): the scheduler records one of these
// where it decides to realize a node, and :schedule prints it.
namespace boundary {
inline constexpr const char* output = "the graph's output";
inline constexpr const char* explicit_realize = "explicit realize";
inline constexpr const char* assign = "assign target";
inline constexpr const char* assign_in_place = "assign target, written in place (its kernel reads the old "
                                               "value only where it writes, and no later kernel reads it)";
inline constexpr const char* assign_copy = "assign target: copied in after every reader of the old value";
inline constexpr const char* contiguous = "contiguous";
inline constexpr const char* reduce_into_reduce = "a reduce feeds a reduce over other axes";
inline constexpr const char* broadcast_back = "a reduce's result is broadcast (expanded) before its use";
inline constexpr const char* reduce_view = "a reduce is read through a permute, pad, shrink or flip";
inline constexpr const char* other_reduce = "a second reduce of another shape in the consumer";
inline constexpr const char* two_consumers = "used by two consumers that cannot share a loop";
inline constexpr const char* pack =
    "a matmul's operand copied into panels, so the matmul's loop reads it in order (engine/pack.h)";
inline constexpr const char* rows = "a matmul's operand read across its rows, copied with the reduce "
                                    "innermost so each row streams (engine/pack.h)";
inline constexpr const char* operand =
    "a matmul's broadcast operand, computed once instead of once per tile (engine/pack.h)";
inline constexpr const char* copy = "a copy to another device (Tensor:to)";
inline constexpr const char* copy_source = "copied to another device: computed on its own first";
inline constexpr const char* host_step =
    "work on the host between kernels (an MPI collective, dist.all_reduce)";
inline constexpr const char* recompute =
    "costly elementwise math broadcast into its reader (computed once, not once per use)";
} // namespace boundary

struct ScheduleItem {
  UOpRef ast;                                // SINK(STORE(DEFINE_GLOBAL 0, VIEW, value))
  std::vector<std::shared_ptr<Buffer>> bufs; // bufs[i] is DEFINE_GLOBAL i; bufs[0] is the output
  const char* reason = boundary::output;     // one of boundary::*
  // The Variables the kernel takes (DEFINE_VARs, by name) and the values this run binds them to.
  std::vector<std::pair<UOpRef, int64_t>> var_vals;
  // Set on an item that is host work, not a kernel (engine/realize.h: run_host_step); its ast is
  // null.
  std::shared_ptr<const HostStep> host;
  std::string to_string() const;
};

// Schedules the graphs of `outs`; `views` (if given) receives the buffer view each out holds
// afterwards. Realized nodes are cached, so later graphs that share them read the buffer
// instead of recomputing (until the next in-place write). `why` is the outputs' reason.
std::vector<ScheduleItem> create_schedule(const std::vector<UOpRef>& outs,
                                          std::vector<UOpRef>* views = nullptr,
                                          const char* why = boundary::output);

// Same, but records nothing: for printing what a realize would do.
std::vector<ScheduleItem> preview_schedule(const std::vector<UOpRef>& outs);

// Rewrites a graph so realized nodes become their buffer views. Each node rebuilt over them (and
// not realized itself) goes into `rebuilt` as (node, rebuilt node), where given.
UOpRef resolve_realized(const UOpRef& u, std::vector<std::pair<UOpRef, UOpRef>>* rebuilt = nullptr);

} // namespace mg
