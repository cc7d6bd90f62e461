// Tokenizer tests: hand-built vocabularies, and lockstep vs the JS reference on the real vocab.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kN = static_cast<int32_t>(TokenType::kNormal);
constexpr int32_t kC = static_cast<int32_t>(TokenType::kControl);
constexpr int32_t kU = static_cast<int32_t>(TokenType::kUserDefined);
constexpr int32_t kB = static_cast<int32_t>(TokenType::kByte);

// A small vocabulary: specials, all 256 byte tokens, a few characters and merges.
VocabData SmallVocab(std::vector<std::string> merges) {
  VocabData d;
  d.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|channel>"};
  d.types = {kC, kC, kC, kC, kC, kC, kU};
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(fmt::format("<0x{:02X}>", b));
    d.types.push_back(kB);
  }
  for (const char* t : {"a", "b", "c", "ab", "bc", "abc", "\n", "\n\n", "\xE2\x96\x81",
                        "\xE2\x96\x81"
                        "a",
                        "\xC3\xA9"}) {
    d.tokens.push_back(t);
    d.types.push_back(kN);
  }
  d.merges = std::move(merges);
  d.bos_id = 2;
  d.eos_id = 1;
  d.unk_id = 3;
  return d;
}

std::unique_ptr<Tokenizer> Make(std::vector<std::string> merges) {
  auto t = Tokenizer::Create(SmallVocab(std::move(merges)));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

int32_t Id(const Tokenizer& t, const std::string& s) {
  return t.FindToken(s);
}

TEST(Tokenizer, MergesApplyInRankOrder) {
  auto t1 = Make({"b c", "a bc", "a b", "ab c"});
  EXPECT_EQ(t1->Encode("abc", false, false), (Ids{Id(*t1, "abc")}));
  // With "a b" first, "ab c" completes it; without "ab c" the result stops at [ab, c].
  auto t2 = Make({"a b", "b c"});
  EXPECT_EQ(t2->Encode("abc", false, false), (Ids{Id(*t2, "ab"), Id(*t2, "c")}));
  auto t3 = Make({"b c", "a b"});
  EXPECT_EQ(t3->Encode("abc", false, false), (Ids{Id(*t3, "a"), Id(*t3, "bc")}));
  // Negative control: the two orders really differ, so the test can fail.
  EXPECT_NE(t2->Encode("abc", false, false), t3->Encode("abc", false, false));
}

TEST(Tokenizer, SpacesBecomeMarkAndBosIsAdded) {
  auto t = Make({"\xE2\x96\x81 a"});
  EXPECT_EQ(t->Encode(" a", true, false), (Ids{2, Id(*t,
                                                     "\xE2\x96\x81"
                                                     "a")}));
  EXPECT_EQ(t->Encode(""), (Ids{2}));
  EXPECT_EQ(t->Decode(t->Encode(" a b")), " a b");
}

TEST(Tokenizer, NewlineRunsSplitAndByteFallback) {
  auto t = Make({"a b", "\n \n"});
  // "\n\n" is a token and is emitted whole; a run of 3 goes through BPE; 'b\n' never merges.
  EXPECT_EQ(t->Encode("ab\n\nb", false, false), (Ids{Id(*t, "ab"), Id(*t, "\n\n"), Id(*t, "b")}));
  EXPECT_EQ(t->Encode("\n\n\n", false, false), (Ids{Id(*t, "\n\n"), Id(*t, "\n")}));
  // 'z' (0x7A) and U+20AC are not in the vocab: one byte token per UTF-8 byte.
  EXPECT_EQ(t->Encode("z\xE2\x82\xAC", false, false),
            (Ids{Id(*t, "<0x7A>"), Id(*t, "<0xE2>"), Id(*t, "<0x82>"), Id(*t, "<0xAC>")}));
  // Invalid UTF-8 bytes are symbols of their own and fall back to bytes; 'a' stays a token.
  EXPECT_EQ(t->Encode("\xFF"
                      "a\xC3",
                      false, false),
            (Ids{Id(*t, "<0xFF>"), Id(*t, "a"), Id(*t, "<0xC3>")}));
  EXPECT_EQ(t->Decode(t->Encode("\xFF"
                                "a\xC3",
                                false, false)),
            "\xFF"
            "a\xC3");
}

TEST(Tokenizer, ControlTokensOnlyWithSpecialParsing) {
  auto t = Make({});
  const Ids plain = t->Encode("<|turn>", false, false);
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_NE(id, 4);
  EXPECT_EQ(t->Encode("<|turn>", false, true), (Ids{4}));
  // User-defined tokens are matched either way (llama.cpp renders/parses them as text).
  EXPECT_EQ(t->Encode("<|channel>", false, false), (Ids{6}));
  EXPECT_EQ(t->Encode("a<|turn><turn|>b", false, true), (Ids{Id(*t, "a"), 4, 5, Id(*t, "b")}));
  // Control tokens decode to nothing unless asked; user-defined always to their text.
  EXPECT_EQ(t->Decode(Ids{4, 6}), "<|channel>");
  EXPECT_EQ(t->Decode(Ids{4, 6}, true), "<|turn><|channel>");
}

TEST(Tokenizer, StreamDecoderNeverSplitsCharacters) {
  auto t = Make({});
  const std::string text = "a\xF0\x9F\xA7\xAC\xC3\xA9z";  // a, U+1F9EC (4 bytes), é, z
  const Ids ids = t->Encode(text, false, false);
  StreamDecoder sd(*t);
  std::string got;
  std::vector<std::string> parts;
  for (int32_t id : ids) parts.push_back(sd.Push(id));
  parts.push_back(sd.Flush());
  for (const auto& p : parts) got += p;
  EXPECT_EQ(got, text);
  EXPECT_EQ(parts[1], "");  // first byte of the emoji is held back
  EXPECT_EQ(parts[4], "\xF0\x9F\xA7\xAC");
  // Bytes that can never complete become U+FFFD; an unfinished tail at Flush too.
  std::string pend = "x\x80y\xE2\x82";
  EXPECT_EQ(TakeValidUtf8(pend, false), "x\xEF\xBF\xBDy");
  EXPECT_EQ(pend, "\xE2\x82");
  EXPECT_EQ(TakeValidUtf8(pend, true), "\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string bad_second = "\xE0\x80";  // E0 needs A0..BF next: can never complete
  EXPECT_EQ(TakeValidUtf8(bad_second, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Tokenizer, RejectsBadData) {
  auto bad_merge = SmallVocab({"a zz"});
  EXPECT_FALSE(Tokenizer::Create(bad_merge).ok());
  auto bad_model = SmallVocab({});
  bad_model.model = "llama";
  auto r = Tokenizer::Create(bad_model);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("llama"), std::string::npos);
  auto bad_bos = SmallVocab({});
  bad_bos.bos_id = 1 << 20;
  EXPECT_FALSE(Tokenizer::Create(bad_bos).ok());
}

TEST(Tokenizer, EogSetFromMetadataAndNames) {
  auto t = Make({});
  EXPECT_TRUE(t->IsEog(1));
  EXPECT_TRUE(t->IsEog(5));  // <turn|>
  EXPECT_FALSE(t->IsEog(4));
}

// ---- Real vocabulary: lockstep vs the JS reference (tests/js/gen_tokenizer_ref.js) ----

std::string RefDir() {
  if (const char* e = std::getenv("LOCKSTEP_TOKREF_DIR")) return e;
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/js/node_modules/.lockstep-ref";
}

std::string Unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    s.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return s;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class RealVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = RefDir();
    if (!std::filesystem::exists(dir + "/tokenizer_cases.json")) return;
    auto t0 = std::chrono::steady_clock::now();
    gguf::Writer w;
    Status st = AddTokenizerFromHfJson(dir + "/gemma4_tokenizer.json",
                                       dir + "/gemma4_tokenizer_config.json", w);
    ASSERT_TRUE(st.ok()) << st.message();
    const double convert_s = Seconds(t0);
    // One file per process: ctest runs each test in its own process, in parallel, and one
    // process's teardown must not delete the file another is reading.
    gguf_path_ = new std::string(::testing::TempDir() + "/lockstep_gemma4_vocab_" +
                                 std::to_string(::getpid()) + ".gguf");
    st = w.WriteFile(*gguf_path_);
    ASSERT_TRUE(st.ok()) << st.message();
    t0 = std::chrono::steady_clock::now();
    auto f = gguf::File::Open(*gguf_path_);
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto t = Tokenizer::FromGguf(**f);
    ASSERT_TRUE(t.ok()) << t.status().message();
    std::printf("[ real vocab ] json->gguf %.2f s, gguf load %.2f s, %d tokens, %zu merges\n",
                convert_s, Seconds(t0), (*t)->n_tokens(), (*t)->n_merges());
    tok_ = std::move(t).value().release();
    std::ifstream in(dir + "/tokenizer_cases.json");
    cases_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete cases_;
    if (gguf_path_ != nullptr) std::filesystem::remove(*gguf_path_);
    delete gguf_path_;
  }
  void SetUp() override {
    if (tok_ == nullptr)
      GTEST_SKIP() << "no JS reference at " << RefDir()
                   << ": run scripts/fetch-tokenizer-ref.sh (needs node and npm ci in tests/js), "
                      "or set LOCKSTEP_TOKREF_DIR";
  }
  static Tokenizer* tok_;
  static nlohmann::json* cases_;
  static std::string* gguf_path_;
};
Tokenizer* RealVocab::tok_ = nullptr;
nlohmann::json* RealVocab::cases_ = nullptr;
std::string* RealVocab::gguf_path_ = nullptr;

// Counts cases where `encode(text)` differs from the ids stored under `key`.
size_t CountMismatches(const nlohmann::json& cases, const char* key,
                       const std::function<Ids(const std::string&)>& encode, bool print) {
  size_t bad = 0;
  for (const auto& c : cases) {
    if (c[key].is_null()) continue;
    const std::string text = Unhex(c["hex"].get<std::string>());
    const Ids got = encode(text);
    const Ids want = c[key].get<Ids>();
    if (got == want) continue;
    if (print && bad < 8)
      ADD_FAILURE() << key << " mismatch, category " << c["cat"] << ", text hex " << c["hex"]
                    << "\n  lockstep: " << ::testing::PrintToString(got)
                    << "\n  expected: " << ::testing::PrintToString(want);
    ++bad;
  }
  return bad;
}

TEST_F(RealVocab, VocabShapeAndKnownIds) {
  EXPECT_EQ(tok_->n_tokens(), 262144);
  EXPECT_EQ(tok_->n_merges(), 514906u);
  EXPECT_EQ(tok_->bos_id(), 2);
  EXPECT_EQ(tok_->FindToken("<|turn>"), 105);
  EXPECT_EQ(tok_->token_type(105), TokenType::kControl);
  EXPECT_EQ(tok_->token_type(100), TokenType::kUserDefined);  // <|channel>
  EXPECT_EQ(tok_->token_type(238), TokenType::kByte);
  EXPECT_EQ(tok_->token_type(168), TokenType::kNormal);  // <table>: NORMAL in Gemma 4
  EXPECT_EQ(tok_->eog_ids(), (Ids{1, 50, 106}));
  EXPECT_FALSE(tok_->chat_template().empty());
}

TEST_F(RealVocab, MatchesReferenceIds) {
  const auto& cases = (*cases_)["cases"];
  ASSERT_GE(cases.size(), 2000u);
  std::map<std::string, int> per_cat;
  for (const auto& c : cases) per_cat[c["cat"].get<std::string>()]++;
  for (const char* cat : {"code", "ws", "emoji", "cjk", "rtl", "marks", "invalid", "special"})
    EXPECT_GE(per_cat[cat], 100) << cat;
  size_t bytes = 0;
  for (const auto& c : cases) bytes += c["hex"].get<std::string>().size() / 2;
  auto t0 = std::chrono::steady_clock::now();
  // llama.cpp's pipeline on the JS BPE model: plain text, then with special-token parsing.
  EXPECT_EQ(0u, CountMismatches(
                    cases, "ref",
                    [&](const std::string& s) { return tok_->Encode(s, true, false); }, true));
  const double enc_s = Seconds(t0);
  EXPECT_EQ(0u, CountMismatches(
                    cases, "ref_special",
                    [&](const std::string& s) { return tok_->Encode(s, true, true); }, true));
  // The JS encoder's own HF semantics, on every case where no documented difference applies.
  nlohmann::json comparable = nlohmann::json::array();
  for (const auto& c : cases)
    if (c["hf_comparable"].get<bool>()) comparable.push_back(c);
  EXPECT_GE(comparable.size(), 2000u);
  EXPECT_EQ(0u, CountMismatches(
                    comparable, "hf",
                    [&](const std::string& s) { return tok_->Encode(s, true, true); }, true));
  std::printf("[ real vocab ] %zu cases (%zu HF-comparable), %zu bytes encoded in %.3f s\n",
              cases.size(), comparable.size(), bytes, enc_s);
}

TEST_F(RealVocab, DocumentedDifferencesFromHfAreReal) {
  // Literal `<table>`: HF matches its added token (168); a Gemma 4 GGUF marks it NORMAL, so
  // llama.cpp reaches it only through merges, which split it. Control tokens in plain text are
  // likewise not parsed without special parsing, while HF always parses them.
  EXPECT_NE(tok_->Encode("<table>", true, false), (Ids{2, 168}));
  EXPECT_NE(tok_->Encode("<|turn>", true, false), (Ids{2, 105}));
  EXPECT_EQ(tok_->Encode("<|turn>", true, true), (Ids{2, 105}));
}

TEST_F(RealVocab, NegativeControlPerturbedMergesDisagree) {
  // Rebuild with the merge list reversed: the comparison must then report mismatches.
  auto f = gguf::File::Open(*gguf_path_);
  ASSERT_TRUE(f.ok());
  VocabData d;
  d.tokens.reserve(262144);
  for (int32_t i = 0; i < tok_->n_tokens(); ++i) d.tokens.push_back(tok_->token_text(i));
  for (int32_t i = 0; i < tok_->n_tokens(); ++i)
    d.types.push_back(static_cast<int32_t>(tok_->token_type(i)));
  for (const auto& v : (*f)->Find("tokenizer.ggml.merges")->AsArray()->items)
    d.merges.push_back(*v.AsString());
  std::reverse(d.merges.begin(), d.merges.end());
  d.bos_id = 2;
  auto bad = Tokenizer::Create(std::move(d));
  ASSERT_TRUE(bad.ok());
  const size_t n =
      CountMismatches((*cases_)["cases"], "ref",
                      [&](const std::string& s) { return (*bad)->Encode(s, true, false); }, false);
  EXPECT_GT(n, 500u);
}

TEST_F(RealVocab, DecodeRoundTripsAndStreamsValidUtf8) {
  size_t checked = 0;
  for (const auto& c : (*cases_)["cases"]) {
    const std::string text = Unhex(c["hex"].get<std::string>());
    if (text.find("\xE2\x96\x81") != std::string::npos) continue;  // a literal ▁ decodes to ' '
    const Ids ids = tok_->Encode(text, false, false);
    ASSERT_EQ(tok_->Decode(ids), text) << c["hex"];
    if (!c["hf"].is_null()) {  // valid UTF-8: streaming pieces reassemble it exactly
      StreamDecoder sd(*tok_);
      std::string got;
      for (int32_t id : ids) {
        std::string piece = sd.Push(id);
        std::string copy = piece;
        ASSERT_EQ(TakeValidUtf8(copy, true), piece) << "streamed piece is not valid UTF-8";
        got += piece;
      }
      got += sd.Flush();
      ASSERT_EQ(got, text);
    }
    ++checked;
  }
  EXPECT_GE(checked, 2000u);
}

TEST_F(RealVocab, LongLineEncodesFast) {
  std::string line;
  for (int i = 0; i < 20000; ++i) line += "tokenizer throughput test 12345 ";
  auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok_->Encode(line, true, false);
  const double s = Seconds(t0);
  std::printf("[ real vocab ] %zu-byte single line -> %zu ids in %.3f s (%.1f MB/s)\n", line.size(),
              ids.size(), s, line.size() / s / 1e6);
  EXPECT_LT(s, 5.0);
  EXPECT_EQ(tok_->Decode(ids), line);
}

}  // namespace
}  // namespace lockstep::tokenizer
