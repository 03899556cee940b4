// Packs of a tile's scalar copies that a C-like renderer writes as one vector value each (an SLP
// vectorizer, after LLVM's: seeds are stores to consecutive addresses, grown through their
// operands). The lowerer leaves a tile of accumulators (UPCAST) as scalars, one per output; clang
// packed them into vectors itself, but summed an unrolled reduce's terms before adding them to
// the accumulator (a multiply, 3 multiply-adds and an add where 4 multiply-adds do) and spilled
// registers doing it. Written as vectors, each step is the multiply-adds the tile needs.
#pragma once
#include <unordered_map>
#include <vector>

#include "engine/uop.h"

namespace mg {

struct Pack {
  enum Kind { Acc, Load, Alu, Assign, Store } kind;
  std::vector<const UOp*> members; // lane i's scalar
  // per source: the pack it reads (an index into Packs::packs), or -1 where all lanes read one
  // scalar (it is used as it is: C widens a scalar operand to every lane)
  std::vector<int> src;
  size_t last = 0; // the position of its last member in the linear program: where it is written
};

struct Packs {
  int lanes = 0;
  std::vector<Pack> packs;
  std::unordered_map<const UOp*, int> of; // member -> its pack
};

// The packs of `linear` with `lanes` lanes each, or empty packs where some store, or some value a
// pack needs, does not fit one: then the kernel stays scalar. Only kernels with a tile of float32
// accumulators stored along rows of `lanes` consecutive elements.
Packs find_packs(const std::vector<UOpRef>& linear, int lanes);

} // namespace mg
