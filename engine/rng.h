// The state of Tensor.rand's generator (engine/tensor.cpp: splitmix64 of a seed and a counter),
// read and set as a whole, so a checkpoint can resume the same random draws.
#pragma once
#include <cstdint>

namespace mg {

struct RngState {
  uint64_t seed = 0, counter = 0;
};
RngState rng_state();
void set_rng_state(RngState s);

} // namespace mg
