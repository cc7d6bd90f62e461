// Chat templates (Jinja, as GGUF files carry them) rendered into prompt text.
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

// Ok when `template_text` parses and uses only statements, filters and tests the interpreter
// implements; otherwise an error naming the template line.
Status CheckChatTemplate(const std::string& template_text);

// Renders `messages` (OpenAI-style: role, content as string or [{type, text}], tool_calls,
// tool_responses) with the template, byte for byte as @huggingface/jinja does, with the variables
// messages, bos_token, add_generation_prompt, enable_thinking (when set) and tools (when not
// null). Gemma templates start with the BOS text, so encode with add_bos = false and
// parse_special = true. Runtime errors (including raise_exception) name the template line.
Expected<std::string> RenderChat(const std::string& template_text, const nlohmann::json& messages,
                                 const ChatOptions& options);

}  // namespace lockstep::tokenizer
