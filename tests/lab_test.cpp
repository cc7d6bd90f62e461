// The lab: stream parsing, margins and near-tie classification on synthetic logits, first
// divergence, teacher forcing against greedy decoding, batched decode vs plain decode, the
// determinism probe, forced-stream acceptance vs real speculation, identity diffs, and the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/check.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "lab/accept.h"
#include "lab/diverge.h"
#include "lab/identity_diff.h"
#include "lab/logprobs.h"
#include "lab/probe.h"
#include "lab/stream.h"
#include "model/assistant.h"
#include "speculative/proposer.h"
#include "testing/echo_drafter.h"
#include "testing/models.h"
#include "testing/run_cli.h"
#include "testing/synthetic_assistant.h"

namespace lockstep {
namespace {

using nlohmann::json;

// ---- streams ---------------------------------------------------------------------------

TEST(LabStream, AcceptsIdArraysGenerateOutputAndLlamaServerResponses) {
  auto a = lab::ParseStreamJson("[5, 6, 7]", "a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->tokens, (std::vector<int32_t>{5, 6, 7}));
  auto g = lab::ParseStreamJson(R"({"tokens":[1,2],"text":"x","identity":{}})", "g");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->tokens, (std::vector<int32_t>{1, 2}));
  auto s = lab::ParseStreamJson(R"({"content":"ab","tokens":[{"id":9},{"id":8}],
                                    "prompt_tokens":[2,3]})",
                                "s");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tokens, (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(s->prompt, (std::vector<int32_t>{2, 3}));
  auto c = lab::ParseStreamJson(R"({"completion_probabilities":[{"id":4,"logprob":-0.1}]})", "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tokens, (std::vector<int32_t>{4}));
}

TEST(LabStream, RejectsMalformedInputNamingTheProblem) {
  for (const char* bad : {"[1, \"x\"]", "{\"content\":\"no ids\"}", "[]", "[-3]", "not json",
                          "{\"tokens\":[{\"tok\":1}]}"}) {
    auto r = lab::ParseStreamJson(bad, "in.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("in.json"), std::string::npos) << r.status().message();
  }
}

// ---- margins on synthetic logits ------------------------------------------------------

std::vector<float> TieLogits(float gap) {
  std::vector<float> l(32, -4.0f);
  l[7] = 3.0f;         // top-1
  l[12] = 3.0f - gap;  // top-2
  l[20] = 1.0f;        // top-3
  return l;
}

TEST(LabMargins, SyntheticNearTieIsFlaggedAndAClearWinnerIsNot) {
  lab::AnalyzeOptions opt{3, 0.05};
  const auto tie = lab::AnalyzeLogits(TieLogits(0.01f), 12, opt);
  // Independent reference: log-softmax computed directly.
  std::vector<float> l = TieLogits(0.01f);
  double z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v));
  EXPECT_NEAR(tie.logprob, static_cast<double>(l[12]) - std::log(z), 1e-9);
  EXPECT_EQ(tie.rank, 2);
  ASSERT_EQ(tie.top.size(), 3u);
  EXPECT_EQ(tie.top[0].id, 7);
  EXPECT_EQ(tie.top[1].id, 12);
  EXPECT_EQ(tie.top[2].id, 20);
  EXPECT_NEAR(tie.margin, 0.01, 1e-6);
  EXPECT_TRUE(tie.near_tie);
  // Negative control: the same shape with a clear winner is not a tie.
  const auto clear = lab::AnalyzeLogits(TieLogits(1.0f), 7, opt);
  EXPECT_EQ(clear.rank, 1);
  EXPECT_FALSE(clear.near_tie);
  EXPECT_NEAR(clear.margin, 1.0, 1e-6);
}

TEST(LabMargins, ExactTiesRankTheLowerIdFirstLikeGreedy) {
  const auto s = lab::AnalyzeLogits(TieLogits(0.0f), 12, {2, 0.05});
  EXPECT_EQ(s.rank, 2);  // 7 and 12 tie; greedy (lowest id) picks 7
  EXPECT_EQ(s.top[0].id, 7);
  EXPECT_EQ(s.margin, 0.0);
}

TEST(LabMargins, ForkClassification) {
  lab::AnalyzeOptions opt{3, 0.05};
  EXPECT_EQ(lab::ClassifyFork(TieLogits(0.01f), 7, 12, opt).kind, lab::ForkKind::kNearTie);
  EXPECT_EQ(lab::ClassifyFork(TieLogits(0.01f), 12, 7, opt).kind, lab::ForkKind::kNearTie);
  // A wide gap between the top two, or a side outside the top two, is a real divergence.
  EXPECT_EQ(lab::ClassifyFork(TieLogits(1.0f), 7, 12, opt).kind, lab::ForkKind::kReal);
  EXPECT_EQ(lab::ClassifyFork(TieLogits(0.01f), 7, 20, opt).kind, lab::ForkKind::kReal);
}

TEST(LabDiverge, FirstDivergenceAtAKnownPosition) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = a;
  b[6] = 70;
  auto d = lab::FirstDivergence(a, b);
  EXPECT_FALSE(d.identical);
  EXPECT_EQ(d.index, 6);
  EXPECT_TRUE(d.has_a() && d.has_b());
  auto same = lab::FirstDivergence(a, a);
  EXPECT_TRUE(same.identical);
  auto prefix = lab::FirstDivergence(a, std::vector<int32_t>(a.begin(), a.begin() + 4));
  EXPECT_FALSE(prefix.identical);
  EXPECT_EQ(prefix.index, 4);
  EXPECT_FALSE(prefix.has_b());
}

// ---- with a synthetic model -----------------------------------------------------------

struct Target {
  std::unique_ptr<backend::CpuBackend> be;
  std::unique_ptr<model::Model> m;
};

Target LoadMoe(int threads = 2) {
  Target t;
  t.be = std::make_unique<backend::CpuBackend>(threads);
  auto m = model::Model::Load(testing::SyntheticPath("lab-moe", testing::MoeSpec()), *t.be);
  CHECK(m.ok());
  t.m = std::move(*m);
  return t;
}

std::vector<int32_t> Prompt(int seed, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((seed * 53 + i * 29 + 3) % 256);
  return p;
}

std::vector<int32_t> Greedy(const model::Model& m, const std::vector<int32_t>& prompt, int n) {
  engine::GenerateOptions opt;
  opt.n_predict = n;
  auto r = engine::Generate(m, nullptr, prompt, opt);
  CHECK(r.ok());
  return r->tokens;
}

TEST(LabTeacherForce, GreedyStreamRanksFirstEverywhereAndChunkingChangesNothing) {
  Target t = LoadMoe();
  const auto prompt = Prompt(1, 9);
  const auto stream = Greedy(*t.m, prompt, 24);
  auto rows = lab::TeacherForce(*t.m, prompt, stream, {4, 0.1}, 128);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), stream.size());
  for (const auto& r : *rows) {
    EXPECT_EQ(r.rank, 1) << "index " << r.index;
    EXPECT_EQ(r.top[0].id, r.token);
    EXPECT_EQ(r.pos, r.index + 9);
  }
  auto by1 = lab::TeacherForce(*t.m, prompt, stream, {4, 0.1}, 1);
  ASSERT_TRUE(by1.ok());
  for (size_t i = 0; i < rows->size(); ++i) {
    EXPECT_EQ((*by1)[i].logprob, (*rows)[i].logprob) << i;  // bytes, not a tolerance
    EXPECT_EQ((*by1)[i].margin, (*rows)[i].margin) << i;
  }
  // Negative control: forcing the runner-up at index 5 shows rank 2 there.
  auto forced = stream;
  forced[5] = (*rows)[5].top[1].id;
  auto f = lab::TeacherForce(*t.m, prompt, forced, {4, 0.1}, 128);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[5].rank, 2);
}

TEST(LabDiverge, SyntheticDivergenceIsLocatedAndScoredAtTheFork) {
  Target t = LoadMoe();
  const auto prompt = Prompt(2, 7);
  const auto a = Greedy(*t.m, prompt, 16);
  auto rows = lab::TeacherForce(*t.m, prompt, a, {4, 0.1});
  ASSERT_TRUE(rows.ok());
  auto b = a;
  b[9] = (*rows)[9].top[1].id;  // the other engine took the runner-up at index 9
  const auto d = lab::FirstDivergence(a, b);
  ASSERT_EQ(d.index, 9);
  const double margin = (*rows)[9].margin;
  auto tie = lab::AnalyzeFork(*t.m, prompt, a, b, d, {4, margin + 1.0});
  ASSERT_TRUE(tie.ok()) << tie.status().message();
  EXPECT_EQ(tie->a.rank, 1);
  EXPECT_EQ(tie->b.rank, 2);
  EXPECT_EQ(tie->a.margin, margin);
  EXPECT_EQ(tie->kind, lab::ForkKind::kNearTie);
  auto real = lab::AnalyzeFork(*t.m, prompt, a, b, d, {4, margin / 2});
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(real->kind, lab::ForkKind::kReal);
}

TEST(LabBatchDecode, EachSequenceMatchesPlainDecodeAtEveryWidth) {
  Target t = LoadMoe();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(Prompt(10 + i, 3 + 4 * i));
  std::vector<std::vector<int32_t>> ref;
  for (const auto& p : prompts) ref.push_back(Greedy(*t.m, p, 12));
  for (size_t w = 1; w <= prompts.size(); ++w) {
    std::vector<std::vector<int32_t>> sub(prompts.begin(), prompts.begin() + w);
    engine::Options eo;
    eo.n_seq_max = static_cast<int>(w);
    eo.n_ctx = 64;
    eo.prefill_chunk = 5;  // forces prompts to be split across mixed forwards
    auto eng = engine::Engine::Create(*t.m, nullptr, eo);
    ASSERT_TRUE(eng.ok()) << eng.status().message();
    std::vector<engine::Request> reqs;
    for (const auto& p : sub) {
      engine::Request r;
      r.prompt = p;
      r.n_predict = 12;
      reqs.push_back(std::move(r));
    }
    auto out = engine::RunAll(**eng, std::move(reqs));
    ASSERT_TRUE(out.ok()) << out.status().message();
    for (size_t i = 0; i < w; ++i)
      EXPECT_EQ((*out)[i].tokens, ref[i]) << "width " << w << " seq " << i;
  }
  EXPECT_NE(ref[0], ref[1]);  // negative control: different prompts do give different outputs
}

// ---- probe ------------------------------------------------------------------------------

std::string EchoDraftPath() {
  return testing::EchoDraftPath("lab-moe", testing::MoeSpec());
}

TEST(LabProbe, EveryModeHasOneUniqueOutput) {
  lab::ProbeOptions opt;
  opt.model_path = testing::SyntheticPath("lab-moe", testing::MoeSpec());
  opt.draft_path = EchoDraftPath();
  ASSERT_FALSE(opt.draft_path.empty());
  opt.prompt = Prompt(3, 11);
  for (int i = 0; i < 3; ++i) opt.fillers.push_back(Prompt(20 + i, 4 + 5 * i));
  opt.n_predict = 10;
  opt.max_width = 4;
  opt.duplicates = 2;
  opt.max_k = 3;
  opt.max_threads = 2;
  auto modes = lab::RunProbe(opt);
  ASSERT_TRUE(modes.ok()) << modes.status().message();
  ASSERT_EQ(modes->size(), 4u);
  for (const auto& m : *modes) {
    for (const auto& r : m.runs) EXPECT_TRUE(r.error.empty()) << m.name << " " << r.error;
    EXPECT_EQ(m.unique, 1) << m.name;
    EXPECT_EQ(m.differing_run, -1) << m.name;
  }
  EXPECT_EQ((*modes)[0].runs.size(), 4u);
  EXPECT_EQ((*modes)[1].runs.size(), 4u);  // 2 requests + 2 batch copies
  EXPECT_EQ((*modes)[2].runs.size(), 4u);  // K = 0..3
}

// Negative control: a mode whose runs differ reports two outputs and the fork's margins.
TEST(LabProbe, DifferingRunsAreCountedAndTheForkIsScored) {
  Target t = LoadMoe();
  const auto prompt = Prompt(6, 8);
  const auto ref = Greedy(*t.m, prompt, 12);
  auto rows = lab::TeacherForce(*t.m, prompt, ref, {4, 0.1});
  ASSERT_TRUE(rows.ok());
  auto other = ref;
  other[7] = (*rows)[7].top[1].id;
  lab::ProbeMode mode;
  mode.runs = {{"a", ref, ""}, {"b", ref, ""}, {"c", other, ""}, {"d", {}, "failed"}};
  lab::SummarizeMode(*t.m, prompt, {4, 1e9}, &mode);
  EXPECT_EQ(mode.unique, 2);
  EXPECT_EQ(mode.differing_run, 2);
  EXPECT_EQ(mode.divergence.index, 7);
  ASSERT_TRUE(mode.fork.has_value());
  EXPECT_EQ(mode.fork->b.rank, 2);
  EXPECT_EQ(mode.fork->kind, lab::ForkKind::kNearTie);  // threshold 1e9: any top-2 flip
}

// `lab probe`'s exit status: 0 when every mode agrees, 1 when one gave several outputs, 2 when
// a run failed, even if another mode also differed.
TEST(LabProbe, ExitCodeFollowsDiffsConvention) {
  const auto mode = [](int unique, bool failed) {
    lab::ProbeMode m;
    m.unique = unique;
    m.runs = {{"a", {1, 2}, ""}, {"b", {}, failed ? "out of memory" : ""}};
    return m;
  };
  EXPECT_EQ(lab::ProbeExitCode(std::vector<lab::ProbeMode>{}), 0);
  EXPECT_EQ(lab::ProbeExitCode(std::vector{mode(1, false), mode(1, false)}), 0);
  EXPECT_EQ(lab::ProbeExitCode(std::vector{mode(1, false), mode(2, false)}), 1);
  EXPECT_EQ(lab::ProbeExitCode(std::vector{mode(1, true), mode(1, false)}), 2);
  EXPECT_EQ(lab::ProbeExitCode(std::vector{mode(2, false), mode(1, true)}), 2);
}

// ---- forced-stream acceptance ------------------------------------------------------------

struct Pair {
  Target t;
  std::unique_ptr<model::Model> draft;
  std::unique_ptr<model::Assistant> assistant;
};

Pair LoadPair() {
  Pair p{LoadMoe(), nullptr, nullptr};
  auto d = model::Model::Load(EchoDraftPath(), *p.t.be);
  CHECK(d.ok());
  p.draft = std::move(*d);
  auto a = model::Assistant::Pair(*p.t.m, *p.draft);
  CHECK(a.ok());
  p.assistant = std::move(*a);
  return p;
}

TEST(LabAccept, ReplayOnTheTargetsOwnStreamReproducesRealSpeculationCounters) {
  Pair p = LoadPair();
  for (int k : {1, 3, 5}) {
    const auto prompt = Prompt(4 + k, 8);
    engine::GenerateOptions g;
    g.n_predict = 40;
    g.draft_max = k;
    g.adaptive_draft = false;
    auto real = engine::GenerateSpeculative(*p.t.m, *p.draft, prompt, g);
    ASSERT_TRUE(real.ok()) << real.status().message();
    speculative::AssistantProposer proposer(*p.assistant, 1);
    lab::AcceptOptions ao;
    ao.draft_max = k;
    ao.segment = 16;
    auto rep = lab::MeasureAcceptance(*p.t.m, proposer, prompt, real->tokens, ao);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    EXPECT_EQ(rep->greedy_match, rep->scored);
    EXPECT_EQ(rep->stats.rounds, real->draft.rounds) << k;
    EXPECT_EQ(rep->stats.drafted, real->draft.drafted) << k;
    EXPECT_EQ(rep->stats.accepted, real->draft.accepted) << k;
    EXPECT_EQ(rep->stats.drafted_at, real->draft.drafted_at) << k;
    EXPECT_EQ(rep->stats.accepted_at, real->draft.accepted_at) << k;
    EXPECT_GT(rep->stats.accepted, 0) << "the echo drafter should get drafts accepted";
    EXPECT_LT(rep->stats.accepted, rep->stats.drafted) << "and some rejected";
    int64_t seg_drafted = 0;
    for (const auto& s : rep->segments) seg_drafted += s.drafted;
    EXPECT_EQ(seg_drafted, rep->stats.drafted);
  }
}

// A stop token inside a round: the counters describe only drafts that predicted emitted tokens,
// so generate --draft and lab accept over the emitted stream agree exactly (they used to count
// the drafts past the stop token in generate only).
TEST(LabAccept, StreamsEndedByAStopTokenCountTheSame) {
  Pair p = LoadPair();
  int64_t checked = 0;
  for (int k : {2, 4, 6}) {
    for (int i = 0; i < 6; ++i) {
      const auto prompt = Prompt(40 + i, 7);
      engine::GenerateOptions g;
      g.n_predict = 48;
      g.draft_max = k;
      g.adaptive_draft = false;
      auto full = engine::GenerateSpeculative(*p.t.m, *p.draft, prompt, g);
      ASSERT_TRUE(full.ok());
      g.stop_tokens = {full->tokens[static_cast<size_t>(10 + 5 * i)]};
      auto real = engine::GenerateSpeculative(*p.t.m, *p.draft, prompt, g);
      ASSERT_TRUE(real.ok());
      ASSERT_LT(real->tokens.size(), full->tokens.size());
      if (real->tokens.size() < 3) continue;  // the stop token came first: nothing to draft
      speculative::AssistantProposer proposer(*p.assistant, 1);
      lab::AcceptOptions ao;
      ao.draft_max = k;
      auto rep = lab::MeasureAcceptance(*p.t.m, proposer, prompt, real->tokens, ao);
      ASSERT_TRUE(rep.ok()) << rep.status().message();
      EXPECT_EQ(rep->stats.drafted, real->draft.drafted) << "K " << k << " prompt " << i;
      EXPECT_EQ(rep->stats.accepted, real->draft.accepted) << "K " << k << " prompt " << i;
      EXPECT_EQ(rep->stats.rounds, real->draft.rounds) << "K " << k << " prompt " << i;
      EXPECT_EQ(rep->stats.drafted_at, real->draft.drafted_at);
      checked += real->draft.drafted;
    }
  }
  EXPECT_GT(checked, 0);
}

// Proposes the stream's own continuation (everything accepted) or a token that never matches.
class StreamOracle : public speculative::Proposer {
 public:
  StreamOracle(std::vector<int32_t> all, bool wrong) : all_(std::move(all)), wrong_(wrong) {}
  Status Draft(std::span<const speculative::DraftRequest> reqs, const backend::Tensor&,
               kv::KvCache&, std::span<std::vector<int32_t>* const> out) override {
    for (size_t i = 0; i < reqs.size(); ++i) {
      out[i]->clear();
      for (int j = 0; j < reqs[i].max; ++j) {
        const int32_t next = all_[static_cast<size_t>(reqs[i].pos + 1 + j)];
        out[i]->push_back(wrong_ ? (next + 1) % 256 : next);
      }
    }
    return Status::Ok();
  }

 private:
  std::vector<int32_t> all_;
  bool wrong_;
};

TEST(LabAccept, OracleAndAdversarialProposersBoundTheRate) {
  Target t = LoadMoe();
  const auto prompt = Prompt(9, 6);
  const auto stream = Prompt(30, 41);  // any stream: acceptance is counted against it
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), stream.begin(), stream.end());
  StreamOracle right(all, false), wrong(all, true);
  lab::AcceptOptions ao;
  ao.draft_max = 4;
  ao.segment = 10;
  auto r = lab::MeasureAcceptance(*t.m, right, prompt, stream, ao);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stats.rate(), 1.0);
  EXPECT_EQ(r->mean_accepted(), 4.0);  // 40 tokens after the first: 8 rounds of 4 + bonus
  auto w = lab::MeasureAcceptance(*t.m, wrong, prompt, stream, ao);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.accepted, 0);
  // One token per round; the round that emits the stream's last token has nothing to draft.
  EXPECT_EQ(w->stats.rounds, 39);
}

// The embedded default pair (skipped until it is trained): the replay along the target's own
// greedy stream reproduces real speculation's counters on a real drafter too.
TEST(LabAccept, DefaultPairReplayMatchesGenerate) {
  const std::string dir = std::string(LOCKSTEP_SOURCE_DIR) + "/models/";
  const std::string tp = dir + "lockstep-code-target.gguf",
                    dp = dir + "lockstep-code-assistant.gguf";
  if (!std::filesystem::exists(tp) || !std::filesystem::exists(dp))
    GTEST_SKIP() << "no default pair";
  backend::CpuBackend be(2);
  auto target = model::Model::Load(tp, be);
  auto draft = model::Model::Load(dp, be);
  ASSERT_TRUE(target.ok() && draft.ok());
  auto assistant = model::Assistant::Pair(**target, **draft);
  ASSERT_TRUE(assistant.ok()) << assistant.status().message();
  const std::vector<int32_t> prompt = {2, 947, 334, 1034, 581, 309};  // "class Stack:"
  engine::GenerateOptions g;
  g.n_predict = 64;
  g.draft_max = 4;
  g.adaptive_draft = false;
  auto real = engine::GenerateSpeculative(**target, **draft, prompt, g);
  ASSERT_TRUE(real.ok()) << real.status().message();
  speculative::AssistantProposer proposer(**assistant, 1);
  lab::AcceptOptions ao;
  ao.draft_max = 4;
  auto rep = lab::MeasureAcceptance(**target, proposer, prompt, real->tokens, ao);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->stats.drafted_at, real->draft.drafted_at);
  EXPECT_EQ(rep->stats.accepted_at, real->draft.accepted_at);
  EXPECT_EQ(rep->stats.rounds, real->draft.rounds);
  EXPECT_GT(rep->stats.accepted, 0);
}

// ---- identity diff ------------------------------------------------------------------------

TEST(LabIdentityDiff, ListsExactlyTheFieldsThatDiffer) {
  json a = {{"tokens", {1, 2}},
            {"identity",
             {{"git_hash", "abc"}, {"threads", 2}, {"settings", {{"draft_max", 3}, {"temp", 0}}}}}};
  json b = a;
  b["identity"]["threads"] = 4;
  b["identity"]["settings"]["draft_max"] = 5;
  b["identity"]["draft"] = "d.gguf";
  b["tokens"] = {9};  // outside the identity block: not listed
  const auto diffs = lab::DiffIdentity(a, b);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_EQ(diffs[0].field, "draft");
  EXPECT_EQ(diffs[0].a, "<missing>");
  EXPECT_EQ(diffs[1].field, "settings.draft_max");
  EXPECT_EQ(diffs[2].field, "threads");
  EXPECT_EQ(diffs[2].b, "4");
  EXPECT_TRUE(lab::DiffIdentity(a, a).empty());
}

// ---- the CLI, end to end -----------------------------------------------------------------

std::string RunCli(const std::string& args, int* rc) {
  return testing::RunCli(LOCKSTEP_BINARY, args, rc);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / "lockstep-tests" / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(LabCli, CommandsProduceJsonWithIdentity) {
  const std::string model = testing::SyntheticPath("lab-moe", testing::MoeSpec());
  const std::string draft = EchoDraftPath();
  Target t = LoadMoe();
  const auto prompt = Prompt(5, 6);
  const auto a = Greedy(*t.m, prompt, 12);
  auto b = a;
  b[4] = (b[4] + 1) % 256;
  const std::string fa =
      WriteFile("lab-a.json", json({{"tokens", a}, {"prompt_tokens", prompt}}).dump());
  const std::string fb = WriteFile("lab-b.json", json(b).dump());
  int rc = 0;

  std::string out = RunCli(fmt::format("lab logprobs -m {} --stream {} --json", model, fa), &rc);
  ASSERT_EQ(rc, 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["positions"].size(), a.size());
  EXPECT_EQ(j["summary"]["greedy_match"], a.size());
  EXPECT_TRUE(j["identity"].contains("model_sha256"));
  EXPECT_EQ(j["identity"]["model_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["identity"]["prompt_sha256"], IdsSha256(prompt));  // the context, as generate's
  // --no-hash as on generate: the same output, the digest not computed.
  out = RunCli(fmt::format("lab logprobs -m {} --stream {} --json --no-hash", model, fa), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out)["identity"]["model_sha256"], "not computed (--no-hash)");
  EXPECT_EQ(json::parse(out)["positions"], j["positions"]);

  out = RunCli(fmt::format("lab diverge {} {} -m {} --json", fa, fb, model), &rc);
  ASSERT_EQ(rc, 1) << out;  // diff's convention: the streams differ
  j = json::parse(out);
  EXPECT_EQ(j["index"], 4);
  EXPECT_EQ(j["fork"]["a"]["rank"], 1);
  EXPECT_EQ(j["identity"]["prompt_sha256"], IdsSha256(prompt));  // the streams' context
  const std::string fd = WriteFile("lab-diverge.json", out);

  out =
      RunCli(fmt::format("lab accept -m {} --draft {} --stream {} --json", model, draft, fa), &rc);
  ASSERT_EQ(rc, 0) << out;
  j = json::parse(out);
  EXPECT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["identity"]["draft_sha256"].get<std::string>().size(), 64u);
  // llama.cpp's -md and --spec-draft-n-max name the same options.
  const std::string aliased =
      RunCli(fmt::format("lab accept -m {} -md {} --spec-draft-n-max 3 --stream {} --json", model,
                         draft, fa),
             &rc);
  ASSERT_EQ(rc, 0) << aliased;
  EXPECT_EQ(json::parse(aliased)["results"], j["results"]);
  out = RunCli(fmt::format("lab accept -m {} --draft {} --draft {} --stream {} --stream {}", model,
                           draft, draft, fa, fb),
               &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("stream \\ drafter"), std::string::npos) << out;

  out = RunCli(fmt::format("lab probe -m {} --tokens 3,4,5 -n 4 --width 2 --duplicates 2 "
                           "--max-threads 2 --json",
                           model),
               &rc);
  ASSERT_EQ(rc, 0) << out;
  j = json::parse(out);
  for (const auto& m : j["modes"]) EXPECT_EQ(m["unique_outputs"], 1) << m.dump();
  EXPECT_EQ(j["identity"]["prompt_sha256"], IdsSha256(std::vector<int32_t>{3, 4, 5}));

  out = RunCli(fmt::format("lab identity-diff {} {} --json", fa, fd), &rc);
  ASSERT_EQ(rc, 1) << out;
  EXPECT_FALSE(json::parse(out)["identical"].get<bool>());
  out = RunCli(fmt::format("lab identity-diff {} {} --json", fa, fa), &rc);
  EXPECT_EQ(rc, 0) << out;
  out = RunCli(fmt::format("lab diverge {} {}", fa, fa), &rc);
  EXPECT_EQ(rc, 0) << out;

  out = RunCli(fmt::format("lab diverge {} /nonexistent.json", fa), &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("/nonexistent.json"), std::string::npos) << out;
  out = RunCli(fmt::format("lab identity-diff {} /nonexistent.json", fa), &rc);
  EXPECT_EQ(rc, 2) << out;  // an error, not "different"
  EXPECT_NE(out.find("/nonexistent.json"), std::string::npos) << out;
  // Asked for by name without a drafter, the speculation mode is an error (it printed an empty
  // table before).
  out = RunCli(fmt::format("lab probe -m {} --tokens 3,4,5 --modes speculation", model), &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("needs --draft"), std::string::npos) << out;
}

}  // namespace
}  // namespace lockstep
