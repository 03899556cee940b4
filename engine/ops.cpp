#include "engine/ops.h"

namespace mg {
namespace {
struct OpInfo {
  const char* name;
  OpGroup group;
};
constexpr OpInfo op_infos[] = {
#define X(n, g) {#n, OpGroup::g},
    MG_OPS(X)
#undef X
};
} // namespace
const char* name(Ops op) { return op_infos[static_cast<int>(op)].name; }
OpGroup group(Ops op) { return op_infos[static_cast<int>(op)].group; }
} // namespace mg
