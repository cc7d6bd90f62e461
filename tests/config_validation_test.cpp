// Every config value is checked at load: a file with a zero head count, a NaN epsilon, a zero
// RoPE base and similar is refused with an error naming the file, key and value (they used to
// crash with SIGFPE or run and print garbage).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "testing/models.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

// A fixture (the dense one unless named) with one metadata value replaced.
std::string WithKey(const std::string& key, const gguf::Value& value,
                    const std::string& fixture = testing::SyntheticPath("dense",
                                                                        testing::DenseSpec())) {
  auto src = gguf::File::Open(fixture);
  CHECK(src.ok());
  gguf::Writer w;
  for (const auto& [k, v] : (*src)->metadata()) w.Set(k, v);
  w.Set(key, value);
  for (const auto& t : (*src)->tensors())
    w.AddTensorCopy(t.name, t.type, t.ne, (*src)->TensorData(t));
  const fs::path path =
      fs::temp_directory_path() / "lockstep-tests" / fmt::format("bad-config-{}.gguf", ::getpid());
  CHECK(w.WriteFile(path.string()).ok());
  return path.string();
}

struct Bad {
  const char* key;
  gguf::Value value;
  const char* shown;  // how the value appears in the message
};

TEST(ConfigValidation, OutOfRangeValuesAreRefusedNamingKeyAndValue) {
  const Bad cases[] = {
      {"gemma4.attention.head_count", gguf::Value::U32(0), "= 0"},
      {"gemma4.attention.layer_norm_rms_epsilon", gguf::Value::F32(NAN), "= nan"},
      {"gemma4.attention.layer_norm_rms_epsilon", gguf::Value::F32(-1.0f), "= -1"},
      {"gemma4.rope.freq_base", gguf::Value::F32(0.0f), "= 0"},
      {"gemma4.rope.freq_base_swa", gguf::Value::F32(INFINITY), "= inf"},
      {"gemma4.final_logit_softcapping", gguf::Value::F32(NAN), "= nan"},
      {"gemma4.context_length", gguf::Value::U32(0), "= 0"},
      {"gemma4.attention.sliding_window", gguf::Value::I32(-5), "= -5"},
      {"gemma4.feed_forward_length", gguf::Value::U32(0), "= 0"},
  };
  backend::CpuBackend be(1);
  for (const Bad& b : cases) {
    const std::string path = WithKey(b.key, b.value);
    auto m = model::Model::Load(path, be);
    ASSERT_FALSE(m.ok()) << b.key << " " << b.shown;
    const std::string msg = m.status().message();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(b.key).substr(7)), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.shown), std::string::npos) << msg;
    fs::remove(path);
  }
  // Control: the unmodified fixture loads.
  EXPECT_TRUE(model::Model::Load(testing::SyntheticPath("dense", testing::DenseSpec()), be).ok());
}

// Values that are each in range but inconsistent with the rest of the config (a division or a
// layer layout they break) are refused too, with the file and the numbers at fault.
TEST(ConfigValidation, InconsistentValuesAreRefused) {
  struct Case {
    std::string fixture;
    const char* key;
    gguf::Value value;
    const char* expect;
  };
  const std::string dense = testing::SyntheticPath("dense", testing::DenseSpec());
  const std::string moe = testing::SyntheticPath("moe", testing::MoeSpec());
  const Case cases[] = {
      {dense, "gemma4.attention.head_count_kv", gguf::Value::U32(3), "cannot share 3 kv heads"},
      {dense, "gemma4.rope.dimension_count", gguf::Value::U32(7), "rope dimension count 7"},
      {dense, "gemma4.rope.dimension_count_swa", gguf::Value::U32(4096),
       "rope dimension count 4096"},
      {dense, "gemma4.attention.value_length", gguf::Value::U32(8), "value"},
      {dense, "gemma4.attention.sliding_window", gguf::Value::U32(0),
       "sliding but attention.sliding_window is 0"},
      {moe, "gemma4.expert_used_count", gguf::Value::U32(99), "expert_used_count"},
  };
  backend::CpuBackend be(1);
  for (const Case& c : cases) {
    const std::string path = WithKey(c.key, c.value, c.fixture);
    auto m = model::Model::Load(path, be);
    ASSERT_FALSE(m.ok()) << c.key;
    const std::string msg = m.status().message();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.key << ": " << msg;
    fs::remove(path);
  }
  // Control: the unmodified MoE fixture loads (the dense one is checked above).
  EXPECT_TRUE(model::Model::Load(moe, be).ok());
}

}  // namespace
}  // namespace lockstep
