// Whole-row norms that quantize their output for the integer matmuls (docs/kernels.md, "Norms
// that quantize their output"): the fused kernel's floats and quantized rows against the norm
// then QuantizeActivations, byte for byte, for several row counts, widths and both activation
// block lengths; and the backend's use of those copies (norm then matmuls, and the MoE's
// experts) against the unfused ops, with a copy dropped once its tensor is written. Negative
// controls: one perturbed input element changes the bytes; a stale copy would change the
// product. Skipped, visibly, where lockstep was built without CUDA or the machine has no CUDA
// device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "testing/cuda_fixture.h"
#include "testing/encode.h"
#include "testing/random.h"
#if LOCKSTEP_HAS_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/norm.h"
#endif

namespace lockstep {
namespace {

using backend::Tensor;
using backend::Weight;
using testing::QuantWeight;
using testing::SameBits;
using testing::VectorWeight;

// The fused path is one of session 13's kernels not yet run on a GPU: on for these tests.
class CudaNormQuant : public testing::CudaFixture {
 protected:
  testing::UnverifiedKernelsScope unverified_;
};

#if LOCKSTEP_HAS_CUDA
namespace cu = backend::cuda;

// Device bytes to the host.
std::vector<uint8_t> Bytes(const void* p, size_t n) {
  std::vector<uint8_t> h(n);
  CHECK(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

// The meaningful bytes of a quantized activation scratch (levels, scales, 16-level sums; not the
// alignment padding between them).
std::vector<uint8_t> ActBytes(const void* act, int block, int64_t rows, int64_t k) {
  const cu::ActLayout lay(block, rows, k);
  auto* base = static_cast<const uint8_t*>(act);
  std::vector<uint8_t> out = Bytes(base, static_cast<size_t>(rows * k));
  const auto d = Bytes(base + lay.q_bytes, static_cast<size_t>(rows * (k / block)) * sizeof(float));
  out.insert(out.end(), d.begin(), d.end());
  if (block == 256) {
    const auto s = Bytes(base + lay.q_bytes + lay.d_bytes,
                         static_cast<size_t>(rows * (k / 16)) * sizeof(int16_t));
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

// One launch of up to three whole-row norms of x, outputs 0 and 2 quantized in blocks of
// `block0` and `block2` (0: not), against the same norms unfused then QuantizeActivations of
// their floats: every float and every quantized byte equal, for the register widths of the
// kernel (8 and 24 values a thread) and row counts of decode, verify and prefill. Control: one
// element of x moved changes the floats and the quantized bytes of its row.
TEST_F(CudaNormQuant, FusedNormQuantizeEqualsNormThenQuantize) {
  struct Blocks {
    int b0, b2;
    int n_outs;
  };
  const DType type_of[] = {DType::Q8_0, DType::Q4_K};  // blocks of 32, 256
  for (int64_t cols : {1536, 2048, 2816, 5376}) {
    for (int64_t rows : {1, 2, 5, 33}) {
      for (const Blocks bl : {Blocks{256, 0, 1}, Blocks{32, 0, 1}, Blocks{256, 32, 3},
                              Blocks{32, 256, 3}, Blocks{256, 256, 2}}) {
        SCOPED_TRACE(std::to_string(cols) + " cols, " + std::to_string(rows) + " rows, blocks " +
                     std::to_string(bl.b0) + "/" + std::to_string(bl.b2) + ", " +
                     std::to_string(bl.n_outs) + " outputs");
        const int64_t n = rows * cols;
        auto x = testing::GaussianRow(n, 51 + static_cast<uint32_t>(cols + rows));
        const Weight w0 = gpu_->PrepareWeight(VectorWeight("n0", testing::GaussianRow(cols, 52)));
        const Weight w2 = gpu_->PrepareWeight(VectorWeight("n2", testing::GaussianRow(cols, 53)));
        const int blocks[3] = {bl.b0, 0, bl.b2};
        const float* weights[3] = {static_cast<const float*>(w0.data), nullptr,
                                   static_cast<const float*>(w2.data)};
        const float scales[3] = {1.0f, 0.25f, 0.5f};
        // The outputs' floats and quantized bytes, fused or not.
        auto run = [&](const std::vector<float>& xh, bool fused) {
          float *dx = nullptr, *dy[3] = {};
          void* act[3] = {};
          EXPECT_EQ(cudaMalloc(&dx, n * sizeof(float)), cudaSuccess);
          EXPECT_EQ(cudaMemcpy(dx, xh.data(), n * sizeof(float), cudaMemcpyHostToDevice),
                    cudaSuccess);
          cu::RmsNormOut outs[3];
          for (int o = 0; o < bl.n_outs; ++o) {
            EXPECT_EQ(cudaMalloc(&dy[o], n * sizeof(float)), cudaSuccess);
            EXPECT_EQ(cudaMemset(dy[o], 0x5A, n * sizeof(float)), cudaSuccess);  // poison
            const int b = o == 0 ? bl.b0 : o == 2 ? bl.b2 : 0;
            if (b != 0) {
              const size_t bytes = cu::ActivationBytes(b, rows, cols);
              EXPECT_EQ(cudaMalloc(&act[o], bytes), cudaSuccess);
              EXPECT_EQ(cudaMemset(act[o], fused ? 0x5A : 0xA5, bytes), cudaSuccess);
            }
            outs[o] = {weights[o], scales[o], dy[o], {}};
            if (fused && b != 0) {
              EXPECT_TRUE(cu::CanQuantizeInNorm(cols, b));
              outs[o].quant = {b, act[o]};
            }
          }
          EXPECT_TRUE(cu::LaunchRmsNorms(
              dx, 1e-6f, rows, cols, std::span<const cu::RmsNormOut>(outs, bl.n_outs), nullptr));
          for (int o = 0; o < bl.n_outs; ++o)
            if (!fused && act[o])
              cu::QuantizeActivations(type_of[blocks[o] == 256], dy[o], rows, cols, act[o],
                                      nullptr);
          EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<std::vector<uint8_t>> got;
          for (int o = 0; o < bl.n_outs; ++o) {
            got.push_back(Bytes(dy[o], n * sizeof(float)));
            if (act[o]) got.push_back(ActBytes(act[o], blocks[o], rows, cols));
            cudaFree(dy[o]);
            cudaFree(act[o]);
          }
          cudaFree(dx);
          return got;
        };
        const auto fused = run(x, true), plain = run(x, false);
        ASSERT_EQ(fused.size(), plain.size());
        for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(fused[i] == plain[i]) << "part " << i;
        // Control: one element of the last row moved; every part now differs from the plain run.
        x[static_cast<size_t>((rows - 1) * cols + 7)] += 0.75f;
        const auto moved = run(x, true);
        for (size_t i = 0; i < moved.size(); ++i)
          EXPECT_FALSE(moved[i] == plain[i]) << "part " << i;
      }
    }
  }
}

// Through the backend: a layer's norm, its q/k/v-like matmuls (Q4_K and Q6_K share 256-element
// blocks, Q8_0 has its own), the three norms of a MoE layer's residual stream with the MLP's
// matmuls, the router's F32 matmul and the experts (fused gate/up Q4_K, down Q8_0). The first
// pass teaches the backend which block each norm output needs; the second takes the norms'
// copies (counted), with every output's bits those of the first. Control: another input changes
// them.
TEST_F(CudaNormQuant, BackendNormCopiesFeedMatMulsAndExpertsWithTheSameBits) {
  auto* cuda = dynamic_cast<backend::CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  const int64_t d = 2816, n_ff = 256;
  const int n_expert = 4, n_used = 2;
  std::vector<std::vector<uint8_t>> bytes(7);
  const Weight wq = gpu_->PrepareWeight(QuantWeight(DType::Q4_K, {d, 512}, 10, &bytes[0]));
  const Weight wk = gpu_->PrepareWeight(QuantWeight(DType::Q6_K, {d, 256}, 20, &bytes[1]));
  const Weight wv = gpu_->PrepareWeight(QuantWeight(DType::Q8_0, {d, 256}, 30, &bytes[2]));
  const Weight wgate = gpu_->PrepareWeight(QuantWeight(DType::Q4_K, {d, 384}, 40, &bytes[3]));
  const Weight wrouter = gpu_->PrepareWeight(QuantWeight(DType::F32, {d, n_expert}, 50, &bytes[4]));
  const Weight wexp =
      gpu_->PrepareWeight(QuantWeight(DType::Q4_K, {d, 2 * n_ff, n_expert}, 60, &bytes[5]));
  const Weight wdown =
      gpu_->PrepareWeight(QuantWeight(DType::Q8_0, {n_ff, d, n_expert}, 70, &bytes[6]));
  const Weight n1 = gpu_->PrepareWeight(VectorWeight("n1", testing::GaussianRow(d, 1)));
  const Weight n2 = gpu_->PrepareWeight(VectorWeight("n2", testing::GaussianRow(d, 2)));
  const Weight n3 = gpu_->PrepareWeight(VectorWeight("n3", testing::GaussianRow(d, 3)));
  for (int64_t rows : {1, 3, 20}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    Tensor x = gpu_->NewTensor(rows, d), attn_norm = gpu_->NewTensor(rows, d);
    Tensor ffn_norm = gpu_->NewTensor(rows, d), router_in = gpu_->NewTensor(rows, d);
    Tensor moe_in = gpu_->NewTensor(rows, d), logits = gpu_->NewTensor(rows, n_expert);
    Tensor q = gpu_->NewTensor(rows, 512), k = gpu_->NewTensor(rows, 256);
    Tensor v = gpu_->NewTensor(rows, 256), gate = gpu_->NewTensor(rows, 384);
    Tensor moe_out = gpu_->NewTensor(rows, d);
    auto pass = [&](uint32_t seed) {
      gpu_->FromHost(testing::GaussianRow(rows * d, seed), &x);
      gpu_->RmsNorm(x, &n1, 1e-6f, d, 1.0f, &attn_norm);
      const backend::Backend::MatMulOut qkv[] = {{&wq, &q}, {&wk, &k}, {&wv, &v}};
      gpu_->MatMuls(attn_norm, qkv);
      const backend::Backend::NormOut norms[] = {
          {&n2, 1.0f, &ffn_norm}, {nullptr, 0.125f, &router_in}, {&n3, 1.0f, &moe_in}};
      gpu_->RmsNorms(x, 1e-6f, norms);
      const backend::Backend::MatMulOut mlp[] = {{&wgate, &gate}};
      gpu_->MatMuls(ffn_norm, mlp);
      gpu_->MatMul(wrouter, router_in, &logits);
      gpu_->MoeFfn(moe_in, logits, wexp, nullptr, wdown, nullptr, n_used, &moe_out);
      std::vector<float> all;
      for (const Tensor* t : {&q, &k, &v, &gate, &logits, &moe_out}) {
        const auto h = Host(*t);
        all.insert(all.end(), h.begin(), h.end());
      }
      return all;
    };
    const auto first = pass(7);
    const int64_t taught = cuda->quantized_in_norms();
    const auto second = pass(7);
    // q/k (one copy), gate/up, the experts: three matmul inputs from norm copies (the first
    // pass may have read some too, where a tensor took an earlier row count's address).
    EXPECT_EQ(cuda->quantized_in_norms() - taught, 3);
    EXPECT_TRUE(SameBits(first, second));
    EXPECT_FALSE(SameBits(first, pass(8)));  // the comparison can fail
  }
}

// A copy stops being current when its tensor is written: after the norm, the tensor overwritten
// (an upload, or an op writing it in place), a matmul of it equals the matmul of the new values
// in a tensor no norm wrote, and not the product of the norm's output it replaced (control).
TEST_F(CudaNormQuant, AWrittenTensorDropsItsCopy) {
  auto* cuda = dynamic_cast<backend::CudaBackend*>(gpu_.get());
  ASSERT_NE(cuda, nullptr);
  const int64_t d = 1536, rows = 2;
  std::vector<uint8_t> bytes;
  const Weight w = gpu_->PrepareWeight(QuantWeight(DType::Q4_K, {d, 128}, 80, &bytes));
  const Weight nw = gpu_->PrepareWeight(VectorWeight("n", testing::GaussianRow(d, 4)));
  const auto xh = testing::GaussianRow(rows * d, 5), other = testing::GaussianRow(rows * d, 6);
  Tensor x = Upload(xh, rows, d), y = gpu_->NewTensor(rows, d), out = gpu_->NewTensor(rows, 128);
  const backend::Backend::MatMulOut mm[] = {{&w, &out}};
  for (int i = 0; i < 2; ++i) {  // the second norm makes a copy
    gpu_->RmsNorm(x, &nw, 1e-6f, d, 1.0f, &y);
    gpu_->MatMuls(y, mm);
  }
  const auto of_norm = Host(out);
  const Tensor fresh = Upload(other, rows, d);
  gpu_->MatMul(w, fresh, &out);
  const auto of_other = Host(out);
  ASSERT_FALSE(SameBits(of_norm, of_other));  // the comparison can fail
  const int64_t used = cuda->quantized_in_norms();
  // Overwritten by an upload.
  gpu_->RmsNorm(x, &nw, 1e-6f, d, 1.0f, &y);
  gpu_->FromHost(other, &y);
  gpu_->MatMuls(y, mm);
  EXPECT_TRUE(SameBits(Host(out), of_other));
  // Overwritten in place by an op: y = y * 0 + other.
  Tensor zero = Upload(std::vector<float>(static_cast<size_t>(rows * d), 0.0f), rows, d);
  gpu_->RmsNorm(x, &nw, 1e-6f, d, 1.0f, &y);
  gpu_->Mul(y, zero, &y);
  gpu_->Add(y, fresh, &y);
  gpu_->MatMul(w, y, &out);
  EXPECT_TRUE(SameBits(Host(out), of_other));
  EXPECT_EQ(cuda->quantized_in_norms(), used);  // neither read a copy
  // Not overwritten: the copy is read.
  gpu_->RmsNorm(x, &nw, 1e-6f, d, 1.0f, &y);
  gpu_->MatMul(w, y, &out);
  EXPECT_TRUE(SameBits(Host(out), of_norm));
  EXPECT_EQ(cuda->quantized_in_norms(), used + 1);
}
#endif

}  // namespace
}  // namespace lockstep
