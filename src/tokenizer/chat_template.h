// Native renderer of the Gemma 4 chat template; refuses templates it does not recognise.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace lockstep::tokenizer {

struct ChatOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // unset = the template's `enable_thinking is defined` false
  nlohmann::json tools = nullptr;       // OpenAI-style [{type, function: {name, ...}}] or null
  std::string bos_token = "<bos>";
};

// Ok when `template_text` is a Gemma 4 template this renderer reproduces exactly (identified by
// a fingerprint of its full text); otherwise an error explaining that it is not supported.
Status CheckChatTemplate(const std::string& template_text);

// Renders `messages` (OpenAI-style: role, content as string or [{type, text}], tool_calls,
// tool_responses) exactly as the recognised Jinja template does. The result starts with the
// BOS text, so encode it with add_bos = false and parse_special = true.
Expected<std::string> RenderChat(const std::string& template_text, const nlohmann::json& messages,
                                 const ChatOptions& options);

}  // namespace lockstep::tokenizer
