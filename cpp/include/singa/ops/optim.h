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
//
//   singa::AdamUpdate(&W, dW, &m, &v, lr, beta_1, beta_2, epsilon, weight_decay, step_counter,
//                     /*decay=*/false);
// does singa.opt.Adam's step in one pass, with the same float32 arithmetic op by op
// (cpp/src/ops/adam_step.h): g = grad (+ weight_decay * p when decay), m and v updated, and
// p -= lr * (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon) with t = step + 1.
#pragma once

#include "singa/core/tensor.h"

namespace singa {

void SGDUpdate(Tensor* param, const Tensor& grad, Tensor* buf, const Tensor& lr,
               const Tensor& momentum, const Tensor& dampening, const Tensor& weight_decay,
               bool nesterov);
void AdamUpdate(Tensor* param, const Tensor& grad, Tensor* m, Tensor* v, const Tensor& lr,
                const Tensor& beta_1, const Tensor& beta_2, const Tensor& epsilon,
                const Tensor& weight_decay, const Tensor& step, bool decay);

}  // namespace singa
