// The engine's exactness contract: sequences decoded together (mixed lengths, greedy and seeded
// sampling, mixed draft lengths, joining, leaving and cancelled mid-run, prefix-shared or not)
// emit exactly the token ids each emits decoded alone with plain decoding. Negative control: a
// backend whose matmuls depend on the row count breaks the same comparison.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "model/assistant.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/proposer.h"
#include "testing/backends.h"
#include "testing/echo_drafter.h"
#include "testing/models.h"
#include "testing/near_tie.h"
#include "testing/synthetic_assistant.h"

namespace lockstep {
namespace {

using engine::Request;

// Drafts each sequence's known continuation (its solo output), corrupting a seeded fraction of
// drafts: long accepted runs, all-accepted rounds and rejections at every depth, so verify rows
// decide many tokens.
class HistoryOracle : public speculative::Proposer {
 public:
  HistoryOracle(std::vector<std::vector<int32_t>> truths, double p_wrong, int vocab)
      : truths_(std::move(truths)), p_wrong_(p_wrong), vocab_(vocab) {}
  Status Draft(std::span<const speculative::DraftRequest> reqs, const backend::Tensor&,
               kv::KvCache&, std::span<std::vector<int32_t>* const> out) override {
    for (size_t i = 0; i < reqs.size(); ++i) {
      out[i]->clear();
      const std::vector<int32_t>* truth = Find(reqs[i].history);
      for (int j = 0; j < reqs[i].max; ++j) {
        const size_t at = reqs[i].history.size() + static_cast<size_t>(j);
        int32_t d = truth && at < truth->size() ? (*truth)[at] : 0;
        if (sample::UniformAt(977, reqs[i].pos, j) < p_wrong_) d = (d + 1) % vocab_;
        out[i]->push_back(d);
      }
    }
    return Status::Ok();
  }

 private:
  const std::vector<int32_t>* Find(std::span<const int32_t> h) const {
    for (const auto& t : truths_)
      if (t.size() >= h.size() && std::equal(h.begin(), h.end(), t.begin())) return &t;
    return nullptr;
  }
  std::vector<std::vector<int32_t>> truths_;
  double p_wrong_;
  int vocab_;
};

// Sixteen varied requests: prompt lengths 1..40 (every fourth shares the previous prompt's
// start), greedy and seeded sampling (top-k, top-p, min-p, repeat penalty), n_predict 6..40,
// draft lengths 0..6, some stop tokens.
std::vector<Request> Requests(int vocab) {
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    Request r;
    const int len = 1 + (i * 7) % 40;
    if (i % 4 == 3) r.prompt = reqs.back().prompt;  // a shared prefix, then its own tokens
    for (int p = 0; p < len; ++p) r.prompt.push_back((i * 37 + p * 11 + 5) % vocab);
    r.n_predict = 6 + (i * 13) % 35;
    if (i % 2) r.sampling = {0.9f, static_cast<uint64_t>(100 + i), i % 3 ? 0 : 20};
    // Filters and the repeat penalty, whose history on verify rows includes the row's drafts.
    if (i % 4 == 1) r.sampling.top_p = 0.8f, r.sampling.min_p = 0.05f;
    if (i % 3 == 1) r.sampling.repeat_penalty = 1.5f, r.sampling.repeat_last_n = 1 + i % 9;
    r.draft_max = i % 7;
    r.adaptive_draft = i % 3 != 0;
    if (i % 5 == 4) r.stop_tokens = {static_cast<int32_t>((i * 3) % vocab)};
    reqs.push_back(std::move(r));
  }
  return reqs;
}

std::vector<int32_t> Solo(const model::Model& m, const Request& r, DType cache) {
  engine::GenerateOptions o;
  o.n_predict = r.n_predict;
  o.sampling = r.sampling;
  o.stop_tokens = r.stop_tokens;
  o.prefill_chunk = 64;
  o.cache_type_k = o.cache_type_v = cache;
  auto g = engine::Generate(m, nullptr, r.prompt, o);
  CHECK(g.ok());
  return g->tokens;
}

struct Together {
  std::vector<std::vector<int32_t>> tokens;  // by request; cancelled: what was emitted
  int64_t drafted = 0, accepted = 0, shared = 0, max_rows = 0;
  std::vector<bool> cancelled;
};

// `n` requests through one engine of `slots` slots: half submitted at the start, the rest
// after a few steps (joining mid-run); request 5 (when present) is cancelled mid-run.
Together RunTogether(const model::Model& m, speculative::Proposer* proposer,
                     std::vector<Request> reqs, int n, int slots, DType cache) {
  engine::Options o;
  o.n_seq_max = slots;
  o.n_ctx = 96;
  o.prefill_chunk = 7;  // prompts split across steps shared with decode rows
  o.draft_max = proposer ? 8 : 0;
  o.cache_type_k = o.cache_type_v = cache;
  auto eng = engine::Engine::Create(m, proposer, o);
  CHECK(eng.ok());
  engine::Engine& e = **eng;
  Together t;
  t.tokens.resize(static_cast<size_t>(n));
  t.cancelled.assign(static_cast<size_t>(n), false);
  std::vector<engine::SeqId> ids(static_cast<size_t>(n), -1);
  auto submit = [&](int i) {
    if (!proposer) reqs[static_cast<size_t>(i)].draft_max = 0;
    auto id = e.Submit(reqs[static_cast<size_t>(i)]);
    CHECK(id.ok());
    ids[static_cast<size_t>(i)] = *id;
  };
  for (int i = 0; i < (n + 1) / 2; ++i) submit(i);
  for (int step = 0; !e.Idle() || ids[static_cast<size_t>(n - 1)] < 0; ++step) {
    if (step == 3)
      for (int i = (n + 1) / 2; i < n; ++i) submit(i);
    if (step == 9 && n > 5) e.Cancel(ids[5]);
    CHECK(e.Step().ok());
    t.max_rows = std::max<int64_t>(t.max_rows, e.last_step_rows());
    for (engine::SeqResult& r : e.TakeFinished()) {
      const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), r.id) - ids.begin());
      t.tokens[i] = r.tokens;
      t.cancelled[i] = r.finish == engine::Finish::kCancelled;
      t.drafted += r.draft.drafted;
      t.accepted += r.draft.accepted;
      t.shared += r.n_shared;
    }
  }
  return t;
}

// Counts requests whose tokens differ from their solo run (a cancelled one must be a prefix).
int CountDiffering(const model::Model& m, speculative::Proposer* proposer, int n, int slots,
                   DType cache, Together* out = nullptr) {
  const auto reqs = Requests(m.config().n_vocab);
  Together t = RunTogether(m, proposer, reqs, n, slots, cache);
  int differ = 0;
  for (int i = 0; i < n; ++i) {
    const auto solo = Solo(m, reqs[static_cast<size_t>(i)], cache);
    const auto& got = t.tokens[static_cast<size_t>(i)];
    const bool same =
        t.cancelled[static_cast<size_t>(i)]
            ? got.size() <= solo.size() && std::equal(got.begin(), got.end(), solo.begin())
            : got == solo;
    differ += !same;
  }
  if (out) *out = std::move(t);
  return differ;
}

std::vector<std::vector<int32_t>> Truths(const model::Model& m, DType cache) {
  std::vector<std::vector<int32_t>> truths;
  for (const Request& r : Requests(m.config().n_vocab)) {
    std::vector<int32_t> t = r.prompt;
    const auto solo = Solo(m, r, cache);
    t.insert(t.end(), solo.begin(), solo.end());
    truths.push_back(std::move(t));
  }
  return truths;
}

struct Case {
  const char* name;
  model::SyntheticSpec spec;
  DType cache;
  int threads;
  const char* backend = "cpu";
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " " << c.name << " " << Name(c.cache) << " threads " << c.threads;
}

class EngineExactness : public ::testing::TestWithParam<Case> {};

TEST_P(EngineExactness, SequencesTogetherMatchEachAlone) {
  const Case& c = GetParam();
  auto be = backend::Create(c.backend, c.threads);
  if (!be) GTEST_SKIP() << "SKIPPED (no " << c.backend << " device)";
  auto m = model::Model::Load(testing::SyntheticPath(c.name, c.spec), *be);
  ASSERT_TRUE(m.ok()) << m.status().message();
  HistoryOracle oracle(Truths(**m, c.cache), 0.25, (*m)->config().n_vocab);
  int64_t drafted = 0, accepted = 0, shared = 0, max_rows = 0;
  for (int n : {1, 2, 3, 5, 8, 16}) {
    for (int slots : {n, std::max(1, n / 2)}) {  // fewer slots: requests queue, join and leave
      for (speculative::Proposer* p : {static_cast<speculative::Proposer*>(nullptr),
                                       static_cast<speculative::Proposer*>(&oracle)}) {
        Together t;
        EXPECT_EQ(CountDiffering(**m, p, n, slots, c.cache, &t), 0)
            << "n " << n << " slots " << slots << (p ? " speculative" : " plain");
        drafted += t.drafted, accepted += t.accepted, shared += t.shared;
        max_rows = std::max(max_rows, t.max_rows);
      }
    }
  }
  std::printf("  %s: drafted %lld accepted %lld, prompt positions shared %lld, rows/step <= %lld\n",
              c.name, static_cast<long long>(drafted), static_cast<long long>(accepted),
              static_cast<long long>(shared), static_cast<long long>(max_rows));
  // The comparison only means something if verify rows decided tokens, prefixes were shared
  // and steps carried many rows.
  EXPECT_GT(accepted, drafted / 2);
  EXPECT_GT(shared, 0);
  EXPECT_GT(max_rows, 16);
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineExactness,
    ::testing::Values(Case{"engine-dense", testing::DenseSpec(), DType::F32, 1},
                      Case{"engine-moe", testing::MoeSpec(), DType::F32, 2},
                      Case{"engine-ple", testing::PleSpec(), DType::F32, 3},
                      Case{"engine-dense", testing::DenseSpec(), DType::F16, 2},
                      Case{"engine-moe", testing::MoeSpec(), DType::BF16, 1}),
    [](const ::testing::TestParamInfo<Case>& p) {
      return std::string(p.param.name + 7) + "_" + std::string(Name(p.param.cache)) + "_t" +
             std::to_string(p.param.threads);
    });

// The same contract on the GPU (skipped where no CUDA device is present).
INSTANTIATE_TEST_SUITE_P(
    CudaModels, EngineExactness,
    ::testing::Values(Case{"engine-dense", testing::DenseSpec(), DType::F32, 1, "cuda"},
                      Case{"engine-moe", testing::MoeSpec(), DType::BF16, 1, "cuda"},
                      Case{"engine-ple", testing::PleSpec(), DType::F16, 1, "cuda"}),
    [](const ::testing::TestParamInfo<Case>& p) {
      return std::string(p.param.name + 7) + "_" + std::string(Name(p.param.cache));
    });

// The real drafter (an "echo" assistant that often agrees with the MoE target) batched across
// sequences: one drafter pass per draft position for all of them.
class EngineAssistant : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineAssistant, DrafterBatchedAcrossSequences) {
  const std::string target = testing::SyntheticPath("engine-moe", testing::MoeSpec());
  const std::string path = testing::EchoDraftPath("engine-moe", testing::MoeSpec());
  ASSERT_FALSE(path.empty());
  auto be = backend::Create(GetParam(), 2);
  if (!be) GTEST_SKIP() << "SKIPPED (no " << GetParam() << " device)";
  auto m = model::Model::Load(target, *be);
  auto d = model::Model::Load(path, *be);
  ASSERT_TRUE(m.ok() && d.ok());
  auto pair = model::Assistant::Pair(**m, **d);
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  speculative::AssistantProposer proposer(**pair, 16);
  Together t;
  EXPECT_EQ(CountDiffering(**m, &proposer, 16, 8, DType::F32, &t), 0);
  std::printf("  echo drafter: drafted %lld accepted %lld\n", static_cast<long long>(t.drafted),
              static_cast<long long>(t.accepted));
  EXPECT_GT(t.accepted, t.drafted / 8);  // half the requests sample: acceptance is lower
}
INSTANTIATE_TEST_SUITE_P(Backends, EngineAssistant, ::testing::Values("cpu", "cuda"));

// Negative control: the same comparison on a backend whose matmuls (every entry point) sum in
// another order when a call carries several rows finds sequences that differ.
// On a near-tie model, so that last-bit changes change tokens; the real backend stays exact on
// the same model.
TEST(EngineExactnessNegativeControl, ShapeDependentMatmulBreaksIt) {
  const std::string path = testing::NearTieTarget();
  ASSERT_FALSE(path.empty());
  testing::ShapeDependentBackend bad(1);
  backend::CpuBackend good(1);
  int differ[2];
  for (backend::CpuBackend* be : {static_cast<backend::CpuBackend*>(&bad), &good}) {
    auto m = model::Model::Load(path, *be);
    ASSERT_TRUE(m.ok());
    differ[be == &good] = CountDiffering(**m, nullptr, 16, 16, DType::F32);
  }
  std::printf("  sequences of 16 that differ: shape-dependent backend %d, real backend %d\n",
              differ[0], differ[1]);
  EXPECT_GT(differ[0], 0) << "the comparison failed to see a changed reduction order";
  EXPECT_EQ(differ[1], 0);
}

#if LOCKSTEP_HAS_CUDA
// The GPU's negative control: CUDA matmuls whose last bits change when a call carries several
// rows are caught by the same comparison; the real CUDA backend stays exact on the same model.
TEST(EngineExactnessNegativeControl, ShapeDependentCudaMatmulBreaksIt) {
  if (backend::CudaBackend::DeviceCount() == 0) GTEST_SKIP() << "SKIPPED (no CUDA device)";
  const std::string path = testing::NearTieTarget();
  ASSERT_FALSE(path.empty());
  testing::ShapeDependentCudaBackend bad(0);
  backend::CudaBackend good(0);
  int differ[2];
  for (backend::CudaBackend* be : {static_cast<backend::CudaBackend*>(&bad), &good}) {
    auto m = model::Model::Load(path, *be);
    ASSERT_TRUE(m.ok());
    differ[be == &good] = CountDiffering(**m, nullptr, 16, 16, DType::F32);
  }
  std::printf("  sequences of 16 that differ: shape-dependent CUDA backend %d, real %d\n",
              differ[0], differ[1]);
  EXPECT_GT(differ[0], 0) << "the comparison failed to see a changed reduction order";
  EXPECT_EQ(differ[1], 0);
}
#endif

// A drafter that is always wrong: adaptive drafting stops paying for drafts, output unchanged.
TEST(EngineAdaptiveDraft, AFruitlessDrafterIsPaused) {
  backend::CpuBackend be(1);
  auto m = model::Model::Load(testing::SyntheticPath("engine-dense", testing::DenseSpec()), be);
  ASSERT_TRUE(m.ok());
  const int V = (*m)->config().n_vocab;
  HistoryOracle wrong(Truths(**m, DType::F32), 1.0, V);
  Request r = Requests(V)[2];
  r.n_predict = 40;
  r.draft_max = 6;
  int64_t drafted[2];
  for (int adaptive = 0; adaptive < 2; ++adaptive) {
    r.adaptive_draft = adaptive;
    engine::Options o;
    o.n_ctx = 96;
    o.draft_max = 6;
    auto e = engine::Engine::Create(**m, &wrong, o);
    ASSERT_TRUE(e.ok());
    auto res = engine::RunAll(**e, {r});
    ASSERT_TRUE(res.ok());
    EXPECT_EQ((*res)[0].tokens, Solo(**m, r, DType::F32));
    EXPECT_EQ((*res)[0].draft.accepted, 0);
    drafted[adaptive] = (*res)[0].draft.drafted;
  }
  std::printf("  drafts made by a never-right drafter: fixed K %lld, adaptive %lld\n",
              static_cast<long long>(drafted[0]), static_cast<long long>(drafted[1]));
  EXPECT_LT(drafted[1] * 8, drafted[0]);
}

// A cap on the rows drafts may fill (serve's --draft-rows): four sequences decoding together
// with a right-half-the-time drafter get the same tokens as alone, and at most one draft a step
// (four decode rows of a cap of five) instead of up to six each. The control: without the cap
// they draft several times as much, so the cap is what cut it.
TEST(EngineDraftRows, ACapCutsDraftsAndNeverTheTokens) {
  backend::CpuBackend be(1);
  auto m = model::Model::Load(testing::SyntheticPath("engine-dense", testing::DenseSpec()), be);
  ASSERT_TRUE(m.ok());
  const int V = (*m)->config().n_vocab;
  HistoryOracle half_right(Truths(**m, DType::F32), 0.5, V);
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) {
    Request r = Requests(V)[static_cast<size_t>(i)];
    r.n_predict = 24;
    r.draft_max = 6;
    reqs.push_back(r);
  }
  int64_t drafted[2] = {0, 0};
  for (int capped = 0; capped < 2; ++capped) {
    engine::Options o;
    o.n_seq_max = 4;
    o.n_ctx = 96;
    o.draft_max = 6;
    o.draft_rows = capped ? 5 : 0;
    auto e = engine::Engine::Create(**m, &half_right, o);
    ASSERT_TRUE(e.ok());
    auto res = engine::RunAll(**e, reqs);
    ASSERT_TRUE(res.ok());
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ((*res)[i].tokens, Solo(**m, reqs[i], DType::F32)) << "request " << i;
      drafted[capped] += (*res)[i].draft.drafted;
    }
  }
  std::printf("  drafts of 4 sequences: no cap %lld, at most 5 rows a step %lld\n",
              static_cast<long long>(drafted[0]), static_cast<long long>(drafted[1]));
  EXPECT_GT(drafted[1], 0);
  EXPECT_GT(drafted[0], 3 * drafted[1]);
}

TEST(EngineRequests, InvalidRequestsAreRefusedWithClearErrors) {
  backend::CpuBackend be(1);
  auto m = model::Model::Load(testing::SyntheticPath("engine-dense", testing::DenseSpec()), be);
  ASSERT_TRUE(m.ok());
  engine::Options o;
  o.n_ctx = 32;
  auto e = engine::Engine::Create(**m, nullptr, o);
  ASSERT_TRUE(e.ok());
  Request empty;
  EXPECT_NE((*e)->Submit(empty).status().message().find("no tokens"), std::string::npos);
  Request bad_id;
  bad_id.prompt = {1, 99999};
  EXPECT_NE((*e)->Submit(bad_id).status().message().find("outside the vocabulary"),
            std::string::npos);
  Request too_long;
  too_long.prompt = {1, 2, 3};
  too_long.n_predict = 40;
  EXPECT_NE((*e)->Submit(too_long).status().message().find("exceeds the context"),
            std::string::npos);
  Request drafts;
  drafts.prompt = {1, 2};
  drafts.n_predict = 4;
  drafts.draft_max = 2;
  EXPECT_NE((*e)->Submit(drafts).status().message().find("draft_max"), std::string::npos);
  EXPECT_TRUE((*e)->Idle());
  EXPECT_FALSE(engine::Engine::Create(**m, nullptr, {.n_seq_max = 0}).ok());
}

}  // namespace
}  // namespace lockstep
