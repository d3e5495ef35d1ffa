// The kernel slots of the op schema's NN ops (schema/nn.py; generated into build/gen/src): one
// definition each, whichever front uses them.
#include "nn_kernels.h"

namespace singa {
#include "nn_slots.inc"
}  // namespace singa
