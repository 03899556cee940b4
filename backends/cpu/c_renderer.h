// Linear UOps -> C source: one function `void NAME(void** bufs)` per kernel.
#pragma once
#include <string>
#include <vector>

#include "engine/uop.h"

namespace mg {
std::string render_c(const std::string& fn, const std::vector<UOpRef>& linear);
}
