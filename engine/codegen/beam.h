// BEAM driving: the search (engine/codegen/search.h) run on one kernel, each candidate compiled
// by the pipeline and timed on scratch buffers.
#pragma once
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/schedule.h"

namespace mg {
struct CompileOptions;
// BEAM's choice of opts for the item's kernel (from the cache, or searched now). Candidates run on
// zeroed scratch buffers of the same sizes, never on the user's data. An illegal candidate is
// skipped; any other failure to compile one is a bug and throws, naming the kernel and its opts.
std::vector<Opt> beam_opts(const ScheduleItem& item, const CompileOptions& o);
} // namespace mg
