// Streaming generation: the engine's token sink prints each token's text and flushes.
#include "cli/stream.h"

#include <optional>
#include <string>

namespace lockstep::cli {
namespace {

std::optional<int32_t> FindToken(const tokenizer::Tokenizer& tok, std::string_view text) {
  for (int32_t id = 0; id < tok.n_tokens(); ++id)
    if (tok.token_text(id) == text) return id;
  return std::nullopt;
}

// Turns emitted ids into printed text, hiding thinking spans on request.
class Printer {
 public:
  Printer(const tokenizer::Tokenizer* tok, const StreamOptions& so)
      : tok_(tok),
        so_(so),
        thinking_(tok && so.hide_thinking ? FindToken(*tok, "<|channel>") : std::nullopt,
                  tok && so.hide_thinking ? FindToken(*tok, "<channel|>") : std::nullopt) {
    if (tok_) decoder_.emplace(*tok_);
  }

  void Token(int32_t id) {
    if (!tok_) return Write(std::to_string(id) + " ");
    if (thinking_.Show(id)) Write(decoder_->Push(id));
  }
  void Finish() {
    if (decoder_) Write(decoder_->Flush());
  }
  std::string& text() { return text_; }

 private:
  void Write(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), so_.out);
    std::fflush(so_.out);
    text_ += s;
  }

  const tokenizer::Tokenizer* tok_;
  const StreamOptions& so_;
  std::optional<tokenizer::StreamDecoder> decoder_;
  ThinkingFilter thinking_;
  std::string text_;
};

}  // namespace

std::string PrintTokens(const tokenizer::Tokenizer* tok, std::span<const int32_t> ids,
                        const StreamOptions& so) {
  Printer printer(tok, so);
  for (int32_t id : ids) printer.Token(id);
  printer.Finish();
  return printer.text();
}

Expected<StreamedRun> GenerateStreaming(const model::Model& target, speculative::Proposer* proposer,
                                        std::span<const int32_t> prompt,
                                        const engine::GenerateOptions& opt,
                                        const tokenizer::Tokenizer* tok, const StreamOptions& so) {
  if (prompt.empty()) return Status::Error("generate: the prompt has no tokens");
  const bool spec = proposer != nullptr && opt.draft_max > 0;
  LS_ASSIGN_OR_RETURN(auto eng,
                      engine::Engine::Create(target, spec ? proposer : nullptr,
                                             engine::SingleSequenceOptions(prompt, opt, spec)));
  Printer printer(tok, so);
  eng->set_token_sink([&printer](engine::SeqId, int32_t id) { printer.Token(id); });
  LS_ASSIGN_OR_RETURN(const engine::SeqId id, eng->Submit(engine::ToRequest(prompt, opt, spec)));
  StreamedRun run;
  bool cancelled = false;
  while (!eng->Idle()) {
    if (!cancelled && so.interrupt && so.interrupt->load(std::memory_order_relaxed)) {
      eng->Cancel(id);
      cancelled = run.interrupted = true;
    }
    LS_RETURN_IF_ERROR(eng->Step());
  }
  printer.Finish();
  std::vector<engine::SeqResult> done = eng->TakeFinished();
  if (done.size() != 1) return Status::Error("generate: the engine finished no sequence");
  run.result.tokens = std::move(done[0].tokens);
  run.result.prompt_ms = done[0].prompt_ms;
  run.result.generate_ms = done[0].generate_ms;
  run.result.draft = std::move(done[0].draft);
  run.text = std::move(printer.text());
  return run;
}

}  // namespace lockstep::cli
