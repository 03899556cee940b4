// Kernel optimizations as data, as tinygrad's Opt: an action, the axis it acts on and an amount.
// apply_opt changes a kernel's loop shape and its views, or throws an error that names the opt
// and the reason. The hand-coded heuristic (heuristic.h), a learner (show.opts) and a search
// all speak this one language.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/shapetracker.h"
#include "engine/uop.h"

namespace mg {

// UPCAST:   split a dim over outputs; the inner part becomes copies of the code (a tile of
//           outputs, each loaded value reused across it).
// UNROLL:   split a reduce dim; the inner part becomes copies of the reduced term.
// SWAP:     exchange two dims over outputs (axis and amount both count them): the loop order.
// LOCAL:    split a dim over outputs; the inner part becomes a local dim (a GPU's work-group,
//           SPECIAL lidx), placed after every global dim. A CPU runs it as a loop inside all
//           global loops: a block of outputs computed together, for the cache.
// NOLOCALS: no LOCAL may follow (no axis, no amount).
// PADTO:    round a dim over outputs up to a multiple of the amount; the extra iterations load
//           nothing (masked) and store nothing, so the dim splits evenly (26 -> 32, then UPCAST 16).
// GROUP:    split a reduce dim; the inner part becomes a group dim: that many partial results,
//           each over every amount-th element, combined after (a GPU's work-group sharing a
//           reduce). A CPU runs the group as a loop around the partial reduce.
// GROUPTOP: the same with the outer part as the group: each partial over a contiguous run.
// BLOCK:    cache blocking: split a reduce dim; the outer part becomes the outermost loop, so
//           each block of the reduce (amount long) runs over all the outputs before the next:
//           its slice of the inputs stays in the cache. The output holds the partial result
//           between blocks (a kernel that stores its reduce as is).
// VECTORIZE: the innermost loop (a dim over outputs with no loop inside it; amount 0) runs its
//           iterations as vector lanes: the CPU's C compiler is told to vectorize it whatever its
//           cost model says (clang's loop pragma; LLVM IR: the loop's metadata). For a loop too
//           short for that model whose loads are contiguous along it while its stores stride
//           (a Winograd output transform: 6 tiles a row, each storing 4 outputs apart). Not on a GPU.
// MERGE:    join a dim over outputs with the next one (adjacent loops; amount 0) into one loop. A
//           view that cannot follow as one view takes a second (its index divides the loop by the
//           inner size): a block of 4 x 4 Winograd tiles stored contiguously but read 2 floats
//           apart within rows 16 apart becomes one loop of 16, which VECTORIZE can then take.
// (opts.cpp names them in this order)
enum class OptOp { UPCAST, UNROLL, SWAP, LOCAL, NOLOCALS, PADTO, GROUP, GROUPTOP, BLOCK, VECTORIZE, MERGE };

struct Opt {
  OptOp op;
  int64_t
      axis; // UNROLL, GROUP, GROUPTOP, BLOCK: among the reduce dims; the others: among the dims over outputs
  int64_t amount;                // 0: the whole dim; for SWAP, the other axis
  std::string to_string() const; // UPCAST(1, 4)
  bool operator==(const Opt&) const = default;
};

const char* name(OptOp op);
OptOp opt_op(const std::string& name); // throws std::invalid_argument for an unknown name

// What a loop dim becomes: a loop over outputs, a reduce loop, a dim expanded into copies of
// the code (by UPCAST: several accumulators; by UNROLL: several terms), a local dim over
// outputs (by LOCAL), a group of partial reduces (by GROUP), the blocks of a reduce (by
// BLOCK), or a loop over outputs run as vector lanes (by VECTORIZE). A RANGE's arg carries its kind.
enum Kind {
  kGlobal = 0,
  kReduce = 1,
  kUpcast = 2,
  kUnroll = 3,
  kLocal = 4,
  kGroup = 5,
  kBlock = 6,
  kVector = 7
};

// A kernel's loops while opts are applied: the loop sizes (full), the output's view of them
// (reduced dims as 1) and each dim's kind.
struct KernelShape {
  Shape full, out;
  std::vector<int> kind;
  bool no_locals = false;     // set by NOLOCALS
  bool stores_reduce = false; // the kernel stores its one reduce as is (BLOCK needs that)
  bool reduces(size_t d) const {
    return kind[d] == kReduce || kind[d] == kUnroll || kind[d] == kGroup || kind[d] == kBlock;
  }
};

// An opt (or list of opts) this kernel cannot take, or a launch the target cannot run: BEAM skips
// such candidates; any other error while compiling one is a bug and is reported.
struct IllegalOpt : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A launch dim as its SPECIAL node carries it: a work-group id (gidx) or a thread id within the
// work-group (lidx), along axis 0..2. The arg is {local, axis}: data, not a name to parse.
struct LaunchDim {
  bool local;
  int axis;
  std::string name() const { return (local ? "lidx" : "gidx") + std::to_string(axis); }
};
std::vector<int64_t> launch_arg(LaunchDim d);
LaunchDim launch_dim(const UOp& special);

// What a kernel is lowered for. A CPU runs the launch dims as loops, one thread per core; a GPU
// keeps them as thread and work-group ids (SPECIAL gidx/lidx), runs GROUP dims as threads of one
// work-group that combine their partial results in shared memory, and limits the launch.
struct Target {
  bool gpu = false;
  int64_t max_local = 1024;        // threads per work-group
  // threads along lidx0, 1, 2 where fewer are allowed than max_local (CUDA: 64 along z); 0: none
  int64_t max_local_axis[3] = {0, 0, 0};
  int64_t max_groups = 2147483647; // work-groups along one launch dim (Vulkan: 65535)
  int64_t max_groups_x = 0;        // along gidx0 where it allows more (CUDA: 2^31-1); 0: max_groups
  int64_t max_shared = 16384;      // bytes of shared memory a GROUP's partials may take
  // Loop iterations one thread may run in all (0: no limit). lavapipe stops the loops of an
  // invocation after 65535 iterations in all, silently: a longer kernel would compute garbage.
  int64_t max_thread_iterations = 0;
  // whether the renderer writes a kernel's copies as vectors (the C renderer's packs, slp.h)
  bool vector_packs = false;
};

// Every VIEW of the kernel's AST with its ShapeTracker, reshaped along with the loops.
using ViewList = std::vector<std::pair<const UOp*, ShapeTracker>>;

// Merges dims i and i+1 where both are the same kind and every view stays one view.
bool try_merge(KernelShape& ks, ViewList& sts, size_t i);

// The loop dim (index into ks.full) that `o` acts on; throws if there is none.
size_t opt_dim(const KernelShape& ks, const Opt& o);
// The opt that acts on loop dim `d`.
Opt opt_at(const KernelShape& ks, OptOp op, size_t d, int64_t amount);

// Applies `o`, or throws std::invalid_argument naming the opt and why it is illegal here
// (leaving ks and sts unchanged).
void apply_opt(KernelShape& ks, ViewList& sts, const Opt& o);

// Part of every BEAM cache key: a change to what an opt means (its axis numbering, a new op) or
// to how its kernels compile (7: AVX-512 tiles at 512 bits; 9: a tile's reduce loop not unrolled
// again by clang; 10: MERGE) must not reuse choices made before.
constexpr const char* kOptsVersion =
    "opts 10 (UPCAST UNROLL SWAP LOCAL NOLOCALS PADTO GROUP GROUPTOP BLOCK VECTORIZE MERGE)";

// The most copies of the kernel body all UPCASTs and UNROLLs together may make.
constexpr int64_t kMaxExpansion = 1024;
// The distinct ranges the views are masked to along dim d (full ranges left out): the pieces of a
// stack (the rows of a Winograd transform, a concatenation), each load valid in its own piece
// only; and how many there are.
std::vector<std::pair<int64_t, int64_t>> stack_ranges(const KernelShape& ks, const ViewList& sts, size_t d);
int64_t stack_pieces(const KernelShape& ks, const ViewList& sts, size_t d);
// The most loads one body may hold across its copies once masks fold (opts.cpp, body_loads): a
// 1024-copy matmul tile holds 3072, a fused Winograd transform 500.
constexpr int64_t kMaxBodyLoads = 8192;
// The most partial results a kernel's groups may hold, times its output tile: a GPU keeps them
// in a work-group's shared memory (16 KiB of float32).
constexpr int64_t kMaxGroupPartials = 4096;

} // namespace mg
