// Looking at kernels without running them: their IR stages, how another device would build
// them, and MG_CROSS_COMPILE's copies for a device that is not here.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/codegen/pipeline.h"

namespace mg {

// Each stage of kernel_stages() with its text, as DEBUG=4 and :ir print them.
std::vector<std::pair<std::string, std::string>> ir_stages(const CompiledKernel& c);

// One kernel as another device would build it, without running it (or needing that device's
// hardware): lowered for its target, rendered, and what its compiler makes of the source where
// that is text (SPIR-V disassembly, PTX; "" otherwise, or when `compiled` is false).
struct RenderedKernel {
  std::string name, src, compiled, launch;
};
RenderedKernel render_on(const ScheduleItem& item, const std::string& device, bool compiled);

// MG_CROSS_COMPILE=DEVICE:DIR builds every kernel this process compiles for DEVICE as well,
// without running it, and writes its source and compiled text (PTX, SPIR-V) to DIR, or the
// error to a .error file there: the CUDA test compiles the whole op suite this way.
void cross_compile(const ScheduleItem& item);

} // namespace mg
