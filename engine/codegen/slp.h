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
  // a Load's lanes: `stride` elements apart (1: one vector load; else each lane loaded apart, or
  // all lanes of a group of such packs at once: LoadGroup)
  int64_t stride = 1;
};

// Strided Load packs that read consecutive elements at each lane (a Winograd tile's row of 4
// floats in each of 16 images): each lane's run is one small vector load, and the runs are
// transposed into the packs by shuffles, where loading lane by lane took a gather per pack.
struct LoadGroup {
  const UOp* buffer = nullptr;
  const UOp* base = nullptr; // lane 0 of column 0 reads buffer[base + first]
  int64_t first = 0, stride = 0;
  std::vector<int> packs; // column c: lane l reads buffer[base + first + c + l * stride]
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
