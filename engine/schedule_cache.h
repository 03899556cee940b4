// The schedule cache, tinygrad's schedule_cache: a loop that builds the same graph each time
// over new buffers (a training step without TinyJit, a model run on new inputs) gets the kernels
// of its first schedule again, without the scheduler's walks. The key is the graph's structure
// with its buffers numbered in order of first use; a hit replays the kernels over this graph's
// buffers and fresh intermediates, and caches the same nodes' values as the schedule did.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/schedule.h"

namespace mg {

// The graphs of one realize (resolved: realized nodes replaced by their buffer views), reduced to
// their structure.
struct GraphKey {
  bool cacheable = false;                    // false: copies or bound Variables (see graph_key)
  std::vector<UOpRef> roots;                 // keeps `nodes` alive
  std::vector<uint64_t> sig;                 // each node: op, dtype, arg (a buffer as its number), sources
  size_t hash = 0;                           // of sig
  std::vector<const UOp*> nodes;             // sources before users, the roots' graphs in turn
  std::vector<std::shared_ptr<Buffer>> bufs; // the graph's buffers, in order of first use
};

GraphKey graph_key(const std::vector<UOpRef>& resolved, const char* why);

// On a hit: the schedule of an equal graph over this one's buffers (fresh buffers for its
// intermediates), `views` as schedule() would set them, and the nodes that schedule cached
// cached again. Returns false on a miss. Each hit counts in GlobalCounters::schedules_cached.
bool replay_schedule(const GraphKey& key, const std::vector<UOpRef>& outs, std::vector<UOpRef>* views,
                     std::vector<ScheduleItem>& items);

// Records a schedule just made for key (after it ran its course: devices settled, nodes cached);
// new_epoch: it started a new epoch (an in-place write), which a replay does too.
void remember_schedule(const GraphKey& key, const std::vector<UOpRef>& outs, const std::vector<UOpRef>* views,
                       const std::vector<ScheduleItem>& items, bool new_epoch);

} // namespace mg
