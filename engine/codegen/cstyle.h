// The renderer shared by the C-like languages (C, OpenCL C, CUDA C, GLSL), after tinygrad's
// CStyleLanguage: one walk over the linear program, and a dialect that says only where a
// language differs (type names, launch ids, math functions, the kernel's signature).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/codegen/opts.h"
#include "engine/uop.h"

namespace mg {

// What a dialect's header sees: the kernel's name, its buffers (index, element dtype; 0 is the
// output; every index up to the last used, Void for one the kernel does not touch), its work-group size (from
// the SPECIAL lidx), its shared arrays and its body.
struct KernelParts {
  std::string fn;
  std::vector<std::pair<int64_t, DType>> globals;
  Shape local_size;
  std::vector<std::string> shared; // declarations, "float temp0[256]"
  std::string body;
  const std::vector<UOpRef>* linear;
};

struct Dialect {
  std::string name;
  std::function<std::string(DType)> type; // a value's type
  // Reading element `idx` of buffer `buf` as a value, and the statement storing value `v` there;
  // default: buf[idx] (a type stored differently from how it computes converts here).
  std::function<std::string(DType, const std::string& buf, const std::string& idx)> load;
  // an index of dtype t as the language indexes arrays (GLSL: int only); default: as is
  std::function<std::string(DType t, const std::string& idx)> index;
  std::function<std::string(DType, const std::string& buf, const std::string& idx, const std::string& v)>
      store;
  std::function<std::string(DType, const std::string&)> cast; // default: ((T)x)
  // an int-promoted 8/16-bit result back to its dtype's range (default: cast)
  std::function<std::string(DType, const std::string&)> wrap;
  // exp2, log2, sin, sqrt, pow, fmod, trunc for a float dtype; default: C's, f-suffixed for float
  std::function<std::string(const std::string& f, DType, const std::vector<std::string>&)> math;
  // An op the dialect writes its own way, or "" for the common C form.
  std::function<std::string(const UOp&, const std::vector<std::string>&)> alu;
  std::function<std::string(LaunchDim)> special; // gidx0 / lidx0 -> the id
  // x's bits read as dtype `to` (a float and an integer of one size; integers of one size are a
  // cast), or "" where the dialect cannot (a dtype computed in another type)
  std::function<std::string(DType from, DType to, const std::string& x)> bitcast;
  // the integer remainder a % b with C's sign (truncating); default: a % b
  std::function<std::string(const std::string& a, const std::string& b)> rem;
  std::string inf = "INFINITY", nan = "NAN";
  std::string int64_suffix = "ll", uint64_suffix = "ull", uint_suffix = "u";
  std::string float_suffix = "f", double_suffix = "";
  std::string barrier;        // a work-group barrier statement
  std::string shared;         // prefix of a shared array's declaration
  bool shared_in_body = true; // false: the header declares them (GLSL: at global scope)
  bool reassociate = false;   // a lone float sum may add in any order (clang's pragma)
  std::string vector_loop;    // the line before a loop VECTORIZE marks (clang's loop pragma)
  std::string tile_loop;      // the line before a tile loop (linearize.h, tile_loops)
  std::string scalar_loop;    // the line before a loop that would gather (linearize.h, gather_loops)
  // The float lanes of the vector types mg_float<N> (aligned) and mg_float<N>u (unaligned) the
  // header declares, for a tile's packs (slp.h); none (null or 0): scalars only.
  std::function<int()> vector_lanes;
  // float16 values live in float: every result is rounded back to half (cast), as half arithmetic
  // would round it
  bool half_in_float = false;
  bool typed_literals = false; // narrow ints and bools written as typed values (no implicit conversion)
  std::function<std::string(const KernelParts&)> header; // the whole source around the body
};

// The kernel `fn` in the dialect. `parallel`: the outermost loop takes this call's share of its
// iterations from (core, ncores), which the dialect's signature must provide.
std::string render_cstyle(const Dialect& d, const std::string& fn, const std::vector<UOpRef>& linear,
                          bool parallel);

// The common literal of `v` as dtype `t` in the dialect.
std::string cstyle_literal(const Dialect& d, DType t, double v);
std::string cstyle_int_literal(const Dialect& d, DType t, int64_t bits); // exact, for 64-bit values

} // namespace mg
