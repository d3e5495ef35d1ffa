// layout_test_util.h: image batches stored in the graph's kept layouts (singa/core/layout.h), for
// the tests that call batch-norm kernels on tagged blocks (test_graph_layouts.cc,
// test_graph_relu_grad.cc).
//
//   Tensor x = FromVector(layout_test::ToLayout(v, MemLayout::kChannels16, shape, false), shape);
//   x.block()->set_mem_layout(MemLayout::kChannels16);
//   std::vector<float> plain = layout_test::ToLayout(layout_test::Values(y), l, shape, true);
#pragma once

#include <cstring>
#include <vector>

#include "singa/singa.h"

namespace layout_test {

// Where element (n, c, s) of an (N, C, S) image batch lies in layout l.
inline size_t IndexIn(singa::MemLayout l, size_t C, size_t S, size_t n, size_t c, size_t s) {
  if (l == singa::MemLayout::kChannels16) return (n * C + c / 16 * 16) * S + s * 16 + c % 16;
  if (l == singa::MemLayout::kChannelsLast) return (n * S + s) * C + c;
  return (n * C + c) * S + s;
}
// v (plain NCHW of shape sh) stored in layout l, or (back) v in layout l as plain NCHW.
inline std::vector<float> ToLayout(const std::vector<float>& v, singa::MemLayout l,
                                   const singa::Shape& sh, bool back) {
  const size_t N = sh[0], C = sh[1], S = sh[2] * sh[3];
  std::vector<float> r(v.size());
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t s = 0; s < S; ++s) {
        const size_t p = (n * C + c) * S + s, q = IndexIn(l, C, S, n, c, s);
        if (back) r[p] = v[q];
        else r[q] = v[p];
      }
  return r;
}
// A float32 tensor's values as stored.
inline std::vector<float> Values(const singa::Tensor& t) {
  std::vector<float> v(t.Size());
  std::memcpy(v.data(), t.block()->data(), v.size() * sizeof(float));
  return v;
}

}  // namespace layout_test
