// OpenAI response shapes: text_completion and chat.completion, whole and as chunks.
#include <string>

#include "server/formats.h"

namespace lockstep::server {
namespace {

nlohmann::json TopChat(const tokenizer::Tokenizer* tok, const TokenLogprob& lp) {
  nlohmann::json top = nlohmann::json::array();
  for (const lab::TopEntry& e : lp.top) {
    const std::string piece = PieceText(tok, e.id);
    top.push_back({{"token", piece}, {"logprob", e.logprob}, {"bytes", PieceBytes(piece)}});
  }
  return top;
}

class OpenAiFormat : public ResponseFormat {
 public:
  explicit OpenAiFormat(const ResponseInfo& info) : info_(info) {}

  std::string Chunk(const Delta& delta, const Generation&) override {
    std::string out;
    if (chat() && !announced_) {
      announced_ = true;  // the first chunk names the role, as OpenAI's does
      out += SseEvent(
          Envelope(Choice("delta", {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)));
    }
    if (delta.text.empty() && delta.tokens.empty()) return out;
    nlohmann::json logprobs = Logprobs(delta.tokens, delta.logprobs, streamed_text_);
    streamed_text_ += delta.text;
    const nlohmann::json content =
        chat() ? nlohmann::json{{"content", delta.text}} : nlohmann::json(delta.text);
    out += SseEvent(Envelope(Choice(Key(false), content, std::move(logprobs), nullptr)));
    return out;
  }

  std::string End(const Generation& g) override {
    std::string out = Chunk({}, g);
    const nlohmann::json empty = chat() ? nlohmann::json::object() : nlohmann::json("");
    nlohmann::json last = Envelope(Choice(Key(false), empty, nullptr, FinishReason(g.stop_type())));
    AddRunFields(info_, g, &last);
    out += SseEvent(last);
    if (info_.params.include_usage) {
      nlohmann::json usage = Envelope(nlohmann::json::array());
      usage["usage"] = Usage(g, info_.prompt.size());
      out += SseEvent(usage);
    }
    return out + "data: [DONE]\n\n";
  }

  nlohmann::json Whole(const Generation& g) override {
    nlohmann::json content = chat() ? nlohmann::json{{"role", "assistant"}, {"content", g.text()}}
                                    : nlohmann::json(g.text());
    nlohmann::json j = Envelope(Choice(Key(true), content, Logprobs(g.tokens(), g.logprobs(), ""),
                                       FinishReason(g.stop_type())));
    j["object"] = chat() ? "chat.completion" : "text_completion";
    j["usage"] = Usage(g, info_.prompt.size());
    AddRunFields(info_, g, &j);
    return j;
  }

 private:
  bool chat() const { return info_.api == Api::kChat; }
  // Where a choice holds its output: chat's message (whole) or delta (chunks), or text.
  const char* Key(bool whole) const { return chat() ? (whole ? "message" : "delta") : "text"; }

  nlohmann::json Envelope(nlohmann::json choice) const {
    nlohmann::json choices = choice.is_array() ? choice : nlohmann::json::array({choice});
    return {{"id", info_.id},
            {"object", chat() ? "chat.completion.chunk" : "text_completion"},
            {"created", info_.created},
            {"model", info_.model},
            {"system_fingerprint", info_.identity.value("git_hash", "")},
            {"choices", std::move(choices)}};
  }

  static nlohmann::json Choice(const char* key, nlohmann::json content, nlohmann::json logprobs,
                               const char* finish) {
    return {{"index", 0},
            {key, std::move(content)},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", finish ? nlohmann::json(finish) : nullptr}};
  }

  // Chat: {content: [{token, logprob, bytes, top_logprobs}]}. Completions: parallel arrays
  // tokens / token_logprobs / top_logprobs / text_offset.
  nlohmann::json Logprobs(const std::vector<int32_t>& tokens, const std::vector<TokenLogprob>& lps,
                          const std::string& text_before) const {
    if (info_.params.n_probs < 0) return nullptr;
    const tokenizer::Tokenizer* tok = info_.tok;
    const size_t n = std::min(tokens.size(), lps.size());
    if (chat()) {
      nlohmann::json content = nlohmann::json::array();
      for (size_t i = 0; i < n; ++i) {
        const std::string piece = PieceText(tok, tokens[i]);
        content.push_back({{"token", piece},
                           {"logprob", lps[i].logprob},
                           {"bytes", PieceBytes(piece)},
                           {"top_logprobs", TopChat(tok, lps[i])}});
      }
      return {{"content", std::move(content)}};
    }
    nlohmann::json pieces = nlohmann::json::array(), values = nlohmann::json::array(),
                   tops = nlohmann::json::array(), offsets = nlohmann::json::array();
    size_t offset = text_before.size();
    for (size_t i = 0; i < n; ++i) {
      const std::string piece = PieceText(tok, tokens[i]);
      pieces.push_back(piece);
      values.push_back(lps[i].logprob);
      nlohmann::json top = nlohmann::json::object();
      for (const lab::TopEntry& e : lps[i].top) top[PieceText(tok, e.id)] = e.logprob;
      tops.push_back(std::move(top));
      offsets.push_back(offset);
      offset += tok ? tok->TokenToPiece(tokens[i], false).size() : 0;
    }
    return {{"tokens", pieces},
            {"token_logprobs", values},
            {"top_logprobs", tops},
            {"text_offset", offsets}};
  }

  ResponseInfo info_;
  bool announced_ = false;
  std::string streamed_text_;
};

}  // namespace

std::unique_ptr<ResponseFormat> MakeOpenAiFormat(const ResponseInfo& info) {
  return std::make_unique<OpenAiFormat>(info);
}

}  // namespace lockstep::server
