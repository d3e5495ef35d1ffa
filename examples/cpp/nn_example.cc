// A small convolutional network trained with libsinga's C++ API alone (ops/nn.h): conv + ReLU ->
// max pooling -> linear -> softmax cross entropy, forward and backward written out by hand, SGD.
//
// The task: 8x8 images holding one bright 3x3 square in one of the four quadrants (plus noise);
// the class is the quadrant. The network must reach 95% on held-out images.
#include <singa/singa.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr size_t kSide = 8, kClasses = 4;

// n images (n, 1, 8, 8) and their labels.
void MakeData(size_t n, std::mt19937* gen, std::vector<float>* x, std::vector<int>* y) {
  std::normal_distribution<float> noise(0.f, 0.1f);
  std::uniform_int_distribution<int> cls(0, kClasses - 1), pos(0, 1);
  x->assign(n * kSide * kSide, 0.f);
  y->resize(n);
  for (size_t i = 0; i < n; ++i) {
    float* img = x->data() + i * kSide * kSide;
    for (size_t p = 0; p < kSide * kSide; ++p) img[p] = noise(*gen);
    int c = cls(*gen);
    (*y)[i] = c;
    size_t r0 = (c / 2) * 4 + pos(*gen), c0 = (c % 2) * 4 + pos(*gen);
    for (size_t r = r0; r < r0 + 3; ++r)
      for (size_t q = c0; q < c0 + 3; ++q) img[r * kSide + q] += 1.f;
  }
}

singa::Tensor FromHost(const std::vector<float>& v, const singa::Shape& shape,
                       const std::shared_ptr<singa::Device>& dev) {
  singa::Tensor t(shape, dev);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

struct Net {
  singa::ConvHandle conv;
  singa::PoolingHandle pool;
  singa::Tensor W, b, Wl, bl;  // conv (4, 1, 3, 3) and (4,); linear (64, 4) and (4,)

  Net(size_t batch, const std::shared_ptr<singa::Device>& dev)
      : conv({batch, 1, kSide, kSide}, {3, 3}, {1, 1}, {1, 1}, 1, 4, /*bias=*/true),
        pool(conv.OutputShape(batch), {2, 2}, {2, 2}, {0, 0}, /*is_max=*/true),
        W(conv.WeightShape(), dev), b({4}, dev), Wl({64, kClasses}, dev), bl({kClasses}, dev) {
    singa::Gaussian(0.f, 0.3f, &W);
    singa::Gaussian(0.f, 0.1f, &Wl);
    b.SetValue(0.f);
    bl.SetValue(0.f);
  }

  singa::Tensor Logits(const singa::Tensor& x, singa::Tensor* y, singa::Tensor* p,
                       singa::Tensor* flat) const {
    *y = singa::Conv2dForward(x, W, b, conv, /*relu=*/true);     // (N, 4, 8, 8)
    *p = singa::Pool2dForward(*y, pool);                         // (N, 4, 4, 4)
    *flat = singa::Reshape(*p, singa::Shape{x.shape(0), 64});
    singa::Tensor logits = singa::Mult(*flat, Wl);               // (N, 4)
    singa::AddRow(bl, &logits);
    return logits;
  }

  // One SGD step on (x, labels); returns the mean loss.
  float Step(const singa::Tensor& x, const singa::Tensor& labels, float lr) {
    singa::Tensor y, p, flat;
    singa::Tensor logits = Logits(x, &y, &p, &flat);
    const float n = static_cast<float>(x.shape(0));
    std::vector<float> loss = singa::SoftmaxCrossEntropyForward(logits, labels).ToVector<float>();
    singa::Tensor dlogits = singa::SoftmaxCrossEntropyBackward(logits, labels) / n;
    singa::Tensor dWl = singa::Mult(singa::Transpose(flat), dlogits);
    singa::Tensor dbl = singa::ReduceSum(dlogits, {0});
    singa::Tensor dp = singa::Reshape(singa::Mult(dlogits, singa::Transpose(Wl)), p.shape());
    singa::Tensor dy = singa::Pool2dBackward(dp, y, p, pool);
    dy = singa::ReLUBackward(dy, y);  // the fused ReLU: y > 0 exactly where its input was
    singa::Tensor dW = singa::Conv2dBackwardW(dy, x, conv), db = singa::Conv2dBackwardB(dy, conv);
    singa::Axpy(-lr, dW, &W);
    singa::Axpy(-lr, db, &b);
    singa::Axpy(-lr, dWl, &Wl);
    singa::Axpy(-lr, dbl, &bl);
    float sum = 0.f;
    for (float v : loss) sum += v;
    return sum / n;
  }

  float Accuracy(const singa::Tensor& x, const std::vector<int>& labels) const {
    singa::Tensor y, p, flat;
    std::vector<float> out = Logits(x, &y, &p, &flat).ToVector<float>();
    size_t correct = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      const float* row = out.data() + i * kClasses;
      correct += (std::max_element(row, row + kClasses) - row) == labels[i];
    }
    return static_cast<float>(correct) / labels.size();
  }
};

}  // namespace

int main() {
  auto dev = singa::defaultDevice();
  dev->SetRandSeed(0);
  std::mt19937 gen(0);
  const size_t batch = 32;
  std::vector<float> xs;
  std::vector<int> ys;
  MakeData(batch, &gen, &xs, &ys);  // held-out images
  singa::Tensor x_test = FromHost(xs, {batch, 1, kSide, kSide}, dev);
  std::vector<int> y_test = ys;

  Net net(batch, dev);
  singa::Tensor x({batch, 1, kSide, kSide}, dev), labels({batch}, dev, singa::kInt);
  for (int step = 1; step <= 150; ++step) {
    MakeData(batch, &gen, &xs, &ys);
    x.CopyDataFromHostPtr(xs.data(), xs.size());
    labels.CopyDataFromHostPtr(ys.data(), ys.size());
    float loss = net.Step(x, labels, 0.1f);
    if (step % 50 == 0) std::printf("step %d: loss %.4f\n", step, loss);
  }
  float acc = net.Accuracy(x_test, y_test);
  std::printf("held-out accuracy: %.1f%% of %zu images\n", 100 * acc, y_test.size());

  try {  // a label outside [0, 4): the loss says so instead of reading out of bounds
    std::vector<int> bad(batch, 7);
    labels.CopyDataFromHostPtr(bad.data(), bad.size());
    net.Step(x, labels, 0.1f);
    std::printf("error: an out-of-range label did not throw\n");
    return 1;
  } catch (const singa::Error& e) {
    std::printf("caught %s\n", e.what());
  }
  return acc >= 0.95f ? 0 : 1;
}
