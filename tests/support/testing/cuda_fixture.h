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
#include "testing/backends.h"

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

// Turns the kernels not yet run on a GPU on for its lifetime (backend/cuda/common.h,
// UnverifiedKernelOn), restoring the variable after.
class UnverifiedKernelsScope {
 public:
  UnverifiedKernelsScope() {
    if (const char* v = std::getenv(kName)) saved_ = v, had_ = true;
    setenv(kName, "1", 1);
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
