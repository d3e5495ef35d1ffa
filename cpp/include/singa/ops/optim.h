// singa/ops/optim.h: fused optimizer updates (one pass over a parameter instead of six ops).
//
//   // hyper-parameters live on the device as (1,) tensors so that a replayed graph sees
//   // schedules advance:
//   singa::SGDUpdate(&W, dW, &momentum_buf, lr, mom, dampening, weight_decay, /*nesterov=*/false);
//
// Per element, exactly the arithmetic of the unfused Python update (so eager and graph agree):
//   g = grad + weight_decay * p
//   buf = momentum * buf + (1 - dampening) * g          (skipped when buf is null)
//   g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
#pragma once

#include "singa/core/tensor.h"

namespace singa {

void SGDUpdate(Tensor* param, const Tensor& grad, Tensor* buf, const Tensor& lr,
               const Tensor& momentum, const Tensor& dampening, const Tensor& weight_decay,
               bool nesterov);

}  // namespace singa
