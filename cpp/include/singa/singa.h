// singa/singa.h: the whole public C++ API, in one include.
//
//   #include <singa/singa.h>
//   auto dev = singa::defaultDevice();
//   singa::Tensor a({2, 2}, dev); a.SetValue(1.f);
//   singa::Tensor c = singa::Mult(a, a);                                   // ops/blas.h
//   singa::ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 1, 8, true);   // ops/nn.h
//   singa::Tensor loss = singa::SoftmaxCrossEntropyForward(logits, labels);
//
// Every header under cpp/include/singa/ is listed here (tests/python/test_public_header.py checks
// it, tests/cpp/test_public_header.cc compiles against this file alone). All of them compile in
// every build: the CUDA, NCCL and MPI parts declare functions that a build without them answers
// with NotImplementedError (or "no GPU"), so no macro is needed to include this file.
#pragma once

#include "singa/core/block.h"
#include "singa/core/common.h"
#include "singa/core/context.h"
#include "singa/core/cpu_features.h"
#include "singa/core/cuda_gpu.h"
#include "singa/core/device.h"
#include "singa/core/error.h"
#include "singa/core/fusion.h"
#include "singa/core/layout.h"
#include "singa/core/host_device.h"
#include "singa/core/kernel.h"
#include "singa/core/op_ids.h"
#include "singa/core/tensor.h"
#include "singa/dist/communicator.h"
#include "singa/dist/nccl.h"
#include "singa/graph/graph.h"
#include "singa/graph/remat.h"
#include "singa/memory/pool.h"
#include "singa/ops/attention.h"
#include "singa/ops/blas.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/elementwise_functors.h"
#include "singa/ops/gemm_backend.h"
#include "singa/ops/nn.h"
#include "singa/ops/optim.h"
#include "singa/ops/random.h"
#include "singa/ops/reduce.h"
#include "singa/ops/rnn.h"
#include "singa/ops/shape.h"
#include "singa/ops/transformer.h"
