// Scalar element types and tinygrad's promotion lattice.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace mg {

// X(name, lua/printed name, C type, itemsize, priority)
// clang-format off
#define MG_DTYPES(X)                                                                                         \
  X(Void, "void", "void", 0, -1)                                                                             \
  X(Bool, "bool", "_Bool", 1, 0)                                                                             \
  X(Int8, "int8", "signed char", 1, 1)                                                                       \
  X(UInt8, "uint8", "unsigned char", 1, 2)                                                                   \
  X(Int16, "int16", "short", 2, 3)                                                                           \
  X(UInt16, "uint16", "unsigned short", 2, 4)                                                                \
  X(Int32, "int32", "int", 4, 5)                                                                             \
  X(UInt32, "uint32", "unsigned int", 4, 6)                                                                  \
  X(Int64, "int64", "long long", 8, 7)                                                                       \
  X(UInt64, "uint64", "unsigned long long", 8, 8)                                                            \
  X(Float16, "float16", "_Float16", 2, 11)                                                                   \
  X(BFloat16, "bfloat16", "float", 2, 12)                                                                    \
  X(Float32, "float32", "float", 4, 13)                                                                      \
  X(Float64, "float64", "double", 8, 14)
// clang-format on

enum class DType : uint8_t {
#define X(n, s, c, sz, p) n,
  MG_DTYPES(X)
#undef X
};

const char* name(DType d);
const char* c_type(DType d);
int itemsize(DType d);
int priority(DType d);
bool is_float(DType d);
bool is_int(DType d); // signed or unsigned integer, not bool
bool is_unsigned(DType d);
// Parses "float32", "float", "half", "int", "long", ...; throws on unknown names.
DType dtype_from_name(const std::string& s);

// A kernel language's names for the value types, Bool to Float64 in DType order (the renderers
// keep one table each), and the lookup: Void has no name, and the error names the language.
using TypeNames = std::array<const char*, 13>;
std::string type_in(DType d, const TypeNames& names, const char* language);

// tinygrad's least_upper_dtype: the smallest type both promote to.
DType promote(DType a, DType b);
// The type a sum over `d` accumulates in (bool/small ints widen, as tinygrad's sum_acc_dtype).
DType sum_acc_dtype(DType d);
// The float type a true division / transcendental of `d` produces.
DType float_of(DType d);

inline constexpr DType default_float = DType::Float32;
inline constexpr DType default_int = DType::Int32;

// bfloat16 bits from a float (round to nearest even; NaN stays NaN) and back.
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

// Min and max representable value, as doubles (for const folding and ranges).
double dtype_min(DType d);
double dtype_max(DType d);

} // namespace mg
