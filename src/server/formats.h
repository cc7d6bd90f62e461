// Response bodies of the three completion APIs, for whole responses and server-sent events.
// Each route's shape lives in one class; the generation itself is the same for all three.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/params.h"

namespace lockstep::server {

// Facts about a response that every format reports.
struct ResponseInfo {
  Api api = Api::kCompletions;
  std::string id;  // "cmpl-N" / "chatcmpl-N"
  int64_t created = 0;
  std::string model;
  std::vector<int32_t> prompt;
  CompletionParams params;
  const tokenizer::Tokenizer* tok = nullptr;
  nlohmann::json identity;  // the server's, completed per response by Identity()
};

class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;
  // Events for new output (may be empty when there is nothing to say yet).
  virtual std::string Chunk(const Delta& delta, const Generation& g) = 0;
  // The last events, ending the stream.
  virtual std::string End(const Generation& g) = 0;
  // The non-streamed response body.
  virtual nlohmann::json Whole(const Generation& g) = 0;
};

std::unique_ptr<ResponseFormat> MakeFormat(const ResponseInfo& info);

// Shared pieces of the formats.
std::string SseEvent(const nlohmann::json& data);
// The identity block of this response: the server's plus settings, prompt and output hashes.
nlohmann::json Identity(const ResponseInfo& info, const Generation& g);
// llama-server's timings, with draft_n / draft_n_accepted when the request speculated.
nlohmann::json Timings(const Generation& g, size_t n_prompt, bool speculative);
nlohmann::json Usage(const Generation& g, size_t n_prompt);
// Adds what a response carries beyond the API's own shape: timings, the identity, and the
// verify rounds when the request asked for `draft_rounds`.
void AddRunFields(const ResponseInfo& info, const Generation& g, nlohmann::json* j);
// A token's text and its bytes (a piece may hold part of a UTF-8 character).
std::string PieceText(const tokenizer::Tokenizer* tok, int32_t id);
nlohmann::json PieceBytes(const std::string& piece);

std::unique_ptr<ResponseFormat> MakeOpenAiFormat(const ResponseInfo& info);
std::unique_ptr<ResponseFormat> MakeLlamaFormat(const ResponseInfo& info);

}  // namespace lockstep::server
