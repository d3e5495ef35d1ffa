// The host-side construction of the CUDA kernels' n-d indexers (strided_indexer.h), compiled by
// the host compiler: the .cu files use these two instantiations (unary: 2 operands, binary: 3).
#include "strided_indexer.h"

namespace singa {
namespace cuda {

template StridedIndexer<2> MakeIndexer<2>(const char*, const Shape&,
                                          const std::array<const Strides*, 2>&);
template StridedIndexer<3> MakeIndexer<3>(const char*, const Shape&,
                                          const std::array<const Strides*, 3>&);

}  // namespace cuda
}  // namespace singa
