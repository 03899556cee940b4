// UOp: the one immutable, hash-consed IR node. Equal parts give the same object,
// so graph equality is pointer equality and caches key on pointers.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "engine/dtype.h"
#include "engine/ops.h"
#include "engine/sint.h"

namespace mg {

struct UOp;
struct ShapeTracker;
struct Buffer;
// UOps are made, shared and dropped on the main thread only (kernels run on raw pointers, and
// BEAM's threads compile source text), so their counts need no atomics. std::shared_ptr's
// counts turn into locked instructions once any thread exists, which made building a 100-op
// graph 10-20% slower on 2 threads than on 1; libstdc++'s single-threaded policy does not.

struct ReduceArg {
  Ops op; // ADD or MAX
  std::vector<int64_t> axes;
  bool operator==(const ReduceArg&) const = default;
};

// A Variable: a named int32 in [lo, hi] that a kernel takes as a parameter (DEFINE_VAR's arg).
struct VarArg {
  std::string name;
  int64_t lo, hi;
  bool operator==(const VarArg&) const = default;
};

// Movement ops (RESHAPE, EXPAND, PAD, SHRINK) carry a Shape: their sizes may be symbolic.
using Arg = std::variant<std::monostate, int64_t, double, std::vector<int64_t>, ReduceArg, std::string,
                         std::shared_ptr<const ShapeTracker>, std::shared_ptr<Buffer>, VarArg, Shape>;

struct UOp {
  Ops op;
  DType dtype;
  std::vector<UOpRef> src;
  Arg arg;
  // Derived from the parts above (not part of identity).
  size_t hash; // structural: op, dtype, arg and the sources' hashes (equal graphs, equal hash)
  bool has_shape = false;
  Shape shape; // tensor-level ops only

  // Cache filled by realize: the buffer view this graph node was computed into. It holds only
  // until a buffer is next written in place (Tensor::assign, a TinyJit replay): after that,
  // values computed earlier may be stale, so every such write starts a new epoch.
  mutable UOpRef realized;
  mutable uint64_t realized_epoch = 0; // 0: pinned (an assign, once done, is its buffer for good)
  // The buffer view holding this node's value, if it has one: a REALIZED node's src[0] (for good),
  // else the view a realize cached here (while its epoch lasts).
  UOpRef cached() const {
    if (op == Ops::REALIZED) return src[0];
    return realized && (realized_epoch == 0 || realized_epoch == mutation_epoch()) ? realized : nullptr;
  }
  void pin_cached(UOpRef v) const {
    realized = std::move(v);
    realized_epoch = 0;
  }
  void set_cached(UOpRef v) const {
    realized = std::move(v);
    realized_epoch = mutation_epoch();
  }
  static uint64_t& mutation_epoch();
  // A CONST never made before: as an extra source it keeps a node apart from equal-looking
  // ones (an assign is an action, not a value; a fresh copy must not be an old node).
  static UOpRef unique_tag();

  static UOpRef make(Ops op, DType dtype, std::vector<UOpRef> src = {}, Arg arg = {});
  static UOpRef cconst(DType dtype, double v);          // CONST, value stored as the dtype wants
  static UOpRef cconst_like(const UOpRef& x, double v); // CONST with x's dtype
  // An integer CONST from its exact bits (two's complement; a uint64 above 2^63 reads negative
  // here): a double cannot hold every 64-bit value.
  static UOpRef cconst_bits(DType dtype, int64_t bits);
  ~UOp();

  // Accessors for args.
  int64_t iarg() const { return std::get<int64_t>(arg); }
  const std::vector<int64_t>& varg() const { return std::get<std::vector<int64_t>>(arg); }
  const Shape& sarg() const { return std::get<Shape>(arg); }
  const VarArg& var() const { return std::get<VarArg>(arg); }
  const ReduceArg& rarg() const { return std::get<ReduceArg>(arg); }
  const ShapeTracker& st() const { return *std::get<std::shared_ptr<const ShapeTracker>>(arg); }
  const std::shared_ptr<Buffer>& buffer() const { return std::get<std::shared_ptr<Buffer>>(arg); }
  double const_value() const; // for CONST
  int64_t const_bits() const; // for an integer or bool CONST: its exact bits, sign-extended
  int64_t numel() const;      // throws when the shape is symbolic
  int64_t max_numel() const;  // at each dim's largest value (what a buffer for it holds)

  // Proven value range (integers and bools exact; floats unbounded unless constant).
  double vmin() const;
  double vmax() const;

  std::string arg_string() const;

  // Rebuild with other parts.
  UOpRef replace_src(std::vector<UOpRef> s) const;

  UOp(Ops op, DType dtype, std::vector<UOpRef> src, Arg arg, size_t hash);
  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

private:
  mutable std::optional<std::pair<double, double>> range_;
};

// One value folded into a hash (boost's hash_combine, 64-bit).
inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }
size_t hash_arg(const Arg& a);
bool arg_equal(const Arg& a, const Arg& b);
std::string shape_str(const Shape& s);
std::string shape_str(const std::vector<int64_t>& s);

// u with each source s replaced by done.at(s) (u itself when none changed): a bottom-up walk's
// step once the sources are done.
UOpRef with_sources(const UOpRef& u, const std::unordered_map<const UOp*, UOpRef>& done);

// Post-order (sources first) list of every node reachable from root.
std::vector<const UOp*> toposort(const UOp* root);

// Whether a source below root satisfies `hit`, walking down only through sources that satisfy
// `through` (each visited once; iterative: graphs can be 100k nodes deep).
template <class Hit, class Through> bool reaches(const UOp* root, Hit hit, Through through) {
  std::unordered_set<const UOp*> seen{root};
  std::vector<const UOp*> todo{root};
  while (!todo.empty()) {
    const UOp* u = todo.back();
    todo.pop_back();
    for (auto& s : u->src) {
      if (hit(s.get())) return true;
      if (through(s.get()) && seen.insert(s.get()).second) todo.push_back(s.get());
    }
  }
  return false;
}
// Indented tree; a node with several parents is printed once and named (%N) after.
std::string print_tree(const UOpRef& root);
// Number of UOps alive (hash-consing table size).
size_t live_uops();

// Alu on constants: the value `op` produces for these inputs in dtype `dt`.
double exec_alu(Ops op, DType dt, const std::vector<double>& v);
// The CONST c cast to `to`: integers wrap, floats saturate into an integer's range (NaN: 0).
UOpRef cast_const(const UOp& c, DType to);
// The bits of integer dtype `dt` holding the value v (wrapped; past 2^64, uint64's max).
int64_t int_bits(DType dt, double v);
// Wraps 64 bits into dtype `dt`'s width: sign-extended when signed, zero-extended when not.
int64_t wrap_bits(DType dt, int64_t x);
// Wraps/truncates a value into what dtype `dt` can hold.
double truncate_to(DType dt, double v);

} // namespace mg

namespace mg {
// Builders for ALU nodes (dtype from the first source; comparisons give bool).
UOpRef alu(Ops op, std::vector<UOpRef> src);
// What a reduce starts from: 0 for ADD, the dtype's lowest value for MAX.
double reduce_identity(Ops op, DType d);
inline UOpRef operator+(const UOpRef& a, const UOpRef& b) { return alu(Ops::ADD, {a, b}); }
inline UOpRef operator*(const UOpRef& a, const UOpRef& b) { return alu(Ops::MUL, {a, b}); }
inline UOpRef operator+(const UOpRef& a, double c) { return a + UOp::cconst_like(a, c); }
inline UOpRef operator*(const UOpRef& a, double c) { return a * UOp::cconst_like(a, c); }
inline UOpRef idiv(const UOpRef& a, double c) { return alu(Ops::IDIV, {a, UOp::cconst_like(a, c)}); }
inline UOpRef mod(const UOpRef& a, double c) { return alu(Ops::MOD, {a, UOp::cconst_like(a, c)}); }
inline UOpRef lt(const UOpRef& a, double c) { return alu(Ops::CMPLT, {a, UOp::cconst_like(a, c)}); }
UOpRef uand(const UOpRef& a, const UOpRef& b);
UOpRef cast(const UOpRef& a, DType d);
} // namespace mg
