// The CUDA kernel lab's timing half: each matmul format at 1..512 activation rows on a weight
// several times the L2, next to the device-to-device copy bandwidth measured in the same run
// (the roofline a memory-bound GEMV is held to). Correctness lives in tests/cuda_ops_test.cpp.
// Options: kUsage below, or `cuda_kernels_bench --help`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_common.h"
#include "core/dtype.h"
#include "testing/encode.h"
#include "testing/quant_weights.h"
#include "testing/random.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::string> formats{"F16",  "BF16", "Q8_0",   "Q6_K", "Q5_K",
                                   "Q4_K", "Q4_0", "IQ4_XS", "MXFP4"};
  std::vector<int> rows{1, 2, 4, 8, 16, 32, 64, 512};
  int64_t k = 4096, n = 65536;
};

constexpr bench::Usage kUsage{
    "cuda_kernels_bench",
    "usage: cuda_kernels_bench [options]\n"
    "CUDA matmul per weight format and row count against the device copy bandwidth, then the\n"
    "small ops of a decode row (prints SKIPPED and exits 0 without a CUDA device).\n"
    "  --formats F,F,...   weight formats (default F16,BF16,Q8_0,Q6_K,Q5_K,Q4_K,Q4_0,IQ4_XS,\n"
    "                      MXFP4)\n"
    "  --rows N,N,...      activation rows per matmul (default 1,2,4,8,16,32,64,512)\n"
    "  --k K               weight columns (default 4096)\n"
    "  --n N               weight rows (default 65536)\n"
    "  -h, --help          print this and exit\n"};

std::vector<std::string> Split(const std::string& option, const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  if (out.empty()) kUsage.Error(option + ": an empty list");
  return out;
}

Args ParseArgs(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (key == "--formats") {
      a.formats = Split(key, value());
    } else if (key == "--rows") {
      a.rows.clear();
      for (const auto& r : Split(key, value())) a.rows.push_back(std::max(1, std::atoi(r.c_str())));
    } else if (key == "--k") {
      a.k = std::atoll(value());
    } else if (key == "--n") {
      a.n = std::atoll(value());
    } else {
      kUsage.Unknown(key);
    }
  }
  return a;
}

// Host bytes of an n-row weight: 512 distinct quantized rows repeated (quantizing every row
// would take minutes; the device reads every byte either way).
// (Used only by the CUDA measurements: a CPU-only build compiles it unused.)
[[maybe_unused]] std::vector<uint8_t> WeightBytes(DType type, int64_t k, int64_t n) {
  const size_t row_bytes = RowBytes(type, k);
  const int64_t distinct = std::min<int64_t>(n, 512);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(n));
  for (int64_t r = 0; r < distinct; ++r) {
    const auto row = testing::GaussianRow(k, 1000 + static_cast<uint32_t>(r), 0.5f);
    uint8_t* dst = bytes.data() + row_bytes * static_cast<size_t>(r);
    if (!testing::EncodeRow(type, row, dst)) {  // a type lockstep cannot quantize (IQ4_XS)
      const auto random = testing::RandomWeights(type, k, 1000 + static_cast<uint32_t>(r));
      std::memcpy(dst, random.data(), row_bytes);
    }
  }
  for (int64_t r = distinct; r < n; ++r)
    std::memcpy(bytes.data() + row_bytes * static_cast<size_t>(r),
                bytes.data() + row_bytes * static_cast<size_t>(r % distinct), row_bytes);
  return bytes;
}

#if LOCKSTEP_HAS_CUDA
// Seconds per call of f, from enough calls to run past 50 ms (after one warm-up call).
template <class F>
double TimePerCall(backend::CudaBackend& be, F&& f) {
  f();
  be.Synchronize();
  int calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    be.Synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0.05 || calls >= 1 << 14) return s / calls;
    calls *= 4;
  }
}

// GPU time of one `op` at a decode shape: 100 of them captured into one graph and replayed, so
// launch overhead stays out (what a replayed decode step pays for the op).
template <class F>
double ReplayedTime(backend::CudaBackend& be, F&& op) {
  constexpr int kReps = 100;
  auto replays = be.NewReplays();
  auto run = [&] {
    be.RunReplayable(replays.get(), 1, [&] {
      for (int i = 0; i < kReps; ++i) op();
    });
  };
  run();  // plain
  run();  // captured
  return TimePerCall(be, run) / kReps;
}

backend::Tensor RandomTensor(backend::CudaBackend& be, int64_t rows, int64_t cols, uint32_t seed) {
  backend::Tensor t = be.NewTensor(rows, cols);
  be.FromHost(testing::GaussianRow(rows * cols, seed), &t);
  return t;
}

// A prompt pass's attention: 512 causal queries (positions 0..511 of one sequence) in the heads
// of 31B's sliding layers (32 x 256 over 16 KV heads) and full layers (32 x 512 over 4).
template <class Report>
void PrefillAttention(backend::CudaBackend& be, const Report& report) {
  constexpr int kRows = 512;
  struct Heads {
    int n_head, n_head_kv, head_dim;
  };
  for (const Heads h : {Heads{32, 16, 256}, Heads{32, 4, 512}}) {
    backend::KvLayerView kv;
    const int64_t width = static_cast<int64_t>(h.n_head_kv) * h.head_dim;
    backend::Tensor k = RandomTensor(be, kRows, width, 3), v = RandomTensor(be, kRows, width, 4);
    kv.k = k.data();
    kv.v = v.data();
    kv.k_width = kv.v_width = width;
    kv.ring = kRows;
    kv.n_seq = 1;
    kv.n_ctx = kRows;
    std::vector<int32_t> positions(kRows), slots(kRows, 0);
    for (int i = 0; i < kRows; ++i) positions[static_cast<size_t>(i)] = i;
    backend::IntTensor pos = be.NewIntTensor(kRows), seq = be.NewIntTensor(kRows);
    be.Upload(positions, &pos);
    be.Upload(slots, &seq);
    backend::Tensor q = RandomTensor(be, kRows, h.n_head * h.head_dim, 5),
                    out = be.NewTensor(kRows, h.n_head * h.head_dim);
    const backend::RowInfo rows{pos.first(kRows), seq.first(kRows)};
    report(fmt::format("attention prefill {} queries, {} heads x {} ({} kv heads)", kRows, h.n_head,
                       h.head_dim, h.n_head_kv),
           ReplayedTime(be, [&] {
             be.Attention(q, kv, h.n_head, h.n_head_kv, h.head_dim, 0, true, rows, &out);
           }));
  }
}

// The small ops of one decode row at Gemma 4 shapes, each alone on the GPU.
void DecodeOps(backend::CudaBackend& be) {
  std::printf("\nops of one decode row (GPU time, replayed)\n%-44s %10s\n", "op", "us");
  auto report = [](const std::string& what, double s) {
    std::printf("%-44s %10.2f\n", what.c_str(), s * 1e6);
  };
  for (int64_t d : {1536, 5376}) {
    backend::Tensor x = RandomTensor(be, 1, d, 1), y = be.NewTensor(1, d);
    report(fmt::format("rms_norm row of {}", d),
           ReplayedTime(be, [&] { be.RmsNorm(x, nullptr, 1e-6f, d, 1.0f, &y); }));
  }
  {
    backend::Tensor q = RandomTensor(be, 1, 16 * 256, 2);
    report("rms_norm 16 heads of 256",
           ReplayedTime(be, [&] { be.RmsNorm(q, nullptr, 1e-6f, 256, 1.0f, &q); }));
  }
  struct Shape {
    DType type;
    int64_t k, n;
  };
  for (const Shape& m : {Shape{DType::F16, 1536, 1536}, Shape{DType::Q4_K, 2816, 2816},
                         Shape{DType::Q4_K, 2816, 4224}}) {
    std::vector<uint8_t> bytes = WeightBytes(m.type, m.k, m.n);
    backend::Weight host;
    host.name = "op_bench";
    host.type = m.type;
    host.ne = {m.k, m.n};
    host.data = bytes.data();
    host.row_bytes = RowBytes(m.type, m.k);
    const backend::Weight w = be.PrepareWeight(host);
    backend::Tensor x = RandomTensor(be, 1, m.k, 6), y = be.NewTensor(1, m.n);
    report(fmt::format("matmul {} {} -> {}", Name(m.type), m.k, m.n),
           ReplayedTime(be, [&] { be.MatMul(w, x, &y); }));
  }
  const int n_head = 16, n_head_kv = 8, head_dim = 256;
  {
    backend::Tensor q = RandomTensor(be, 1, n_head * head_dim, 7);
    backend::IntTensor pos = be.NewIntTensor(1);
    const int32_t p = 1000;
    be.Upload(std::span(&p, 1), &pos);
    report("rope 16 heads of 256", ReplayedTime(be, [&] {
             be.Rope(&q, pos.first(1), head_dim, head_dim, 10000.0f, nullptr);
           }));
  }
  for (int keys : {128, 1024, 8192}) {
    backend::KvLayerView kv;
    const int64_t width = static_cast<int64_t>(n_head_kv) * head_dim;
    backend::Tensor k = RandomTensor(be, keys, width, 3), v = RandomTensor(be, keys, width, 4);
    kv.k = k.data();
    kv.v = v.data();
    kv.k_width = kv.v_width = width;
    kv.ring = keys;
    kv.n_seq = 1;
    kv.n_ctx = keys;
    backend::IntTensor pos = be.NewIntTensor(1), seq = be.NewIntTensor(1);
    const int32_t last = keys - 1, slot = 0;
    be.Upload(std::span(&last, 1), &pos);
    be.Upload(std::span(&slot, 1), &seq);
    backend::Tensor q = RandomTensor(be, 1, n_head * head_dim, 5),
                    out = be.NewTensor(1, n_head * head_dim);
    const backend::RowInfo rows{pos.first(1), seq.first(1)};
    report(fmt::format("attention 16 heads x 256 over {} keys", keys), ReplayedTime(be, [&] {
             be.Attention(q, kv, n_head, n_head_kv, head_dim, 0, true, rows, &out);
           }));
  }
  PrefillAttention(be, report);
}

double CopyBandwidth(backend::CudaBackend& be) {
  const size_t bytes = size_t{2} << 30;
  auto a = be.NewBuffer(bytes), b = be.NewBuffer(bytes);
  const double s = TimePerCall(be, [&] { be.CopyBytes(b.get(), a.get(), bytes); });
  return 2.0 * static_cast<double>(bytes) / s;  // bytes read plus bytes written
}

int Run(const Args& a) {
  auto created = backend::CudaBackend::Create(0);
  if (!created.ok()) {
    std::printf("cuda_kernels_bench: SKIPPED (no CUDA device): %s\n",
                created.status().message().c_str());
    return 0;
  }
  backend::CudaBackend& be = **created;
  const double copy_bw = CopyBandwidth(be);
  std::printf("device %s, device-to-device copy %.0f GB/s (read + write)\n",
              be.device_name().c_str(), copy_bw / 1e9);
  std::printf("weight %lld x %lld\n\n", static_cast<long long>(a.n), static_cast<long long>(a.k));
  std::printf("%-7s %5s %10s %9s %7s %9s\n", "format", "rows", "us/call", "GB/s", "%copy",
              "TFLOP/s");
  const int max_rows = *std::max_element(a.rows.begin(), a.rows.end());
  const auto x_host = testing::GaussianRow(max_rows * a.k, 3);
  backend::Tensor x_all = be.NewTensor(max_rows, a.k);
  be.FromHost(x_host, &x_all);
  backend::Tensor y_all = be.NewTensor(max_rows, a.n);
  for (const std::string& name : a.formats) {
    const auto type = DTypeFromName(name);
    if (!type) {
      std::fprintf(stderr, "cuda_kernels_bench: unknown format %s\n", name.c_str());
      return 2;
    }
    std::vector<uint8_t> bytes = WeightBytes(*type, a.k, a.n);
    backend::Weight host;
    host.name = "bench_" + name;
    host.type = *type;
    host.ne = {a.k, a.n};
    host.data = bytes.data();
    host.row_bytes = RowBytes(*type, a.k);
    const backend::Weight w = be.PrepareWeight(host);
    for (int rows : a.rows) {
      const backend::Tensor x = x_all.View(rows, a.k);
      backend::Tensor y = y_all.View(rows, a.n);
      const double s = TimePerCall(be, [&] { be.MatMul(w, x, &y); });
      const double gbs = static_cast<double>(bytes.size()) / s / 1e9;
      std::printf("%-7s %5d %10.1f %9.0f %6.0f%% %9.2f\n", name.c_str(), rows, s * 1e6, gbs,
                  100.0 * gbs * 1e9 / copy_bw, 2.0 * rows * a.k * a.n / s / 1e12);
    }
  }
  DecodeOps(be);
  return 0;
}
#else
int Run(const Args&) {
  std::printf("cuda_kernels_bench: SKIPPED (no CUDA device): built without the CUDA backend\n");
  return 0;
}
#endif

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line reaches a pipe as it is printed
  return lockstep::Run(lockstep::ParseArgs(argc, argv));
}
