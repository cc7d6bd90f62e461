// One running generation seen from its HTTP handler: pulls tokens from the request stream,
// turns them into UTF-8 text, applies stop strings (holding back text that may begin one),
// cancels on a stop string or a timeout, and reports why it ended.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::server {

enum class StopType { kNone, kEos, kLimit, kWord, kCancelled, kTimeout };
// OpenAI's finish_reason and llama-server's stop_type for an ending.
const char* FinishReason(StopType t);
const char* StopTypeName(StopType t);

// New output since the previous Next call.
struct Delta {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // parallel to tokens when logprobs were asked
};

class Generation {
 public:
  Generation(Scheduler& scheduler, std::shared_ptr<RequestStream> stream,
             const tokenizer::Tokenizer* tok, std::vector<std::string> stop_strings,
             Clock::time_point deadline);
  // Waits up to `slice` for news and appends it to *delta. Returns true once the generation is
  // over; the delta then holds the rest of the text.
  bool Next(std::chrono::milliseconds slice, Delta* delta);
  // Ends the generation now (the client went away).
  void Cancel();

  StopType stop_type() const { return stop_type_; }
  const std::string& stopping_word() const { return stopping_word_; }
  // Every token that belongs to the output, text released so far, and its logprobs.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::string& text() const { return text_; }
  const std::vector<TokenLogprob>& logprobs() const { return logprobs_; }
  // The engine's result; valid once Next returned true.
  const engine::SeqResult& result() const { return stream_->result(); }
  const Status& error() const { return stream_->error(); }
  const RequestStream& stream() const { return *stream_; }
  bool first_token_seen() const { return !tokens_.empty(); }

 private:
  void Accept(int32_t token, const TokenLogprob* logprob, Delta* delta);
  void Release(bool final, Delta* delta);
  void Finish();

  Scheduler& scheduler_;
  std::shared_ptr<RequestStream> stream_;
  const tokenizer::Tokenizer* tok_;
  std::optional<tokenizer::StreamDecoder> decoder_;
  std::vector<std::string> stops_;
  Clock::time_point deadline_;
  size_t polled_ = 0;    // stream tokens consumed
  std::string pending_;  // decoded text not yet released (it may start a stop string)
  std::string text_;     // released text
  std::vector<int32_t> tokens_;
  std::vector<TokenLogprob> logprobs_;
  StopType stop_type_ = StopType::kNone;
  std::string stopping_word_;
  bool cut_ = false;  // a stop string or timeout ended it early: later tokens are dropped
  bool over_ = false;
};

}  // namespace lockstep::server
