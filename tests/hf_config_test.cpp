// config.json of Hugging Face Gemma 4 checkpoints read into the converter's HfConfig: the
// serialisations transformers writes (per_layer_config, older global keys, padded layer keys)
// and the gemma4_unified types.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"

namespace lockstep::convert {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kData = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata";

TEST(HfConfig, OldGlobalHeadKeysResolveLikePerLayerConfig) {
  // The committed config uses transformers 5 per_layer_config; checkpoints saved by older versions
  // carry global_head_dim / num_global_key_value_heads instead. Both must resolve identically.
  json cfg = json::parse(std::ifstream(kData / "hf/moe_draft/config.json"));
  auto a = ParseHfConfig(cfg, "new");
  ASSERT_TRUE(a.ok()) << a.status().message();
  json& t = cfg["text_config"];
  t.erase("per_layer_config");
  t["global_head_dim"] = 32;
  t["num_global_key_value_heads"] = 1;
  auto b = ParseHfConfig(cfg, "old");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a->head_dim, b->head_dim);
  EXPECT_EQ(a->n_kv_head, b->n_kv_head);
  EXPECT_EQ(b->n_kv_head, (std::vector<int64_t>{2, 2, 2, 1}));
  t["attention_k_eq_v"] = false;  // without K=V transformers ignores num_global_key_value_heads
  auto c = ParseHfConfig(cfg, "old");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->n_kv_head, (std::vector<int64_t>{2, 2, 2, 2}));
  cfg["model_type"] = "llama";
  auto d = ParseHfConfig(cfg, "x/config.json");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("model_type 'llama' is not a Gemma 4"), std::string::npos);
}

TEST(HfConfig, PerLayerConfigKeysMayBeZeroPadded) {
  // transformers 5.17 writes per_layer_config keys zero-padded once a model has 10 or more
  // layers ("05" of 12); lockstep convert refused them until the default pair v3 (12 layers).
  json cfg = json::parse(std::ifstream(kData / "hf/moe_draft/config.json"));
  auto plain = ParseHfConfig(cfg, "plain");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  json& plc = cfg["text_config"]["per_layer_config"];
  json padded = json::object();
  for (auto it = plc.begin(); it != plc.end(); ++it) padded["0" + it.key()] = it.value();
  plc = padded;
  auto a = ParseHfConfig(cfg, "padded");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->head_dim, plain->head_dim);
  EXPECT_EQ(a->n_kv_head, plain->n_kv_head);
  // Still refused: one layer under two spellings, signs, non-digits and out-of-range indices.
  const std::string first = padded.begin().key();
  const std::vector<std::string> bad_keys = {first.substr(1), "-1", "+1", "1x", "4", ""};
  for (const std::string& bad : bad_keys) {
    json c2 = cfg;
    c2["text_config"]["per_layer_config"][bad] = padded.begin().value();
    auto r = ParseHfConfig(c2, "bad");
    ASSERT_FALSE(r.ok()) << "key '" << bad << "' accepted";
    EXPECT_NE(r.status().message().find("per_layer_config"), std::string::npos);
  }
}

TEST(HfConfig, UnifiedTypesMapLikeGemma4) {
  // gemma4_unified (the 12B): no PLE key means no PLE (gemma4's default would be 256), a null
  // softcap means none, and text attention must stay causal.
  json cfg = json::parse(std::ifstream(kData / "hf/unified/config.json"));
  auto u = ParseHfConfig(cfg, "unified");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u->unified && u->multimodal);
  EXPECT_EQ(u->arch, "gemma4");
  EXPECT_EQ(u->tensor_prefix, "model.language_model.");
  EXPECT_EQ(u->ple_dim, 0);
  EXPECT_FALSE(u->final_softcap.has_value());
  json as_gemma4 = cfg;  // control: read as plain gemma4, the absent key means 256
  as_gemma4["model_type"] = "gemma4";
  auto g = ParseHfConfig(as_gemma4, "as gemma4");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->ple_dim, 256);
  json all = cfg;
  all["text_config"]["use_bidirectional_attention"] = "all";
  auto b = ParseHfConfig(all, "all");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("use_bidirectional_attention"), std::string::npos)
      << b.status().message();
  auto d = ParseHfConfig(json::parse(std::ifstream(kData / "hf/unified_draft/config.json")), "d");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->assistant() && d->unified && !d->multimodal);
}

}  // namespace
}  // namespace lockstep::convert
