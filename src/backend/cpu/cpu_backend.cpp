// CpuBackend: memory management and the element-wise ops.
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "backend/activations.h"
#include "backend/cpu/activation_rows.h"
#include "backend/cpu/matmul_rows.h"
#include "core/check.h"
#include "quant/packed.h"
#include "quant/quant.h"

namespace lockstep::backend {

int64_t Weight::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  return n;
}

CpuBackend::CpuBackend(int n_threads)
    : pool_(n_threads),
      attn_scratch_(static_cast<size_t>(pool_.size())),
      worker_(static_cast<size_t>(pool_.size())),
      rows_scratch_(static_cast<size_t>(pool_.size() * kRowsScratchFloats)) {}

Tensor CpuBackend::NewTensor(int64_t rows, int64_t cols) {
  CHECK(rows >= 0 && cols >= 0);
  const size_t n = static_cast<size_t>(std::max<int64_t>(1, rows * cols));
  std::shared_ptr<float[]> buf(new float[n]);
  float* data = buf.get();
  return Wrap(std::shared_ptr<void>(buf, data), data, rows, cols);
}

IntTensor CpuBackend::NewIntTensor(int64_t n) {
  CHECK(n >= 0);
  std::shared_ptr<int32_t[]> buf(new int32_t[static_cast<size_t>(std::max<int64_t>(1, n))]());
  int32_t* data = buf.get();
  return WrapInts(std::shared_ptr<void>(buf, data), data, n);
}

void CpuBackend::Upload(std::span<const int32_t> src, IntTensor* t) {
  CHECKF(static_cast<int64_t>(src.size()) <= t->size(), "upload of {} ids into {}", src.size(),
         t->size());
  std::memcpy(t->data(), src.data(), src.size_bytes());
}

void CpuBackend::Download(const IntTensor& t, std::span<int32_t> out) {
  CHECK(static_cast<int64_t>(out.size()) <= t.size());
  std::memcpy(out.data(), t.data(), out.size_bytes());
}

void CpuBackend::ToHost(const Tensor& t, std::vector<float>* out) {
  out->assign(t.data(), t.data() + t.rows() * t.cols());
}

void CpuBackend::FromHost(std::span<const float> src, Tensor* t) {
  CHECK(static_cast<int64_t>(src.size()) == t->rows() * t->cols());
  std::memcpy(t->data(), src.data(), src.size_bytes());
}

Weight CpuBackend::PrepareWeight(Weight w) {
  // Matmul weights of the types with packed kernels are repacked once, here (the same bytes,
  // 16 rows interleaved per block); the mmapped view stays for row reads (GetRows of a tied
  // embedding) and for the row-by-row baseline path.
  if (w.use == WeightUse::kMatMul && w.ne.size() == 2 && quant::CanPack(w.type))
    w.packed = quant::Pack(w.type, w.data, w.row_bytes, w.n_rows(), w.ne[0], &pool_);
  // Expert stacks pack as one matrix when every expert's rows fill whole 16-row groups, so
  // expert e's group g is group e * ne[1] / 16 + g and no group mixes two experts.
  if (w.use == WeightUse::kExperts && pack_experts_ && w.ne.size() == 3 &&
      w.ne[1] % quant::kPackedCols == 0 && quant::CanPack(w.type))
    w.packed = quant::Pack(w.type, w.data, w.row_bytes, w.n_rows(), w.ne[0], &pool_);
  return w;
}

std::shared_ptr<void> CpuBackend::NewBuffer(size_t bytes) {
  // Value-initialised (zeroed) bytes: a cache row nobody wrote reads as zeros, not garbage.
  std::shared_ptr<uint8_t[]> buf(new uint8_t[std::max<size_t>(1, bytes)]());
  return std::shared_ptr<void>(buf, buf.get());
}

void CpuBackend::CopyBytes(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void WeightRowF32(const Weight& w, int64_t row, float* out) {
  quant::DequantizeRow(w.type, w.row(row), out, w.ne[0]);
}

void RmsNormRow(const float* x, const float* w, float eps, int64_t n, float extra_scale, float* y) {
  const float ss = quant::DotF32(x, x, n);
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * inv;
    if (w) v *= w[i];
    y[i] = v * extra_scale;
  }
}

namespace {
// Applies fn(row) over all rows, in parallel from 16 rows up (cheap per-row ops); each row is
// computed by one thread.
template <typename F>
void ForRows(ThreadPool& pool, int64_t rows, F&& fn) {
  pool.ParallelFor(rows, 8, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) fn(r);
  });
}
// Applies fn(row, begin, end) over spans of every row's columns, in parallel: for element-wise
// ops whose cost (tanh per element) is worth splitting even a single decode row; any split
// gives the same values.
template <typename F>
void ForSpans(ThreadPool& pool, int64_t rows, int64_t cols, F&& fn) {
  constexpr int64_t kSpan = 1024;
  const int64_t per_row = std::max<int64_t>(1, (cols + kSpan - 1) / kSpan);
  pool.ParallelFor(rows * per_row, 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t c0 = (i % per_row) * kSpan;
      fn(i / per_row, c0, std::min(cols, c0 + kSpan));
    }
  });
}
}  // namespace

void CpuBackend::Add(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && a.cols() == b.cols() && y->rows() == a.rows());
  const int64_t n = a.rows() * a.cols();
  for (int64_t i = 0; i < n; ++i) y->data()[i] = a.data()[i] + b.data()[i];
}

void CpuBackend::Mul(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && a.cols() == b.cols());
  const int64_t n = a.rows() * a.cols();
  for (int64_t i = 0; i < n; ++i) y->data()[i] = a.data()[i] * b.data()[i];
}

void CpuBackend::Scale(const Tensor& a, float s, Tensor* y) {
  const int64_t n = a.rows() * a.cols();
  for (int64_t i = 0; i < n; ++i) y->data()[i] = a.data()[i] * s;
}

void CpuBackend::ScaleByWeight(const Tensor& a, const Weight& s, Tensor* y) {
  float v;
  CHECK(s.ne[0] == 1);
  WeightRowF32(s, 0, &v);
  Scale(a, v, y);
}

void CpuBackend::GeluMul(const Tensor& gate, int64_t gate_col, const Tensor& up, int64_t up_col,
                         int64_t width, Tensor* y) {
  CHECK(y->cols() == width && gate.rows() == up.rows() && y->rows() == gate.rows());
  ForSpans(pool_, gate.rows(), width, [&](int64_t r, int64_t b, int64_t e) {
    GeluMulRow(gate.row(r) + gate_col + b, up.row(r) + up_col + b, y->row(r) + b, e - b);
  });
}

void CpuBackend::Gelu(const Tensor& x, Tensor* y) {
  CHECK(y->rows() == x.rows() && y->cols() == x.cols());
  ForSpans(pool_, x.rows(), x.cols(), [&](int64_t r, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y->row(r)[i] = GeluTanh(x.row(r)[i]);
  });
}

void CpuBackend::Softcap(const Tensor& x, float c, Tensor* y) {
  CHECK(y->rows() == x.rows() && y->cols() == x.cols());
  ForSpans(pool_, x.rows(), x.cols(), [&](int64_t r, int64_t b, int64_t e) {
    SoftcapRow(x.row(r) + b, c, y->row(r) + b, e - b);
  });
}

void CpuBackend::CopyCols(const Tensor& x, int64_t col, int64_t width, Tensor* y) {
  CHECK(col + width <= x.cols() && y->cols() == width && y->rows() == x.rows());
  for (int64_t r = 0; r < x.rows(); ++r)
    std::memcpy(y->row(r), x.row(r) + col, static_cast<size_t>(width) * sizeof(float));
}

void CpuBackend::GatherRows(const Tensor& x, std::span<const int32_t> rows, Tensor* y) {
  CHECK(y->rows() == static_cast<int64_t>(rows.size()) && y->cols() == x.cols());
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i] >= 0 && rows[i] < x.rows());
    std::memcpy(y->row(static_cast<int64_t>(i)), x.row(rows[i]),
                static_cast<size_t>(x.cols()) * sizeof(float));
  }
}

void CpuBackend::CopyRows(const Tensor& x, std::span<const int32_t> src, Tensor* y,
                          std::span<const int32_t> dst) {
  CHECK(src.size() == dst.size() && y->cols() == x.cols());
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(src[i] >= 0 && src[i] < x.rows() && dst[i] >= 0 && dst[i] < y->rows());
    std::memcpy(y->row(dst[i]), x.row(src[i]), static_cast<size_t>(x.cols()) * sizeof(float));
  }
}

void CpuBackend::Concat(const Tensor& a, const Tensor& b, Tensor* y) {
  CHECK(a.rows() == b.rows() && y->cols() == a.cols() + b.cols());
  for (int64_t r = 0; r < a.rows(); ++r) {
    std::memcpy(y->row(r), a.row(r), static_cast<size_t>(a.cols()) * sizeof(float));
    std::memcpy(y->row(r) + a.cols(), b.row(r), static_cast<size_t>(b.cols()) * sizeof(float));
  }
}

void CpuBackend::RmsNorm(const Tensor& x, const Weight* w, float eps, int64_t group,
                         float extra_scale, Tensor* y) {
  CHECK(x.cols() % group == 0 && y->rows() == x.rows() && y->cols() == x.cols());
  // Norm weights are F32 in every release: read them in place; other types are expanded into
  // a reused buffer.
  const float* wp = nullptr;
  if (w) {
    CHECKF(w->ne[0] == group, "norm weight {} has {} elements, group is {}", w->name, w->ne[0],
           group);
    if (w->type == DType::F32) {
      wp = static_cast<const float*>(w->data);
    } else {
      norm_w_.resize(static_cast<size_t>(group));
      WeightRowF32(*w, 0, norm_w_.data());
      wp = norm_w_.data();
    }
  }
  const int64_t groups = x.cols() / group;
  ForRows(pool_, x.rows(), [&](int64_t r) {
    for (int64_t g = 0; g < groups; ++g)
      RmsNormRow(x.row(r) + g * group, wp, eps, group, extra_scale, y->row(r) + g * group);
  });
}

const float* CpuBackend::RopeTable(std::span<const int32_t> pos, int n_rot, float base,
                                   const Weight* freq_factors) {
  const int half = n_rot / 2;
  // ff_i: the model's frequency factors (their first `half`), else none (1). Compared by value:
  // a table is reused only for the same angles, whatever model asks.
  std::span<const float> ff;
  if (freq_factors) {
    CHECK(freq_factors->ne[0] >= half);
    rope_ff_.resize(static_cast<size_t>(freq_factors->ne[0]));
    WeightRowF32(*freq_factors, 0, rope_ff_.data());
    ff = std::span<const float>(rope_ff_.data(), static_cast<size_t>(half));
  }
  for (const RopeAngles& t : rope_angles_)
    if (t.n_rot == n_rot && t.base == base &&
        std::equal(ff.begin(), ff.end(), t.freq_factors.begin(), t.freq_factors.end()) &&
        std::equal(pos.begin(), pos.end(), t.pos.begin(), t.pos.end()))
      return t.cos_sin.data();
  // theta_i = pos * base^(-2i/n_rot) / ff_i, evaluated in double then rounded: a pure function
  // of (pos, i), identical for every batch.
  rope_inv_freq_.resize(static_cast<size_t>(half));
  double* inv_freq = rope_inv_freq_.data();
  for (int i = 0; i < half; ++i)
    inv_freq[i] =
        std::pow(static_cast<double>(base), -2.0 * i / n_rot) / (ff.empty() ? 1.0f : ff[i]);
  RopeAngles& t = rope_angles_[rope_angles_next_];
  rope_angles_next_ = (rope_angles_next_ + 1) % rope_angles_.size();
  t.pos.assign(pos.begin(), pos.end());
  t.n_rot = n_rot;
  t.base = base;
  t.freq_factors.assign(ff.begin(), ff.end());
  t.cos_sin.resize(pos.size() * static_cast<size_t>(n_rot));
  float* cs = t.cos_sin.data();
  ForRows(pool_, static_cast<int64_t>(pos.size()), [&](int64_t r) {
    for (int i = 0; i < half; ++i) {
      const double theta = static_cast<double>(pos[static_cast<size_t>(r)]) * inv_freq[i];
      cs[(r * half + i) * 2] = static_cast<float>(std::cos(theta));
      cs[(r * half + i) * 2 + 1] = static_cast<float>(std::sin(theta));
    }
  });
  return cs;
}

void CpuBackend::Rope(Tensor* x, std::span<const int32_t> pos, int head_dim, int n_rot, float base,
                      const Weight* freq_factors) {
  CHECK(x->cols() % head_dim == 0 && static_cast<int64_t>(pos.size()) == x->rows());
  const int half = n_rot / 2;
  const float* cs = RopeTable(pos, n_rot, base, freq_factors);
  const int64_t heads = x->cols() / head_dim;
  ForRows(pool_, x->rows(), [&](int64_t r) {
    for (int i = 0; i < half; ++i) {
      const float c = cs[(r * half + i) * 2], s = cs[(r * half + i) * 2 + 1];
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x->row(r) + h * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = a * s + b * c;
      }
    }
  });
}

}  // namespace lockstep::backend
