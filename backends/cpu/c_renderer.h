// Linear UOps -> C source: one function `void NAME(void** bufs, int core, int ncores)` per kernel;
// core/ncores pick this call's share of the outermost loop when it can run in parallel.
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {
// A source line starting with this passes the rest of the line to the compiler as one flag.
inline constexpr const char* kCompileFlagTag = "//!flag ";

std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel);
// The blocks render_c puts before a kernel's function, each as it appears in the source.
std::vector<std::string> c_preamble();
} // namespace mg
