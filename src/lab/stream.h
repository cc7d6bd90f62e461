// Token streams for the lab: what an engine produced, read from lockstep's or another engine's
// JSON (a plain id array, lockstep generate --json, llama-server /completion responses).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace lockstep::lab {

struct Stream {
  std::vector<int32_t> prompt;  // context before the stream (empty when the file has none)
  std::vector<int32_t> tokens;  // the stream itself
  std::string source;           // file name or "--tokens", for tables and errors
};

// Accepts: [1,2,3]; {"tokens": [1,2,3], ...} (lockstep generate --json, llama-server
// /completion with return_tokens); {"tokens": [{"id": 1}, ...]}; {"completion_probabilities":
// [{"id": 1, ...}, ...]}. An object may carry the context as "prompt_tokens" or "prompt_ids".
// `what` names the input in error messages.
Expected<Stream> ParseStreamJson(const std::string& text, const std::string& what);
Expected<Stream> LoadStreamFile(const std::string& path);

}  // namespace lockstep::lab
