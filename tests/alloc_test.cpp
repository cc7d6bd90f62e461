// Steady-state decode allocates nothing: a counting global operator new watches Engine::Step
// for plain and speculative decoding (adaptive and fixed K), 1 and 2 threads, dense, MoE and
// PLE targets, F32 and F16 KV caches; a negative control proves the counter sees allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/assistant.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/proposer.h"
#include "testing/models.h"
#include "testing/synthetic_assistant.h"

namespace {

// Test-only global state: the replaced allocator counts while a Counting scope is open. Every
// thread's allocations count (the pool's workers run the kernels).
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocs{0};

void* CountedAlloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return std::malloc(n == 0 ? 1 : n);
}

void* CountedAlignedAlloc(std::size_t n, std::align_val_t al) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  const std::size_t a = static_cast<std::size_t>(al);
  // aligned_alloc wants a size that is a multiple of the alignment.
  return std::aligned_alloc(a, (n + a - 1) / a * a == 0 ? a : (n + a - 1) / a * a);
}

void* OrThrow(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) {
  return OrThrow(CountedAlloc(n));
}
void* operator new[](std::size_t n) {
  return OrThrow(CountedAlloc(n));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return CountedAlloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return CountedAlloc(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return OrThrow(CountedAlignedAlloc(n, a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return OrThrow(CountedAlignedAlloc(n, a));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return CountedAlignedAlloc(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return CountedAlignedAlloc(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// Counts allocations made (on any thread) while `fn` runs.
template <typename Fn>
int64_t CountAllocs(Fn&& fn) {
  g_allocs.store(0);
  g_counting.store(true);
  fn();
  g_counting.store(false);
  return g_allocs.load();
}

constexpr int kSeqs = 4, kCtx = 256, kWarmSteps = 8, kMeasuredSteps = 20;

std::string DrafterPath(const std::string& name, const model::SyntheticSpec& target) {
  const auto path = fs::temp_directory_path() / "lockstep-tests" / (name + ".gguf");
  fs::create_directories(path.parent_path());
  if (!fs::exists(path)) {
    const std::string scratch = testing::ScratchPath(path);
    if (!model::WriteSyntheticAssistant(model::AssistantSpecFor(target), scratch).ok()) return "";
    fs::rename(scratch, path);
  }
  return path.string();
}

struct Case {
  const char* model;
  int threads = 1;
  int draft_max = 0;  // 0: plain decoding
  bool adaptive = true;
  DType cache = DType::F32;
};

model::SyntheticSpec SpecOf(const std::string& name) {
  if (name == "moe") return testing::MoeSpec();
  if (name == "ple") return testing::PleSpec();
  return testing::DenseSpec();
}

// Prompts of different lengths so the sequences sit at different positions.
std::vector<int32_t> Prompt(int i, int vocab) {
  std::vector<int32_t> p{2};
  for (int j = 0; j < 3 + 5 * i; ++j)
    p.push_back(static_cast<int32_t>(5 + (i * 31 + j * 7) % (vocab - 5)));
  return p;
}

// Everything a case needs, alive for the whole measurement.
struct Rig {
  std::unique_ptr<backend::CpuBackend> be;
  std::unique_ptr<model::Model> target, drafter;
  std::unique_ptr<model::Assistant> assistant;
  std::unique_ptr<speculative::AssistantProposer> proposer;
  std::unique_ptr<engine::Engine> engine;
  int64_t emitted = 0;
};

// Builds the engine, submits kSeqs greedy requests and steps until every sequence decodes,
// then kWarmSteps more so every grow-only buffer has reached its size.
void Warm(const Case& c, Rig* r) {
  const model::SyntheticSpec spec = SpecOf(c.model);
  r->be = std::make_unique<backend::CpuBackend>(c.threads);
  auto t = model::Model::Load(testing::SyntheticPath(c.model, spec), *r->be);
  ASSERT_TRUE(t.ok()) << t.status().message();
  r->target = std::move(*t);
  if (c.draft_max > 0) {
    auto d =
        model::Model::Load(DrafterPath(std::string("alloc-") + c.model + "-draft", spec), *r->be);
    ASSERT_TRUE(d.ok()) << d.status().message();
    r->drafter = std::move(*d);
    auto a = model::Assistant::Pair(*r->target, *r->drafter);
    ASSERT_TRUE(a.ok()) << a.status().message();
    r->assistant = std::move(*a);
    r->proposer = std::make_unique<speculative::AssistantProposer>(*r->assistant, kSeqs);
  }
  engine::Options o;
  o.n_seq_max = kSeqs;
  o.n_ctx = kCtx;
  o.draft_max = c.draft_max;
  o.cache_type_k = o.cache_type_v = c.cache;
  auto e = engine::Engine::Create(*r->target, r->proposer.get(), o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  r->engine = std::move(*e);
  r->engine->set_token_sink([r](engine::SeqId, int32_t) { ++r->emitted; });
  for (int i = 0; i < kSeqs; ++i) {
    engine::Request q;
    q.prompt = Prompt(i, r->target->config().n_vocab);
    q.n_predict = kCtx - static_cast<int>(q.prompt.size());
    q.draft_max = c.draft_max;
    q.adaptive_draft = c.adaptive;
    ASSERT_TRUE(r->engine->Submit(std::move(q)).ok());
  }
  // Prompts fit one chunk: the first step prefills them all, later ones decode.
  for (int i = 0; i < 1 + kWarmSteps; ++i) ASSERT_TRUE(r->engine->Step().ok());
  ASSERT_GE(r->emitted, kSeqs * kWarmSteps);
}

std::string Name(const Case& c) {
  std::string s = std::string(c.model) + " threads " + std::to_string(c.threads);
  s += c.draft_max ? " draft " + std::to_string(c.draft_max) + (c.adaptive ? " adaptive" : " fixed")
                   : " plain";
  return s + (c.cache == DType::F16 ? " kv f16" : " kv f32");
}

// Allocations per step over kMeasuredSteps steady decode steps.
void ExpectNoAllocs(const Case& c) {
  Rig r;
  ASSERT_NO_FATAL_FAILURE(Warm(c, &r));
  const int64_t before = r.emitted;
  bool ok = true;
  const int64_t n = CountAllocs([&] {
    for (int i = 0; i < kMeasuredSteps; ++i) ok = r.engine->Step().ok() && ok;
  });
  ASSERT_TRUE(ok);
  EXPECT_GE(r.emitted - before, kSeqs * kMeasuredSteps);
  EXPECT_TRUE(r.engine->TakeFinished().empty()) << "a sequence ended inside the window";
  std::printf("alloc: %-40s %lld allocations in %d steps (%.2f per step)\n", Name(c).c_str(),
              static_cast<long long>(n), kMeasuredSteps, static_cast<double>(n) / kMeasuredSteps);
  EXPECT_EQ(n, 0) << Name(c);
}

class AllocFree : public ::testing::TestWithParam<const char*> {};

TEST_P(AllocFree, PlainDecode) {
  for (int threads : {1, 2}) ExpectNoAllocs({GetParam(), threads});
}

TEST_P(AllocFree, SpeculativeAdaptive) {
  for (int threads : {1, 2}) ExpectNoAllocs({GetParam(), threads, 3, true});
}

TEST_P(AllocFree, SpeculativeFixed) {
  for (int threads : {1, 2}) ExpectNoAllocs({GetParam(), threads, 3, false});
}

TEST_P(AllocFree, F16Cache) {
  ExpectNoAllocs({GetParam(), 2, 0, true, DType::F16});
  ExpectNoAllocs({GetParam(), 2, 3, true, DType::F16});
}

INSTANTIATE_TEST_SUITE_P(Models, AllocFree, ::testing::Values("dense", "moe", "ple"));

// Keeps the negative control's allocation observable (new/delete pairs may be elided).
std::vector<int>* volatile g_sink = nullptr;

// The counter works: a vector made while counting, and a step that admits a new request into
// the slot of a cancelled one (admission sizes the sequence's buffers).
TEST(AllocCounter, SeesAllocations) {
  const int64_t v = CountAllocs([] {
    g_sink = new std::vector<int>(100);
    delete g_sink;
  });
  std::printf("alloc: vector made while counting: %lld allocations\n", static_cast<long long>(v));
  EXPECT_GE(v, 2);
  Rig r;
  ASSERT_NO_FATAL_FAILURE(Warm({"dense"}, &r));
  r.engine->Cancel(1);
  engine::Request q;
  q.prompt = Prompt(0, r.target->config().n_vocab);
  q.n_predict = 8;
  ASSERT_TRUE(r.engine->Submit(std::move(q)).ok());
  bool ok = true;
  const int64_t n = CountAllocs([&] { ok = r.engine->Step().ok(); });
  ASSERT_TRUE(ok);
  std::printf("alloc: step admitting a request: %lld allocations\n", static_cast<long long>(n));
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace lockstep
