// The GPU tests' shared fixture and helpers: the CUDA backend or a visible skip, a CPU reference
// backend, host <-> device copies for either, bitwise comparison and vector weights.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "testing/backends.h"
#include "testing/encode.h"
#include "testing/random.h"

namespace lockstep::testing {

// Every float of `a` and `b` equal to the bit (NaN payloads and signed zeros included).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An F32 vector weight (norm weights, scales) viewing `values`, which must outlive it.
inline backend::Weight VectorWeight(const std::string& name, const std::vector<float>& values) {
  backend::Weight w;
  w.name = name;
  w.type = DType::F32;
  w.ne = {static_cast<int64_t>(values.size())};
  w.data = values.data();
  w.row_bytes = values.size() * sizeof(float);
  return w;
}

// A weight [n, k] (or [k, n, experts]) of `type` from Gaussian rows, its bytes kept in `bytes`.
inline backend::Weight QuantWeight(DType type, std::vector<int64_t> ne, uint32_t seed,
                                   std::vector<uint8_t>* bytes) {
  const int64_t k = ne[0];
  int64_t n = 1;
  for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  const size_t row_bytes = RowBytes(type, k);
  bytes->resize(row_bytes * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    CHECK(EncodeRow(type, GaussianRow(k, seed + static_cast<uint32_t>(r), 0.5f),
                    bytes->data() + row_bytes * static_cast<size_t>(r)));
  backend::Weight w;
  w.name = "w_" + std::string(Name(type));
  w.type = type;
  w.ne = std::move(ne);
  w.data = bytes->data();
  w.row_bytes = row_bytes;
  return w;
}

// Turns the kernels not yet run on a GPU on for its lifetime (backend/cuda/common.h,
// UnverifiedKernelOn): all of them, or those `names` names; restores the variable after.
class UnverifiedKernelsScope {
 public:
  explicit UnverifiedKernelsScope(const char* names = "1") {
    if (const char* v = std::getenv(kName)) saved_ = v, had_ = true;
    setenv(kName, names, 1);
  }
  ~UnverifiedKernelsScope() {
    if (had_)
      setenv(kName, saved_.c_str(), 1);
    else
      unsetenv(kName);
  }
  UnverifiedKernelsScope(const UnverifiedKernelsScope&) = delete;
  UnverifiedKernelsScope& operator=(const UnverifiedKernelsScope&) = delete;

 private:
  static constexpr const char* kName = "LOCKSTEP_CUDA_UNVERIFIED";
  std::string saved_;
  bool had_ = false;
};

// Skips the test with "SKIPPED (no CUDA device): <why>" where there is no CUDA backend.
class CudaFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    gpu_ = CudaBackendOrWhyNot(&why);
    if (!gpu_) GTEST_SKIP() << "SKIPPED (no CUDA device): " << why;
  }
  static backend::Tensor Upload(backend::Backend& be, const std::vector<float>& v, int64_t rows,
                                int64_t cols) {
    backend::Tensor t = be.NewTensor(rows, cols);
    be.FromHost(v, &t);
    return t;
  }
  static std::vector<float> Host(backend::Backend& be, const backend::Tensor& t) {
    std::vector<float> v;
    be.ToHost(t, &v);
    return v;
  }
  backend::Tensor Upload(const std::vector<float>& v, int64_t rows, int64_t cols) {
    return Upload(*gpu_, v, rows, cols);
  }
  std::vector<float> Host(const backend::Tensor& t) { return Host(*gpu_, t); }

  std::unique_ptr<backend::Backend> gpu_;
  backend::CpuBackend cpu_{2};
};

}  // namespace lockstep::testing
