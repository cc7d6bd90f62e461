// The KV cache module: block pool bookkeeping, copy-on-write, pool exhaustion, ring bounds,
// F16/BF16 rounding, and model forwards over paged blocks, wrapping rings, reduced-precision
// storage and shared prefixes that must stay byte-exact. Exactness tests carry negative controls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/kv_view.h"
#include "core/half.h"
#include "engine/generate.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "testing/kv_shapes.h"
#include "testing/models.h"
#include "testing/synthetic_assistant.h"

namespace lockstep {
namespace {

using backend::CpuBackend;
using kv::CacheConfig;
using kv::KvCache;
using model::Model;
using testing::Gemma26bA4b;

// Layer 0 full, layer 1 sliding, layer 2 shares another layer's cache.
CacheConfig SmallConfig(int n_seq, int n_ctx) {
  CacheConfig c;
  c.layers = {{true, false, 8, 8}, {true, true, 8, 8}, {false, false, 8, 8}};
  c.n_seq_max = n_seq;
  c.n_ctx = n_ctx;
  c.sliding_keep = 6;
  c.max_step_rows = 4;
  c.block = 16;
  return c;
}

std::unique_ptr<KvCache> Make(backend::Backend& be, const CacheConfig& c) {
  auto kv = KvCache::Create(be, c);
  EXPECT_TRUE(kv.ok()) << kv.status().message();
  return kv.ok() ? std::move(kv).value() : nullptr;
}

// Writes one row per position of `seq` into `layer`, every element = base + pos.
void WriteRows(CpuBackend& be, const KvCache& kv, int layer, int seq, int from, int to,
               float base) {
  const auto view = kv.View(layer);
  const int n = to - from;
  backend::Tensor k = be.NewTensor(n, view.k_width), v = be.NewTensor(n, view.v_width);
  std::vector<int32_t> pos, sq;
  for (int i = 0; i < n; ++i) {
    for (int64_t j = 0; j < view.k_width; ++j) k.row(i)[j] = base + static_cast<float>(from + i);
    for (int64_t j = 0; j < view.v_width; ++j) v.row(i)[j] = -base - static_cast<float>(from + i);
    pos.push_back(from + i);
    sq.push_back(seq);
  }
  be.KvWrite(view, k, v, {pos, sq});
}

float KeyAt(const KvCache& kv, int layer, int seq, int pos) {
  const auto view = kv.View(layer);
  return static_cast<const float*>(view.k)[view.Row(seq, pos) * view.k_width];
}

std::vector<uint8_t> BlockBytes(const KvCache& kv, int layer, int seq, int pos) {
  const auto view = kv.View(layer);
  const int64_t row0 = view.Row(seq, pos - pos % view.block);
  const auto* p = static_cast<const uint8_t*>(view.k) + row0 * view.k_width * 4;
  return {p, p + view.block * view.k_width * 4};
}

TEST(KvCache, BlocksAllocatedAndReusedAfterRelease) {
  CpuBackend be(1);
  auto kv = Make(be, SmallConfig(2, 64));
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->total_blocks(), 8);  // 2 slots * 64 / 16
  EXPECT_TRUE(kv->has_layer(0) && kv->has_layer(1) && !kv->has_layer(2));
  ASSERT_TRUE(kv->PrepareWrite(0, 0, 4).ok());
  EXPECT_EQ(kv->free_blocks(), 7);
  for (int p = 4; p < 20; p += 4) ASSERT_TRUE(kv->PrepareWrite(0, p, p + 4).ok());
  EXPECT_EQ(kv->free_blocks(), 6);
  const int64_t first = kv->View(0).Row(0, 0);
  kv->Release(0);
  EXPECT_EQ(kv->free_blocks(), 8);
  EXPECT_EQ(kv->length(0), 0);
  ASSERT_TRUE(kv->PrepareWrite(1, 0, 1).ok());
  const int64_t reused = kv->View(0).Row(1, 0);
  EXPECT_TRUE(reused == first || reused == first + 16);  // a freed block is handed out again
  EXPECT_EQ(kv->free_blocks(), 7);
  // With one slot released, the whole pool serves the other slots.
  for (int p = 4; p < 64; p += 4) ASSERT_TRUE(kv->PrepareWrite(1, p, p + 4).ok());
  for (int p = 0; p < 64; p += 4) ASSERT_TRUE(kv->PrepareWrite(0, p, p + 4).ok());
  EXPECT_EQ(kv->free_blocks(), 0);
}

TEST(KvCache, TruncateFreesWholeBlocksPastTheEnd) {
  CpuBackend be(1);
  CacheConfig c = SmallConfig(1, 64);
  c.max_step_rows = 64;
  auto kv = Make(be, c);
  ASSERT_TRUE(kv && kv->PrepareWrite(0, 0, 48).ok());
  EXPECT_EQ(kv->free_blocks(), 1);
  kv->Truncate(0, 17);  // positions 16 live in block 1: blocks 0, 1 stay
  EXPECT_EQ(kv->free_blocks(), 2);
  EXPECT_EQ(kv->length(0), 17);
  kv->Truncate(0, 16);
  EXPECT_EQ(kv->free_blocks(), 3);
  kv->Truncate(0, 0);
  EXPECT_EQ(kv->free_blocks(), 4);
}

TEST(KvCache, CopyOnWriteLeavesTheSourceUnchanged) {
  CpuBackend be(1);
  auto kv = Make(be, SmallConfig(3, 64));
  ASSERT_TRUE(kv);
  for (int p = 0; p < 20; p += 4) {
    ASSERT_TRUE(kv->PrepareWrite(0, p, p + 4).ok());
    WriteRows(be, *kv, 0, 0, p, p + 4, 100.0f);
  }
  const auto before = BlockBytes(*kv, 0, 0, 16);
  const int free_before = kv->free_blocks();
  ASSERT_TRUE(kv->SharePrefix(1, 0, 18).ok());
  EXPECT_EQ(kv->free_blocks(), free_before);  // shared, not copied
  EXPECT_EQ(kv->View(0).Row(1, 17), kv->View(0).Row(0, 17));
  ASSERT_TRUE(kv->PrepareWrite(1, 18, 19).ok());
  EXPECT_EQ(kv->free_blocks(), free_before - 1);  // block 1 copied for slot 1
  EXPECT_NE(kv->View(0).Row(1, 17), kv->View(0).Row(0, 17));
  WriteRows(be, *kv, 0, 1, 18, 19, 500.0f);
  EXPECT_EQ(BlockBytes(*kv, 0, 0, 16), before);
  EXPECT_EQ(KeyAt(*kv, 0, 1, 17), 117.0f);  // the copy carries the shared prefix
  EXPECT_EQ(KeyAt(*kv, 0, 1, 18), 518.0f);
  EXPECT_EQ(KeyAt(*kv, 0, 0, 18), 118.0f);

  // Negative control: writing into a still-shared block without PrepareWrite changes the
  // source's bytes, so the comparison above can fail.
  ASSERT_TRUE(kv->SharePrefix(2, 0, 18).ok());
  WriteRows(be, *kv, 0, 2, 17, 18, 900.0f);
  EXPECT_NE(BlockBytes(*kv, 0, 0, 16), before);
}

TEST(KvCache, PoolExhaustionIsAnErrorAndChangesNothing) {
  CpuBackend be(1);
  CacheConfig c = SmallConfig(2, 64);
  c.n_blocks = 3;
  c.max_step_rows = 64;
  auto kv = Make(be, c);
  ASSERT_TRUE(kv && kv->PrepareWrite(0, 0, 32).ok());
  Status s = kv->PrepareWrite(1, 0, 32);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("blocks"), std::string::npos) << s.message();
  EXPECT_EQ(kv->free_blocks(), 1);
  EXPECT_EQ(kv->length(1), 0);
  // Copy-on-write needs a block too.
  ASSERT_TRUE(kv->PrepareWrite(0, 32, 40).ok());
  ASSERT_TRUE(kv->SharePrefix(1, 0, 40).ok());
  EXPECT_FALSE(kv->PrepareWrite(1, 40, 41).ok());
  EXPECT_FALSE(kv->PrepareWrite(0, 60, 65).ok());  // past n_ctx
  kv->Release(0);
  kv->Release(1);
  EXPECT_EQ(kv->free_blocks(), 3);
}

TEST(KvCache, RingErrorsInsteadOfLosingKeys) {
  CpuBackend be(1);
  auto kv = Make(be, SmallConfig(2, 64));  // ring 6 + 4 = 10
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->ring(), 10);
  EXPECT_FALSE(kv->PrepareWrite(0, 0, 5).ok());  // more than max_step_rows
  for (int p = 0; p < 24; p += 4) ASSERT_TRUE(kv->PrepareWrite(0, p, p + 4).ok());
  kv->Truncate(0, 21);  // a speculative rollback of three rows: fine
  EXPECT_TRUE(kv->PrepareWrite(0, 21, 23).ok());
  kv->Truncate(0, 12);  // rolled back past the ring: keys 6..11 are overwritten
  EXPECT_FALSE(kv->PrepareWrite(0, 12, 13).ok());
  EXPECT_FALSE(kv->SharePrefix(1, 0, 12).ok());
  kv->Truncate(0, 0);
  EXPECT_TRUE(kv->PrepareWrite(0, 0, 4).ok());
}

TEST(KvCache, SlidingRingBytesAreBoundedByTheWindow) {
  CacheConfig c = SmallConfig(1, 100);
  c.layers = {{true, true, 8, 8}};
  EXPECT_EQ(KvCache::BytesPerSequence(c, 100), KvCache::BytesPerSequence(c, 100000));
  EXPECT_EQ(KvCache::BytesPerSequence(c, 100), 10u * 16 * 4);
  CpuBackend be(1);
  c.n_ctx = 5000;
  auto kv = Make(be, c);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->bytes(), 10u * 16 * 4);
  c.layers = {{true, false, 8, 8}};  // a full layer grows with the context
  EXPECT_EQ(KvCache::BytesPerSequence(c, 100), 112u * 16 * 4);
  EXPECT_GT(KvCache::BytesPerSequence(c, 100000), KvCache::BytesPerSequence(c, 100));
}

// Rows(seq, pos, n) equals Row(seq, pos + i) position by position, across ring wraps and block
// boundaries and over unallocated (-1) blocks, for every start and length up to 16. A rows
// function that ignores the wraps (first + i) disagrees somewhere in each view (negative control).
TEST(KvLayerView, RowsEqualRowPerPosition) {
  // The storage pointers stay null: Row and Rows only map positions.
  backend::KvLayerView ring;
  ring.ring = 7;
  ring.n_seq = 3;
  ring.n_ctx = 64;
  // Slot 0: blocks 3, 0, unallocated, 5, 1; slot 1: unallocated, 2, 4, 6, unallocated.
  const int32_t table[] = {3, 0, -1, 5, 1, -1, 2, 4, 6, -1};
  backend::KvLayerView paged;
  paged.block = 4;
  paged.table = table;
  paged.table_stride = 5;
  paged.n_seq = 2;
  paged.n_ctx = 20;
  for (const backend::KvLayerView& view : {ring, paged}) {
    SCOPED_TRACE(view.ring > 0 ? "ring" : "paged");
    int checked = 0, naive_differs = 0;
    const int end = view.ring > 0 ? 30 + 16 : view.table_stride * view.block;
    for (int seq = 0; seq < view.n_seq; ++seq) {
      for (int pos = 0; pos < std::min(30, end); ++pos) {
        for (int n = 1; n <= 16 && pos + n <= end; ++n) {
          std::vector<int64_t> rows(static_cast<size_t>(n), -2);
          view.Rows(seq, pos, n, rows.data());
          const int64_t first = view.Row(seq, pos);
          for (int i = 0; i < n; ++i) {
            ASSERT_EQ(rows[i], view.Row(seq, pos + i))
                << "seq=" << seq << " pos=" << pos << " n=" << n << " i=" << i;
            naive_differs += (first < 0 ? -1 : first + i) != view.Row(seq, pos + i);
          }
          ++checked;
        }
      }
    }
    std::printf("  %s: %d (seq, pos, n) cases; the no-wrap rows differ at %d positions\n",
                view.ring > 0 ? "ring" : "paged", checked, naive_differs);
    EXPECT_GT(naive_differs, 0);
  }
}

TEST(KvCache, ParseCacheTypeNamesTheAcceptedTypes) {
  EXPECT_EQ(*kv::ParseCacheType("f16"), DType::F16);
  EXPECT_EQ(*kv::ParseCacheType("bf16"), DType::BF16);
  EXPECT_EQ(*kv::ParseCacheType("F32"), DType::F32);
  auto bad = kv::ParseCacheType("q8_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("f32, f16, bf16"), std::string::npos);
}

// Stored bits of one value written through KvWrite into a cache of `type`.
uint16_t StoredBits(DType type, float x) {
  CpuBackend be(1);
  CacheConfig c = SmallConfig(1, 16);
  c.type_k = c.type_v = type;
  auto kv = Make(be, c);
  EXPECT_TRUE(kv->PrepareWrite(0, 0, 1).ok());
  const auto view = kv->View(0);
  backend::Tensor k = be.NewTensor(1, 8), v = be.NewTensor(1, 8);
  for (int j = 0; j < 8; ++j) k.row(0)[j] = v.row(0)[j] = x;
  const int32_t zero = 0;
  be.KvWrite(view, k, v, {std::span(&zero, 1), std::span(&zero, 1)});
  uint16_t bits;
  std::memcpy(&bits, static_cast<const uint8_t*>(view.k) + view.Row(0, 0) * 8 * 2, 2);
  return bits;
}

TEST(KvCache, HalfAndBf16WritesRoundToNearestEven) {
  // Ties: 1 + half an ulp stays at 1 (even); 1 + 1.5 ulp goes up to 1 + 2 ulp (even).
  EXPECT_EQ(StoredBits(DType::F16, 1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(StoredBits(DType::F16, 1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(StoredBits(DType::F16, -(1.0f + 3 * 0x1p-11f)), 0xBC02);
  EXPECT_EQ(StoredBits(DType::BF16, 1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(StoredBits(DType::BF16, 1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(StoredBits(DType::BF16, 1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above the tie
  // Negative control: truncation would store 0x3C01 / 0x3F81 for the upper ties.
  EXPECT_NE(StoredBits(DType::F16, 1.0f + 3 * 0x1p-11f), 0x3C01);
  EXPECT_NE(StoredBits(DType::BF16, 1.0f + 3 * 0x1p-8f), 0x3F81);
}

TEST(KvCache, Gemma26bA4bPerSequenceBytesAtMostLlamaCpp) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const CacheConfig c = Gemma26bA4b(32768, t);
    const size_t ours = KvCache::BytesPerSequence(c, 32768);
    const size_t llama = kv::LlamaCppBytesPerSequence(c, 32768, 1024);
    std::printf("  26B-A4B 32k %-4s lockstep %11zu B (%.1f MiB)  llama.cpp %11zu B (%.1f MiB)\n",
                std::string(Name(t)).c_str(), ours, ours / 1048576.0, llama, llama / 1048576.0);
    EXPECT_LE(ours, llama) << Name(t);
  }
  // f16 by hand: full 5 * 32768 * (1024 + 1024) * 2; sliding 25 * ring * (2048 + 2048) * 2
  // with our ring 1024 + 2 + 256 = 1282 and llama.cpp's pad256(1024 + 512) = 1536 cells.
  const CacheConfig f16 = Gemma26bA4b(32768, DType::F16);
  EXPECT_EQ(KvCache::BytesPerSequence(f16, 32768), 671088640u + 262553600u);
  EXPECT_EQ(kv::LlamaCppBytesPerSequence(f16, 32768, 1024), 671088640u + 314572800u);
}

// ---- model forwards ----

std::vector<int32_t> Tokens(int seed, int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seed * 131 + i * 71 + i * i * 7) % vocab);
  return t;
}

// Feeds `tokens` (positions from `start`) to slot `seq` in chunks; returns every row's logits.
std::vector<float> Feed(const Model& m, KvCache& kv, const std::vector<int32_t>& tokens, int chunk,
                        int seq = 0, int start = 0) {
  std::vector<float> logits;
  model::ForwardResult out;
  const int n = static_cast<int>(tokens.size());
  for (int b0 = 0; b0 < n; b0 += chunk) {
    model::Batch b;
    for (int i = b0; i < std::min(n, b0 + chunk); ++i) b.Add(tokens[i], start + i, seq, true);
    Status s = m.Forward(b, kv, &out);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return {};
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  return logits;
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::unique_ptr<KvCache> ModelKv(const Model& m, int n_seq, int n_ctx, int step, DType t) {
  auto kv = m.NewKv(n_seq, n_ctx, step, t, t);
  EXPECT_TRUE(kv.ok()) << kv.status().message();
  return std::move(kv).value();
}

class KvForward : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& n = GetParam();
    const auto spec = n == "moe"   ? testing::MoeSpec()
                      : n == "ple" ? testing::PleSpec()
                                   : testing::DenseSpec();
    auto m = Model::Load(testing::SyntheticPath(n, spec), be_);
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
  }
  CpuBackend be_{2};
  std::unique_ptr<Model> model_;
};

TEST_P(KvForward, HalfAndBf16CachesAreBatchInvariant) {
  const Model& m = *model_;
  const auto toks = Tokens(5, 30, m.config().n_vocab);
  std::vector<float> f32;
  for (DType t : {DType::F16, DType::BF16}) {
    auto kv1 = ModelKv(m, 1, 40, 30, t), kv2 = ModelKv(m, 1, 40, 30, t),
         kv3 = ModelKv(m, 1, 40, 30, t);
    const auto whole = Feed(m, *kv1, toks, 30);
    EXPECT_TRUE(SameBytes(whole, Feed(m, *kv2, toks, 1))) << Name(t) << " token by token";
    EXPECT_TRUE(SameBytes(whole, Feed(m, *kv3, toks, 3))) << Name(t) << " chunks of 3";
    // Negative control: the storage type reaches the logits, so a comparison can fail.
    if (f32.empty()) {
      auto kvf = ModelKv(m, 1, 40, 30, DType::F32);
      f32 = Feed(m, *kvf, toks, 30);
    }
    EXPECT_FALSE(SameBytes(whole, f32)) << Name(t);
  }
}

TEST_P(KvForward, WrappingRingsMatchAWholeContextCache) {
  const Model& m = *model_;
  ASSERT_EQ(m.config().n_swa, 8);
  const auto toks = Tokens(9, 80, m.config().n_vocab);
  auto whole_kv = ModelKv(m, 1, 80, 80, DType::F32);  // ring = n_ctx: never wraps
  ASSERT_EQ(whole_kv->ring(), 80);
  const auto ref = Feed(m, *whole_kv, toks, 3);
  for (int step : {1, 3}) {
    auto ring_kv = ModelKv(m, 1, 80, step, DType::F32);
    ASSERT_EQ(ring_kv->ring(), 10 + step);  // many wraps over 80 positions
    EXPECT_TRUE(SameBytes(ref, Feed(m, *ring_kv, toks, step))) << "step " << step;
    // Negative control: the ring really dropped old keys (position 0's row now holds a later
    // position), so the equality is not a whole-context cache in disguise.
    int sliding = -1;
    for (int il = 0; il < m.config().n_layer && sliding < 0; ++il)
      if (m.config().layers[il].sliding && m.config().layers[il].has_kv) sliding = il;
    ASSERT_GE(sliding, 0);
    const auto rv = ring_kv->View(sliding), wv = whole_kv->View(sliding);
    EXPECT_NE(std::memcmp(static_cast<const float*>(rv.k) + rv.Row(0, 0) * rv.k_width,
                          static_cast<const float*>(wv.k) + wv.Row(0, 0) * wv.k_width,
                          static_cast<size_t>(rv.k_width) * 4),
              0);
  }
}

TEST_P(KvForward, SharedPrefixContinuesLikeAFreshPrefill) {
  const Model& m = *model_;
  const int V = m.config().n_vocab, N = 30;
  auto a = Tokens(3, N + 2, V), b = Tokens(3, N, V), other = Tokens(4, N, V);
  const auto tail = Tokens(7, 12, V);
  b.insert(b.end(), tail.begin(), tail.end());
  // Reference: B alone.
  auto alone_kv = ModelKv(m, 1, 64, 4, DType::F32);
  const auto alone = Feed(m, *alone_kv, b, 4);
  const std::vector<float> alone_tail(alone.end() - static_cast<long>(tail.size()) * V,
                                      alone.end());
  // A (slot 0) runs past the shared prefix; B (slot 1) takes A's first N positions.
  auto kv = ModelKv(m, 3, 64, 4, DType::F32);
  ASSERT_LT(kv->ring(), 64);
  Feed(m, *kv, a, 4, 0);
  ASSERT_TRUE(kv->SharePrefix(1, 0, N).ok());
  const auto shared_tail = Feed(m, *kv, tail, 4, 1, N);
  EXPECT_TRUE(SameBytes(alone_tail, shared_tail));
  // A continues unaffected by B's writes into blocks they shared.
  const auto a_more = Feed(m, *kv, tail, 3, 0, N + 2);
  auto a_kv = ModelKv(m, 1, 64, 4, DType::F32);
  auto a_full = a;
  a_full.insert(a_full.end(), tail.begin(), tail.end());
  const auto a_ref = Feed(m, *a_kv, a_full, 4);
  EXPECT_TRUE(SameBytes(
      std::vector<float>(a_ref.end() - static_cast<long>(tail.size()) * V, a_ref.end()), a_more));
  // Negative control: a prefix computed from different tokens gives different logits.
  Feed(m, *kv, other, 4, 2);
  kv->Release(1);
  ASSERT_TRUE(kv->SharePrefix(1, 2, N).ok());
  EXPECT_FALSE(SameBytes(alone_tail, Feed(m, *kv, tail, 4, 1, N)));
}

INSTANTIATE_TEST_SUITE_P(Models, KvForward, ::testing::Values("dense", "moe", "ple"));

// Speculative decoding over wrapping rings (prefill chunk 2, K = 3: ring n_swa + 2 + 4) emits
// the plain loop's tokens, so rollback never loses a key the next round reads.
TEST(KvCacheSpec, SpeculativeOverWrappingRingsMatchesPlain) {
  const std::string target = testing::SyntheticPath("moe", testing::MoeSpec());
  auto a = model::AssistantSpecFor(testing::MoeSpec());
  a.n_embd = a.n_bb;
  a.n_layer = 2;
  a.echo_target = target;
  a.echo_noise = 0.05f;
  const auto dir = std::filesystem::temp_directory_path() / "lockstep-tests";
  const auto path = dir / "kv-moe-echo.gguf";
  if (!std::filesystem::exists(path)) {
    ASSERT_TRUE(model::WriteSyntheticAssistant(a, testing::ScratchPath(path)).ok());
    std::filesystem::rename(testing::ScratchPath(path), path);
  }
  CpuBackend be(2);
  auto t = Model::Load(target, be);
  auto d = Model::Load(path.string(), be);
  ASSERT_TRUE(t.ok() && d.ok());
  engine::GenerateOptions opt;
  opt.n_predict = 48;
  opt.prefill_chunk = 2;
  opt.draft_max = 3;
  opt.adaptive_draft = false;
  int64_t accepted = 0;
  for (int i = 0; i < 4; ++i) {
    const auto prompt = Tokens(20 + i, 5 + 6 * i, (*t)->config().n_vocab);
    auto plain = engine::Generate(**t, nullptr, prompt, opt);
    auto got = engine::GenerateSpeculative(**t, **d, prompt, opt);
    ASSERT_TRUE(plain.ok() && got.ok()) << got.status().message();
    EXPECT_EQ(plain->tokens, got->tokens) << "prompt " << i;
    accepted += got->draft.accepted;
  }
  EXPECT_GT(accepted, 0);  // rollbacks and acceptances both happened
}

}  // namespace
}  // namespace lockstep
