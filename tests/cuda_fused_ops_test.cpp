// The CUDA backend's fused ops (RmsNormAdd, RmsNorms, RmsNormSumNormAdd, RmsNormRope) against the
// pair of ops each replaces, bit for bit on the GPU (the backend contract: fusing never changes a
// bit), and close to the CPU. Skipped, visibly, where lockstep was built without CUDA or the
// machine has no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "testing/cuda_fixture.h"
#include "testing/encode.h"
#include "testing/random.h"

namespace lockstep {
namespace {

using backend::Tensor;
using backend::Weight;

using CudaFusedOps = testing::CudaFixture;
using testing::QuantWeight;
using testing::SameBits;
using testing::VectorWeight;

// y = RmsNorm(x) + residual over whole rows of every kernel's width (the register-held rows up
// to 2,048 and 6,144 values, the streamed ones beyond, head-sized groups below 1,024), with and
// without a weight: the fused op's bits are the two ops' bits. Control: another eps changes them.
TEST_F(CudaFusedOps, RmsNormAddEqualsNormThenAdd) {
  for (int64_t cols : {256, 1536, 2816, 5376, 8192}) {
    for (bool weighted : {true, false}) {
      SCOPED_TRACE(std::to_string(cols) + (weighted ? " weighted" : " unweighted"));
      const int64_t rows = 3;
      const auto x = testing::GaussianRow(rows * cols, 21),
                 r = testing::GaussianRow(rows * cols, 22);
      const auto wv = testing::GaussianRow(cols, 23);
      const Weight hw = VectorWeight("norm", wv);
      const Weight gw = gpu_->PrepareWeight(hw);
      auto run = [&](backend::Backend& be, const Weight& w, bool fused, float eps) {
        Tensor tx = Upload(be, x, rows, cols), tr = Upload(be, r, rows, cols);
        Tensor y = be.NewTensor(rows, cols);
        const Weight* wp = weighted ? &w : nullptr;
        if (fused) {
          be.RmsNormAdd(tx, wp, eps, tr, &y);
        } else {
          be.RmsNorm(tx, wp, eps, cols, 1.0f, &y);
          be.Add(y, tr, &y);
        }
        return Host(be, y);
      };
      const auto fused = run(*gpu_, gw, true, 1e-6f);
      EXPECT_TRUE(SameBits(fused, run(*gpu_, gw, false, 1e-6f)));
      EXPECT_FALSE(SameBits(fused, run(*gpu_, gw, true, 1e-2f)));  // the comparison can fail
      const auto cpu = run(cpu_, hw, true, 1e-6f);
      for (size_t i = 0; i < cpu.size(); ++i)
        ASSERT_NEAR(fused[i], cpu[i], 1e-5f * (1.0f + std::fabs(cpu[i]))) << i;
    }
  }
}

// Three whole-row norms of one input (a MoE layer's MLP, router and expert inputs: a weight and
// extra scale each, one without weight) in one op: each output's bits are those of its own
// RmsNorm, for every kernel width (under 1,024 values the op falls back to one launch each).
// Control: another eps changes every output.
TEST_F(CudaFusedOps, RmsNormsEqualEachNormAlone) {
  for (int64_t cols : {256, 1536, 2816, 5376, 8192}) {
    SCOPED_TRACE(std::to_string(cols));
    const int64_t rows = 3;
    const auto x = testing::GaussianRow(rows * cols, 31);
    const Weight w1 = gpu_->PrepareWeight(VectorWeight("n1", testing::GaussianRow(cols, 32)));
    const Weight w3 = gpu_->PrepareWeight(VectorWeight("n3", testing::GaussianRow(cols, 33)));
    const Weight* weights[3] = {&w1, nullptr, &w3};
    const float scales[3] = {1.0f, 0.25f, 1.0f};
    auto run = [&](bool fused, float eps) {
      const Tensor tx = Upload(*gpu_, x, rows, cols);
      Tensor ys[3] = {gpu_->NewTensor(rows, cols), gpu_->NewTensor(rows, cols),
                      gpu_->NewTensor(rows, cols)};
      backend::Backend::NormOut outs[3];
      for (int o = 0; o < 3; ++o) outs[o] = {weights[o], scales[o], &ys[o]};
      if (fused)
        gpu_->RmsNorms(tx, eps, outs);
      else
        for (int o = 0; o < 3; ++o) gpu_->RmsNorm(tx, weights[o], eps, cols, scales[o], &ys[o]);
      std::vector<float> all;
      for (const Tensor& y : ys) {
        const auto h = Host(*gpu_, y);
        all.insert(all.end(), h.begin(), h.end());
      }
      return all;
    };
    const auto fused = run(true, 1e-6f);
    EXPECT_TRUE(SameBits(fused, run(false, 1e-6f)));
    const auto other = run(true, 1e-2f);
    for (int o = 0; o < 3; ++o) {  // the comparison can fail, for each output
      const auto at = static_cast<std::ptrdiff_t>(o * rows * cols);
      EXPECT_FALSE(
          SameBits(std::vector<float>(fused.begin() + at, fused.begin() + at + rows * cols),
                   std::vector<float>(other.begin() + at, other.begin() + at + rows * cols)))
          << "output " << o;
    }
  }
}

// A MoE layer's tail, y = RmsNorm(RmsNorm(a, wa) + RmsNorm(b, wb), w) + residual, in one op:
// the bits of the three norms run one after another, for the widths the fused kernel takes
// (1,024 to 6,144 values, in two register variants) and those it leaves to the composition.
// Control: another eps changes them.
TEST_F(CudaFusedOps, RmsNormSumNormAddEqualsItsThreeNorms) {
  for (int64_t cols : {256, 1536, 2816, 5376, 8192}) {
    SCOPED_TRACE(std::to_string(cols));
    const int64_t rows = 3;
    const auto a = testing::GaussianRow(rows * cols, 41), b = testing::GaussianRow(rows * cols, 42);
    const auto r = testing::GaussianRow(rows * cols, 43);
    const Weight wa = gpu_->PrepareWeight(VectorWeight("wa", testing::GaussianRow(cols, 44)));
    const Weight wb = gpu_->PrepareWeight(VectorWeight("wb", testing::GaussianRow(cols, 45)));
    const Weight w = gpu_->PrepareWeight(VectorWeight("w", testing::GaussianRow(cols, 46)));
    auto run = [&](bool fused, float eps) {
      const Tensor ta = Upload(*gpu_, a, rows, cols), tb = Upload(*gpu_, b, rows, cols);
      const Tensor tr = Upload(*gpu_, r, rows, cols);
      Tensor na = gpu_->NewTensor(rows, cols), sum = gpu_->NewTensor(rows, cols);
      Tensor y = gpu_->NewTensor(rows, cols);
      if (fused) {
        Tensor* const work[2] = {&na, &sum};
        gpu_->RmsNormSumNormAdd(ta, &wa, tb, &wb, &w, eps, tr, work, &y);
      } else {
        gpu_->RmsNorm(ta, &wa, eps, cols, 1.0f, &na);
        gpu_->RmsNormAdd(tb, &wb, eps, na, &sum);
        gpu_->RmsNormAdd(sum, &w, eps, tr, &y);
      }
      return Host(*gpu_, y);
    };
    const auto fused = run(true, 1e-6f);
    EXPECT_TRUE(SameBits(fused, run(false, 1e-6f)));
    EXPECT_FALSE(SameBits(fused, run(true, 1e-2f)));  // the comparison can fail
  }
}

// Per-head RmsNorm then RoPE for head widths 128, 256 and 512, full and partial rotation, with
// frequency factors (proportional RoPE) and without: the fused kernel's bits are the two ops'
// bits, and a rotation it cannot fuse (n_rot / 2 not a multiple of 32) falls back to them.
// Control: positions one further change the bits.
TEST_F(CudaFusedOps, RmsNormRopeEqualsNormThenRope) {
  struct Case {
    int head_dim, n_rot;
    bool freqs;
  };
  for (const Case c : {Case{128, 128, false}, Case{256, 256, false}, Case{256, 128, true},
                       Case{512, 512, true}, Case{64, 32, false}}) {
    SCOPED_TRACE(std::to_string(c.head_dim) + "/" + std::to_string(c.n_rot));
    const int64_t rows = 5, heads = 3, cols = heads * c.head_dim;
    const auto x = testing::GaussianRow(rows * cols, 31);
    const auto wv = testing::GaussianRow(c.head_dim, 32);
    std::vector<float> ff(static_cast<size_t>(c.n_rot / 2), 1.0f);
    for (size_t i = ff.size() / 2; i < ff.size(); ++i) ff[i] = 1e30f;  // identity pairs
    const Weight hw = VectorWeight("norm", wv), hf = VectorWeight("freqs", ff);
    const Weight gw = gpu_->PrepareWeight(hw), gf = gpu_->PrepareWeight(hf);
    auto run = [&](backend::Backend& be, const Weight& w, const Weight& f, bool fused, int shift) {
      std::vector<int32_t> pos;
      for (int64_t r = 0; r < rows; ++r) pos.push_back(static_cast<int32_t>(r * 977 + 3 + shift));
      backend::IntTensor p = be.NewIntTensor(rows);
      be.Upload(pos, &p);
      Tensor t = Upload(be, x, rows, cols);
      const Weight* fp = c.freqs ? &f : nullptr;
      if (fused) {
        be.RmsNormRope(t, &w, 1e-6f, c.head_dim, p.first(rows), c.n_rot, 1e6f, fp, &t);
      } else {
        be.RmsNorm(t, &w, 1e-6f, c.head_dim, 1.0f, &t);
        be.Rope(&t, p.first(rows), c.head_dim, c.n_rot, 1e6f, fp);
      }
      return Host(be, t);
    };
    const auto fused = run(*gpu_, gw, gf, true, 0);
    EXPECT_TRUE(SameBits(fused, run(*gpu_, gw, gf, false, 0)));
    EXPECT_FALSE(SameBits(fused, run(*gpu_, gw, gf, true, 1)));  // the comparison can fail
    const auto cpu = run(cpu_, hw, hf, true, 0);
    for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(fused[i], cpu[i], 2e-5f) << i;
  }
}

// MatMuls of weights whose activations quantize alike (Q4_K and Q6_K: 256-element blocks) and
// unalike (Q8_0: 32; F16: the float kernels), for the row counts of decode, verify and prefill:
// every output equals the separate MatMul's bits. Control: another input changes them.
TEST_F(CudaFusedOps, MatMulsShareQuantizedInputsWithTheSameBits) {
  const int64_t k = 512;
  const DType types[] = {DType::Q4_K, DType::Q8_0, DType::Q6_K, DType::F16};
  std::vector<std::vector<uint8_t>> bytes(std::size(types));
  std::vector<Weight> ws;
  for (size_t i = 0; i < std::size(types); ++i)
    ws.push_back(gpu_->PrepareWeight(
        QuantWeight(types[i], {k, 96 + 32 * static_cast<int64_t>(i)}, 40 + 10 * i, &bytes[i])));
  for (int64_t rows : {1, 3, 20}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    auto run = [&](bool shared, uint32_t seed) {
      Tensor x = Upload(*gpu_, testing::GaussianRow(rows * k, seed), rows, k);
      std::vector<Tensor> ys;
      for (const Weight& w : ws) ys.push_back(gpu_->NewTensor(rows, w.ne[1]));
      std::vector<backend::Backend::MatMulOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], &ys[i]});
      if (shared)
        gpu_->MatMuls(x, outs);
      else
        for (const auto& o : outs) gpu_->MatMul(*o.w, x, o.y);
      std::vector<std::vector<float>> out;
      for (const Tensor& y : ys) out.push_back(Host(*gpu_, y));
      return out;
    };
    const auto shared = run(true, 7), alone = run(false, 7), other = run(true, 8);
    for (size_t i = 0; i < ws.size(); ++i) {
      SCOPED_TRACE(std::string(Name(types[i])));
      EXPECT_TRUE(SameBits(shared[i], alone[i]));
      EXPECT_FALSE(SameBits(shared[i], other[i]));  // the comparison can fail
    }
  }
}

}  // namespace
}  // namespace lockstep
