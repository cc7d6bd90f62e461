// Batch invariance of the CPU forward pass: a sequence's logits are byte-identical whether it
// is prefilled at once, token by token, in chunks of 3, or inside a batch with other
// sequences, at 1 to 7 threads, for batches up to past the 256-row prefill chunk. A negative
// control proves the comparison can fail.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "quant/quant.h"
#include "testing/backends.h"
#include "testing/models.h"

namespace lockstep {
namespace {

using backend::CpuBackend;
using model::Batch;
using model::ForwardResult;
using model::Model;

constexpr int kLen = 21;  // longer than the sliding window (8)

std::vector<int32_t> Tokens(int seed, int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seed * 131 + i * 71 + i * i * 7) % vocab);
  return t;
}

// Runs `len` tokens of sequence slot 0 in chunks of `chunk`; optionally interleaves two other
// sequences (slots 1 and 2) into every forward call. Returns all logits of slot 0, in order.
std::vector<float> RunSequence(const Model& m, int chunk, bool mixed, int len = kLen) {
  const int V = m.config().n_vocab;
  // Steps of up to len + 3 rows of one slot: the sliding rings must hold a whole chunk.
  auto kv = m.NewKv(3, std::max(64, len + 8), len + 3).value();
  const auto main = Tokens(1, len, V), other1 = Tokens(2, len, V), other2 = Tokens(3, 5, V);
  std::vector<float> logits;
  ForwardResult out;
  int o1 = 0, o2 = 0;
  for (int start = 0; start < len; start += chunk) {
    Batch b;
    if (mixed) {  // other sequences before and after, at their own positions
      for (int i = 0; i < 2 && o1 < len; ++i, ++o1) b.Add(other1[o1], o1, 1, true);
    }
    const int end = std::min(len, start + chunk);
    for (int p = start; p < end; ++p) b.Add(main[p], p, 0, true);
    if (mixed && o2 < 5) b.Add(other2[o2], o2, 2, true), ++o2;
    EXPECT_TRUE(m.Forward(b, *kv, &out).ok());
    for (size_t i = 0; i < out.rows.size(); ++i)
      if (b.seq[out.rows[i]] == 0)
        logits.insert(logits.end(), out.logits_row(i), out.logits_row(i) + V);
  }
  return logits;
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ForwardInvariance : public ::testing::TestWithParam<std::string> {};

model::SyntheticSpec SpecFor(const std::string& name) {
  if (name == "moe") return testing::MoeSpec();
  if (name == "ple") return testing::PleSpec();
  return testing::DenseSpec();
}

TEST_P(ForwardInvariance, LogitsIndependentOfBatchChunkAndThreads) {
  const std::string path = testing::SyntheticPath(GetParam(), SpecFor(GetParam()));
  ASSERT_FALSE(path.empty());
  std::vector<float> reference;
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    auto m = Model::Load(path, be);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Model& model = **m;
    if (reference.empty()) reference = RunSequence(model, kLen, false);
    ASSERT_EQ(reference.size(), static_cast<size_t>(kLen * model.config().n_vocab));
    EXPECT_TRUE(SameBytes(reference, RunSequence(model, kLen, false))) << "rerun, " << threads;
    EXPECT_TRUE(SameBytes(reference, RunSequence(model, 1, false)))
        << "token by token, " << threads;
    EXPECT_TRUE(SameBytes(reference, RunSequence(model, 3, false))) << "chunks of 3, " << threads;
    EXPECT_TRUE(SameBytes(reference, RunSequence(model, 4, true))) << "mixed batch, " << threads;
    EXPECT_TRUE(SameBytes(reference, RunSequence(model, 1, true))) << "mixed decode, " << threads;
  }
}

// Batches past the default prefill chunk (256 rows): a kernel whose order changes only above
// some row count (a wider tile, another code path) differs between the one 300-row prefill and
// decoding the same tokens one at a time. Thread counts that do not divide the column blocks
// evenly (3, 7) change every thread's share.
TEST_P(ForwardInvariance, LongPrefillMatchesDecodeAtOneToSevenThreads) {
  constexpr int kLong = 300;
  const std::string path = testing::SyntheticPath(GetParam(), SpecFor(GetParam()));
  ASSERT_FALSE(path.empty());
  std::vector<float> reference;
  const std::vector<int> threads =
      GetParam() == "dense" ? std::vector<int>{1, 2, 3, 4, 7} : std::vector<int>{1, 3};
  for (int t : threads) {
    CpuBackend be(t);
    auto m = Model::Load(path, be);
    ASSERT_TRUE(m.ok()) << m.status().message();
    if (reference.empty()) reference = RunSequence(**m, 1, false, kLong);  // decode, 1 row
    ASSERT_EQ(reference.size(), static_cast<size_t>(kLong * (*m)->config().n_vocab));
    EXPECT_TRUE(SameBytes(reference, RunSequence(**m, kLong, false, kLong))) << "300 rows, " << t;
    EXPECT_TRUE(SameBytes(reference, RunSequence(**m, 256, true, kLong))) << "mixed 256, " << t;
    EXPECT_TRUE(SameBytes(reference, RunSequence(**m, 33, false, kLong))) << "chunks of 33, " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardInvariance, ::testing::Values("dense", "moe", "ple"));

using testing::ShapeDependentBackend;

TEST(ForwardInvarianceNegativeControl, ShapeDependentMatmulIsDetected) {
  const std::string path = testing::SyntheticPath("dense", testing::DenseSpec());
  ShapeDependentBackend be(1);
  auto m = Model::Load(path, be);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto prefill = RunSequence(**m, kLen, false);
  const auto decode = RunSequence(**m, 1, false);
  EXPECT_FALSE(SameBytes(prefill, decode)) << "the comparison failed to see a changed order";
}

}  // namespace
}  // namespace lockstep
