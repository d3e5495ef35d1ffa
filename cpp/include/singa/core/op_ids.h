// singa/core/op_ids.h: a typed id for every operation the library submits to Device::Exec.
//
//   dev->Exec({.id = singa::OpId::kReLU, .reads = {x.block()}, .writes = {y.block()}}, fn);
//   singa::OpName(singa::OpId::kReLU);   // "ReLU": what profiles and graph dumps print
//
// The list is op_ids.def plus the elementwise table (singa/ops/elementwise.def) and the op
// schema's generated ids (singa/ops/activation_ids.def, nn_ids.def, build tree); the graph keys
// its rewrites on ids (epilogue fusion finds kBatchNormForwardInference, kAdd and kReLU, the
// recompute cost model kMult and the convolutions), never on printed names. Operations defined outside the library (tests, user
// kernels) are OpId::kCustom and carry their own label in OpDesc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace singa {

enum class OpId : uint16_t {
  kCustom = 0,  ///< an operation from outside the library: OpDesc::label names it
#define SINGA_OP(Name) k##Name,
#define SINGA_OP_AS(Name, printed) k##Name,
#define SINGA_UNARY(Name, kinds, expr) k##Name,
#define SINGA_BINARY(Name, kinds, expr) k##Name,
#include "singa/ops/elementwise.def"
#include "singa/core/op_ids.def"
#include "singa/ops/activation_ids.def"
#include "singa/ops/nn_ids.def"
#undef SINGA_OP
#undef SINGA_OP_AS
#undef SINGA_UNARY
#undef SINGA_BINARY
  kCount
};

// ggml's tripwire: a new hand-listed id changes this count, which sends its author here. Before
// updating it, check what keys on OpId: kEpilogueOps and Graph::EstimateCost
// (cpp/src/graph/graph.cc) and the id <-> name test (tests/cpp/test_op_ids.cc). The schema's
// ids (activation_ids.def and nn_ids.def, generated from schema/activations.py and nn.py) are
// counted apart: nothing keys on them but the schema's own tables (epilogue partners come from
// schema/nn.py's FUSABLE), and a schema row must stay the whole change.
constexpr size_t kNumListedOpIds = 122;
constexpr size_t kNumSchemaOpIds = 0
#define SINGA_OP(Name) +1
#include "singa/ops/activation_ids.def"
#include "singa/ops/nn_ids.def"
#undef SINGA_OP
    ;
constexpr size_t kNumOpIds = kNumListedOpIds + kNumSchemaOpIds;
static_assert(static_cast<size_t>(OpId::kCount) == kNumOpIds,
              "an op id was added or removed: see the note above kNumListedOpIds in op_ids.h");

/// The printed name of `id` ("ReLU", "Conv2dForward", "Communicator.synch"; "op" for kCustom);
/// a static string. Out-of-range values print "?".
const char* OpName(OpId id) noexcept;

}  // namespace singa
