// The reference the batched-matmul tests compare with: the backend's own MatMul, one
// activation row at a time (the decode path).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace lockstep::testing {

// A weight of `cols` rows of n elements of type t over host bytes (which must outlive it).
inline backend::Weight HostWeight(DType t, int64_t n, int64_t cols,
                                  const std::vector<uint8_t>& bytes) {
  backend::Weight w;
  w.name = "w";
  w.type = t;
  w.ne = {n, cols};
  w.data = bytes.data();
  w.row_bytes = RowBytes(t, n);
  return w;
}

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
