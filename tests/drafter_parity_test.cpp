// The assistant drafter against transformers' Gemma4AssistantForCausalLM dumps in
// testdata/parity/{moe_draft,ple_draft} (scripts/hf_reference.py drives the drafter the way
// transformers' assisted generation does right after prefill): for three chained draft steps,
// the input, hn, logits and h_next match; argmax and top-5 are equal.
//
// Bound: both sides compute in float32 but sum in different orders (torch's blocked/SIMD
// reductions vs lockstep's fixed per-row order), about 1e-7 relative per reduction. Through the
// target (6-8 layers) and then 4 drafter layers, chained over 3 steps, that grows to ~1e-5 of
// the tensor's scale; we allow 1e-4 * max(1, max|ref|). A real bug (wrong KV layer, window,
// position, scale or missing norm) moves values by O(0.1..1) and fails by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "model/assistant.h"
#include "model/model.h"
#include "testing/reference.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using backend::CpuBackend;
using model::Model;

constexpr double kRelBound = 1e-4;

using testing::ReadF32;

// Prefills `prefix` into a fresh cache and returns the target's post-norm hidden state of the
// last row (the drafter's first input).
std::vector<float> PrefillHidden(const Model& target, const std::vector<int32_t>& prefix,
                                 kv::KvCache* kv) {
  model::Batch b;
  const int n = static_cast<int>(prefix.size());
  for (int p = 0; p < n; ++p) b.Add(prefix[p], p, 0, p == n - 1);
  model::ForwardResult out;
  model::ForwardOptions fo;
  fo.want_hidden = true;
  EXPECT_TRUE(target.Forward(b, *kv, &out, fo).ok());
  return std::vector<float>(out.hidden_row(0), out.hidden_row(0) + out.n_embd);
}

// Max |a - b| over entries, relative to max(1, max |b|); both finite and same size.
double RelDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, scale = 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return d / scale;
}

std::vector<int32_t> Top(std::span<const float> v, int k) {
  std::vector<int32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

void CheckPair(const std::string& name, int threads) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata" / "parity" / name;
  std::ifstream mf(dir / "meta.json");
  if (!mf) GTEST_SKIP() << "no dump at " << dir;
  const auto meta = nlohmann::json::parse(mf);
  CpuBackend be(threads);
  auto target = Model::Load((dir / meta["target_model"].get<std::string>()).string(), be);
  ASSERT_TRUE(target.ok()) << target.status().message();
  auto drafter = Model::Load((dir / meta["model"].get<std::string>()).string(), be);
  ASSERT_TRUE(drafter.ok()) << drafter.status().message();
  auto pair = model::Assistant::Pair(**target, **drafter);
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  const model::Assistant& a = **pair;
  const bool ordered = meta["use_ordered_embeddings"].get<bool>();
  ASSERT_EQ((*drafter)->config().ordered_embeddings, ordered);
  const int n_swa = (*drafter)->config().n_swa;
  double worst = 0;
  for (const auto& s : meta["sequences"]) {
    const auto tensors = s["tensors"];
    auto ref = [&](const std::string& key) {
      return ReadF32(dir / tensors[key]["file"].get<std::string>());
    };
    const auto prefix = s["prefix_tokens"].get<std::vector<int32_t>>();
    const int n = static_cast<int>(prefix.size());
    ASSERT_EQ(s["draft_position"].get<int>(), n);
    // The window rule Assistant implements: sliding layers see the n_swa + 1 keys < n.
    std::vector<int> swa(static_cast<size_t>(std::min(n, n_swa + 1)));
    std::iota(swa.begin(), swa.end(), n - static_cast<int>(swa.size()));
    EXPECT_EQ(s["visible_kv_positions"]["sliding_attention"].get<std::vector<int>>(), swa);
    EXPECT_EQ(s["visible_kv_positions"]["full_attention"].get<std::vector<int>>().size(),
              static_cast<size_t>(n));

    auto kv = (*target)->NewKv(1, n + 8, n + 8).value();
    std::vector<float> h = PrefillHidden(**target, prefix, kv.get());
    const double dh = RelDiff(h, ref("target.h"));
    EXPECT_LT(dh, kRelBound) << name << " target.h";
    int32_t tok = s["id_last"].get<int32_t>();
    const auto drafts = s["draft_tokens"].get<std::vector<int32_t>>();
    const int32_t seq = 0;
    for (int j = 0; j < meta["draft_steps"].get<int>(); ++j) {
      const std::string st = ".step" + std::to_string(j);
      std::vector<float> inp, hn, cl;
      model::TensorObserver obs = [&](std::string_view what, const backend::Tensor& t) {
        if (what == "draft_inp") be.ToHost(t, &inp);
        if (what == "result_norm") be.ToHost(t, &hn);
        if (what == "centroid_logits") be.ToHost(t, &cl);
      };
      model::DraftResult dr;
      ASSERT_TRUE(a.Step({{&tok, 1}, h, {&n, 1}, {&seq, 1}}, *kv, &dr, &obs).ok());
      const double d_inp = RelDiff(inp, ref("draft.inp" + st));
      const double d_hn = RelDiff(hn, ref("draft.hn" + st));
      const double d_h = RelDiff(dr.h_next, ref("draft.h" + st));
      EXPECT_LT(d_inp, kRelBound) << name << st << " inp";
      EXPECT_LT(d_hn, kRelBound) << name << st << " hn";
      EXPECT_LT(d_h, kRelBound) << name << st << " h_next";
      const auto want = ref("draft.logits" + st);
      ASSERT_EQ(want.size(), dr.logits.size());
      // transformers fills non-candidates of the centroid head with min(candidates) - 1;
      // lockstep uses -inf. Same candidate set, same values on it.
      const float hf_mask = *std::min_element(want.begin(), want.end());
      std::vector<float> got_cmp = dr.logits, want_cmp = want;
      for (size_t i = 0; i < want.size(); ++i) {
        const bool hf_cand = !ordered || want[i] > hf_mask;
        ASSERT_EQ(hf_cand, std::isfinite(dr.logits[i])) << name << st << " candidate " << i;
        if (!hf_cand) got_cmp[i] = want_cmp[i] = 0.0f;
      }
      const double d_log = RelDiff(got_cmp, want_cmp);
      EXPECT_LT(d_log, kRelBound) << name << st << " logits";
      if (ordered) {
        EXPECT_LT(RelDiff(cl, ref("draft.centroid_logits" + st)), kRelBound) << name << st;
      }
      EXPECT_EQ(Top(dr.logits, 1), Top(want, 1)) << name << st << " argmax";
      EXPECT_EQ(Top(dr.logits, 5), Top(want, 5)) << name << st << " top-5";
      EXPECT_EQ(Top(dr.logits, 1)[0], drafts[static_cast<size_t>(j)]) << name << st;
      worst = std::max({worst, dh, d_inp, d_hn, d_h, d_log});
      tok = drafts[static_cast<size_t>(j)];
      h = dr.h_next;
    }
  }
  std::printf("  %s (%d threads): worst relative difference %.3g (bound %.0e)\n", name.c_str(),
              threads, worst, kRelBound);
}

TEST(DrafterParity, DenseHeadMoeTarget) {
  for (int t : {1, 2}) CheckPair("moe_draft", t);
}

TEST(DrafterParity, CentroidHeadPleTarget) {
  for (int t : {1, 2}) CheckPair("ple_draft", t);
}

// gemma4_unified_assistant on a gemma4_unified (12B-like) target: 12 layers, no softcap.
TEST(DrafterParity, UnifiedAssistantUnifiedTarget) {
  for (int t : {1, 2}) CheckPair("unified_draft", t);
}

// Negative control: the same comparison with the query one position early (what an off-by-one
// in the position convention would do) must leave the bound by far.
TEST(DrafterParity, ShiftedPositionIsDetected) {
  const fs::path dir = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata" / "parity" / "moe_draft";
  std::ifstream mf(dir / "meta.json");
  if (!mf) GTEST_SKIP() << "no dump at " << dir;
  const auto meta = nlohmann::json::parse(mf);
  CpuBackend be(1);
  auto target = Model::Load((dir / meta["target_model"].get<std::string>()).string(), be);
  auto drafter = Model::Load((dir / meta["model"].get<std::string>()).string(), be);
  ASSERT_TRUE(target.ok() && drafter.ok());
  auto pair = model::Assistant::Pair(**target, **drafter);
  ASSERT_TRUE(pair.ok());
  const auto& s = meta["sequences"][0];
  const auto prefix = s["prefix_tokens"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(prefix.size());
  auto kv = (*target)->NewKv(1, n + 8, n + 8).value();
  std::vector<float> h = PrefillHidden(**target, prefix, kv.get());
  const int32_t tok = s["id_last"].get<int32_t>(), seq = 0, pos = n - 1;  // off by one
  model::DraftResult dr;
  ASSERT_TRUE((*pair)->Step({{&tok, 1}, h, {&pos, 1}, {&seq, 1}}, *kv, &dr).ok());
  const auto want = ReadF32(dir / s["tensors"]["draft.logits.step0"]["file"].get<std::string>());
  EXPECT_GT(RelDiff(dr.logits, want), 100 * kRelBound);
}

}  // namespace
}  // namespace lockstep
