// The printed names of the op ids (singa/core/op_ids.h), generated from the same lists.
#include "singa/core/op_ids.h"

namespace singa {
namespace {

constexpr const char* kNames[] = {
    "op",  // kCustom: OpDesc::label names such an operation
#define SINGA_OP(Name) #Name,
#define SINGA_OP_AS(Name, printed) printed,
#define SINGA_UNARY(Name, kinds, expr) #Name,
#define SINGA_BINARY(Name, kinds, expr) #Name,
#include "singa/ops/elementwise.def"
#include "singa/core/op_ids.def"
#include "singa/ops/activation_ids.def"
#include "singa/ops/nn_ids.def"
#undef SINGA_OP
#undef SINGA_OP_AS
#undef SINGA_UNARY
#undef SINGA_BINARY
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumOpIds, "one name per op id");

}  // namespace

const char* OpName(OpId id) noexcept {
  const auto i = static_cast<size_t>(id);
  return i < kNumOpIds ? kNames[i] : "?";
}

}  // namespace singa
