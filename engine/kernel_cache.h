// The kernels compiled in this process, per device and compile variant (NOOPT, BEAM width),
// keyed on the AST's structural hash: equal ASTs share one kernel. (Compiled programs are also
// cached on disk by each device, keyed on their source.)
#pragma once
#include <string>

#include "engine/codegen/pipeline.h"

namespace mg {

// The item's kernel, compiled with the current settings on a miss.
const CompiledKernel& compiled_for(const ScheduleItem& item);
inline const KernelInfo& kernel_for(const ScheduleItem& item) { return compiled_for(item).info; }

// Forgets the kernels compiled for `device` (a Lua device whose functions were replaced).
void drop_compiled(const std::string& device);

} // namespace mg
