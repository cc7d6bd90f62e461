// CUDA graphs: a decode whose steps are replayed from captures emits the tokens of the same
// decode run op by op, for dense and MoE models, greedy and sampled, with prompts in chunks of
// several sizes; a negative control keyed without the step's shape is caught. Skipped, visibly,
// without a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "model/model.h"
#include "testing/models.h"
#include "testing/synthetic.h"
#if LOCKSTEP_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace lockstep {
namespace {

#if LOCKSTEP_HAS_CUDA
// Runs every step op by op (no replays): the reference.
class OpByOpCudaBackend : public backend::CudaBackend {
 public:
  using CudaBackend::CudaBackend;
  std::unique_ptr<backend::Replays> NewReplays() override { return nullptr; }
};

// Negative control: every step shares one capture whatever its rows, so a prompt chunk of
// another size (or a decode step) replays a capture made for a different shape.
class ShapeBlindReplayCudaBackend : public backend::CudaBackend {
 public:
  using CudaBackend::CudaBackend;
  void RunReplayable(backend::Replays* r, uint64_t key, FunctionRef<void()> record) override {
    CudaBackend::RunReplayable(r, key == 0 ? 0 : 1, record);
  }
};

std::vector<int32_t> Decode(backend::CudaBackend& be, const std::string& path, bool sampled) {
  auto m = model::Model::Load(path, be);
  CHECK(m.ok());
  engine::GenerateOptions o;
  o.n_predict = 40;
  o.prefill_chunk = 5;  // a 13-token prompt: chunks of 5, 5 and 3 rows
  if (sampled) o.sampling = {0.8f, 77, 0};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 13; ++i) prompt.push_back((i * 29 + 3) % (*m)->config().n_vocab);
  auto g = engine::Generate(**m, nullptr, prompt, o);
  CHECK(g.ok());
  return g->tokens;
}

struct Model {
  const char* name;
  model::SyntheticSpec spec;
};

void PrintTo(const Model& m, std::ostream* os) {
  *os << m.name;
}

class CudaGraphs : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    if (backend::CudaBackend::DeviceCount() == 0) GTEST_SKIP() << "SKIPPED (no CUDA device)";
  }
};

TEST_P(CudaGraphs, ReplayedStepsEmitTheOpByOpTokens) {
  const std::string path = testing::SyntheticPath(GetParam().name, GetParam().spec);
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    backend::CudaBackend replaying(0);
    OpByOpCudaBackend op_by_op(0);
    const auto got = Decode(replaying, path, sampled);
    EXPECT_GT(replaying.replays_launched(), 30) << "the decode steps were not replayed";
    EXPECT_EQ(op_by_op.replays_launched(), 0);
    EXPECT_EQ(got, Decode(op_by_op, path, sampled));
  }
}

TEST_P(CudaGraphs, NegativeControlAShapeBlindReplayIsCaught) {
  const std::string path = testing::SyntheticPath(GetParam().name, GetParam().spec);
  ShapeBlindReplayCudaBackend blind(0);
  OpByOpCudaBackend op_by_op(0);
  const auto wrong = Decode(blind, path, false);
  EXPECT_GT(blind.replays_launched(), 0);
  EXPECT_NE(wrong, Decode(op_by_op, path, false))
      << "replaying a capture of another shape went unnoticed";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphs,
                         ::testing::Values(Model{"graphs-dense", testing::DenseSpec()},
                                           Model{"graphs-moe", testing::MoeSpec()}),
                         [](const ::testing::TestParamInfo<Model>& p) {
                           return std::string(p.param.name + 7);
                         });
#else
TEST(CudaGraphs, Skipped) {
  GTEST_SKIP() << "SKIPPED (no CUDA device): lockstep was built without the CUDA backend";
}
#endif

}  // namespace
}  // namespace lockstep
