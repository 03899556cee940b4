// Packing a matmul's streamed operand into panels, before scheduling (a graph rewrite).
//
// On the CPU, the hand-coded opts tile a reduce of a product (a matmul, a batched one, x @ W.T)
// with a row of R outputs along the innermost dim where one operand is broadcast; each step of
// the reduce then reads R consecutive values of the other operand, B. Where B's own layout puts
// those R values apart (x @ W.T: a gather) or puts consecutive reduce steps a whole row apart
// (4 KiB in a 1024-wide matrix: every step lands in the same cache sets), the kernel waits on
// B's loads. The rule copies B once into panels of (reduce, R), GotoBLAS's packed B, in a kernel
// of its own (boundary::pack); the matmul then reads B as one stream. The other operand, where
// it is read across its rows (a weight gradient's dY^T), is copied once with the reduce innermost
// (boundary::rows), so each row of the tile streams too.
#pragma once
#include "engine/pattern.h"
#include "engine/uop.h"

namespace mg {

// Where a pack pays: a float32 reduce of a product on a device that is not a GPU, big enough
// (flops and reuse) to repay a copy of B, whose B is not already laid out in panels.
// The rule's table: REDUCE_AXIS(ADD, MUL(a, b)) -> the same reduce over b read from its panels.
const PatternMatcher& pack_operand_rules();

// Cheap test for "the rule may fire somewhere here": a float32 REDUCE_AXIS over a MUL.
bool may_pack(const UOp* u);

} // namespace mg
