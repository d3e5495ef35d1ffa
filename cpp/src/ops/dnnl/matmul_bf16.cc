// bfloat16 matrix products with oneDNN's matmul (slot GemmBf16, bf16.h): bf16 operands read in
// place through their strides (a transposed view costs nothing), float32 accumulation, a bf16
// result. One primitive per (m, n, k, layouts), cached; a batched product runs it per matrix.
#include <algorithm>
#include <string>

#include "../bf16.h"
#include "common.h"

namespace singa {
namespace dnnl_kernel {
namespace {

struct MatMulEntry {
  dnnl::matmul prim;
  memory::desc a, b, c;
};

memory::desc MatrixDesc(memory::dim rows, memory::dim cols, bool trans, memory::dim ld) {
  return memory::desc({rows, cols}, memory::data_type::bf16,
                      trans ? memory::dims{1, ld} : memory::dims{ld, 1});
}

std::shared_ptr<MatMulEntry> EntryOf(const BatchedGemmArgs& g) {
  std::string key = KeyStart("matmul_bf16");
  for (long v : {long(g.m), long(g.n), long(g.k), long(g.lda), long(g.ldb), long(g.trans_a),
                 long(g.trans_b)})
    key += "," + std::to_string(v);
  return Cached<MatMulEntry>(key, [&] {
    auto e = std::make_shared<MatMulEntry>();
    e->a = MatrixDesc(g.m, g.k, g.trans_a, g.lda);
    e->b = MatrixDesc(g.k, g.n, g.trans_b, g.ldb);
    e->c = MatrixDesc(g.m, g.n, false, g.n);
    const dnnl::matmul::desc d(e->a, e->b, e->c);
    e->prim = Make<dnnl::matmul>(dnnl::matmul::primitive_desc(d, Engine()));
    return e;
  });
}

void GemmBf16(const BatchedGemmArgs& g, Context*) {
  if (g.m == 0 || g.n == 0) return;
  auto* pc = static_cast<BFloat16*>(g.c.block()->mutable_data());
  const size_t count = Product(g.batch), mn = size_t(g.m) * g.n;
  if (g.k == 0) {  // an empty sum
    std::fill(pc, pc + count * mn, BFloat16{});
    return;
  }
  const auto e = EntryOf(g);
  auto* pa = static_cast<BFloat16*>(const_cast<void*>(g.a.block()->data()));
  auto* pb = static_cast<BFloat16*>(const_cast<void*>(g.b.block()->data()));
  for (size_t i = 0; i < count; ++i) {
    std::ptrdiff_t oa, ob;
    BatchOffsets(g, i, &oa, &ob);
    e->prim.execute(Stream(), {{DNNL_ARG_SRC, memory(e->a, Engine(), pa + oa)},
                               {DNNL_ARG_WEIGHTS, memory(e->b, Engine(), pb + ob)},
                               {DNNL_ARG_DST, memory(e->c, Engine(), pc + i * mn)}});
  }
  Stream().wait();
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(GemmBf16, kCpuDnnl, dnnl_kernel::GemmBf16);

}  // namespace singa
