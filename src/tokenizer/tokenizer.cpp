// Gemma 4 BPE tokenizer core: special-token partition, newline-run split, rank-ordered merges.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>

#include "core/check.h"

namespace lockstep::tokenizer {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Length of the valid UTF-8 character starting at s[i], or 0 when s[i] does not start one
// (stray continuation byte, overlong form, surrogate, > U+10FFFF or truncated sequence).
size_t ValidUtf8Len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

int ParseByteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (size_t k = 3; k < 5; ++k) {
    const char c = t[k];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return -1;
    v = v * 16 + d;
  }
  return v;
}

// True when pending[i..] is a proper prefix of some valid `need`-byte character.
bool CouldComplete(std::string_view pending, size_t i, size_t need) {
  const std::string have(pending.substr(i));
  for (int second = 0x80; second <= 0xBF; ++second) {
    std::string probe = have;
    if (probe.size() < 2) probe.push_back(static_cast<char>(second));
    while (probe.size() < need) probe.push_back(static_cast<char>(0x80));
    if (ValidUtf8Len(probe, 0) == need) return true;
    if (have.size() >= 2) break;  // the second byte is fixed; one probe decides
  }
  return false;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabData d) {
  const size_t n = d.tokens.size();
  if (n == 0) return Status::Error("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX))
    return Status::Errorf("tokenizer: {} tokens exceed the int32 id range", n);
  if (d.model != "gemma4")
    return Status::Errorf("tokenizer: tokenizer.ggml.model '{}' is not supported (only 'gemma4')",
                          d.model);
  if (!d.types.empty() && d.types.size() != n)
    return Status::Errorf("tokenizer: token_type has {} entries, tokens has {}", d.types.size(), n);
  if (!d.scores.empty() && d.scores.size() != n)
    return Status::Errorf("tokenizer: scores has {} entries, tokens has {}", d.scores.size(), n);
  for (auto [name, id] : {std::pair{"bos_token_id", d.bos_id},
                          {"eos_token_id", d.eos_id},
                          {"unknown_token_id", d.unk_id},
                          {"padding_token_id", d.pad_id},
                          {"eot_token_id", d.eot_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n))
      return Status::Errorf("tokenizer: {} = {} is outside [0, {})", name, id, n);
  }
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->tokens_ = std::move(d.tokens);
  t->types_.resize(n, TokenType::kNormal);
  for (size_t i = 0; i < d.types.size(); ++i) {
    if (d.types[i] < 0 || d.types[i] > 6)
      return Status::Errorf("tokenizer: token_type[{}] = {} is not a llama.cpp token type", i,
                            d.types[i]);
    t->types_[i] = static_cast<TokenType>(d.types[i]);
  }
  std::fill(std::begin(t->byte_ids_), std::end(t->byte_ids_), -1);
  t->text_to_id_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    // Keep the first id for duplicated texts (llama.cpp's map insert does the same).
    t->text_to_id_.emplace(std::string_view(t->tokens_[i]), id);
    const TokenType ty = t->types_[i];
    if (ty == TokenType::kByte) {
      const int b = ParseByteToken(t->tokens_[i]);
      if (b < 0)
        return Status::Errorf("tokenizer: token {} '{}' has type BYTE but is not <0xXX>", i,
                              t->tokens_[i]);
      if (t->byte_ids_[b] < 0) t->byte_ids_[b] = id;
    } else if ((ty == TokenType::kControl || ty == TokenType::kUserDefined ||
                ty == TokenType::kUnknown) &&
               !t->tokens_[i].empty()) {
      t->specials_.push_back(id);
    }
  }
  // Longest text first, as llama.cpp's special-token cache; ties by id for determinism.
  std::stable_sort(t->specials_.begin(), t->specials_.end(), [&](int32_t a, int32_t b) {
    return t->tokens_[static_cast<size_t>(a)].size() > t->tokens_[static_cast<size_t>(b)].size();
  });
  t->merges_.reserve(d.merges.size() * 2);
  for (size_t r = 0; r < d.merges.size(); ++r) {
    const std::string& m = d.merges[r];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      return Status::Errorf("tokenizer: merges[{}] '{}' has no separating space", r, m);
    const int32_t a = t->FindToken(std::string_view(m).substr(0, sp));
    const int32_t b = t->FindToken(std::string_view(m).substr(sp + 1));
    const int32_t c = t->FindToken(m.substr(0, sp) + m.substr(sp + 1));
    if (a < 0 || b < 0 || c < 0)
      return Status::Errorf("tokenizer: merges[{}] '{}' names a token missing from the vocab", r,
                            m);
    const uint64_t key = (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
    t->merges_.emplace(key, MergeInfo{static_cast<int32_t>(r), c});
  }
  t->bos_ = d.bos_id;
  t->eos_ = d.eos_id;
  t->unk_ = d.unk_id;
  t->eot_ = d.eot_id;
  // llama.cpp forces BOS on for gemma4 whatever the file says; see gemma4-arch.md §4.
  t->add_bos_ = true;
  (void)d.add_bos;
  t->chat_template_ = std::move(d.chat_template);
  for (int32_t id : {t->eos_, t->eot_}) {
    if (id >= 0) t->eog_.push_back(id);
  }
  for (std::string_view name : {"<eos>", "<turn|>", "<|tool_response>", "<end_of_turn>"}) {
    const int32_t id = t->FindToken(name);
    if (id >= 0 && t->types_[static_cast<size_t>(id)] != TokenType::kNormal) t->eog_.push_back(id);
  }
  std::sort(t->eog_.begin(), t->eog_.end());
  t->eog_.erase(std::unique(t->eog_.begin(), t->eog_.end()), t->eog_.end());
  return t;
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  // Fragments: either a matched special token (id >= 0) or raw text still to be tokenized.
  struct Frag {
    int32_t id;
    std::string_view text;
  };
  std::vector<Frag> frags{{-1, text}};
  std::vector<Frag> next;
  for (int32_t sid : specials_) {
    const TokenType ty = types_[static_cast<size_t>(sid)];
    if (!parse_special && ty != TokenType::kUserDefined) continue;
    const std::string_view st = tokens_[static_cast<size_t>(sid)];
    next.clear();
    for (const Frag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(st, pos)) != std::string_view::npos;
           pos = hit + st.size()) {
        if (hit > pos) next.push_back({-1, f.text.substr(pos, hit - pos)});
        next.push_back({sid, st});
      }
      if (pos < f.text.size()) next.push_back({-1, f.text.substr(pos)});
    }
    frags.swap(next);
  }
  for (const Frag& f : frags) {
    if (f.id >= 0)
      out.push_back(f.id);
    else
      EncodeRaw(f.text, out);
  }
  return out;
}

// Spaces become `▁`, then the text is cut into runs of '\n' and runs of anything else (the
// effect of llama.cpp's gemma4 pre-split `[^\n]+|[\n]+`, written by hand: O(n), no regex).
void Tokenizer::EncodeRaw(std::string_view text, std::vector<int32_t>& out) const {
  size_t i = 0;
  while (i < text.size()) {
    const bool nl = text[i] == '\n';
    size_t j = i;
    while (j < text.size() && (text[j] == '\n') == nl) ++j;
    const std::string_view chunk = text.substr(i, j - i);
    if (nl) {
      // A newline run that is itself a token is emitted whole (llama.cpp PR #21343).
      const int32_t id = FindToken(chunk);
      if (id >= 0)
        out.push_back(id);
      else
        Bpe(std::string(chunk), out);
    } else {
      EncodeChunk(chunk, out);
    }
    i = j;
  }
}

void Tokenizer::EncodeChunk(std::string_view chunk, std::vector<int32_t>& out) const {
  std::string word;
  word.reserve(chunk.size() + chunk.size() / 2);
  for (char c : chunk) {
    if (c == ' ')
      word.append(kSpaceMark);
    else
      word.push_back(c);
  }
  Bpe(word, out);
}

// Rank-ordered BPE: a min-heap of candidate pairs keyed by (merge rank, byte position);
// stale entries are detected by comparing the recorded symbol lengths. O(n log n) per word.
void Tokenizer::Bpe(const std::string& word, std::vector<int32_t>& out) const {
  struct Sym {
    uint32_t start, len;
    int32_t id, prev, next;
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t len = ValidUtf8Len(word, i);
    const bool valid = len > 0;
    if (!valid) len = 1;  // an invalid byte is its own symbol; it falls back to <0xXX>
    const int32_t id = valid ? FindToken(std::string_view(word).substr(i, len)) : -1;
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(len), id, idx - 1, idx + 1});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  struct Cand {
    int32_t rank;
    uint32_t pos;
    int32_t left, right;
    uint32_t left_len, right_len;
    int32_t result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  const auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym& a = syms[static_cast<size_t>(l)];
    const Sym& b = syms[static_cast<size_t>(r)];
    if (a.id < 0 || b.id < 0) return;
    auto it = merges_.find((static_cast<uint64_t>(a.id) << 32) | static_cast<uint32_t>(b.id));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, a.start, l, r, a.len, b.len, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) try_add(i, i + 1);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& a = syms[static_cast<size_t>(c.left)];
    Sym& b = syms[static_cast<size_t>(c.right)];
    if (a.len != c.left_len || b.len != c.right_len || a.next != c.right) continue;
    a.len += b.len;
    a.id = c.result;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) syms[static_cast<size_t>(b.next)].prev = c.left;
    try_add(a.prev, c.left);
    try_add(c.left, a.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    const Sym& s = syms[static_cast<size_t>(i)];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const int32_t bid = byte_ids_[static_cast<uint8_t>(word[s.start + k])];
      if (bid >= 0)
        out.push_back(bid);
      else if (unk_ >= 0)
        out.push_back(unk_);
    }
  }
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_tokens()) return {};
  const std::string& t = tokens_[static_cast<size_t>(id)];
  switch (types_[static_cast<size_t>(id)]) {
    case TokenType::kByte:
      return std::string(1, static_cast<char>(ParseByteToken(t)));
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? t : std::string();
    case TokenType::kUserDefined:
      return t;
    default:
      break;
  }
  std::string s;
  s.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      s.push_back(' ');
      i += kSpaceMark.size();
    } else {
      s.push_back(t[i++]);
    }
  }
  return s;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string s;
  for (int32_t id : ids) s += TokenToPiece(id, render_special);
  return s;
}

std::string TakeValidUtf8(std::string& pending, bool flush) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const size_t len = ValidUtf8Len(pending, i);
    if (len > 0) {
      out.append(pending, i, len);
      i += len;
      continue;
    }
    // Not valid here: hold it if it is a proper prefix of a character that more bytes could
    // complete; otherwise it is garbage and becomes U+FFFD.
    const uint8_t c = static_cast<uint8_t>(pending[i]);
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!flush && need > 0 && pending.size() - i < need && CouldComplete(pending, i, need)) break;
    out.append(kReplacement);
    ++i;
  }
  pending.erase(0, i);
  return out;
}

std::string StreamDecoder::Push(int32_t id) {
  pending_ += tok_.TokenToPiece(id, render_special_);
  return TakeValidUtf8(pending_, false);
}

std::string StreamDecoder::Flush() {
  std::string out = TakeValidUtf8(pending_, true);
  pending_.clear();
  return out;
}

}  // namespace lockstep::tokenizer
