// Linear UOps -> LLVM IR text: one function `void NAME(ptr bufs, i32 core, i32 ncores)` per kernel,
// the same contract as the C renderer's, for the LLVM device (backends/cpu/cpu_device.cpp).
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {
std::string render_llvm(const std::string& fn, const std::vector<UOpRef>& linear, bool parallel);
} // namespace mg
