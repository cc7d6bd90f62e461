// The CUDA backend's ops, each against a CPU reference (float64 for matmuls, the CPU backend for
// the rest: bit for bit where both run the same arithmetic), and its batch-invariance contract:
// a row's output is bit-identical whether it is computed alone or with others. Skipped, visibly,
// where lockstep was built without CUDA or the machine has no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "kv/kv_cache.h"
#include "quant/quant.h"
#include "testing/cuda_fixture.h"
#include "testing/encode.h"
#include "testing/random.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#endif

namespace lockstep {
namespace {

using backend::Tensor;
using backend::Weight;

// A weight of `type` with k columns and n rows, from seeded Gaussian values (host bytes).
struct HostWeight {
  std::vector<uint8_t> bytes;
  Weight view;
  std::vector<float> dequant;  // the values the weight holds, row-major [n, k]
};

bool MakeWeight(DType type, int64_t k, int64_t n, uint32_t seed, HostWeight* out) {
  const size_t row_bytes = RowBytes(type, k);
  out->bytes.resize(row_bytes * static_cast<size_t>(n));
  out->dequant.resize(static_cast<size_t>(k * n));
  for (int64_t r = 0; r < n; ++r) {
    const auto row = testing::GaussianRow(k, seed + static_cast<uint32_t>(r), 0.5f);
    uint8_t* dst = out->bytes.data() + row_bytes * static_cast<size_t>(r);
    if (!testing::EncodeRow(type, row, dst)) return false;
    quant::DequantizeRow(type, dst, out->dequant.data() + r * k, k);
  }
  out->view.name = std::string("w_") + std::string(Name(type));
  out->view.type = type;
  out->view.ne = {k, n};
  out->view.data = out->bytes.data();
  out->view.row_bytes = row_bytes;
  return true;
}

using testing::SameBits;
using testing::VectorWeight;

class CudaOps : public testing::CudaFixture {
 protected:
  backend::IntTensor Ids(const std::vector<int32_t>& ids) {
    backend::IntTensor t = gpu_->NewIntTensor(static_cast<int64_t>(ids.size()));
    gpu_->Upload(ids, &t);
    return t;
  }
};

constexpr DType kFormats[] = {DType::F32,    DType::F16,    DType::BF16, DType::Q8_0,
                              DType::Q4_0,   DType::Q4_1,   DType::Q5_0, DType::Q5_1,
                              DType::IQ4_NL, DType::MXFP4,  DType::Q4_K, DType::Q5_K,
                              DType::Q6_K,   DType::IQ4_XS, DType::Q2_K, DType::Q3_K};

// Every format: close to the float64 product of the values the weight holds, and every row's
// bits the same alone, in any grouping, and through MatMulRows.
TEST_F(CudaOps, MatMulEveryFormatIsAccurateAndBatchInvariant) {
  const int64_t k = 512, n = 77, rows = 13;
  const auto x_host = testing::GaussianRow(rows * k, 7);
  for (DType type : kFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    HostWeight hw;
    if (!MakeWeight(type, k, n, 100, &hw)) continue;
    const Weight w = gpu_->PrepareWeight(hw.view);
#if LOCKSTEP_HAS_CUDA
    // A format without a native kernel is expanded to BF16 at load: the GPU then holds the
    // BF16 rounding of the values, and that is what its product must match.
    if (!backend::cuda::HasNativeFormat(type))
      for (float& v : hw.dequant) v = BF16ToFloat(FloatToBF16(v));
#endif
    const Tensor x = Upload(x_host, rows, k);
    Tensor y = gpu_->NewTensor(rows, n);
    gpu_->MatMul(w, x, &y);
    const auto all = Host(y);
#if LOCKSTEP_HAS_CUDA
    // The integer path quantizes activations as the CPU does: cuda_matmul_int_test holds it to
    // the CPU's bits instead of this float64 bound.
    const bool check_accuracy = !backend::cuda::HasIntegerPath(type);
#else
    const bool check_accuracy = true;
#endif
    double err = 0, norm = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t i = 0; i < k; ++i)
          ref += static_cast<double>(hw.dequant[static_cast<size_t>(j * k + i)]) *
                 x_host[static_cast<size_t>(r * k + i)];
        err = std::max(err, std::fabs(ref - all[static_cast<size_t>(r * n + j)]));
        norm = std::max(norm, std::fabs(ref));
      }
    if (check_accuracy) {
      EXPECT_LT(err, 1e-5 * norm) << "max error " << err << " of " << norm;
    }
    // Groupings of 1, 2, 3, 5, 8 and 9 rows: the row-group templates and their tails.
    for (int64_t group : {1, 2, 3, 5, 8, 9}) {
      for (int64_t r0 = 0; r0 < rows; r0 += group) {
        const int64_t g = std::min(group, rows - r0);
        std::vector<float> part(x_host.begin() + r0 * k, x_host.begin() + (r0 + g) * k);
        Tensor yg = gpu_->NewTensor(g, n);
        gpu_->MatMul(w, Upload(part, g, k), &yg);
        const auto got = Host(yg);
        std::vector<float> want(all.begin() + r0 * n, all.begin() + (r0 + g) * n);
        ASSERT_TRUE(SameBits(got, want)) << "rows " << r0 << ".." << r0 + g;
      }
    }
    // MatMulRows: 5 listed weight rows per activation row equal the full matmul's elements.
    std::vector<int32_t> ids;
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < 5; ++i) ids.push_back(static_cast<int32_t>((r * 7 + i * 13) % n));
    const auto id_t = Ids(ids);
    Tensor ys = gpu_->NewTensor(rows, 5);
    gpu_->MatMulRows(w, x, id_t.span(), 5, &ys);
    const auto sel = Host(ys);
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < 5; ++i)
        ASSERT_EQ(testing::FloatBits(sel[static_cast<size_t>(r * 5 + i)]),
                  testing::FloatBits(all[static_cast<size_t>(r * n + ids[r * 5 + i])]));
  }
}

// Float weights whose rows are not whole 32-element chunks (small models' per-layer
// projections): accurate, and each row's bits the same alone as in the batch.
TEST_F(CudaOps, MatMulFloatRowsOfAnyLength) {
  const int64_t n = 37, rows = 6;
  for (int64_t k : {16, 40, 7}) {
    const auto x_host = testing::GaussianRow(rows * k, 11);
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(Name(type)) + " k=" + std::to_string(k));
      HostWeight hw;
      ASSERT_TRUE(MakeWeight(type, k, n, 200, &hw));
      const Weight w = gpu_->PrepareWeight(hw.view);
      ASSERT_EQ(w.type, type) << "converted although a kernel exists";
      Tensor y = gpu_->NewTensor(rows, n);
      gpu_->MatMul(w, Upload(x_host, rows, k), &y);
      const auto all = Host(y);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t i = 0; i < k; ++i)
            ref += static_cast<double>(hw.dequant[static_cast<size_t>(j * k + i)]) *
                   x_host[static_cast<size_t>(r * k + i)];
          ASSERT_NEAR(all[static_cast<size_t>(r * n + j)], ref, 1e-5 * (1 + std::fabs(ref)));
        }
        std::vector<float> one(x_host.begin() + r * k, x_host.begin() + (r + 1) * k);
        Tensor y1 = gpu_->NewTensor(1, n);
        gpu_->MatMul(w, Upload(one, 1, k), &y1);
        ASSERT_TRUE(
            SameBits(Host(y1), std::vector<float>(all.begin() + r * n, all.begin() + (r + 1) * n)));
      }
    }
  }
}

// Embedding rows decode to the CPU's floats, bit for bit (same decode arithmetic, same scale).
TEST_F(CudaOps, GetRowsMatchesCpuBitForBit) {
  const int64_t k = 256, n = 40;
  const std::vector<int32_t> ids = {3, 0, 39, 3, 17};
  for (DType type : kFormats) {
    SCOPED_TRACE(std::string(Name(type)));
    HostWeight hw;
    if (!MakeWeight(type, k, n, 200, &hw)) continue;
    const Weight w = gpu_->PrepareWeight(hw.view);
    if (w.type != type) continue;  // converted at load: compared through MatMul above
    Tensor y = gpu_->NewTensor(5, k);
    gpu_->GetRows(w, Ids(ids).span(), 1.5f, &y);
    Tensor yc = cpu_.NewTensor(5, k);
    cpu_.GetRows(hw.view, ids, 1.5f, &yc);
    std::vector<float> want;
    cpu_.ToHost(yc, &want);
    EXPECT_TRUE(SameBits(Host(y), want));
  }
}

// Element-wise ops run the CPU's arithmetic (shared activation functions): same bits.
TEST_F(CudaOps, ElementWiseOpsMatchCpuBitForBit) {
  const int64_t rows = 3, cols = 1000;
  const auto a = testing::GaussianRow(rows * cols, 1, 3.0f);
  const auto b = testing::GaussianRow(rows * cols, 2, 3.0f);
  auto run = [&](backend::Backend& be, auto op) {
    Tensor ta = be.NewTensor(rows, cols), tb = be.NewTensor(rows, cols);
    be.FromHost(a, &ta);
    be.FromHost(b, &tb);
    Tensor y = be.NewTensor(rows, cols);
    op(be, ta, tb, &y);
    std::vector<float> out;
    be.ToHost(y, &out);
    return out;
  };
  using Op = void (*)(backend::Backend&, const Tensor&, const Tensor&, Tensor*);
  const std::pair<const char*, Op> ops[] = {
      {"add",
       [](backend::Backend& be, const Tensor& x, const Tensor& z, Tensor* y) { be.Add(x, z, y); }},
      {"mul",
       [](backend::Backend& be, const Tensor& x, const Tensor& z, Tensor* y) { be.Mul(x, z, y); }},
      {"scale", [](backend::Backend& be, const Tensor& x, const Tensor&,
                   Tensor* y) { be.Scale(x, 0.37f, y); }},
      {"gelu",
       [](backend::Backend& be, const Tensor& x, const Tensor&, Tensor* y) { be.Gelu(x, y); }},
      {"softcap", [](backend::Backend& be, const Tensor& x, const Tensor&,
                     Tensor* y) { be.Softcap(x, 2.5f, y); }},
      {"gelu_mul", [](backend::Backend& be, const Tensor& x, const Tensor& z,
                      Tensor* y) { be.GeluMul(x, 0, z, 0, x.cols(), y); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(SameBits(run(*gpu_, op), run(cpu_, op)));
  }
}

// RMSNorm and RoPE: close to the CPU, and each row's bits independent of the other rows.
TEST_F(CudaOps, NormAndRopeAreAccurateAndRowInvariant) {
  const int64_t rows = 9, head = 64, cols = 4 * head;
  const auto x = testing::GaussianRow(rows * cols, 3);
  const auto wv = testing::GaussianRow(head, 4);
  HostWeight hw;
  hw.view = VectorWeight("norm", wv);
  std::vector<int32_t> pos;
  for (int64_t r = 0; r < rows; ++r) pos.push_back(static_cast<int32_t>(r * 37 + 5));
  auto run = [&](backend::Backend& be, const Weight& w, int64_t r0, int64_t n) {
    Tensor t = be.NewTensor(n, cols);
    be.FromHost(std::span(x).subspan(static_cast<size_t>(r0 * cols), static_cast<size_t>(n * cols)),
                &t);
    be.RmsNorm(t, &w, 1e-6f, head, 1.0f, &t);
    backend::IntTensor p = be.NewIntTensor(n);
    be.Upload(std::span(pos).subspan(static_cast<size_t>(r0), static_cast<size_t>(n)), &p);
    be.Rope(&t, p.first(n), static_cast<int>(head), static_cast<int>(head), 10000.0f, nullptr);
    std::vector<float> out;
    be.ToHost(t, &out);
    return out;
  };
  const Weight gw = gpu_->PrepareWeight(hw.view);
  const auto all = run(*gpu_, gw, 0, rows);
  const auto ref = run(cpu_, hw.view, 0, rows);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(all[i], ref[i], 2e-5f) << i;
  for (int64_t r = 0; r < rows; ++r) {
    const auto one = run(*gpu_, gw, r, 1);
    ASSERT_TRUE(
        SameBits(one, std::vector<float>(all.begin() + r * cols, all.begin() + (r + 1) * cols)))
        << "row " << r;
  }
}

// Whole-row norms (groups of 1024 or more take the block-per-row kernel): close to the CPU and
// each row's bits the same alone as in the batch.
TEST_F(CudaOps, RmsNormOfWholeRowsIsAccurateAndRowInvariant) {
  const int64_t rows = 5, cols = 1536;
  const auto x = testing::GaussianRow(rows * cols, 13);
  const auto wv = testing::GaussianRow(cols, 14);
  HostWeight hw;
  hw.view = VectorWeight("row_norm", wv);
  const Weight gw = gpu_->PrepareWeight(hw.view);
  auto run = [&](backend::Backend& be, const Weight& w, int64_t r0, int64_t n) {
    Tensor t = be.NewTensor(n, cols), y = be.NewTensor(n, cols);
    be.FromHost(std::span(x).subspan(static_cast<size_t>(r0 * cols), static_cast<size_t>(n * cols)),
                &t);
    be.RmsNorm(t, &w, 1e-6f, cols, 0.5f, &y);
    std::vector<float> out;
    be.ToHost(y, &out);
    return out;
  };
  const auto all = run(*gpu_, gw, 0, rows);
  const auto ref = run(cpu_, hw.view, 0, rows);
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_NEAR(all[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i]))) << i;
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_TRUE(SameBits(run(*gpu_, gw, r, 1),
                         std::vector<float>(all.begin() + r * cols, all.begin() + (r + 1) * cols)))
        << "row " << r;
}

// The heads of an attention test: query heads, KV heads, dims per head, cache types.
struct AttentionShape {
  int n_head = 4, n_head_kv = 2, head_dim = 64;
  std::vector<DType> caches = {DType::F32, DType::F16};
};

// Attention over paged (full) and ring (sliding) layers, two sequences of n_pos positions each:
// close to the CPU, and the bits of each of the first `solo` asked query rows (all by default)
// the same alone as in the batch.
void CheckAttention(backend::Backend& gpu, backend::Backend& cpu, int n_pos, int window,
                    const std::vector<int64_t>& asked, const AttentionShape& shape = {},
                    size_t solo = SIZE_MAX) {
  const int n_head = shape.n_head, n_head_kv = shape.n_head_kv, head_dim = shape.head_dim;
  solo = std::min(solo, asked.size());
  const int n_ctx = n_pos + 20;
  const int64_t width = n_head_kv * head_dim;
  for (DType cache : shape.caches) {
    for (bool sliding : {false, true}) {
      SCOPED_TRACE(std::string(Name(cache)) + (sliding ? " ring" : " paged") + " over " +
                   std::to_string(n_pos) + " positions");
      kv::CacheConfig cc;
      cc.layers = {{true, sliding, width, width}};
      cc.n_seq_max = 2;
      cc.n_ctx = n_ctx;
      cc.sliding_keep = window + 2;
      cc.max_step_rows = n_ctx;
      cc.type_k = cc.type_v = cache;
      std::vector<int32_t> pos, seq;
      for (int s = 0; s < 2; ++s)
        for (int p = 0; p < n_pos; ++p) pos.push_back(p), seq.push_back(s);
      const int64_t n = static_cast<int64_t>(pos.size());
      const auto k = testing::GaussianRow(n * width, 11), v = testing::GaussianRow(n * width, 12);
      const auto q = testing::GaussianRow(n * n_head * head_dim, 13);
      auto run = [&](backend::Backend& be, const std::vector<int64_t>& rows_asked, bool self) {
        auto cache_or = kv::KvCache::Create(be, cc);
        CHECK(cache_or.ok());
        kv::KvCache& kvc = **cache_or;
        for (int s = 0; s < 2; ++s) CHECK(kvc.PrepareWrite(s, 0, n_pos).ok());
        Tensor tk = be.NewTensor(n, width), tv = be.NewTensor(n, width);
        be.FromHost(k, &tk);
        be.FromHost(v, &tv);
        backend::IntTensor tp = be.NewIntTensor(n), ts = be.NewIntTensor(n);
        be.Upload(pos, &tp);
        be.Upload(seq, &ts);
        be.KvWrite(kvc.View(0), tk, tv, {tp.first(n), ts.first(n)});
        const int64_t m = static_cast<int64_t>(rows_asked.size());
        std::vector<float> qs;
        std::vector<int32_t> qp, qsq;
        for (int64_t r : rows_asked) {
          qs.insert(qs.end(), q.begin() + r * n_head * head_dim,
                    q.begin() + (r + 1) * n_head * head_dim);
          qp.push_back(pos[static_cast<size_t>(r)]);
          qsq.push_back(seq[static_cast<size_t>(r)]);
        }
        Tensor tq = be.NewTensor(m, n_head * head_dim), out = be.NewTensor(m, n_head * head_dim);
        be.FromHost(qs, &tq);
        backend::IntTensor p2 = be.NewIntTensor(m), s2 = be.NewIntTensor(m);
        be.Upload(qp, &p2);
        be.Upload(qsq, &s2);
        be.Attention(tq, kvc.View(0), n_head, n_head_kv, head_dim, sliding ? window : 0, self,
                     {p2.first(m), s2.first(m)}, &out);
        std::vector<float> o;
        be.ToHost(out, &o);
        return o;
      };
      for (bool self : {true, false}) {
        const auto all = run(gpu, asked, self);
        const auto ref = run(cpu, asked, self);
        // Unscaled scores of Gaussian rows grow as sqrt(head_dim) (about 22 at 512 dims), and
        // the softmax turns a score's absolute rounding error into the output's relative one:
        // each side's fp32 dot products (3xTF32 on the GPU, in another order than the CPU's)
        // err by some 1e-5 there.
        const float tol = 2e-5f * std::max(1.0f, static_cast<float>(head_dim) / 128.0f);
        for (size_t i = 0; i < all.size(); ++i)
          ASSERT_NEAR(all[i], ref[i], tol * (1.0f + std::fabs(ref[i]))) << i;
        for (size_t i = 0; i < solo; ++i) {
          const auto one = run(gpu, {asked[i]}, self);
          const int64_t w = n_head * head_dim;
          ASSERT_TRUE(
              SameBits(one, std::vector<float>(all.begin() + static_cast<int64_t>(i) * w,
                                               all.begin() + static_cast<int64_t>(i + 1) * w)))
              << "query " << i;
        }
      }
    }
  }
}

TEST_F(CudaOps, AttentionIsAccurateAndRowInvariant) {
  // Queries: the last 6 positions of each of two 60-position sequences.
  CheckAttention(*gpu_, cpu_, 60, 24, {54, 55, 56, 57, 58, 59, 114, 115, 116, 117, 118, 119});
}

// Both launch kinds take the asked rows: a batch of them a block per tile, each row alone a
// block per (tile, split) and the merge kernel.
// The launch choice exists only in CUDA builds; without CUDA the fixture skips before this runs.
void ExpectBothLaunchKinds([[maybe_unused]] size_t batch,
                           [[maybe_unused]] const AttentionShape& shape) {
#if LOCKSTEP_HAS_CUDA
  EXPECT_TRUE(backend::cuda::AttentionFoldsWholeTiles(static_cast<int64_t>(batch), shape.n_head,
                                                      shape.n_head_kv));
  EXPECT_FALSE(backend::cuda::AttentionFoldsWholeTiles(1, shape.n_head, shape.n_head_kv));
#endif
}

// Contexts long enough that every split holds several blocks (block b of 32 positions goes to
// split b % 32), with queries where only some do. The batch of 520 rows takes the whole-tile
// kernel, 72 of its rows alone the split kernel: their bits must agree.
TEST_F(CudaOps, AttentionSplitsLongContextsInvariantly) {
  const int n_pos = 2200;
  std::vector<int64_t> asked = {1,    31,   32,   255,       256,          700,
                                2047, 2048, 2199, n_pos + 5, n_pos + 2100, 2 * n_pos - 1};
  for (int64_t r = 3; asked.size() < 520; r += 7) asked.push_back(r % (2 * n_pos));
  const AttentionShape shape{8, 8, 64};
  ExpectBothLaunchKinds(asked.size(), shape);
  CheckAttention(*gpu_, cpu_, n_pos, 1500, asked, shape, 72);
}

// Gemma 4's head shapes and others: 512 dims with 8 query heads per KV head, 256 with 2, a width
// padded to the next tile width (80 of 128) with 16 heads per KV head, 20 heads per KV head (two
// tiles of one token), and 36 dims, whose F16 rows are not 16-byte aligned (every load one value
// at a time; its F32 rows are), over every cache type. 540 asked rows take the whole-tile kernel,
// 40 of them alone the split kernel. The asked rows mix both sequences and far-apart positions, so
// tiles hold rows of two sequences.
TEST_F(CudaOps, AttentionTilesEveryHeadShape) {
  const int n_pos = 300;
  std::vector<int64_t> asked = {1,   2,         31,        32,         33,
                                299, n_pos + 1, n_pos + 2, n_pos + 64, 2 * n_pos - 1};
  for (int64_t r = 5; asked.size() < 40; r += 19) asked.push_back(r);
  for (int64_t r = 3; asked.size() < 540; ++r)
    if (r != n_pos) asked.push_back(r);  // position 0 has no key before it
  for (const AttentionShape& shape : {AttentionShape{8, 1, 512, {DType::F32, DType::BF16}},
                                      AttentionShape{8, 4, 256, {DType::F16}},
                                      AttentionShape{16, 1, 80, {DType::F32, DType::F16}},
                                      AttentionShape{20, 1, 32, {DType::BF16}},
                                      AttentionShape{8, 4, 36, {DType::F16, DType::F32}}}) {
    SCOPED_TRACE(std::to_string(shape.n_head) + " heads, " + std::to_string(shape.n_head_kv) +
                 " kv heads, " + std::to_string(shape.head_dim) + " dims");
    ExpectBothLaunchKinds(asked.size(), shape);
    CheckAttention(*gpu_, cpu_, n_pos, 100, asked, shape, 40);
  }
}

// Mixture of experts (fused gate/up, per-expert scale): close to the CPU with F32 experts, and
// each row's bits the same alone as in the batch, for quantized expert formats too (Q4_K gate/up
// and Q8_0 down: the batch's 28 tasks take the grouped tensor-core path, whose expert tile table
// the gate/up matmul builds and the down matmul reuses).
TEST_F(CudaOps, MoeIsAccurateAndRowInvariant) {
  const int64_t d = 256, n_ff = 64, n_expert = 16, rows = 7;  // d: one Q4_K block
  const int n_used = 4;
  for (DType type : {DType::F32, DType::Q4_K}) {
    SCOPED_TRACE(std::string(Name(type)));
    HostWeight gate, down;
    ASSERT_TRUE(MakeWeight(type, d, 2 * n_ff * n_expert, 300, &gate));
    const DType down_type = type == DType::F32 ? DType::F32 : DType::Q8_0;
    ASSERT_TRUE(MakeWeight(down_type, n_ff, d * n_expert, 400, &down));
    gate.view.ne = {d, 2 * n_ff, n_expert};
    down.view.ne = {n_ff, d, n_expert};
    const auto scale_v = testing::GaussianRow(n_expert, 5);
    HostWeight scale;
    scale.view = VectorWeight("down_scale", scale_v);
    const auto x = testing::GaussianRow(rows * d, 6);
    const auto logits = testing::GaussianRow(rows * n_expert, 8, 2.0f);
    const Weight gg = gpu_->PrepareWeight(gate.view), gd = gpu_->PrepareWeight(down.view),
                 gs = gpu_->PrepareWeight(scale.view);
    auto run = [&](backend::Backend& be, const Weight& g, const Weight& dn, const Weight& sc,
                   int64_t r0, int64_t n) {
      Tensor tx = be.NewTensor(n, d), tl = be.NewTensor(n, n_expert), y = be.NewTensor(n, d);
      be.FromHost(std::span(x).subspan(static_cast<size_t>(r0 * d), static_cast<size_t>(n * d)),
                  &tx);
      be.FromHost(std::span(logits).subspan(static_cast<size_t>(r0 * n_expert),
                                            static_cast<size_t>(n * n_expert)),
                  &tl);
      be.MoeFfn(tx, tl, g, nullptr, dn, &sc, n_used, &y);
      std::vector<float> out;
      be.ToHost(y, &out);
      return out;
    };
    const auto all = run(*gpu_, gg, gd, gs, 0, rows);
    if (type == DType::F32) {
      const auto ref = run(cpu_, gate.view, down.view, scale.view, 0, rows);
      // Relative to the largest output: an element that is a difference of large expert terms
      // carries their rounding.
      float largest = 0.0f;
      for (float v : ref) largest = std::max(largest, std::fabs(v));
      for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(all[i], ref[i], 1e-5f * largest) << i;
    }
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_TRUE(SameBits(run(*gpu_, gg, gd, gs, r, 1),
                           std::vector<float>(all.begin() + r * d, all.begin() + (r + 1) * d)))
          << "row " << r;
  }
}

// Token selection: greedy, seeded sampling (top-k, top-p, min-p) and the repeat penalty pick
// the CPU backend's ids.
TEST_F(CudaOps, SelectTokensMatchesCpu) {
  const int64_t rows = 8, vocab = 20000;  // three slices of the device argmax
  auto logits = testing::GaussianRow(rows * vocab, 9, 4.0f);
  // A tie across slices: the lower id wins.
  logits[2 * vocab + 17] = logits[2 * vocab + 15000] = 100.0f;
  // Row 6's best token was just emitted: a strong repeat penalty must move greedy off it.
  logits[6 * vocab + 123] = 30.0f;
  const std::vector<int32_t> recent = {5, 123};
  std::vector<backend::SampleRow> sr(rows);
  for (int64_t r = 0; r < rows; ++r) {
    sr[static_cast<size_t>(r)].position = 10 + r;
    if (r % 2) sr[static_cast<size_t>(r)].settings = {0.8f, 42, r == 3 ? 40 : 0};
  }
  sr[5].settings.top_p = 0.9f;
  sr[5].settings.min_p = 0.05f;
  sr[6].settings.repeat_penalty = 100.0f;
  sr[6].recent = recent;
  auto run = [&](backend::Backend& be) {
    Tensor t = be.NewTensor(rows, vocab);
    be.FromHost(logits, &t);
    backend::IntTensor ids = be.NewIntTensor(rows);
    be.SelectTokens(t, sr, &ids);
    std::vector<int32_t> out(static_cast<size_t>(rows));
    be.Download(ids, out);
    return out;
  };
  const auto got = run(*gpu_);
  EXPECT_EQ(got, run(cpu_));
  EXPECT_EQ(got[2], 17);
  EXPECT_NE(got[6], 123) << "the repeat penalty was not applied";
}

}  // namespace
}  // namespace lockstep
