// lockstep convert: byte-exact reproduction of the committed parity GGUFs, metadata checked
// against the HF configs, and negative controls (bad config, corrupt safetensors, bad tensors).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "gguf/gguf.h"
#include "testing/child.h"
#include "testing/files.h"

namespace lockstep::convert {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kData = fs::path(LOCKSTEP_SOURCE_DIR) / "testdata";

std::vector<uint8_t> ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}
void WriteAll(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A scratch directory per test, removed afterwards.
class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           fmt::format("lockstep_convert_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }
  // Copies testdata/hf/<name> into the scratch dir so it can be damaged.
  fs::path CopyHf(const std::string& name) {
    const fs::path d = tmp_ / name;
    fs::copy(kData / "hf" / name, d, fs::copy_options::recursive);
    return d;
  }
  Status Convert(const fs::path& dir, const fs::path& out, DType t = DType::F32) {
    ConvertOptions o;
    o.hf_dir = dir.string();
    o.out_path = out.string();
    o.outtype = t;
    return ConvertHfToGguf(o);
  }
  fs::path tmp_;
};

std::unique_ptr<gguf::File> OpenGguf(const fs::path& p) {
  auto f = gguf::File::Open(p.string());
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(f).value() : nullptr;
}

int64_t IntKey(const gguf::File& f, const std::string& k) {
  const auto* v = f.Find(k);
  EXPECT_NE(v, nullptr) << k;
  return v && v->AsInt() ? *v->AsInt() : -1;
}

std::vector<int64_t> IntArray(const gguf::File& f, const std::string& k) {
  std::vector<int64_t> out;
  const auto* v = f.Find(k);
  if (v == nullptr || v->AsArray() == nullptr) return out;
  for (const auto& x : v->AsArray()->items) out.push_back(x.AsInt().value_or(-999));
  return out;
}

TEST_F(ConvertTest, ReproducesCommittedGgufsByteForByte) {
  for (const std::string name : {"moe_draft", "ple_draft", "unified", "unified_draft"}) {
    const fs::path out = tmp_ / (name + ".gguf");
    // The directory's base name becomes general.name, so convert from a same-named copy.
    ASSERT_TRUE(Convert(CopyHf(name), out).ok());
    const auto want = ReadAll(kData / "parity" / name / (name + ".gguf"));
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(ReadAll(out), want) << name;
    EXPECT_EQ(testing::TempSiblings(out), 0);
  }
}

// Ctrl-C / SIGTERM set the cancel flag (cli::InterruptGuard); mid-write that leaves neither the
// output nor a temporary, and an output that existed before is left as it was.
TEST_F(ConvertTest, CancelMidWriteLeavesNoFileAndNoTemporary) {
  const fs::path out = tmp_ / "cancelled.gguf";
  std::ofstream(out) << "previous output";  // what an earlier run left
  std::atomic<bool> cancel{false};
  bool tmp_seen = false;
  ConvertOptions o;
  o.hf_dir = CopyHf("moe_draft").string();
  o.out_path = out.string();
  o.cancel = &cancel;
  o.progress = [&](uint64_t done, uint64_t total) {
    if (!cancel && done > 0 && done < total) {
      tmp_seen = testing::TempSiblings(out) == 1;
      cancel = true;
    }
  };
  const Status s = ConvertHfToGguf(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("interrupted, not written"), std::string::npos) << s.message();
  EXPECT_TRUE(tmp_seen);  // control: the temporary really existed mid-write
  const std::string previous = "previous output";
  EXPECT_EQ(ReadAll(out), std::vector<uint8_t>(previous.begin(), previous.end()));
  EXPECT_EQ(testing::TempSiblings(out), 0);
  // Control: the same conversion without the cancel replaces the file.
  o.cancel = nullptr;
  o.progress = nullptr;
  ASSERT_TRUE(ConvertHfToGguf(o).ok());
  EXPECT_TRUE(gguf::File::Open(out.string()).ok());
}

// The CLI end to end: Ctrl-C or SIGTERM while `lockstep convert` runs exits 130 and leaves no
// output and no temporary, an earlier output untouched. Deterministic: config.json is a FIFO,
// so the process waits in open() (the interrupt guard already installed) until the test has
// signalled it and then writes the config; conversion then stops at its first tensor.
TEST_F(ConvertTest, SignalledCliWritesNothing) {
  const fs::path dir = tmp_ / "unified";
  fs::create_directories(dir);
  fs::copy_file(kData / "hf/unified/model.safetensors", dir / "model.safetensors");
  const std::string config = [] {
    std::ifstream in(kData / "hf/unified/config.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const fs::path out = tmp_ / "signalled.gguf";
  for (int sig : {SIGINT, SIGTERM, 0}) {  // 0: the control, no signal
    fs::remove(dir / "config.json");
    ASSERT_EQ(mkfifo((dir / "config.json").c_str(), 0600), 0);
    std::ofstream(out) << "previous output";
    const int devnull = open("/dev/null", O_WRONLY);
    const pid_t pid = testing::Spawn({LOCKSTEP_BINARY, "convert", dir.string(), "-o", out.string()},
                                     devnull, /*merge_stderr=*/true);
    close(devnull);
    ASSERT_GT(pid, 0);
    // Wait until the child blocks opening the FIFO (wchan wait_for_partner), at most 10 s.
    const fs::path wchan = fmt::format("/proc/{}/wchan", pid);
    for (int i = 0; i < 1000; ++i) {
      std::ifstream w(wchan);
      std::string where;
      w >> where;
      if (where == "wait_for_partner") break;
      usleep(10000);
    }
    if (sig) kill(pid, sig);
    usleep(100000);  // let the handler run before the config arrives
    std::ofstream(dir / "config.json") << config;
    const int status = testing::WaitOrKill(pid, std::chrono::seconds(60));
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig << ": killed by " << WTERMSIG(status);
    EXPECT_EQ(testing::TempSiblings(out), 0) << "signal " << sig;
    if (sig) {
      EXPECT_EQ(WEXITSTATUS(status), 130) << "signal " << sig;
      const auto kept = ReadAll(out);
      EXPECT_EQ(std::string(kept.begin(), kept.end()), "previous output") << "signal " << sig;
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 0);
      EXPECT_TRUE(gguf::File::Open(out.string()).ok());
    }
  }
}

TEST_F(ConvertTest, ChangedWeightChangesOutput) {  // negative control for the byte comparison
  const fs::path d = CopyHf("ple_draft");
  auto st = ReadAll(d / "model.safetensors");
  st[st.size() - 1] ^= 0x01;
  WriteAll(d / "model.safetensors", st);
  ASSERT_TRUE(Convert(d, tmp_ / "x.gguf").ok());
  EXPECT_NE(ReadAll(tmp_ / "x.gguf"), ReadAll(kData / "parity/ple_draft/ple_draft.gguf"));
}

TEST_F(ConvertTest, DrafterMetadataAndTensorsFollowTheHfConfig) {
  const json cfg = json::parse(std::ifstream(kData / "hf/ple_draft/config.json"));
  auto f = OpenGguf(kData / "parity/ple_draft/ple_draft.gguf");
  ASSERT_TRUE(f);
  EXPECT_EQ(*f->Find("general.architecture")->AsString(), "gemma4-assistant");
  const std::string a = "gemma4-assistant.";
  EXPECT_EQ(IntKey(*f, a + "embedding_length"), cfg["text_config"]["hidden_size"].get<int64_t>());
  EXPECT_EQ(IntKey(*f, a + "embedding_length_out"), cfg["backbone_hidden_size"].get<int64_t>());
  EXPECT_EQ(IntKey(*f, a + "nextn_predict_layers"), 4);
  EXPECT_EQ(IntKey(*f, a + "num_centroids"), cfg["num_centroids"].get<int64_t>());
  EXPECT_EQ(IntKey(*f, a + "centroid_top_k"), cfg["centroid_intermediate_top_k"].get<int64_t>());
  EXPECT_EQ(f->Find(a + "use_ordered_embeddings")->AsBool(), std::optional<bool>(true));
  EXPECT_EQ(IntKey(*f, a + "attention.key_length"), 32);  // per_layer_config override of layer 3
  EXPECT_EQ(IntKey(*f, a + "attention.key_length_swa"), 16);
  EXPECT_EQ(IntKey(*f, a + "attention.shared_kv_layers"), 4);

  auto ck = Checkpoint::Open((kData / "hf/ple_draft").string());
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  // Norm weights are copied raw (no +1 shift).
  const auto* norm = f->FindTensor("blk.0.attn_norm.weight");
  const auto* src = (*ck)->Find("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(norm && src);
  EXPECT_EQ(std::memcmp(f->TensorData(*norm), src->data, src->nbytes), 0);
  // Centroid ordering: I32 copy of the int64 buffer.
  const auto* ord = f->FindTensor("masked_embd_ordering");
  const auto* ord_src = (*ck)->Find("masked_embedding.token_ordering");
  ASSERT_TRUE(ord && ord_src);
  EXPECT_EQ(ord->type, DType::I32);
  ASSERT_EQ(ord->ne, std::vector<int64_t>{512});
  for (int i = 0; i < 512; ++i) {
    int32_t got;
    int64_t want;
    std::memcpy(&got, f->TensorData(*ord) + 4 * i, 4);
    std::memcpy(&want, ord_src->data + 8 * i, 8);
    ASSERT_EQ(got, want) << i;
  }
  EXPECT_EQ(f->FindTensor("masked_embd_centroids.weight")->ne, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(f->FindTensor("nextn.pre_projection.weight")->ne, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(f->FindTensor("nextn.post_projection.weight")->ne, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);  // tied head
  EXPECT_EQ(f->FindTensor("blk.0.attn_k.weight"), nullptr);
}

TEST_F(ConvertTest, RopeFreqsFollowPartialRotaryFactor) {
  // Full head dim 32, partial_rotary_factor 0.25: int(0.25 * 32 / 2) = 4 rotated pairs of 16.
  auto f = OpenGguf(kData / "parity/moe_draft/moe_draft.gguf");
  ASSERT_TRUE(f);
  const auto* t = f->FindTensor("rope_freqs.weight");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ne, std::vector<int64_t>{16});
  EXPECT_EQ(t->type, DType::F32);
  for (int i = 0; i < 16; ++i) {
    float v;
    std::memcpy(&v, f->TensorData(*t) + 4 * i, 4);
    EXPECT_EQ(v, i < 4 ? 1.0f : 1e30f) << i;
  }
  EXPECT_EQ(IntArray(*f, "gemma4-assistant.attention.head_count_kv"),
            (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(f->Find("gemma4-assistant.num_centroids"), nullptr);  // dense head
}

TEST_F(ConvertTest, TargetGgufsCarryEveryFeature) {
  auto moe = OpenGguf(kData / "parity/moe/moe.gguf");
  auto ple = OpenGguf(kData / "parity/ple/ple.gguf");
  auto dense = OpenGguf(kData / "parity/dense/dense.gguf");
  ASSERT_TRUE(moe && ple && dense);
  EXPECT_EQ(IntKey(*moe, "gemma4.expert_count"), 8);
  EXPECT_EQ(IntKey(*moe, "gemma4.expert_used_count"), 2);
  EXPECT_EQ(IntKey(*moe, "gemma4.expert_feed_forward_length"), 16);
  EXPECT_EQ(moe->FindTensor("blk.0.ffn_gate_up_exps.weight")->ne,
            (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(moe->FindTensor("blk.0.ffn_down_exps.weight")->ne, (std::vector<int64_t>{16, 64, 8}));
  EXPECT_EQ(moe->FindTensor("blk.0.ffn_down_exps.scale")->ne, (std::vector<int64_t>{8}));
  EXPECT_EQ(IntArray(*moe, "gemma4.attention.head_count_kv"),
            (std::vector<int64_t>{2, 2, 1, 2, 2, 1}));
  EXPECT_EQ(moe->FindTensor("blk.2.attn_v.weight"), nullptr);  // K=V on full layers
  EXPECT_NE(moe->FindTensor("blk.1.attn_v.weight"), nullptr);
  EXPECT_EQ(IntArray(*ple, "gemma4.feed_forward_length"),
            (std::vector<int64_t>{48, 48, 48, 48, 96, 96, 96, 96}));
  EXPECT_EQ(IntKey(*ple, "gemma4.attention.shared_kv_layers"), 4);
  EXPECT_EQ(IntKey(*ple, "gemma4.embedding_length_per_layer_input"), 16);
  EXPECT_EQ(ple->FindTensor("per_layer_token_embd.weight")->ne, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(ple->FindTensor("blk.5.attn_k.weight"), nullptr);    // KV-shared layer
  EXPECT_EQ(*dense->Find("general.name")->AsString(), "dense");  // Gemma4ForConditionalGeneration
  EXPECT_NE(dense->FindTensor("blk.5.layer_output_scale.weight"), nullptr);
  EXPECT_EQ(dense->Find("gemma4.final_logit_softcapping")->AsFloat(), std::optional<double>(15.0));
}

TEST_F(ConvertTest, HalfOutputKeepsVectorsInF32) {
  ASSERT_TRUE(Convert(CopyHf("ple_draft"), tmp_ / "h.gguf", DType::F16).ok());
  auto f = OpenGguf(tmp_ / "h.gguf");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, DType::F16);
  EXPECT_EQ(f->FindTensor("blk.0.attn_norm.weight")->type, DType::F32);
  EXPECT_EQ(f->FindTensor("rope_freqs.weight")->type, DType::F32);
  EXPECT_EQ(f->FindTensor("blk.0.layer_output_scale.weight")->type, DType::F32);
  EXPECT_EQ(IntKey(*f, "general.file_type"), 1);
}

TEST_F(ConvertTest, MissingConfigKeyIsNamedAndLeavesNoFile) {
  const fs::path d = CopyHf("ple_draft");
  json cfg = json::parse(std::ifstream(d / "config.json"));
  cfg["text_config"].erase("hidden_size");
  std::ofstream(d / "config.json") << cfg.dump();
  const fs::path out = tmp_ / "o.gguf";
  std::ofstream(out) << "keep";
  const Status s = Convert(d, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing key 'text_config.hidden_size'"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("config.json"), std::string::npos) << s.message();
  std::string kept;
  std::getline(std::ifstream(out), kept);
  EXPECT_EQ(kept, "keep");
  EXPECT_EQ(testing::TempSiblings(out), 0);
}

TEST_F(ConvertTest, CorruptSafetensorsHeaderIsRejected) {
  const fs::path d = CopyHf("moe_draft");
  auto st = ReadAll(d / "model.safetensors");
  auto bad_len = st;
  bad_len[6] = 0x7f;  // header length far beyond the file
  WriteAll(d / "model.safetensors", bad_len);
  Status s = Convert(d, tmp_ / "o.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.safetensors: header length"), std::string::npos) << s.message();
  auto bad_json = st;
  bad_json[8] = 'x';  // the header's opening brace
  WriteAll(d / "model.safetensors", bad_json);
  s = Convert(d, tmp_ / "o.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a JSON object"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(tmp_ / "o.gguf"));
}

// Rewrites the safetensors header through `edit`, keeping the data section.
void EditHeader(const fs::path& file,
                const std::function<void(json&, std::vector<uint8_t>&)>& edit) {
  const auto st = ReadAll(file);
  uint64_t hlen;
  std::memcpy(&hlen, st.data(), 8);
  json h = json::parse(st.begin() + 8, st.begin() + 8 + static_cast<int64_t>(hlen));
  std::vector<uint8_t> data(st.begin() + 8 + static_cast<int64_t>(hlen), st.end());
  edit(h, data);
  const std::string hs = h.dump();
  std::vector<uint8_t> out(8);
  const uint64_t n = hs.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), hs.begin(), hs.end());
  out.insert(out.end(), data.begin(), data.end());
  WriteAll(file, out);
}

TEST_F(ConvertTest, UnknownTensorWrongShapeAndOverlapAreRejected) {
  struct Case {
    const char* what;
    std::function<void(json&, std::vector<uint8_t>&)> edit;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"unknown name",
       [](json& h, std::vector<uint8_t>& d) {
         h["model.layers.0.bogus.weight"] = {
             {"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {d.size(), d.size() + 4}}};
         d.resize(d.size() + 4);
       },
       "unknown tensor 'model.layers.0.bogus.weight'"},
      {"wrong shape",
       [](json& h, std::vector<uint8_t>&) {
         h["pre_projection.weight"]["shape"] = {96, 64};
       },
       "tensor 'pre_projection.weight' has shape [96, 64], expected [48, 128]"},
      {"size mismatch",
       [](json& h, std::vector<uint8_t>&) {
         h["pre_projection.weight"]["shape"] = {48, 129};
       },
       "hold 24576 bytes"},
      {"overlap",
       [](json& h, std::vector<uint8_t>&) {
         h["model.layers.1.input_layernorm.weight"]["data_offsets"] =
             h["model.layers.0.input_layernorm.weight"]["data_offsets"];
       },
       "byte ranges overlap"},
      {"missing tensor",
       [](json& h, std::vector<uint8_t>&) { h.erase("model.layers.2.mlp.up_proj.weight"); },
       "required tensor 'model.layers.2.mlp.up_proj.weight'"},
  };
  for (const auto& c : cases) {
    const fs::path d = tmp_ / c.what;
    fs::copy(kData / "hf/moe_draft", d, fs::copy_options::recursive);
    EditHeader(d / "model.safetensors", c.edit);
    const Status s = Convert(d, tmp_ / "o.gguf");
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.what << ": " << s.message();
  }
  // The editor itself is sound: a no-op edit still converts.
  const fs::path d = tmp_ / "noop";
  fs::copy(kData / "hf/moe_draft", d, fs::copy_options::recursive);
  EditHeader(d / "model.safetensors", [](json&, std::vector<uint8_t>&) {});
  EXPECT_TRUE(Convert(d, tmp_ / "o.gguf").ok());
}

// Splits one safetensors file into two shards plus model.safetensors.index.json.
void Shard(const fs::path& dir) {
  const auto st = ReadAll(dir / "model.safetensors");
  uint64_t hlen;
  std::memcpy(&hlen, st.data(), 8);
  const json h = json::parse(st.begin() + 8, st.begin() + 8 + static_cast<int64_t>(hlen));
  const uint8_t* data = st.data() + 8 + hlen;
  json shards[2] = {json::object(), json::object()},
       index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  std::vector<uint8_t> bytes[2];
  int k = 0;
  for (auto it = h.begin(); it != h.end(); ++it, ++k) {
    if (it.key() == "__metadata__") continue;
    const int s = k % 2;
    json e = it.value();
    const uint64_t b = e["data_offsets"][0], en = e["data_offsets"][1];
    e["data_offsets"] = {bytes[s].size(), bytes[s].size() + (en - b)};
    bytes[s].insert(bytes[s].end(), data + b, data + en);
    shards[s][it.key()] = e;
    index["weight_map"][it.key()] = fmt::format("model-0000{}-of-00002.safetensors", s + 1);
  }
  for (int s = 0; s < 2; ++s) {
    const std::string hs = shards[s].dump();
    std::vector<uint8_t> out(8);
    const uint64_t n = hs.size();
    std::memcpy(out.data(), &n, 8);
    out.insert(out.end(), hs.begin(), hs.end());
    out.insert(out.end(), bytes[s].begin(), bytes[s].end());
    WriteAll(dir / fmt::format("model-0000{}-of-00002.safetensors", s + 1), out);
  }
  fs::remove(dir / "model.safetensors");
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
}

TEST_F(ConvertTest, ShardedCheckpointGivesTheSameBytes) {
  const fs::path d = CopyHf("moe_draft");
  Shard(d);
  ASSERT_TRUE(Convert(d, tmp_ / "moe_draft.gguf").ok());
  EXPECT_EQ(ReadAll(tmp_ / "moe_draft.gguf"), ReadAll(kData / "parity/moe_draft/moe_draft.gguf"));
  // An index naming a shard that lacks the tensor is an error naming both.
  json idx = json::parse(std::ifstream(d / "model.safetensors.index.json"));
  idx["weight_map"]["model.norm.weight"] =
      idx["weight_map"]["model.norm.weight"] == "model-00001-of-00002.safetensors"
          ? "model-00002-of-00002.safetensors"
          : "model-00001-of-00002.safetensors";
  std::ofstream(d / "model.safetensors.index.json") << idx.dump();
  const Status s = Convert(d, tmp_ / "x.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor \"model.norm.weight\" is listed for"), std::string::npos)
      << s.message();
}

TEST(Safetensors, EveryTruncationFailsCleanly) {
  const auto st = ReadAll(kData / "hf/ple_draft/model.safetensors");
  uint64_t hlen;
  std::memcpy(&hlen, st.data(), 8);
  // Every cut inside the header and the first part of the data must be an error, never a crash.
  for (size_t n = 0; n < std::min<size_t>(st.size() - 1, 8 + hlen + 4096); ++n) {
    auto f = SafetensorsFile::FromMemory(st.data(), n, "cut");
    EXPECT_FALSE(f.ok()) << n;
  }
  EXPECT_TRUE(SafetensorsFile::FromMemory(st.data(), st.size(), "whole").ok());
}

TEST(ConvertCli, HelpAndFailureExitCodes) {
  EXPECT_EQ(std::system(fmt::format("{} convert --help > /dev/null", LOCKSTEP_BINARY).c_str()), 0);
  const int rc = std::system(
      fmt::format("{} convert /nonexistent -o /tmp/x.gguf -q 2> /dev/null", LOCKSTEP_BINARY)
          .c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  EXPECT_EQ(
      WEXITSTATUS(std::system(fmt::format("{} convert 2> /dev/null", LOCKSTEP_BINARY).c_str())), 2);
}

}  // namespace
}  // namespace lockstep::convert
