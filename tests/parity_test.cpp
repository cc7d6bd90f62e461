// Reference parity: lockstep's forward pass against transformers 5.17 float32 dumps of tiny
// random Gemma 4 models (testdata/parity, made by scripts/hf_reference.py). Argmax and the
// top-5 set must match at every position; logits and named intermediates must agree within
// the bounds below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "testing/reference.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// Why these bounds: both sides compute in float32 with different summation orders (lockstep
// sums 8 interleaved partials; torch uses blocked GEMMs), so each dot product differs by a few
// ulps of its terms' magnitude. Through ~6 layers of norms and residuals that grows to ~1e-5
// relative; logits (after the 30.0 softcap) stay within 1e-3 absolute. A real bug (a wrong norm,
// a missing scale, a wrong RoPE pair) moves logits by 1e-1 or more.
constexpr float kLogitBound = 1e-3f;
constexpr float kHiddenRelBound = 1e-4f;

using testing::ReadF32;
using testing::Top5;

// A parity model on a backend: the CPU, and the GPU (the same bounds: its kernels differ from
// the CPU's only in summation order, far below them).
struct ParityCase {
  std::string model;
  const char* backend;
};

void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << c.model << " on " << c.backend;
}

class TargetParity : public ::testing::TestWithParam<ParityCase> {
 protected:
  const std::string& ModelName() const { return GetParam().model; }
};

TEST_P(TargetParity, MatchesTransformers) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity" / ModelName();
  if (!fs::exists(dir / "meta.json")) GTEST_SKIP() << "no parity data at " << dir;
  auto created = backend::Create(GetParam().backend, 2);
  if (!created) GTEST_SKIP() << "SKIPPED (no " << GetParam().backend << " device)";
  backend::Backend& be = *created;
  std::ifstream in(dir / "meta.json");
  const auto meta = nlohmann::json::parse(in);
  auto m = model::Model::Load((dir / meta["model"].get<std::string>()).string(), be);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const model::Model& model = **m;
  const int V = model.config().n_vocab;
  int seq_index = 0;
  for (const auto& seq : meta["sequences"]) {
    auto kv = model.NewKv(1, 128).value();
    model::Batch batch;
    const auto tokens = seq["tokens"].get<std::vector<int32_t>>();
    const auto positions = seq["positions"].get<std::vector<int32_t>>();
    for (size_t i = 0; i < tokens.size(); ++i) batch.Add(tokens[i], positions[i], 0, true);
    std::map<std::string, std::vector<float>> seen;
    model::TensorObserver obs = [&](std::string_view name, const backend::Tensor& t) {
      be.ToHost(t, &seen[std::string(name)]);
    };
    model::ForwardResult out;
    ASSERT_TRUE(model.Forward(batch, *kv, &out, {.want_hidden = false, .observer = &obs}).ok());
    for (const auto& [name, info] : seq["tensors"].items()) {
      const auto ref = ReadF32(dir / info["file"].get<std::string>());
      const std::vector<float>& got = name == "result_output" ? out.logits : seen[name];
      ASSERT_EQ(got.size(), ref.size()) << ModelName() << " s" << seq_index << " " << name;
      float max_abs = 0, max_ref = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        max_abs = std::max(max_abs, std::fabs(got[i] - ref[i]));
        max_ref = std::max(max_ref, std::fabs(ref[i]));
      }
      if (name == "result_output") {
        EXPECT_LT(max_abs, kLogitBound) << ModelName() << " s" << seq_index;
        for (size_t r = 0; r < tokens.size(); ++r)
          EXPECT_EQ(Top5(&got[r * V], V), Top5(&ref[r * V], V)) << "row " << r;
        std::printf("[parity] %s s%d logits max abs diff %.3g (bound %.0e)\n", ModelName().c_str(),
                    seq_index, max_abs, kLogitBound);
      } else {
        EXPECT_LT(max_abs, kHiddenRelBound * std::max(1.0f, max_ref))
            << ModelName() << " s" << seq_index << " " << name << " (max |ref| " << max_ref << ")";
      }
    }
    ++seq_index;
  }
}

std::string CaseName(const ::testing::TestParamInfo<ParityCase>& p) {
  return p.param.model;
}
INSTANTIATE_TEST_SUITE_P(TinyModels, TargetParity,
                         ::testing::Values(ParityCase{"dense", "cpu"}, ParityCase{"moe", "cpu"},
                                           ParityCase{"ple", "cpu"}, ParityCase{"unified", "cpu"}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(CudaTinyModels, TargetParity,
                         ::testing::Values(ParityCase{"dense", "cuda"}, ParityCase{"moe", "cuda"},
                                           ParityCase{"ple", "cuda"},
                                           ParityCase{"unified", "cuda"}),
                         CaseName);

// Negative control: the same comparison flags a forward pass that ignores the layer scalar.
TEST(TargetParityNegativeControl, DetectsAPerturbedModel) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata/parity/dense";
  if (!fs::exists(dir / "meta.json")) GTEST_SKIP() << "no parity data";
  std::ifstream in(dir / "meta.json");
  const auto meta = nlohmann::json::parse(in);
  // A backend that drops the per-layer output scale (pitfall 9 of the architecture notes).
  struct Perturbed : backend::CpuBackend {
    using CpuBackend::CpuBackend;
    void ScaleByWeight(const backend::Tensor& a, const backend::Weight&,
                       backend::Tensor* y) override {
      Scale(a, 1.0f, y);
    }
  } be(1);
  auto m = model::Model::Load((dir / meta["model"].get<std::string>()).string(), be);
  ASSERT_TRUE(m.ok());
  const auto& seq = meta["sequences"][0];
  auto kv = (*m)->NewKv(1, 128).value();
  model::Batch batch;
  const auto tokens = seq["tokens"].get<std::vector<int32_t>>();
  for (size_t i = 0; i < tokens.size(); ++i) batch.Add(tokens[i], static_cast<int>(i), 0, true);
  model::ForwardResult out;
  ASSERT_TRUE((*m)->Forward(batch, *kv, &out).ok());
  const auto ref = ReadF32(dir / seq["tensors"]["result_output"]["file"].get<std::string>());
  float max_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    max_abs = std::max(max_abs, std::fabs(out.logits[i] - ref[i]));
  EXPECT_GT(max_abs, kLogitBound);
}

}  // namespace
}  // namespace lockstep
