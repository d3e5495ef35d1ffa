// A least-squares fit by gradient descent with libsinga's tensor math, and a caught shape error.
#include <singa/singa.h>

#include <cstdio>
#include <vector>

int main() {
  auto dev = singa::defaultDevice();
  dev->SetRandSeed(0);
  // y = X w_true with X random (64 x 3).
  singa::Tensor X({64, 3}, dev);
  singa::Gaussian(0.f, 1.f, &X);
  std::vector<float> w_true{2.f, -1.f, 0.5f};
  singa::Tensor wt({3, 1}, dev);
  wt.CopyDataFromHostPtr(w_true.data(), w_true.size());
  singa::Tensor y = singa::Mult(X, wt);

  singa::Tensor w({3, 1}, dev);
  w.SetValue(0.f);
  for (int step = 0; step < 200; ++step) {
    singa::Tensor err = singa::Mult(X, w) - y;                      // (64, 1)
    singa::Tensor grad = singa::Mult(singa::Transpose(X), err);     // X^T err, no copy of X
    singa::Axpy(-0.5f / 64.f, grad, &w);
  }
  std::vector<float> got = w.ToVector<float>();
  std::printf("fitted w = [%.4f, %.4f, %.4f] (true [2, -1, 0.5])\n", got[0], got[1], got[2]);

  try {
    singa::Mult(X, X);  // (64, 3) x (64, 3): inner sizes differ
    std::printf("error: mismatched Mult did not throw\n");
    return 1;
  } catch (const singa::ShapeError& e) {
    std::printf("caught ShapeError: %s\n", e.what());
  }
  for (int i = 0; i < 3; ++i) {
    float d = got[i] - w_true[i];
    if (d > 1e-3f || d < -1e-3f) {
      std::printf("error: the fit did not converge\n");
      return 1;
    }
  }
  return 0;
}
