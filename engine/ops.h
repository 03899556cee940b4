// The one list of operations, used at every level: tensor graph, kernel AST, linear program.
#pragma once
#include <cstdint>

namespace mg {

// Groups: Meta, Buffer, Unary, Binary, Ternary, Reduce, Movement, Kernel.
// X(name, group)
// clang-format off
#define MG_OPS(X)                                                                                            \
  /* graph structure */                                                                                      \
  X(SINK, Meta)                                                                                              \
  X(CONST, Meta)                                                                                             \
  X(BUFFER, Buffer)                                                                                          \
  X(CONTIGUOUS, Meta)                                                                                        \
  X(DETACH, Meta)                                                                                            \
  X(CUSTOM_GRAD, Meta) /* src[0]'s value; src[1..] get gradients from a registered function */           \
  /* elementwise: unary */                                                                                   \
  X(EXP2, Unary)                                                                                             \
  X(LOG2, Unary)                                                                                             \
  X(SIN, Unary)                                                                                              \
  X(SQRT, Unary)                                                                                             \
  X(RECIP, Unary)                                                                                            \
  X(NEG, Unary)                                                                                              \
  X(CAST, Unary)                                                                                             \
  X(BITCAST, Unary)                                                                                          \
  /* elementwise: binary */                                                                                  \
  X(ADD, Binary)                                                                                             \
  X(SUB, Binary)                                                                                             \
  X(MUL, Binary)                                                                                             \
  X(IDIV, Binary)                                                                                            \
  X(FDIV, Binary) /* true division: made late, from x*(1/y) */                                                \
  X(MOD, Binary)                                                                                             \
  X(MAX, Binary)                                                                                             \
  X(POW, Binary)                                                                                             \
  X(CMPLT, Binary)                                                                                           \
  X(CMPNE, Binary)                                                                                           \
  X(AND, Binary)                                                                                             \
  X(OR, Binary)                                                                                              \
  X(XOR, Binary)                                                                                             \
  X(SHL, Binary)                                                                                             \
  X(SHR, Binary)                                                                                             \
  /* elementwise: ternary */                                                                                 \
  X(WHERE, Ternary)                                                                                          \
  /* reduce: REDUCE_AXIS in graphs and ASTs, REDUCE after lowering (src: value, ranges) */                  \
  X(REDUCE_AXIS, Reduce)                                                                                     \
  X(REDUCE, Reduce)                                                                                          \
  /* movement: metadata only */                                                                              \
  X(RESHAPE, Movement)                                                                                       \
  X(PERMUTE, Movement)                                                                                       \
  X(EXPAND, Movement)                                                                                        \
  X(PAD, Movement)                                                                                           \
  X(SHRINK, Movement)                                                                                        \
  X(FLIP, Movement)                                                                                          \
  /* kernel AST and lowered program */                                                                       \
  X(VIEW, Kernel)                                                                                            \
  X(DEFINE_GLOBAL, Kernel)                                                                                   \
  X(LOAD, Kernel)                                                                                            \
  X(STORE, Kernel)                                                                                           \
  X(INDEX, Kernel)                                                                                           \
  X(RANGE, Kernel)                                                                                           \
  X(SPECIAL, Kernel) /* a launch dim: arg gidx0..2, src its size; the CPU runs it as a loop */        \
  X(ENDRANGE, Kernel)                                                                                        \
  X(DEFINE_ACC, Kernel)                                                                                      \
  X(ASSIGN, Kernel)                                                                                           \
  X(DEFINE_LOCAL, Kernel) /* a work-group's shared array: arg {id, size} (GPU GROUP partials) */            \
  X(BARRIER, Kernel)      /* every thread of the work-group waits here; src the stores before it */
// clang-format on

enum class Ops : uint8_t {
#define X(n, g) n,
  MG_OPS(X)
#undef X
};
enum class OpGroup : uint8_t { Meta, Buffer, Unary, Binary, Ternary, Reduce, Movement, Kernel };

const char* name(Ops op);
OpGroup group(Ops op);
inline bool is_elementwise(Ops op) {
  auto g = group(op);
  return g == OpGroup::Unary || g == OpGroup::Binary || g == OpGroup::Ternary;
}
inline bool is_movement(Ops op) { return group(op) == OpGroup::Movement; }
inline bool is_commutative(Ops op) {
  return op == Ops::ADD || op == Ops::MUL || op == Ops::MAX || op == Ops::CMPNE || op == Ops::AND ||
         op == Ops::OR || op == Ops::XOR;
}
inline constexpr int num_ops = 0
#define X(n, g) +1
    MG_OPS(X)
#undef X
    ;

} // namespace mg
