// The three CPU sgemm routes singa could take, on the shapes of its models, outside singa:
// OpenBLAS' cblas_sgemm, oneDNN's dnnl_sgemm, and a oneDNN matmul primitive created once per
// shape (what dnnl/gemm.cc chose between; BENCHMARKS.md has a run).
//
//   g++ -O2 -fopenmp benchmarks/sgemm_libs.cc -o /tmp/sgemm_libs \
//       -I/usr/include/x86_64-linux-gnu/openblas-openmp -lopenblas -ldnnl && /tmp/sgemm_libs
//
// Each cell is the best of several calls after a warm-up, in GFLOP/s; shapes are M x K x N with
// NN / NT / TN saying which operand is transposed (a Linear layer's forward, dX and dW).
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <dnnl.hpp>
#include <random>
#include <vector>

extern "C" char* openblas_get_corename();

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
template <class F>
double Best(F f, int repeat) {
  f();
  double best = 1e9;
  for (int i = 0; i < repeat; ++i) {
    const double t = Now();
    f();
    best = std::min(best, Now() - t);
  }
  return best;
}
}  // namespace

int main() {
  using dnnl::memory;
  std::printf("OpenBLAS core %s, %d threads\n", openblas_get_corename(), omp_get_max_threads());
  struct Shape {
    int m, k, n;
    bool ta, tb;
  };
  const Shape shapes[] = {{64, 784, 100, 0, 0},   {64, 100, 784, 0, 1},  {784, 64, 100, 1, 0},
                          {64, 384, 384, 0, 0},   {256, 64, 256, 0, 1},  {4096, 256, 1024, 0, 0},
                          {4096, 1024, 256, 0, 1}, {256, 4096, 1024, 1, 0},
                          {4096, 384, 1536, 0, 0}, {1024, 1024, 1024, 0, 0}};
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::printf("| M x K x N | op | OpenBLAS | dnnl_sgemm | dnnl matmul | matmul impl |\n");
  std::printf("|---|---|---:|---:|---:|---|\n");
  for (const Shape& s : shapes) {
    std::vector<float> A(size_t(s.m) * s.k), B(size_t(s.k) * s.n), C(size_t(s.m) * s.n);
    for (float& x : A) x = normal(rng);
    for (float& x : B) x = normal(rng);
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const int repeat = double(s.m) * s.n * s.k < 1e8 ? 50 : 5;
    const double t_blas = Best(
        [&] {
          cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
                      s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.f, A.data(), lda,
                      B.data(), ldb, 0.f, C.data(), s.n);
        },
        repeat);
    const double t_sgemm = Best(
        [&] {
          dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.f, A.data(), lda,
                     B.data(), ldb, 0.f, C.data(), s.n);
        },
        repeat);
    const memory::desc ad({s.m, s.k}, memory::data_type::f32,
                          s.ta ? memory::dims{1, s.m} : memory::dims{s.k, 1});
    const memory::desc bd({s.k, s.n}, memory::data_type::f32,
                          s.tb ? memory::dims{1, s.k} : memory::dims{s.n, 1});
    const memory::desc cd({s.m, s.n}, memory::data_type::f32, memory::dims{s.n, 1});
    const auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), eng);
    dnnl::matmul mm(pd);
    memory am(ad, eng, A.data()), bm(bd, eng, B.data()), cm(cd, eng, C.data());
    const double t_matmul = Best(
        [&] {
          mm.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
          st.wait();
        },
        repeat);
    const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
    std::printf("| %d x %d x %d | %c%c | %.1f | %.1f | %.1f | %s |\n", s.m, s.k, s.n,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', gflop / t_blas, gflop / t_sgemm,
                gflop / t_matmul, pd.impl_info_str());
  }
}
