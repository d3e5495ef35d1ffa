// singa/core/fusion.h: what a graph may fuse into an operation (Graph: epilogue fusion).
//
//   // A convolution front offers a variant that applies an epilogue to its output y:
//   FusionHooks hooks;
//   hooks.with_epilogue = [=](Context*, const Epilogue& e) { /* conv, then e on y */ };
//   hooks.accepts = kEpiBatchNorm | kEpiAdd | kEpiReLU;
//   dev->Exec(fn, reads, {y.block()}, "Conv2dForward", false, hooks);
//   // A graph that finds conv -> BatchNormForwardInference -> Add(., r) -> ReLU, with nobody
//   // else reading the intermediates, runs with_epilogue({bn..., residual = r, relu = true})
//   // and skips the three followers.
//
// The parts apply in this order (their bits ascend in it), each at most once:
//   kEpiBatchNorm  y = (y - mean) * scale / sqrt(var + eps) + bias  (inference batch norm, folded:
//                  the per-channel factors are computed from the blocks at every run, so a
//                  parameter changed by an optimizer step or a load is never stale)
//   kEpiAdd        y = y + residual                                 (same shape and dtype as y)
//   kEpiReLU       y = max(0, y), NaN kept (numpy's semantics, as the ReLU op)
//
// A backward may instead absorb what produces its first read, the incoming gradient (the
// input side: the batch-norm backward after ResNet's bn -> relu):
//   kEpiReLUGrad   dz = ReLUBackward(dy, mask), read as dy where mask > 0 or is NaN, else 0
//                  (the ReLUBackward op's semantics): the operation reads relu_dy and
//                  relu_mask in place of dz, which the graph then never materialises
#pragma once

#include <cstddef>
#include <functional>

namespace singa {

class Block;
class Context;

enum EpiloguePart : unsigned { kEpiBatchNorm = 1, kEpiAdd = 2, kEpiReLU = 4, kEpiReLUGrad = 8 };
/// The parts applied to an operation's output y (a producer's chain, Graph: epilogue fusion).
constexpr unsigned kEpiOutputParts = kEpiBatchNorm | kEpiAdd | kEpiReLU;

struct Epilogue {
  Block *bn_scale = nullptr, *bn_bias = nullptr, *bn_mean = nullptr, *bn_var = nullptr;
  float bn_eps = 0.f;
  Block* residual = nullptr;
  bool relu = false;
  /// kEpiReLUGrad: the ReLU backward's dy and mask (blocks of the replaced read's shape and
  /// dtype, stored in its layout).
  Block *relu_dy = nullptr, *relu_mask = nullptr;
  unsigned parts() const {
    return (bn_scale ? kEpiBatchNorm : 0u) | (residual ? kEpiAdd : 0u) | (relu ? kEpiReLU : 0u) |
           (relu_mask ? kEpiReLUGrad : 0u);
  }
};

using EpilogueFn = std::function<void(Context*, const Epilogue&)>;

/// What an operation tells a graph about fusion when it is submitted (Device::Exec).
struct FusionHooks {
  FusionHooks() = default;
  FusionHooks(std::nullptr_t) {}  // NOLINT: "no hooks" at call sites written as nullptr
  /// The operation with an epilogue applied to its first written block (or, kEpiReLUGrad, its
  /// first read computed on the fly); empty: none.
  EpilogueFn with_epilogue;
  /// The parts with_epilogue can apply (EpiloguePart bits).
  unsigned accepts = 0;
  /// This operation expressed as the epilogue of its input's producer (the batch-norm inference
  /// forward: its parameter blocks and eps); parts() == 0 when it cannot be.
  Epilogue as_epilogue;
};

}  // namespace singa
