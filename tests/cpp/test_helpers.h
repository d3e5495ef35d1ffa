// test_helpers.h: small utilities shared by the GoogleTest files.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "singa/singa.h"

namespace singa_test {

inline singa::Tensor FromVector(const std::vector<float>& v, const singa::Shape& shape) {
  singa::Tensor t(shape);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

inline std::vector<float> Iota(size_t n, float start = 0.f, float step = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

/// Marks a tensor as held by the user for as long as this object lives, as the Python wrappers
/// do: a graph never recycles a held block (see singa/graph/graph.h).
class Hold {
 public:
  explicit Hold(const singa::Tensor& t) : block_(t.block_ptr()) { block_->AddExternalRef(); }
  ~Hold() { block_->RemoveExternalRef(); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  std::shared_ptr<singa::Block> block_;
};

/// EXPECT that `stmt` throws `Kind` whose message contains `needle`.
#define EXPECT_THROW_MSG(stmt, Kind, needle)                                       \
  do {                                                                             \
    try {                                                                          \
      stmt;                                                                        \
      ADD_FAILURE() << "expected " #Kind " from " #stmt;                          \
    } catch (const Kind& e) {                                                      \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); \
    } catch (const std::exception& e) {                                            \
      ADD_FAILURE() << #stmt " threw the wrong exception type: " << e.what();      \
    }                                                                              \
  } while (0)

}  // namespace singa_test
