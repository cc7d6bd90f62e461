// CudaBackend: device memory, weight upload, and the op wrappers that check shapes and launch
// the kernels (each kernel lives with its launcher in a .cu file of this folder).
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "backend/cuda/attention.h"
#include "backend/cuda/common.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_int.h"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/norm_rope.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/select.h"
#include "core/check.h"
#include "core/half.h"
#include "quant/quant.h"

namespace lockstep::backend {

using namespace cuda;

namespace {

cudaStream_t S(CUstream_st* s) {
  return s;
}

// Pinned staging for step inputs: far more than one step uploads (ids, positions, block tables).
constexpr size_t kStagingBytes = size_t{4} << 20;

void CheckMatMulShapes(const Weight& w, const Tensor& x, const Tensor& y) {
  CHECKF(x.cols() == w.ne[0] && y.cols() == w.n_rows() && y.rows() == x.rows(),
         "cuda matmul {}: x [{}, {}], y [{}, {}], w has {} columns", w.name, x.rows(), x.cols(),
         y.rows(), y.cols(), w.ne[0]);
}

// A norm's optional F32 weight of n values, as the kernels take it (null: no weight).
const float* NormWeight(const Weight* w, int64_t n) {
  if (!w) return nullptr;
  CHECKF(w->type == DType::F32 && w->ne[0] == n, "norm weight {}", w->name);
  return static_cast<const float*>(w->data);
}

// RoPE's optional F32 frequency factors, one per rotation pair (null: none).
const float* FreqFactors(const Weight* f, int n_rot) {
  if (!f) return nullptr;
  CHECK(f->type == DType::F32 && f->ne[0] >= n_rot / 2);
  return static_cast<const float*>(f->data);
}

}  // namespace

int CudaBackend::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

Expected<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device) {
  const int n = DeviceCount();
  if (n == 0) return Status::Error("cuda: no CUDA device (or no driver) on this machine");
  if (device < 0 || device >= n)
    return Status::Errorf("cuda: device {} requested, {} present", device, n);
  if (cudaSetDevice(device) != cudaSuccess)
    return Status::Errorf("cuda: cannot use device {}: {}", device,
                          cudaGetErrorString(cudaGetLastError()));
  return std::make_unique<CudaBackend>(device);
}

CudaBackend::CudaBackend(int device) : device_(device), scratch_(kScratchSlots) {
  LS_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  LS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  cudaStream_t stream = nullptr;
  LS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  void* staging = nullptr;
  LS_CUDA_CHECK(cudaMallocHost(&staging, kStagingBytes));
  staging_ = std::shared_ptr<void>(staging, [](void* p) { cudaFreeHost(p); });
}

CudaBackend::~CudaBackend() {
  weights_.clear();
  scratch_.clear();
  if (stream_) cudaStreamDestroy(S(stream_));
}

void CudaBackend::Synchronize() {
  CHECKF(!capturing_, "cuda: a synchronization inside a replayable step");
  LS_CUDA_CHECK(cudaStreamSynchronize(S(stream_)));
  staging_used_ = 0;  // every staged copy has landed
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  CHECKF(!capturing_, "cuda: an upload inside a replayable step (it would replay stale bytes)");
  if (bytes > kStagingBytes) {  // larger than the staging buffer: copy and wait
    LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, S(stream_)));
    Synchronize();
    return;
  }
  if (staging_used_ + bytes > kStagingBytes) Synchronize();
  uint8_t* stage = static_cast<uint8_t*>(staging_.get()) + staging_used_;
  std::memcpy(stage, src, bytes);
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, S(stream_)));
  staging_used_ += (bytes + 15) & ~size_t{15};
}

std::shared_ptr<void> CudaBackend::Allocate(size_t bytes, const char* what) {
  CHECKF(!capturing_, "cuda: allocation of {} inside a replayable step", what);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 16));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    CHECKF(false, "cuda: cannot allocate {:.1f} MiB for {} ({:.1f} MiB free of {:.1f} MiB): {}",
           bytes / 1048576.0, what, free_b / 1048576.0, total_b / 1048576.0,
           cudaGetErrorString(err));
  }
  Wrote(p, bytes);  // new memory at an old tensor's address holds no copy of it
  // The stream may still use the memory when its last owner lets go: cudaFree waits for the
  // device, so nothing is freed under a running kernel.
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void* CudaBackend::Scratch(ScratchSlot slot, size_t bytes) {
  ScratchBuffer& s = scratch_[static_cast<size_t>(slot)];
  if (s.bytes < bytes) {
    s.ptr.reset();
    s.ptr = Allocate(bytes, "scratch");
    s.bytes = bytes;
    ++scratch_generation_;  // captures naming the old buffer are stale
  }
  return s.ptr.get();
}

void* CudaBackend::ActScratch(DType t, int64_t rows, int64_t k) {
  const size_t bytes = IntActivationBytes(t, rows, k);
  return bytes == 0 ? nullptr : Scratch(kActQ, bytes);
}

float* CudaBackend::SplitScratch(DType t, int64_t rows, int64_t n_out) {
  if (!SplitsIntMma(t, rows, n_out)) return nullptr;
  return static_cast<float*>(Scratch(kMmaSplit, static_cast<size_t>(rows * n_out) * sizeof(float)));
}

Tensor CudaBackend::NewTensor(int64_t rows, int64_t cols) {
  CHECK(rows >= 0 && cols >= 0);
  auto buf = Allocate(static_cast<size_t>(rows * cols) * sizeof(float), "a tensor");
  return Wrap(buf, static_cast<float*>(buf.get()), rows, cols);
}

IntTensor CudaBackend::NewIntTensor(int64_t n) {
  CHECK(n >= 0);
  auto buf = Allocate(static_cast<size_t>(n) * sizeof(int32_t), "an id tensor");
  LS_CUDA_CHECK(
      cudaMemsetAsync(buf.get(), 0, static_cast<size_t>(n) * sizeof(int32_t), S(stream_)));
  return WrapInts(buf, static_cast<int32_t*>(buf.get()), n);
}

void CudaBackend::ToHost(const Tensor& t, std::vector<float>* out) {
  out->resize(static_cast<size_t>(t.rows() * t.cols()));
  LS_CUDA_CHECK(cudaMemcpyAsync(out->data(), t.data(), out->size() * sizeof(float),
                                cudaMemcpyDeviceToHost, S(stream_)));
  Synchronize();
}

void CudaBackend::FromHost(std::span<const float> src, Tensor* t) {
  CHECK(static_cast<int64_t>(src.size()) == t->rows() * t->cols());
  Wrote(*t);
  LS_CUDA_CHECK(
      cudaMemcpyAsync(t->data(), src.data(), src.size_bytes(), cudaMemcpyHostToDevice, S(stream_)));
  Synchronize();  // the caller may reuse `src` at once
}

void CudaBackend::Upload(std::span<const int32_t> src, IntTensor* t) {
  CHECKF(static_cast<int64_t>(src.size()) <= t->size(), "upload of {} ids into {}", src.size(),
         t->size());
  if (src.empty()) return;
  CopyToDevice(t->data(), src.data(), src.size_bytes());
}

void CudaBackend::Download(const IntTensor& t, std::span<int32_t> out) {
  CHECK(static_cast<int64_t>(out.size()) <= t.size());
  if (out.empty()) return;
  LS_CUDA_CHECK(
      cudaMemcpyAsync(out.data(), t.data(), out.size_bytes(), cudaMemcpyDeviceToHost, S(stream_)));
  Synchronize();
}

Weight CudaBackend::PrepareWeight(Weight host) {
  Weight dev = host;
  const int64_t k = host.ne.empty() ? 1 : host.ne[0];
  const int64_t rows = host.n_rows();
  const bool vector = rows == 1;
  // Float rows of any length have kernels; block formats always hold whole 32-element chunks.
  const bool is_float =
      host.type == DType::F32 || host.type == DType::F16 || host.type == DType::BF16;
  const bool native = HasNativeFormat(host.type) && (k % 32 == 0 || is_float);
  std::vector<uint8_t> converted;
  const void* src = host.data;
  size_t bytes = host.row_bytes * static_cast<size_t>(rows);
  if (vector || !native) {
    // Vectors (norm weights, scales, frequency factors) are read as f32 by the kernels; a
    // matrix of a type without a native kernel is expanded once to BF16.
    const DType to = vector ? DType::F32 : DType::BF16;
    CHECKF(quant::CanDequantize(host.type),
           "cuda: tensor {} has type {}, which lockstep cannot read", host.name, Name(host.type));
    if (!vector)
      fmt::print(stderr, "cuda: {} ({}) has no native kernel; converted to BF16 at load\n",
                 host.name, Name(host.type));
    std::vector<float> row(static_cast<size_t>(k));
    converted.resize(RowBytes(to, k) * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      quant::DequantizeRow(host.type, host.row(r), row.data(), k);
      uint8_t* dst = converted.data() + RowBytes(to, k) * static_cast<size_t>(r);
      if (to == DType::F32) {
        std::memcpy(dst, row.data(), row.size() * sizeof(float));
      } else {
        for (int64_t i = 0; i < k; ++i) {
          const uint16_t b = FloatToBF16(row[static_cast<size_t>(i)]);
          std::memcpy(dst + 2 * i, &b, 2);
        }
      }
    }
    dev.type = to;
    dev.row_bytes = RowBytes(to, k);
    src = converted.data();
    bytes = converted.size();
  }
  // The raw-block matmuls copy a block's window in 16-byte cp.async pieces whose source size
  // stops at the block's end, but compute-sanitizer counts every piece as 16 bytes read: the last
  // Q6_K block (210 bytes) of a tensor then reads up to 12 bytes past an exact-size allocation
  // (memcheck, CudaIntMatMul at k = 2,816). A zeroed tail of one piece keeps every copy inside.
  constexpr size_t kTailBytes = 16;
  auto buf = Allocate(bytes + kTailBytes, host.name.c_str());
  LS_CUDA_CHECK(cudaMemcpy(buf.get(), src, bytes, cudaMemcpyHostToDevice));
  LS_CUDA_CHECK(cudaMemset(static_cast<uint8_t*>(buf.get()) + bytes, 0, kTailBytes));
  dev.data = buf.get();
  weights_.push_back(std::move(buf));
  weight_bytes_ += bytes;
  return dev;
}

std::shared_ptr<void> CudaBackend::NewBuffer(size_t bytes) {
  auto buf = Allocate(bytes, "the KV cache");
  LS_CUDA_CHECK(cudaMemset(buf.get(), 0, std::max<size_t>(bytes, 16)));
  return buf;
}

void CudaBackend::CopyBytes(void* dst, const void* src, size_t bytes) {
  Wrote(dst, bytes);
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(stream_)));
}

void CudaBackend::GetRows(const Weight& table, std::span<const int32_t> ids, float scale,
                          Tensor* y) {
  CHECK(y->rows() == static_cast<int64_t>(ids.size()) && y->cols() == table.ne[0]);
  Wrote(*y);
  LaunchGetRows(table.type, table.data, static_cast<int64_t>(table.row_bytes), table.ne[0],
                ids.data(), y->rows(), scale, y->data(), S(stream_));
}

void CudaBackend::MatMul(const Weight& w, const Tensor& x, Tensor* y) {
  CheckMatMulShapes(w, x, *y);
  Wrote(*y);
  if (HasIntegerPath(w.type) && x.rows() > 0 && y->cols() > 0) {
    LaunchIntMatMulQuantized(w.type, w.data, static_cast<int64_t>(w.row_bytes), y->cols(),
                             IntInput(w.type, x), x.rows(), y->data(),
                             SplitScratch(w.type, x.rows(), y->cols()), S(stream_));
    return;
  }
  LaunchMatMul(w.type, w.data, static_cast<int64_t>(w.row_bytes), w.ne[0], y->cols(), x.data(),
               x.rows(), y->data(), ActScratch(w.type, x.rows(), w.ne[0]), S(stream_));
}

void CudaBackend::MatMuls(const Tensor& x, std::span<const MatMulOut> outs) {
  const int64_t rows = x.rows();
  std::array<bool, 8> done{};
  CHECK(outs.size() <= done.size());
  for (const MatMulOut& o : outs) Wrote(*o.y);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (done[i]) continue;
    const Weight& wi = *outs[i].w;
    const int block = IntActivationBlock(wi.type);
    if (block == 0) {  // float kernels: nothing to share
      MatMul(wi, x, outs[i].y);
      continue;
    }
    // One quantized copy of x for this weight and every later one of the same block length.
    if (rows == 0) continue;
    const ActRows xq = IntInput(wi.type, x);
    for (size_t j = i; j < outs.size(); ++j) {
      const Weight& w = *outs[j].w;
      if (done[j] || IntActivationBlock(w.type) != block) continue;
      Tensor* y = outs[j].y;
      CheckMatMulShapes(w, x, *y);
      LaunchIntMatMulQuantized(w.type, w.data, static_cast<int64_t>(w.row_bytes), y->cols(), xq,
                               rows, y->data(), SplitScratch(w.type, rows, y->cols()), S(stream_));
      done[j] = true;
    }
  }
}

void CudaBackend::MatMulRows(const Weight& w, const Tensor& x, std::span<const int32_t> ids,
                             int64_t ids_per_row, Tensor* y) {
  CHECK(x.cols() == w.ne[0] && y->cols() == ids_per_row && y->rows() == x.rows());
  CHECK(static_cast<int64_t>(ids.size()) >= x.rows() * ids_per_row);
  Wrote(*y);
  LaunchGatheredMatMul(
      {w.type, w.data, static_cast<int64_t>(w.row_bytes), w.ne[0], ids_per_row, x.data(), 1,
       ids.data(), nullptr, 0, x.rows(), y->data(), ActScratch(w.type, x.rows(), w.ne[0])},
      S(stream_));
}

void CudaBackend::RmsNorm(const Tensor& x, const Weight* w, float eps, int64_t group,
                          float extra_scale, Tensor* y) {
  CHECK(x.cols() % group == 0 && y->rows() == x.rows() && y->cols() == x.cols());
  Wrote(*y);
  if (group == x.cols()) {  // whole rows: with the quantized copy a later matmul reads
    const NormQuant q = NormQuantFor(*y);
    const RmsNormOut out{NormWeight(w, group), extra_scale, y->data(), q};
    if (LaunchRmsNorms(x.data(), eps, x.rows(), x.cols(), std::span(&out, 1), S(stream_))) {
      NormQuantMade(*y, q);
      return;
    }
  }
  LaunchRmsNorm(x.data(), NormWeight(w, group), eps, group, extra_scale, x.rows(), x.cols(),
                y->data(), S(stream_));
}

void CudaBackend::Rope(Tensor* x, std::span<const int32_t> pos, int head_dim, int n_rot, float base,
                       const Weight* freq_factors) {
  CHECK(static_cast<int64_t>(pos.size()) == x->rows());
  Wrote(*x);
  LaunchRope(x->data(), pos.data(), x->rows(), x->cols(), head_dim, n_rot, base,
             FreqFactors(freq_factors, n_rot), S(stream_));
}

void CudaBackend::RmsNorms(const Tensor& x, float eps, std::span<const NormOut> outs) {
  RmsNormOut launch[3];
  bool fits = outs.size() <= std::size(launch);
  for (size_t o = 0; fits && o < outs.size(); ++o) {
    const Tensor& y = *outs[o].y;
    CHECK(y.rows() == x.rows() && y.cols() == x.cols());
    CHECKF(y.data() != x.data(), "rms_norms: an output overwrites the input");
    Wrote(y);
    launch[o] = {NormWeight(outs[o].w, x.cols()), outs[o].extra_scale, y.data(), NormQuantFor(y)};
  }
  // Rows under 1,024 values (the warp kernel) or more outputs: one launch each.
  if (!fits || !LaunchRmsNorms(x.data(), eps, x.rows(), x.cols(),
                               std::span<const RmsNormOut>(launch, outs.size()), S(stream_))) {
    Backend::RmsNorms(x, eps, outs);
    return;
  }
  for (size_t o = 0; o < outs.size(); ++o) NormQuantMade(*outs[o].y, launch[o].quant);
}

void CudaBackend::RmsNormSumNormAdd(const Tensor& a, const Weight* wa, const Tensor& b,
                                    const Weight* wb, const Weight* w, float eps,
                                    const Tensor& residual, std::span<Tensor* const, 2> work,
                                    Tensor* y) {
  for (const Tensor* t : {&b, &residual, static_cast<const Tensor*>(y)})
    CHECK(t->rows() == a.rows() && t->cols() == a.cols());
  CHECKF(y->data() != a.data() && y->data() != b.data() && y->data() != residual.data(),
         "rms_norm_sum_norm_add: the output overwrites an input");
  Wrote(*y);
  const int64_t d = a.cols();
  if (!LaunchRmsNormSumNormAdd(a.data(), NormWeight(wa, d), b.data(), NormWeight(wb, d),
                               NormWeight(w, d), eps, a.rows(), d, residual.data(), y->data(),
                               S(stream_)))
    Backend::RmsNormSumNormAdd(a, wa, b, wb, w, eps, residual, work, y);
}

void CudaBackend::RmsNormAdd(const Tensor& x, const Weight* w, float eps, const Tensor& residual,
                             Tensor* y) {
  CHECK(y->rows() == x.rows() && y->cols() == x.cols() && residual.rows() == x.rows() &&
        residual.cols() == x.cols());
  CHECKF(y->data() != residual.data(), "rms_norm_add: the output overwrites the residual");
  Wrote(*y);
  LaunchRmsNorm(x.data(), NormWeight(w, x.cols()), eps, x.cols(), 1.0f, x.rows(), x.cols(),
                y->data(), S(stream_), residual.data());
}

void CudaBackend::RmsNormRope(const Tensor& x, const Weight* w, float eps, int head_dim,
                              std::span<const int32_t> pos, int n_rot, float base,
                              const Weight* freq_factors, Tensor* y) {
  if (!CanFuseNormRope(head_dim, n_rot)) {
    Backend::RmsNormRope(x, w, eps, head_dim, pos, n_rot, base, freq_factors, y);
    return;
  }
  CHECK(static_cast<int64_t>(pos.size()) == x.rows() && y->rows() == x.rows() &&
        y->cols() == x.cols());
  Wrote(*y);
  LaunchRmsNormRope(x.data(), NormWeight(w, head_dim), eps, head_dim, pos.data(), n_rot, base,
                    FreqFactors(freq_factors, n_rot), x.rows(), x.cols(), y->data(), S(stream_));
}

void CudaBackend::Add(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && a.cols() == b.cols() && y->rows() == a.rows());
  Wrote(*y);
  LaunchBinary(Binary::kAdd, a.data(), b.data(), y->data(), a.rows() * a.cols(), S(stream_));
}

void CudaBackend::Mul(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && a.cols() == b.cols());
  Wrote(*y);
  LaunchBinary(Binary::kMul, a.data(), b.data(), y->data(), a.rows() * a.cols(), S(stream_));
}

void CudaBackend::Scale(const Tensor& a, float s, Tensor* y) {
  Wrote(*y);
  LaunchScale(a.data(), s, nullptr, y->data(), a.rows() * a.cols(), S(stream_));
}

void CudaBackend::ScaleByWeight(const Tensor& a, const Weight& s, Tensor* y) {
  CHECK(s.ne[0] == 1 && s.type == DType::F32);
  Wrote(*y);
  LaunchScale(a.data(), 1.0f, static_cast<const float*>(s.data), y->data(), a.rows() * a.cols(),
              S(stream_));
}

void CudaBackend::GeluMul(const Tensor& gate, int64_t gate_col, const Tensor& up, int64_t up_col,
                          int64_t width, Tensor* y) {
  CHECK(y->cols() == width && gate.rows() == up.rows() && y->rows() == gate.rows());
  Wrote(*y);
  LaunchGeluMul(gate.data(), gate.cols(), gate_col, up.data(), up.cols(), up_col, width,
                gate.rows(), y->data(), S(stream_));
}

void CudaBackend::Gelu(const Tensor& x, Tensor* y) {
  CHECK(y->rows() == x.rows() && y->cols() == x.cols());
  Wrote(*y);
  LaunchUnary(Unary::kGelu, x.data(), 0.0f, y->data(), x.rows() * x.cols(), S(stream_));
}

void CudaBackend::Softcap(const Tensor& x, float c, Tensor* y) {
  CHECK(y->rows() == x.rows() && y->cols() == x.cols());
  Wrote(*y);
  LaunchUnary(Unary::kSoftcap, x.data(), c, y->data(), x.rows() * x.cols(), S(stream_));
}

void CudaBackend::CopyCols(const Tensor& x, int64_t col, int64_t width, Tensor* y) {
  CHECK(col + width <= x.cols() && y->cols() == width && y->rows() == x.rows());
  Wrote(*y);
  LaunchCopy2D(x.data() + col, x.cols(), y->data(), width, x.rows(), width, S(stream_));
}

void CudaBackend::GatherRows(const Tensor& x, std::span<const int32_t> rows, Tensor* y) {
  CHECK(y->rows() == static_cast<int64_t>(rows.size()) && y->cols() == x.cols());
  Wrote(*y);
  LaunchCopyRows(x.data(), rows.data(), y->data(), nullptr, y->rows(), x.cols(), S(stream_));
}

void CudaBackend::CopyRows(const Tensor& x, std::span<const int32_t> src, Tensor* y,
                           std::span<const int32_t> dst) {
  CHECK(src.size() == dst.size() && y->cols() == x.cols());
  Wrote(*y);
  LaunchCopyRows(x.data(), src.data(), y->data(), dst.data(), static_cast<int64_t>(src.size()),
                 x.cols(), S(stream_));
}

void CudaBackend::Concat(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && y->cols() == a.cols() + b.cols() && y->rows() == a.rows());
  Wrote(*y);
  LaunchCopy2D(a.data(), a.cols(), y->data(), y->cols(), a.rows(), a.cols(), S(stream_));
  LaunchCopy2D(b.data(), b.cols(), y->data() + a.cols(), y->cols(), b.rows(), b.cols(), S(stream_));
}

void CudaBackend::KvWrite(const KvLayerView& kv, const Tensor& k, const Tensor& v,
                          const RowInfo& rows) {
  CHECK(kv.k && kv.v && k.cols() == kv.k_width && v.cols() == kv.v_width);
  CHECK(static_cast<int64_t>(rows.pos.size()) == k.rows());
  LaunchKvWrite(kv, k.data(), v.data(), rows.pos.data(), rows.seq.data(), k.rows(), S(stream_));
}

void CudaBackend::Attention(const Tensor& q, const KvLayerView& kv, int n_head, int n_head_kv,
                            int head_dim, int window, bool include_self, const RowInfo& rows,
                            Tensor* out) {
  CHECK(kv.k && kv.v && q.cols() == static_cast<int64_t>(n_head) * head_dim);
  CHECK(kv.k_width == static_cast<int64_t>(n_head_kv) * head_dim && kv.v_width == kv.k_width);
  CHECK(out->cols() == q.cols() && static_cast<int64_t>(rows.pos.size()) == q.rows());
  Wrote(*out);
  LaunchAttention(
      q.data(), kv, n_head, n_head_kv, head_dim, window, include_self, rows.pos.data(),
      rows.seq.data(), q.rows(), out->data(),
      Scratch(kAttnPartials, AttentionScratchBytes(q.rows(), n_head, n_head_kv, head_dim)),
      S(stream_));
}

}  // namespace lockstep::backend
