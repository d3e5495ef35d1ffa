// singa/ops/blas.h: matrix products through OpenBLAS (CPU) / cuBLAS (CUDA), and SINGA's
// row/column broadcasting helpers.
//
//   singa::Tensor C = singa::Mult(A, B);             // (m,k) x (k,n); A or B may be transposed views
//   singa::Mult(0.5f, A, B, 1.0f, &C);               // C = 0.5 * A B + 1.0 * C
//   singa::Tensor y = singa::Mult(A, x);             // matrix-vector
//   singa::Tensor Z = singa::Mult(X, Y);             // batched: (..., m, k) x (..., k, n)
//   singa::Axpy(2.0f, x, &y);                        // y += 2 x
//   singa::Axpy(lr, x, &y);                          // y += lr x, lr a one-element device tensor
//   singa::AddRow(bias, &M);                         // M[i, :] += bias
//
// Transposed views are passed to BLAS as transposes (no copy). Inner sizes must agree: a mismatch
// throws ShapeError naming both shapes (Apache SINGA silently returned a result here).
#pragma once

#include "singa/core/tensor.h"

namespace singa {

Tensor Mult(const Tensor& A, const Tensor& B);
void Mult(const Tensor& A, const Tensor& B, Tensor* C);
/// C = alpha * A B + beta * C, for 2-d A, B, C (or matrix-vector).
void Mult(float alpha, const Tensor& A, const Tensor& B, float beta, Tensor* C);
/// y += alpha * x (same shape).
void Axpy(float alpha, const Tensor& x, Tensor* y);
/// y += alpha * x with alpha a one-element float32 tensor on y's device (Apache SINGA's overload,
/// which its optimizers call with device-side hyper-parameters): read on the device, so a
/// recorded graph replays with alpha's current value and nothing waits for the host.
void Axpy(const Tensor& alpha, const Tensor& x, Tensor* y);
/// Inner product of two float32 tensors of equal size.
float Dot(const Tensor& a, const Tensor& b);

/// M = alpha * v broadcast + beta * M, with v one value per column (AddColumn: v has M.rows
/// elements and is added to every column) or per row (AddRow: v has M.cols elements).
void AddColumn(const Tensor& v, Tensor* M);
void AddColumn(float alpha, float beta, const Tensor& v, Tensor* M);
void AddRow(const Tensor& v, Tensor* M);
void AddRow(float alpha, float beta, const Tensor& v, Tensor* M);
void SubColumn(const Tensor& v, Tensor* M);
void SubRow(const Tensor& v, Tensor* M);
void MultColumn(const Tensor& v, Tensor* M);
void MultRow(const Tensor& v, Tensor* M);
void DivColumn(const Tensor& v, Tensor* M);
void DivRow(const Tensor& v, Tensor* M);

}  // namespace singa
