// llama-server's /completion response shape, whole and as server-sent events.
#include <string>

#include "server/formats.h"

namespace lockstep::server {
namespace {

class LlamaFormat : public ResponseFormat {
 public:
  explicit LlamaFormat(const ResponseInfo& info) : info_(info) {}

  std::string Chunk(const Delta& delta, const Generation& g) override {
    if (delta.text.empty() && delta.tokens.empty()) return "";
    nlohmann::json j = {{"index", 0},
                        {"content", delta.text},
                        {"tokens", delta.tokens},
                        {"stop", false},
                        {"id_slot", Slot(g)}};
    if (info_.params.n_probs > 0) j["completion_probabilities"] = Probs(delta);
    return SseEvent(j);
  }

  std::string End(const Generation& g) override {
    nlohmann::json j = Whole(g);
    j["content"] = "";
    j["tokens"] = nlohmann::json::array();
    j.erase("completion_probabilities");
    return SseEvent(j);
  }

  nlohmann::json Whole(const Generation& g) override {
    const size_t n_prompt = info_.prompt.size();
    nlohmann::json settings = info_.params.Settings();
    settings["model"] = info_.model;
    settings["stream"] = info_.params.stream;
    nlohmann::json j = {
        {"index", 0},
        {"content", g.text()},
        {"tokens", info_.params.return_tokens ? g.tokens() : std::vector<int32_t>()},
        {"id_slot", Slot(g)},
        {"stop", true},
        {"model", info_.model},
        {"tokens_predicted", g.tokens().size()},
        {"tokens_evaluated", n_prompt},
        {"generation_settings", std::move(settings)},
        {"has_new_line", g.text().find('\n') != std::string::npos},
        {"truncated", false},
        {"stop_type", StopTypeName(g.stop_type())},
        {"stopping_word", g.stopping_word()},
        {"tokens_cached", n_prompt + g.tokens().size()}};
    AddRunFields(info_, g, &j);
    if (info_.params.n_probs > 0)
      j["completion_probabilities"] = Probs({"", g.tokens(), g.logprobs()});
    return j;
  }

 private:
  static int Slot(const Generation& g) { return g.stream().slot(); }

  // [{id, token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}]}] per token.
  nlohmann::json Probs(const Delta& d) const {
    nlohmann::json out = nlohmann::json::array();
    auto entry = [&](int32_t id, double logprob) {
      const std::string piece = PieceText(info_.tok, id);
      return nlohmann::json{
          {"id", id}, {"token", piece}, {"bytes", PieceBytes(piece)}, {"logprob", logprob}};
    };
    for (size_t i = 0; i < std::min(d.tokens.size(), d.logprobs.size()); ++i) {
      nlohmann::json e = entry(d.tokens[i], d.logprobs[i].logprob);
      nlohmann::json top = nlohmann::json::array();
      for (const lab::TopEntry& t : d.logprobs[i].top) top.push_back(entry(t.id, t.logprob));
      e["top_logprobs"] = std::move(top);
      out.push_back(std::move(e));
    }
    return out;
  }

  ResponseInfo info_;
};

}  // namespace

std::unique_ptr<ResponseFormat> MakeLlamaFormat(const ResponseInfo& info) {
  return std::make_unique<LlamaFormat>(info);
}

}  // namespace lockstep::server
