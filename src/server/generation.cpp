// Token stream to text with stop strings, for every completion route.
#include "server/generation.h"

#include <algorithm>

namespace lockstep::server {

const char* FinishReason(StopType t) {
  return t == StopType::kLimit || t == StopType::kTimeout ? "length" : "stop";
}

const char* StopTypeName(StopType t) {
  switch (t) {
    case StopType::kNone:
      return "none";
    case StopType::kEos:
      return "eos";
    case StopType::kLimit:
      return "limit";
    case StopType::kWord:
      return "word";
    case StopType::kCancelled:
      return "cancelled";
    case StopType::kTimeout:
      return "timeout";
  }
  return "none";
}

Generation::Generation(Scheduler& scheduler, std::shared_ptr<RequestStream> stream,
                       const tokenizer::Tokenizer* tok, std::vector<std::string> stop_strings,
                       Clock::time_point deadline)
    : scheduler_(scheduler),
      stream_(std::move(stream)),
      tok_(tok),
      stops_(std::move(stop_strings)),
      deadline_(deadline) {
  if (tok_) decoder_.emplace(*tok_);
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

bool Generation::Next(std::chrono::milliseconds slice, Delta* delta) {
  if (over_) return true;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  const bool done = stream_->Poll(polled_, slice, &tokens, &logprobs);
  polled_ += tokens.size();
  for (size_t i = 0; i < tokens.size() && !cut_; ++i)
    Accept(tokens[i], i < logprobs.size() ? &logprobs[i] : nullptr, delta);
  if (!cut_ && !done && Clock::now() >= deadline_) {
    cut_ = true;
    stop_type_ = StopType::kTimeout;
    scheduler_.Cancel(stream_);
  }
  if (!done) return false;
  Finish();
  Release(true, delta);
  over_ = true;
  return true;
}

void Generation::Cancel() {
  if (over_ || cut_) return;
  cut_ = true;
  stop_type_ = StopType::kCancelled;
  scheduler_.Cancel(stream_);
}

void Generation::Accept(int32_t token, const TokenLogprob* logprob, Delta* delta) {
  tokens_.push_back(token);
  delta->tokens.push_back(token);
  if (logprob) {
    logprobs_.push_back(*logprob);
    delta->logprobs.push_back(*logprob);
  }
  if (!decoder_) return;
  pending_ += decoder_->Push(token);
  Release(false, delta);
}

// Moves decoded text from pending_ to the output: all of it at the end, otherwise all but the
// longest tail that could still grow into a stop string. A stop string found ends the output
// just before it.
void Generation::Release(bool final, Delta* delta) {
  if (!decoder_) return;
  if (final && !cut_) pending_ += decoder_->Flush();
  size_t first = std::string::npos;
  const std::string* word = nullptr;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < first) first = at, word = &stop;
  }
  size_t release = pending_.size();
  if (word && !cut_) {
    stopping_word_ = *word;
    release = first;
    pending_.resize(first);
    stop_type_ = StopType::kWord;
    cut_ = true;
    scheduler_.Cancel(stream_);
  } else if (!final) {
    size_t hold = 0;
    for (const std::string& stop : stops_)
      for (size_t n = std::min(stop.size() - 1, pending_.size()); n > hold; --n)
        if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
          hold = n;
          break;
        }
    release = pending_.size() - hold;
  }
  delta->text.append(pending_, 0, release);
  text_.append(pending_, 0, release);
  pending_.erase(0, release);
}

void Generation::Finish() {
  if (stop_type_ != StopType::kNone) return;
  switch (stream_->result().finish) {
    case engine::Finish::kStop:
      stop_type_ = StopType::kEos;
      break;
    case engine::Finish::kLength:
      stop_type_ = StopType::kLimit;
      break;
    case engine::Finish::kCancelled:
      stop_type_ = StopType::kCancelled;
      break;
  }
}

}  // namespace lockstep::server
