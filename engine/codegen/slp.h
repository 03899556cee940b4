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
  // a Load's lanes: `stride` elements apart (1: one vector load; 0: no one stride), each at its
  // base + offsets[l] (a strided Load's): read lane by lane, or with others as a LoadGroup
  int64_t stride = 1;
  std::vector<int64_t> offsets;
};

// Strided Load packs read together: a few vector loads of `width` elements (at base + loads[i])
// joined into one long vector, each pack's lanes picked out of it by a shuffle, where lane by lane
// each pack took a gather. Two kinds: lanes that each read a run of consecutive elements a stride
// apart (a Winograd tile's row of 4 floats in each of 16 images: a short load a lane, transposed),
// and packs whose lanes together read a few whole vectors (a block of 4 x 4 Winograd tiles, each
// tile's 2 x 2 in rows of 16: 4 vector loads for all 4 packs).
struct LoadGroup {
  const UOp* buffer = nullptr;
  const UOp* base = nullptr;
  int width = 0;
  std::vector<int64_t> loads;
  std::vector<int> packs;
  std::vector<std::vector<int64_t>> picks; // per pack, each lane's element of the joined loads
};

struct Packs {
  int lanes = 0;
  std::vector<Pack> packs;
  std::unordered_map<const UOp*, int> of; // member -> its pack
  std::vector<LoadGroup> groups;
  std::unordered_map<int, int> group_of; // strided Load pack -> its group
};

// The packs of `linear` with `lanes` lanes each, or empty packs where some store, or some value a
// pack needs, does not fit one: then the kernel stays scalar. Kernels with a tile of float32
// accumulators stored along rows of `lanes` consecutive elements, and elementwise kernels whose
// copies store such rows while loading strided lanes (which clang's vectorizer takes as gathers).
Packs find_packs(const std::vector<UOpRef>& linear, int lanes);

} // namespace mg
