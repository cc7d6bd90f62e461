// The reference the batched-matmul tests compare with: the backend's own MatMul, one
// activation row at a time (the decode path).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace lockstep::testing {

// y[r][c] = (x row r) · (weight row c) for rows x rows of n floats in `xh`, row by row.
inline std::vector<float> MatMulRowByRow(backend::Backend& be, const backend::Weight& w,
                                         const std::vector<float>& xh, int64_t rows, int64_t n) {
  const int64_t cols = w.n_rows();
  std::vector<float> want(static_cast<size_t>(rows * cols)), one;
  backend::Tensor x1 = be.NewTensor(1, n), y1 = be.NewTensor(1, cols);
  for (int64_t r = 0; r < rows; ++r) {
    be.FromHost({xh.data() + r * n, static_cast<size_t>(n)}, &x1);
    be.MatMul(w, x1, &y1);
    be.ToHost(y1, &one);
    std::copy(one.begin(), one.end(), want.begin() + r * cols);
  }
  return want;
}

}  // namespace lockstep::testing
