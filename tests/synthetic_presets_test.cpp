// The full-size presets the GPU benchmarks write (e4b, 26b-a4b, 31b): their head layout,
// windows, KV sharing, per-layer embeddings and experts load and decode, at reduced width,
// depth and vocabulary (the real files are 8-60 GB; writing in a mix is tested with the
// quantizer, QuantizeModel.SyntheticModelsWrittenInAMixHaveQuantizesTypes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/generate.h"
#include "model/model.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

TEST(SyntheticPresets, GemmaShapesLoadAndDecodeAtReducedSize) {
  EXPECT_FALSE(model::SyntheticPreset("40b").has_value());
  for (const char* name : {"e4b", "26b-a4b", "31b", "d17b", "moe4b"}) {
    SCOPED_TRACE(name);
    auto spec = model::SyntheticPreset(name);
    ASSERT_TRUE(spec.has_value());
    EXPECT_EQ(spec->n_vocab, 262144);
    spec->n_vocab = 512;
    spec->n_layer = 12;  // two full layers (5, 11): a shared full layer has an owner
    spec->n_shared_kv = spec->n_shared_kv > 0 ? 2 : 0;
    spec->n_embd = 256;
    spec->n_ff = 512;
    if (spec->n_expert > 0) {
      EXPECT_EQ(spec->n_expert, 128);
      spec->n_expert = 16;  // top-8 of 16: the routing path, a fraction of the weights to write
      spec->n_ff_exp = 256;
    }
    const std::string path =
        ::testing::TempDir() + "/preset-" + name + "-" + std::to_string(getpid()) + ".gguf";
    ASSERT_TRUE(model::WriteSyntheticModel(*spec, path).ok());
    backend::CpuBackend be(1);
    auto m = model::Model::Load(path, be);
    ASSERT_TRUE(m.ok()) << m.status().message();
    engine::GenerateOptions o;
    o.n_predict = 3;
    const std::vector<int32_t> prompt = {2, 17, 33};
    auto g = engine::Generate(**m, nullptr, prompt, o);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->tokens.size(), 3u);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace lockstep
