// One prompt through the engine with its text streamed to the terminal as tokens are emitted
// (flushed per token), Ctrl-C cancelling the sequence at the next step; `generate` and `chat`
// print through it.
#pragma once

#include <atomic>
#include <cstdio>
#include <optional>
#include <span>

#include "core/status.h"
#include "engine/generate.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {

struct StreamOptions {
  FILE* out = stdout;
  bool hide_thinking = false;                    // drop <|channel>...<channel|> spans from the text
  const std::atomic<bool>* interrupt = nullptr;  // set by Ctrl-C: stop after the current step
};

// Hides thinking: ids from `open` (<|channel>) through `close` (<channel|>) are not shown.
class ThinkingFilter {
 public:
  ThinkingFilter(std::optional<int32_t> open, std::optional<int32_t> close)
      : open_(open), close_(close) {}
  // Whether the token is shown; call once per emitted token, in order.
  bool Show(int32_t id) {
    if (open_ && id == *open_) inside_ = true;
    const bool hidden = inside_;
    if (close_ && id == *close_) inside_ = false;
    return !hidden;
  }

 private:
  std::optional<int32_t> open_, close_;
  bool inside_ = false;
};

struct StreamedRun {
  engine::GenerateResult result;
  bool interrupted = false;
  std::string text;  // what was printed
};

// Prints decoded text (or ids when `tok` is null) as it is generated. The tokens are exactly
// engine::Generate's for the same arguments: streaming only observes the emitted ids.
Expected<StreamedRun> GenerateStreaming(const model::Model& target, speculative::Proposer* proposer,
                                        std::span<const int32_t> prompt,
                                        const engine::GenerateOptions& opt,
                                        const tokenizer::Tokenizer* tok, const StreamOptions& so);

// What GenerateStreaming prints for `ids` (also written to so.out): the same printer, for
// emitted ids given rather than generated.
std::string PrintTokens(const tokenizer::Tokenizer* tok, std::span<const int32_t> ids,
                        const StreamOptions& so);

}  // namespace lockstep::cli
