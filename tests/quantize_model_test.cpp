// `lockstep quantize`: every mix of the tiny parity models stays close to the transformers
// float32 logits, K-quant mixes of a synthetic 256-wide model stay close to its own float32
// forward, output bytes are reproducible, and bad input fails cleanly without an output file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <thread>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "quant/model_quantize.h"
#include "quant/quant.h"
#include "testing/files.h"
#include "testing/models.h"
#include "testing/reference.h"
#include "testing/run_cli.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using quant::Mix;

// Bounds per mix, from the worst case measured over dense/moe/ple x 2 sequences (45 rows; the
// "[quantize]" lines print the figures) with ~1.5x headroom on the logit difference and a few
// rows of slack on agreement. These tiny random models are chaotic: rounding the f32 weights to
// F16 alone moves logits by up to 0.46, so the low-bit logit bounds are loose (logits are
// softcapped at 30) and the informative checks are top-1 agreement far above chance (1/512)
// and the weight-error bounds of QuantizeWide. Rows are 64 wide, so K mixes fall back to
// 32-blocks: Q6_K -> Q8_0, Q5_K -> Q5_1, Q4_K -> Q5_0, Q3_K/Q2_K -> Q4_0.
// Measured worst max|dlogit| / top1 / top5: F16 0.46 / 45 / 43, BF16 3.6 / 44 / 30,
// Q8_0 = Q6_K 9.3 / 35 / 10, Q5_K_M 22.4 / 15 / 2, Q4_K_M 22.2 / 16 / 1, Q4_0 = Q2_K 24.1 / 11 / 0.
struct Bound {
  Mix mix;
  float max_abs;     // max |logit - reference|
  int min_top1_pct;  // rows whose argmax equals the reference argmax
  int min_top5_pct;  // rows whose top-5 set equals the reference top-5 set
};
constexpr Bound kParityBounds[] = {
    {Mix::F16, 0.75f, 100, 90}, {Mix::BF16, 5.5f, 95, 60},   {Mix::Q8_0, 14.0f, 70, 18},
    {Mix::Q6_K, 14.0f, 70, 18}, {Mix::Q5_K_M, 34.0f, 30, 0}, {Mix::Q4_K_M, 34.0f, 30, 0},
    {Mix::Q4_0, 37.0f, 20, 0},  {Mix::Q2_K, 37.0f, 20, 0},
};

using testing::ReadF32;
using testing::Top5;

fs::path TmpDir() {
  const fs::path d = fs::temp_directory_path() / "lockstep-tests" / "quantize";
  fs::create_directories(d);
  return d;
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Agreement {
  float max_abs = 0;
  int rows = 0, top1 = 0, top5 = 0;
};

void Accumulate(const std::vector<float>& got, const std::vector<float>& ref, int V, Agreement* a) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    a->max_abs = std::max(a->max_abs, std::fabs(got[i] - ref[i]));
  for (size_t r = 0; r < ref.size() / static_cast<size_t>(V); ++r) {
    const float* g = &got[r * V];
    const float* f = &ref[r * V];
    ++a->rows;
    a->top1 += std::max_element(g, g + V) - g == std::max_element(f, f + V) - f;
    a->top5 += Top5(g, V) == Top5(f, V);
  }
}

// Runs `path` over the parity sequences of `dir` and compares with the stored reference logits.
Agreement CompareWithReference(const std::string& path, const fs::path& dir) {
  std::ifstream in(dir / "meta.json");
  const auto meta = nlohmann::json::parse(in);
  backend::CpuBackend be(2);
  auto m = model::Model::Load(path, be);
  Agreement a;
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return a;
  for (const auto& seq : meta["sequences"]) {
    auto kv = (*m)->NewKv(1, 128).value();
    model::Batch batch;
    const auto tokens = seq["tokens"].get<std::vector<int32_t>>();
    const auto positions = seq["positions"].get<std::vector<int32_t>>();
    for (size_t i = 0; i < tokens.size(); ++i) batch.Add(tokens[i], positions[i], 0, true);
    model::ForwardResult out;
    EXPECT_TRUE((*m)->Forward(batch, *kv, &out).ok());
    const auto ref = ReadF32(dir / seq["tensors"]["result_output"]["file"].get<std::string>());
    Accumulate(out.logits, ref, (*m)->config().n_vocab, &a);
  }
  return a;
}

void ExpectWithin(const Agreement& a, const Bound& b, const std::string& what) {
  std::printf("[quantize] %-22s max|dlogit| %.4f (bound %.3g)  top1 %d/%d  top5 %d/%d\n",
              what.c_str(), a.max_abs, b.max_abs, a.top1, a.rows, a.top5, a.rows);
  EXPECT_LT(a.max_abs, b.max_abs) << what;
  EXPECT_GE(a.top1 * 100, b.min_top1_pct * a.rows) << what;
  EXPECT_GE(a.top5 * 100, b.min_top5_pct * a.rows) << what;
}

class QuantizeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeParity, EveryMixStaysCloseToTransformers) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity" / GetParam();
  if (!fs::exists(dir / "meta.json")) GTEST_SKIP() << "no parity data at " << dir;
  const std::string in = (dir / (GetParam() + ".gguf")).string();
  for (const Bound& b : kParityBounds) {
    const std::string name = fmt::format("{}-{}", GetParam(), quant::MixName(b.mix));
    const fs::path out = TmpDir() / (name + ".gguf");
    const Status s = quant::QuantizeModel(in, out.string(), b.mix, {.threads = 2});
    ASSERT_TRUE(s.ok()) << s.message();
    ExpectWithin(CompareWithReference(out.string(), dir), b, name);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, QuantizeParity, ::testing::Values("dense", "moe", "ple"));

// Models wide enough (256) for 256-element K blocks, so the K mixes are what they claim.
model::SyntheticSpec WideSpec(int n_layer) {
  model::SyntheticSpec s;
  s.n_vocab = 512;
  s.n_embd = 256;
  s.n_layer = n_layer;
  s.full_every = 4;
  s.head_dim_swa = 64;
  s.head_dim_full = 128;
  s.n_ff = 512;
  s.seed = 21;
  return s;
}

std::string WidePath(int n_layer = 2) {
  const fs::path p = TmpDir() / fmt::format("wide{}-f32.gguf", n_layer);
  if (!fs::exists(p)) {
    const Status s = model::WriteSyntheticModel(WideSpec(n_layer), testing::ScratchPath(p));
    if (!s.ok()) return "";
    fs::rename(testing::ScratchPath(p), p);
  }
  return p.string();
}

std::vector<float> WideLogits(const std::string& path) {
  backend::CpuBackend be(2);
  auto m = model::Model::Load(path, be);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  auto kv = (*m)->NewKv(1, 64).value();
  model::Batch batch;
  for (int i = 0; i < 24; ++i) batch.Add((i * 37 + 5) % 512, i, 0, true);
  model::ForwardResult out;
  EXPECT_TRUE((*m)->Forward(batch, *kv, &out).ok());
  return out.logits;
}

// Worst per-tensor relative RMS weight error (dequantized output vs f32 input) over the
// tensors that changed type: a model-independent measure of each block format.
double WorstWeightError(const std::string& in, const std::string& out) {
  auto a = gguf::File::Open(in);
  auto b = gguf::File::Open(out);
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return 1e9;
  double worst = 0;
  for (const auto& tb : (*b)->tensors()) {
    const auto* ta = (*a)->FindTensor(tb.name);
    if (!ta || ta->type == tb.type) continue;
    const int64_t n = tb.n_elements();
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    quant::DequantizeRow(ta->type, (*a)->TensorData(*ta), x.data(), n);
    quant::DequantizeRow(tb.type, (*b)->TensorData(tb), y.data(), n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += x[i] * x[i];
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

TEST(QuantizeWide, KMixesStayClose) {
  const std::string in = WidePath();
  ASSERT_FALSE(in.empty());
  const auto ref = WideLogits(in);
  // Reference: lockstep's own f32 forward of the same 2-layer model (no transformers dump).
  // Logit bounds ~1.5x the measured figure, agreement a few rows below it; weight-error bounds
  // ~1.5-2x the measured worst tensor. Measured max|dlogit| / top1 / top5 (of 24) / weight err:
  // F16 0.022/24/24/0.0002, Q8_0 0.81/24/17/0.0038, Q6_K 1.53/24/10/0.013,
  // Q5_K_M 3.04/24/6/0.028, Q4_K_M 2.78/24/4/0.055, Q4_0 2.98/24/1/0.065, Q2_K 4.23/24/0/0.23.
  // (Activations are quantized per row for integer dots, which adds to the logit error.)
  struct WideBound {
    Bound b;
    double weight_err;
  };
  constexpr WideBound kWide[] = {
      {{Mix::F16, 0.05f, 100, 95}, 0.001}, {{Mix::Q8_0, 1.2f, 95, 55}, 0.01},
      {{Mix::Q6_K, 2.3f, 95, 30}, 0.02},   {{Mix::Q5_K_M, 4.5f, 95, 15}, 0.04},
      {{Mix::Q4_K_M, 4.2f, 95, 8}, 0.08},  {{Mix::Q4_0, 4.5f, 95, 0}, 0.12},
      {{Mix::Q2_K, 6.5f, 80, 0}, 0.45},
  };
  for (const WideBound& wb : kWide) {
    const std::string name = fmt::format("wide-{}", quant::MixName(wb.b.mix));
    const fs::path out = TmpDir() / (name + ".gguf");
    ASSERT_TRUE(quant::QuantizeModel(in, out.string(), wb.b.mix, {.threads = 2}).ok());
    Agreement a;
    Accumulate(WideLogits(out.string()), ref, 512, &a);
    ExpectWithin(a, wb.b, name);
    const double err = WorstWeightError(in, out.string());
    std::printf("[quantize] %-22s worst tensor rel RMS weight error %.4f (bound %.3g)\n",
                name.c_str(), err, wb.weight_err);
    EXPECT_LT(err, wb.weight_err) << name;
  }
}

// The plan on an 8-layer model: Q6_K for the tied output (token_embd) and for attn_v/ffn_down
// on the use-more-bits layers (of 8: 0 as the first eighth, 3 and 6 as every third, 7 as the
// last), Q4_K elsewhere; norms and the layer scalar unchanged; Q2_K's Q3_K bumps.
TEST(QuantizeWide, MixPlansFollowTheRules) {
  auto f = gguf::File::Open(WidePath(8));
  ASSERT_TRUE(f.ok());
  auto plan = [&](Mix mix) {
    const auto types = quant::PlanTypes(**f, mix);
    std::map<std::string, DType> m;
    for (size_t i = 0; i < types.size(); ++i) m[(*f)->tensors()[i].name] = types[i];
    return m;
  };
  const auto t = plan(Mix::Q4_K_M);
  EXPECT_EQ(t.at("token_embd.weight"), DType::Q6_K);
  for (int il : {0, 3, 6, 7})
    EXPECT_EQ(t.at(fmt::format("blk.{}.ffn_down.weight", il)), DType::Q6_K) << il;
  for (int il : {1, 2, 4, 5})
    EXPECT_EQ(t.at(fmt::format("blk.{}.ffn_down.weight", il)), DType::Q4_K) << il;
  // attn_v is counted over the tensors present: full layers 3 and 7 have none (K = V), so of
  // the 6 (layers 0 1 2 4 5 6) the third and sixth, layers 2 and 6, get more bits.
  for (int il : {2, 6}) EXPECT_EQ(t.at(fmt::format("blk.{}.attn_v.weight", il)), DType::Q6_K) << il;
  for (int il : {0, 1, 4, 5})
    EXPECT_EQ(t.at(fmt::format("blk.{}.attn_v.weight", il)), DType::Q4_K) << il;
  EXPECT_EQ(t.at("blk.2.ffn_gate.weight"), DType::Q4_K);
  EXPECT_EQ(t.at("blk.2.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(t.at("blk.2.attn_norm.weight"), DType::F32);
  EXPECT_EQ(t.at("blk.2.layer_output_scale.weight"), DType::F32);
  EXPECT_EQ(plan(Mix::Q5_K_M).at("blk.1.ffn_down.weight"), DType::Q5_K);
  const auto q2 = plan(Mix::Q2_K);
  EXPECT_EQ(q2.at("blk.2.ffn_gate.weight"), DType::Q2_K);
  EXPECT_EQ(q2.at("blk.2.ffn_down.weight"), DType::Q3_K);
  EXPECT_EQ(q2.at("blk.2.attn_output.weight"), DType::Q3_K);
  EXPECT_EQ(q2.at("token_embd.weight"), DType::Q6_K);
  EXPECT_EQ(plan(Mix::Q8_0).at("token_embd.weight"), DType::Q8_0);
}

// Negative control for the accuracy bounds: a Q2_K model misses the Q8_0 bounds by far, so the
// comparisons above are able to fail.
TEST(QuantizeWide, BoundsDistinguishMixes) {
  const std::string in = WidePath();
  ASSERT_FALSE(in.empty());
  const fs::path out = TmpDir() / "wide-negctl-Q2_K.gguf";
  ASSERT_TRUE(quant::QuantizeModel(in, out.string(), Mix::Q2_K).ok());
  Agreement a;
  Accumulate(WideLogits(out.string()), WideLogits(in), 512, &a);
  EXPECT_GT(a.max_abs, 1.2f);                           // the Q8_0 logit bound
  EXPECT_GT(WorstWeightError(in, out.string()), 0.01);  // the Q8_0 weight-error bound
}

TEST(QuantizeModel, MetadataCopiedAndFileTypeSet) {
  const std::string in = (fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity/moe/moe.gguf").string();
  const fs::path out = TmpDir() / "meta-Q4_K_M.gguf";
  ASSERT_TRUE(quant::QuantizeModel(in, out.string(), Mix::Q4_K_M).ok());
  auto a = gguf::File::Open(in);
  auto b = gguf::File::Open(out.string());
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [k, v] : (*a)->metadata()) {
    if (k == "general.file_type" || k == "general.quantization_version") continue;
    const gguf::Value* w = (*b)->Find(k);
    ASSERT_NE(w, nullptr) << k;
    EXPECT_EQ(gguf::ToString(*w, 1u << 20), gguf::ToString(v, 1u << 20)) << k;
  }
  EXPECT_EQ((*b)->Find("general.file_type")->AsInt().value_or(-1), 15);
  EXPECT_EQ((*b)->Find("general.quantization_version")->AsInt().value_or(-1), 2);
  // The router and 1-D tensors keep their bytes exactly.
  for (const char* name : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_down_exps.scale",
                           "rope_freqs.weight", "blk.1.post_ffw_norm_2.weight"}) {
    const auto* ta = (*a)->FindTensor(name);
    const auto* tb = (*b)->FindTensor(name);
    ASSERT_TRUE(ta && tb) << name;
    EXPECT_EQ(tb->type, ta->type) << name;
    EXPECT_TRUE(std::equal((*a)->TensorData(*ta), (*a)->TensorData(*ta) + ta->nbytes,
                           (*b)->TensorData(*tb)))
        << name;
  }
}

TEST(QuantizeModel, SameBytesTwiceAndAtAnyThreadCount) {
  const std::string in = WidePath();
  ASSERT_FALSE(in.empty());
  std::string previous;
  for (Mix mix : {Mix::Q4_K_M, Mix::Q2_K, Mix::Q8_0}) {
    const fs::path a = TmpDir() / "twice-a.gguf", b = TmpDir() / "twice-b.gguf";
    ASSERT_TRUE(quant::QuantizeModel(in, a.string(), mix, {.threads = 1}).ok());
    ASSERT_TRUE(quant::QuantizeModel(in, b.string(), mix, {.threads = 2}).ok());
    EXPECT_EQ(ReadBytes(a), ReadBytes(b)) << quant::MixName(mix);
    ASSERT_TRUE(quant::QuantizeModel(in, b.string(), mix, {.threads = 1}).ok());
    EXPECT_EQ(ReadBytes(a), ReadBytes(b)) << quant::MixName(mix);
    // Control: the comparison sees a difference when there is one (another mix's bytes).
    EXPECT_NE(ReadBytes(a), previous) << quant::MixName(mix);
    previous = ReadBytes(a);
  }
}

TEST(QuantizeModel, CancelMidWriteLeavesNoFile) {
  const std::string in = WidePath();
  ASSERT_FALSE(in.empty());
  const fs::path out = TmpDir() / "cancelled.gguf";
  fs::remove(out);
  std::atomic<bool> cancel{false};
  bool tmp_seen = false;
  quant::QuantizeOptions opts;
  opts.cancel = &cancel;
  opts.progress = [&](const quant::QuantizeProgress& p) {
    if (p.tensor == 5) {
      tmp_seen = testing::TempSiblings(out) == 1;
      cancel = true;
    }
  };
  const Status s = quant::QuantizeModel(in, out.string(), Mix::Q4_K_M, opts);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.message().starts_with("interrupted")) << s.message();
  EXPECT_TRUE(tmp_seen);  // control: the temporary really existed mid-write
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(testing::TempSiblings(out), 0);
}

int RunCli(const std::string& args, std::string* output) {
  int rc = 0;
  *output = testing::RunCli(LOCKSTEP_BINARY, "quantize " + args, &rc);
  return rc;
}

// Ctrl-C or SIGTERM at any moment: the exit status tells the truth about the output (130: not
// written and absent; 0: written and valid), and no temporary is left. The interrupt used to arrive
// after the rename in some runs and report "not written" for a replaced file, and once (CI, a
// 600 ms SIGTERM) after the handler was restored at the end, killing a process that had written.
TEST(QuantizeCli, InterruptAtAnyMomentReportsWhatHappened) {
  const std::string in = WidePath();
  ASSERT_FALSE(in.empty());
  const fs::path out = TmpDir() / "interrupted.gguf";
  int interrupted = 0, written = 0;
  for (int run = 0; run < 14; ++run) {
    // Ctrl-C and SIGTERM (a service manager, `timeout`) go through the same guard.
    const int delay_ms = std::vector<int>{5, 20, 40, 80, 150, 300, 600}[run / 2];
    const int sig = run % 2 ? SIGTERM : SIGINT;
    fs::remove(out);
    const std::string cmd =
        fmt::format("{} quantize {} {} Q4_K_M -q", LOCKSTEP_BINARY, in, out.string());
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", ("exec " + cmd + " 2>/dev/null").c_str(), nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    if (rc == 130 || rc == -sig) {  // -sig: killed before the handler was installed
      ++interrupted;
      EXPECT_FALSE(fs::exists(out)) << "delay " << delay_ms << " signal " << sig;
    } else {
      EXPECT_EQ(rc, 0) << "delay " << delay_ms << " signal " << sig;
      ++written;
      auto f = gguf::File::Open(out.string());
      EXPECT_TRUE(f.ok()) << "delay " << delay_ms << " signal " << sig;
    }
    EXPECT_EQ(testing::TempSiblings(out), 0) << "delay " << delay_ms << " signal " << sig;
  }
  std::printf("  interrupted %d, written %d\n", interrupted, written);
  EXPECT_GT(interrupted, 0);  // the signal did land mid-write sometimes
}

TEST(QuantizeCli, BadInputFailsClearlyWithoutOutput) {
  const std::string in =
      (fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity/dense/dense.gguf").string();
  const fs::path out = TmpDir() / "cli-out.gguf";
  fs::remove(out);
  std::string msg;
  EXPECT_EQ(RunCli(fmt::format("{} {} Q3_X", in, out.string()), &msg), 2);
  EXPECT_NE(msg.find("unknown TYPE 'Q3_X'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Q4_K_M"), std::string::npos) << msg;  // lists the valid ones
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(RunCli(fmt::format("/nonexistent/x.gguf {} Q8_0 -q", out.string()), &msg), 1);
  EXPECT_NE(msg.find("/nonexistent/x.gguf"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(RunCli(fmt::format("{} {} Q8_0 -q", in, in), &msg), 1);
  EXPECT_NE(msg.find("same file"), std::string::npos) << msg;
  const std::string quantized = (TmpDir() / "cli-dense-Q8_0.gguf").string();
  ASSERT_TRUE(quant::QuantizeModel(in, quantized, Mix::Q8_0).ok());
  EXPECT_EQ(RunCli(fmt::format("{} {} Q4_0 -q", quantized, out.string()), &msg), 1);
  EXPECT_NE(msg.find("is already Q8_0"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(out));
  // Control: the same command with valid arguments succeeds and writes the file.
  EXPECT_EQ(RunCli(fmt::format("{} {} q8_0 --threads 2", in, out.string()), &msg), 0) << msg;
  // stderr is a pipe here: no progress bar (its \r redraws would litter logs), the summary stays.
  EXPECT_EQ(msg.find('\r'), std::string::npos) << msg;
  EXPECT_EQ(msg.find("tensor "), std::string::npos) << msg;
  EXPECT_NE(msg.find("wrote "), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(testing::TempSiblings(out), 0);
}

// --allow-requantize: an already quantized file is refused without it; with it every tensor gets
// the mix's type (the float file's plan) and its bytes are the row quantization of the
// dequantized source rows. Control: those bytes differ from quantizing the float file directly
// (the compounded rounding), so the comparison is not trivially met.
TEST(QuantizeCli, RequantizesOnlyWhenAskedFromDequantizedRows) {
  const std::string in =
      (fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity/dense/dense.gguf").string();
  const std::string q8 = (TmpDir() / "requant-Q8_0.gguf").string();
  const fs::path out = TmpDir() / "requant-Q4_K_M.gguf", direct = TmpDir() / "direct-Q4_K_M.gguf";
  ASSERT_TRUE(quant::QuantizeModel(in, q8, Mix::Q8_0).ok());
  ASSERT_TRUE(quant::QuantizeModel(in, direct.string(), Mix::Q4_K_M).ok());
  fs::remove(out);
  std::string msg;
  EXPECT_EQ(RunCli(fmt::format("{} {} Q4_K_M -q", q8, out.string()), &msg), 1);
  EXPECT_NE(msg.find("--allow-requantize"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(out));
  ASSERT_EQ(RunCli(fmt::format("{} {} Q4_K_M -q --allow-requantize", q8, out.string()), &msg), 0)
      << msg;
  auto src = gguf::File::Open(q8), got = gguf::File::Open(out.string()),
       ref = gguf::File::Open(direct.string());
  ASSERT_TRUE(src.ok() && got.ok() && ref.ok());
  int requantized = 0, differing = 0;
  for (const auto& t : (*src)->tensors()) {
    const auto* g = (*got)->FindTensor(t.name);
    const auto* r = (*ref)->FindTensor(t.name);
    ASSERT_TRUE(g && r) << t.name;
    EXPECT_EQ(g->type, r->type) << t.name;
    if (t.type == g->type) continue;
    ++requantized;
    const int64_t ne0 = t.ne[0], rows = t.n_elements() / ne0;
    std::vector<float> row(static_cast<size_t>(ne0));
    std::vector<uint8_t> want(g->nbytes);
    const size_t in_row = RowBytes(t.type, ne0), out_row = RowBytes(g->type, ne0);
    for (int64_t i = 0; i < rows; ++i) {
      quant::DequantizeRow(t.type, (*src)->TensorData(t) + i * in_row, row.data(), ne0);
      quant::QuantizeRow(g->type, row.data(), want.data() + i * out_row, ne0);
    }
    EXPECT_TRUE(std::equal(want.begin(), want.end(), (*got)->TensorData(*g))) << t.name;
    differing += !std::equal(want.begin(), want.end(), (*ref)->TensorData(*r));
  }
  EXPECT_GT(requantized, 0);
  EXPECT_GT(differing, 0);
}

// A synthetic model written directly in a mix has, tensor by tensor, the types `lockstep
// quantize` gives the same model written in F16 (the full-size GPU benchmark models are made
// this way: a 31B float file would not fit the disk). Covers dense K=V and MoE shapes, PLE.
TEST(QuantizeModel, SyntheticModelsWrittenInAMixHaveQuantizesTypes) {
  for (const char* shape : {"dense", "moe", "ple"}) {
    SCOPED_TRACE(shape);
    model::SyntheticSpec s = std::string(shape) == "moe"   ? testing::MoeSpec()
                             : std::string(shape) == "ple" ? testing::PleSpec()
                                                           : testing::DenseSpec();
    s.n_embd = 256;  // whole K-quant blocks, so the mix's own types (not fallbacks) are chosen
    s.n_ff = 512;
    s.n_ff_exp = s.n_expert > 0 ? 256 : 0;
    s.weight_type = DType::F16;
    const std::string dir = ::testing::TempDir() + "/mix-" + shape + "-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(model::WriteSyntheticModel(s, dir + "/f16.gguf").ok());
    s.mix = quant::Mix::Q4_K_M;
    ASSERT_TRUE(model::WriteSyntheticModel(s, dir + "/direct.gguf").ok());
    auto f16 = gguf::File::Open(dir + "/f16.gguf");
    auto direct = gguf::File::Open(dir + "/direct.gguf");
    ASSERT_TRUE(f16.ok() && direct.ok());
    const auto plan = quant::PlanTypes(**f16, quant::Mix::Q4_K_M);
    const auto& tensors = (*direct)->tensors();
    ASSERT_EQ(tensors.size(), plan.size());
    int quantized = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(Name(tensors[i].type), Name(plan[i])) << tensors[i].name;
      quantized += plan[i] == DType::Q4_K || plan[i] == DType::Q6_K;
    }
    EXPECT_GT(quantized, 8);  // the mix really chose block formats
    // Negative control: a model written in another mix is told apart by the same comparison.
    s.mix = quant::Mix::Q8_0;
    ASSERT_TRUE(model::WriteSyntheticModel(s, dir + "/other.gguf").ok());
    auto other = gguf::File::Open(dir + "/other.gguf");
    ASSERT_TRUE(other.ok());
    int differ = 0;
    for (size_t i = 0; i < plan.size(); ++i) differ += (*other)->tensors()[i].type != plan[i];
    EXPECT_GT(differ, 0) << "the type comparison cannot see a different mix";
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace lockstep
