// Gemma 4 tokenizer (llama.cpp's "gemma4" BPE): encode, decode and streaming UTF-8-safe decode.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace lockstep::gguf {
class File;
class Writer;
}  // namespace lockstep::gguf

namespace lockstep::tokenizer {

// llama.cpp's token types as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything the tokenizer needs, as plain vectors; ids come only from here, never from
// constants, so a small trained vocabulary works the same as Gemma 4's 262144 tokens.
struct VocabData {
  std::string model = "gemma4";
  std::vector<std::string> tokens;
  std::vector<float> scores;        // may be empty
  std::vector<int32_t> types;       // TokenType values; empty means all normal
  std::vector<std::string> merges;  // "left right", rank = index
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1;
  bool add_bos = true;
  bool add_space_prefix = false;
  std::string chat_template;
};

class Tokenizer {
 public:
  // Validates the data (sizes, id ranges, merges naming known tokens) and builds the indexes.
  static Expected<std::unique_ptr<Tokenizer>> Create(VocabData data);
  // Reads llama.cpp's tokenizer.* keys; only tokenizer.ggml.model = "gemma4" is accepted.
  static Expected<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);

  // Text (any bytes, invalid UTF-8 included) to ids. `add_bos` prepends BOS when the vocab has
  // one. Control tokens are matched in the text only when `parse_special`; user-defined tokens
  // (e.g. `<|channel>`) are always matched, as llama.cpp does.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Encode with the model's own BOS policy (llama.cpp forces BOS on for gemma4).
  std::vector<int32_t> Encode(std::string_view text) const { return Encode(text, add_bos_, false); }

  // Bytes of one token: `▁` becomes a space, `<0xXX>` becomes byte XX, user-defined tokens are
  // their text, control/unknown tokens are their text only when `render_special`.
  std::string TokenToPiece(int32_t id, bool render_special) const;
  // Concatenated pieces (may hold invalid UTF-8 when the ids split a character).
  std::string Decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token_text(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  TokenType token_type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  // -1 when absent.
  int32_t FindToken(std::string_view text) const;
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  // End-of-generation: eos, eot, and the Gemma 4 stops `<turn|>`, `<|tool_response>` when present.
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  const std::string& chat_template() const { return chat_template_; }
  size_t n_merges() const { return merges_.size(); }

 private:
  Tokenizer() = default;
  void EncodeRaw(std::string_view text, std::vector<int32_t>& out) const;
  void EncodeChunk(std::string_view chunk, std::vector<int32_t>& out) const;
  void Bpe(const std::string& word, std::vector<int32_t>& out) const;

  struct MergeInfo {
    int32_t rank;
    int32_t result;
  };
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, int32_t> text_to_id_;  // views into tokens_
  std::unordered_map<uint64_t, MergeInfo> merges_;            // (left id << 32 | right id)
  std::vector<int32_t> specials_;  // control/user-defined/unknown ids, longest text first
  int32_t byte_ids_[256];
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, eot_ = -1;
  bool add_bos_ = true;
  std::vector<int32_t> eog_;
  std::string chat_template_;
};

// Turns token pieces into text for streaming: bytes are held back until they form complete
// UTF-8 characters, so every returned string is valid UTF-8. Bytes that can never become a
// valid character are replaced by U+FFFD.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false)
      : tok_(tok), render_special_(render_special) {}
  std::string Push(int32_t id);
  // Emits whatever is still held (an unfinished character becomes U+FFFD).
  std::string Flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
};

// Converts a Hugging Face tokenizer.json (+ optional tokenizer_config.json) into llama.cpp's
// gemma4 tokenizer.* keys on `w`. Types: added tokens flagged special become CONTROL, except
// the seven Gemma 4 text tokens (`<|channel>` ... `<|"|>`) which become USER_DEFINED; `<0xXX>`
// become BYTE; all others (including non-special added tokens) NORMAL, as in Gemma 4 GGUFs.
Status AddTokenizerFromHfJson(const std::string& tokenizer_json_path,
                              const std::string& tokenizer_config_path_or_empty, gguf::Writer& w);

// Removes and returns the longest valid-UTF-8 prefix of `pending`, leaving in it only an
// unfinished character that more bytes could complete (none when `flush`); bytes that can
// never form a character become U+FFFD. Exposed for tests.
std::string TakeValidUtf8(std::string& pending, bool flush);

}  // namespace lockstep::tokenizer
