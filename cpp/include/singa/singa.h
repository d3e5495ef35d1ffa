// singa/singa.h: everything a C++ program needs, in one include.
//
//   #include <singa/singa.h>
//   auto dev = singa::defaultDevice();
//   singa::Tensor a({2, 2}, dev); a.SetValue(1.f);
//   singa::Tensor c = singa::Mult(a, a);
#pragma once

#include "singa/core/common.h"
#include "singa/core/device.h"
#include "singa/core/error.h"
#include "singa/core/tensor.h"
#include "singa/graph/graph.h"
#include "singa/ops/blas.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/optim.h"
#include "singa/ops/random.h"
#include "singa/ops/reduce.h"
#include "singa/ops/shape.h"
