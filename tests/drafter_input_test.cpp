// The drafter is fed the target's hidden state of the row that selected the sequence's last
// token (after a verify round: the last accepted row, not the first or the last verify row).
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/generate.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "testing/models.h"

namespace lockstep {
namespace {

// Records the hidden row handed over with each request and drafts the plain output, one draft
// in four corrupted at a depth set by the position: rounds accept 0 to 3 of 4 drafts, so the
// row that selected `last` moves across the verify rows.
class HiddenProbe : public speculative::Proposer {
 public:
  HiddenProbe(backend::Backend& be, std::vector<int32_t> truth, int n_prompt, int vocab)
      : be_(be), truth_(std::move(truth)), n_prompt_(n_prompt), vocab_(vocab) {}
  Status Draft(std::span<const speculative::DraftRequest> reqs, const backend::Tensor& hidden,
               kv::KvCache&, std::span<std::vector<int32_t>* const> out) override {
    std::vector<float> h;
    be_.ToHost(hidden, &h);
    const size_t e = static_cast<size_t>(hidden.cols());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto at = h.begin() + static_cast<std::ptrdiff_t>(e * reqs[i].hidden_row);
      seen.emplace_back(reqs[i].pos, std::vector<float>(at, at + static_cast<std::ptrdiff_t>(e)));
      out[i]->clear();
      for (int j = 0; j < reqs[i].max; ++j) {
        const size_t idx = static_cast<size_t>(reqs[i].pos + 1 + j - n_prompt_);
        int32_t d = idx < truth_.size() ? truth_[idx] : 0;
        if ((reqs[i].pos + j) % 4 == 3) d = (d + 1) % vocab_;
        out[i]->push_back(d);
      }
    }
    return Status::Ok();
  }
  std::vector<std::pair<int, std::vector<float>>> seen;  // (pos, hidden state handed over)

 private:
  backend::Backend& be_;
  std::vector<int32_t> truth_;
  int n_prompt_, vocab_;
};

TEST(DrafterInput, HiddenStateIsTheRowThatSelectedTheLastToken) {
  const std::string path = testing::SyntheticPath("dense", testing::DenseSpec());
  backend::CpuBackend be(2);
  auto loaded = model::Model::Load(path, be);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const model::Model& m = **loaded;
  const int V = m.config().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 9; ++i) prompt.push_back((i * 37 + 5) % V);
  engine::GenerateOptions opt;
  opt.n_predict = 48;
  auto plain = engine::Generate(m, nullptr, prompt, opt);
  ASSERT_TRUE(plain.ok()) << plain.status().message();

  // Reference: every position's hidden state from one forward over prompt + output.
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), plain->tokens.begin(), plain->tokens.end());
  const int n = static_cast<int>(seq.size());
  auto kv = m.NewKv(1, n + 8, n + 8).value();
  model::Batch b;
  for (int p = 0; p < n; ++p) b.Add(seq[static_cast<size_t>(p)], p, 0, true);
  model::ForwardResult ref;
  model::ForwardOptions fo;
  fo.want_hidden = true;
  ASSERT_TRUE(m.Forward(b, *kv, &ref, fo).ok());

  HiddenProbe probe(be, plain->tokens, static_cast<int>(prompt.size()), V);
  engine::GenerateOptions o = opt;
  o.draft_max = 4;
  o.adaptive_draft = false;
  auto got = engine::Generate(m, &probe, prompt, o);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->tokens, plain->tokens);
  EXPECT_GT(got->draft.accepted, got->draft.drafted / 4) << "the probe's drafts must be accepted";
  ASSERT_GT(probe.seen.size(), 5u);
  for (const auto& [pos, state] : probe.seen) {
    ASSERT_EQ(state.size(), static_cast<size_t>(ref.n_embd));
    EXPECT_EQ(std::memcmp(state.data(), ref.hidden_row(static_cast<size_t>(pos - 1)),
                          state.size() * sizeof(float)),
              0)
        << "the drafter got another row's state at position " << pos;
  }
}

}  // namespace
}  // namespace lockstep
