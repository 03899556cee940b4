// The one list of operations, used at every level: tensor graph, kernel AST, linear program.
// Each row holds the facts about an op that the whole engine shares. What an op means elsewhere
// lives in one table per concern, each keyed by op: how the host evaluates it (exec_alu in
// uop.cpp), how each dialect writes it (engine/codegen/cstyle.cpp, backends/cpu/llvm_renderer.cpp),
// its gradient (engine/gradient.cpp), and the rewrites that fix what it means on every backend
// (engine/codegen/semantics.cpp).
#pragma once
#include <cstdint>

namespace mg {

// X(name, group, arity, commutative, result dtype, reduce identity)
//   arity:    the number of sources; kAny where it varies (a SINK, a REDUCE's loops)
//   result:   Src0 (the first source's dtype), Src1 (the second's: WHERE), Bool (comparisons),
//             Given (the maker names it: CAST, LOAD, CONST, ...)
//   identity: what a reduction with this op starts from (None: not a reduction op)
// clang-format off
#define MG_OPS(X)                                                                                            \
  /* graph structure */                                                                                      \
  X(SINK,          Meta,     kAny, false, Given, None)                                                       \
  X(CONST,         Meta,     kAny, false, Given, None) /* src: none, or a VIEW in a kernel AST */            \
  X(BUFFER,        Buffer,   0,    false, Given, None)                                                       \
  X(CONTIGUOUS,    Meta,     kAny, false, Src0,  None) /* an assign carries a unique tag as src[1] */         \
  X(DETACH,        Meta,     1,    false, Src0,  None)                                                       \
  X(COPY,          Meta,     1,    false, Src0,  None) /* src[0]'s value on the device the arg names (a transfer) */ \
  X(CUSTOM_GRAD,   Meta,     kAny, false, Src0,  None) /* src[0]'s value; src[1..] get gradients from a registered function */ \
  X(BIND,          Meta,     2,    false, Src0,  None) /* a Variable (src[0], a DEFINE_VAR) given a value (src[1], a CONST) */ \
  X(REALIZED,      Meta,     2,    false, Src0,  None) /* src[0]: the buffer view holding the value; src[1]: the graph it came from (gradients flow there) */ \
  /* elementwise: unary */                                                                                   \
  X(EXP2,          Unary,    1,    false, Src0,  None)                                                       \
  X(LOG2,          Unary,    1,    false, Src0,  None)                                                       \
  X(SIN,           Unary,    1,    false, Src0,  None)                                                       \
  X(SQRT,          Unary,    1,    false, Src0,  None)                                                       \
  X(RECIP,         Unary,    1,    false, Src0,  None)                                                       \
  X(NEG,           Unary,    1,    false, Src0,  None)                                                       \
  X(TRUNC,         Unary,    1,    false, Src0,  None) /* round toward zero */                               \
  X(CAST,          Unary,    1,    false, Given, None)                                                       \
  X(BITCAST,       Unary,    1,    false, Given, None)                                                       \
  /* elementwise: binary */                                                                                  \
  X(ADD,           Binary,   2,    true,  Src0,  Zero)                                                       \
  X(SUB,           Binary,   2,    false, Src0,  None)                                                       \
  X(MUL,           Binary,   2,    true,  Src0,  One)                                                        \
  X(IDIV,          Binary,   2,    false, Src0,  None) /* truncating, as C's */                              \
  X(FDIV,          Binary,   2,    false, Src0,  None) /* true division: made late, from x*(1/y) */          \
  X(MOD,           Binary,   2,    false, Src0,  None) /* the remainder of IDIV */                           \
  X(MAX,           Binary,   2,    true,  Src0,  Lowest)                                                     \
  X(POW,           Binary,   2,    false, Src0,  None)                                                       \
  X(CMPLT,         Binary,   2,    false, Bool,  None)                                                       \
  X(CMPNE,         Binary,   2,    true,  Bool,  None)                                                       \
  X(AND,           Binary,   2,    true,  Src0,  None)                                                       \
  X(OR,            Binary,   2,    true,  Src0,  None)                                                       \
  X(XOR,           Binary,   2,    true,  Src0,  None)                                                       \
  X(SHL,           Binary,   2,    false, Src0,  None)                                                       \
  X(SHR,           Binary,   2,    false, Src0,  None) /* arithmetic on signed ints */                       \
  /* elementwise: ternary */                                                                                 \
  X(WHERE,         Ternary,  3,    false, Src1,  None)                                                       \
  /* reduce: REDUCE_AXIS in graphs and ASTs, REDUCE after lowering (src: value, ranges) */                  \
  X(REDUCE_AXIS,   Reduce,   1,    false, Src0,  None)                                                       \
  X(REDUCE,        Reduce,   kAny, false, Src0,  None)                                                       \
  /* movement: metadata only */                                                                              \
  X(RESHAPE,       Movement, 1,    false, Src0,  None)                                                       \
  X(PERMUTE,       Movement, 1,    false, Src0,  None)                                                       \
  X(EXPAND,        Movement, 1,    false, Src0,  None)                                                       \
  X(PAD,           Movement, 1,    false, Src0,  None)                                                       \
  X(SHRINK,        Movement, 1,    false, Src0,  None)                                                       \
  X(FLIP,          Movement, 1,    false, Src0,  None)                                                       \
  /* kernel AST and lowered program */                                                                       \
  X(VIEW,          Kernel,   0,    false, Given, None)                                                       \
  X(DEFINE_GLOBAL, Kernel,   0,    false, Given, None)                                                       \
  X(DEFINE_VAR,    Kernel,   kAny, false, Given, None) /* a Variable, arg VarArg; lowered: src[0] loads its value */ \
  X(LOAD,          Kernel,   kAny, false, Given, None) /* src: the buffer and its view, or an INDEX (and a barrier) */ \
  X(STORE,         Kernel,   kAny, false, Given, None)                                                       \
  X(INDEX,         Kernel,   kAny, false, Given, None) /* buffer, index (, gate) */                           \
  X(RANGE,         Kernel,   1,    false, Given, None) /* src: its size; arg {axis, kind} */                 \
  X(SPECIAL,       Kernel,   1,    false, Given, None) /* a launch dim: arg {kind, dim} (LaunchDim), src its size */ \
  X(ENDRANGE,      Kernel,   1,    false, Given, None)                                                       \
  X(DEFINE_ACC,    Kernel,   kAny, false, Given, None) /* src: the identity, then the loops it sums over */  \
  X(ASSIGN,        Kernel,   2,    false, Src0,  None)                                                       \
  X(DEFINE_LOCAL,  Kernel,   0,    false, Given, None) /* a work-group's shared array: arg {id, size} (GPU GROUP partials) */ \
  X(BARRIER,       Kernel,   kAny, false, Given, None) /* every thread of the work-group waits here; src the stores before it */
// clang-format on

inline constexpr int8_t kAny = -1;

enum class Ops : uint8_t {
#define X(n, ...) n,
  MG_OPS(X)
#undef X
};
enum class OpGroup : uint8_t { Meta, Buffer, Unary, Binary, Ternary, Reduce, Movement, Kernel };
enum class ResultDType : uint8_t { Src0, Src1, Bool, Given };
enum class Identity : uint8_t { None, Zero, One, Lowest };

struct OpInfo {
  const char* name;
  OpGroup group;
  int8_t arity;
  bool commutative;
  ResultDType result;
  Identity identity;
};

inline constexpr OpInfo kOpInfo[] = {
#define X(n, g, a, c, r, i) {#n, OpGroup::g, a, c, ResultDType::r, Identity::i},
    MG_OPS(X)
#undef X
};
inline constexpr int num_ops = sizeof kOpInfo / sizeof kOpInfo[0];

inline constexpr const OpInfo& info(Ops op) { return kOpInfo[static_cast<int>(op)]; }
inline constexpr const char* name(Ops op) { return info(op).name; }
inline constexpr OpGroup group(Ops op) { return info(op).group; }
inline constexpr bool is_elementwise(Ops op) {
  auto g = group(op);
  return g == OpGroup::Unary || g == OpGroup::Binary || g == OpGroup::Ternary;
}
inline constexpr bool is_movement(Ops op) { return group(op) == OpGroup::Movement; }
inline constexpr bool is_commutative(Ops op) { return info(op).commutative; }

} // namespace mg
