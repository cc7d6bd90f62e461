// Pieces every response format shares: SSE framing, identity, timings, usage, token pieces.
#include "server/formats.h"

#include "core/sha256.h"
#include "server/context.h"

namespace lockstep::server {

std::unique_ptr<ResponseFormat> MakeFormat(const ResponseInfo& info) {
  return info.api == Api::kLlama ? MakeLlamaFormat(info) : MakeOpenAiFormat(info);
}

std::string SseEvent(const nlohmann::json& data) {
  return "data: " + Dump(data) + "\n\n";
}

nlohmann::json Identity(const ResponseInfo& info, const Generation& g) {
  nlohmann::json id = info.identity;
  id["settings"].update(info.params.Settings());  // the server's settings and the request's
  id["prompt_sha256"] = IdsSha256(info.prompt);
  id["output_sha256"] = IdsSha256(g.tokens());
  return id;
}

nlohmann::json Timings(const Generation& g, size_t n_prompt, bool speculative) {
  const engine::SeqResult& r = g.result();
  const size_t cached = static_cast<size_t>(std::min<int64_t>(r.n_shared, n_prompt));
  const size_t prompt_n = n_prompt - cached, predicted_n = g.tokens().size();
  auto per_token = [](double ms, size_t n) { return n ? ms / static_cast<double>(n) : 0.0; };
  auto per_second = [](double ms, size_t n) {
    return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0;
  };
  nlohmann::json t = {{"cache_n", cached},
                      {"prompt_n", prompt_n},
                      {"prompt_ms", r.prompt_ms},
                      {"prompt_per_token_ms", per_token(r.prompt_ms, prompt_n)},
                      {"prompt_per_second", per_second(r.prompt_ms, prompt_n)},
                      {"predicted_n", predicted_n},
                      {"predicted_ms", r.generate_ms},
                      {"predicted_per_token_ms", per_token(r.generate_ms, predicted_n)},
                      {"predicted_per_second", per_second(r.generate_ms, predicted_n)}};
  if (speculative) {
    t["draft_n"] = r.draft.drafted;
    t["draft_n_accepted"] = r.draft.accepted;
  }
  return t;
}

void AddRunFields(const ResponseInfo& info, const Generation& g, nlohmann::json* j) {
  (*j)["timings"] = Timings(g, info.prompt.size(), info.params.draft_max > 0);
  (*j)["identity"] = Identity(info, g);
  if (!info.params.draft_rounds) return;
  // Round r emitted tokens [start, start + accepted]: its accepted drafts, then the target's own
  // token where the first rejected draft (if any) was.
  nlohmann::json rounds = nlohmann::json::array();
  for (const speculative::Round& r : g.result().rounds)
    if (r.start < static_cast<int64_t>(g.tokens().size()))
      rounds.push_back({r.start, r.drafted, r.accepted});
  (*j)["draft_rounds"] = std::move(rounds);
}

nlohmann::json Usage(const Generation& g, size_t n_prompt) {
  const size_t n = g.tokens().size();
  return {{"prompt_tokens", n_prompt},
          {"completion_tokens", n},
          {"total_tokens", n_prompt + n},
          {"prompt_tokens_details", {{"cached_tokens", g.result().n_shared}}}};
}

std::string PieceText(const tokenizer::Tokenizer* tok, int32_t id) {
  return tok ? tok->TokenToPiece(id, /*render_special=*/true) : std::string();
}

nlohmann::json PieceBytes(const std::string& piece) {
  nlohmann::json bytes = nlohmann::json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace lockstep::server
