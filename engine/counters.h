// Process-wide counters, like tinygrad's GlobalCounters: what has run and what it cost.
#pragma once
#include <cstdint>

namespace mg {
struct GlobalCounters {
  int64_t kernel_count = 0;
  int64_t mem_used = 0; // bytes held by device memory (buffers and the free list for reuse)
  double time_sum_s = 0;
  int64_t global_ops = 0;
  int64_t global_mem = 0;
  int64_t kernels_compiled = 0; // compiler runs (a kernel found in the on-disk cache is not one)
  int64_t schedules_cached = 0; // realizes replayed by the schedule cache (engine/schedule_cache.h)
};
GlobalCounters& global_counters();
} // namespace mg
