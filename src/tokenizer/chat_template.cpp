// Chat templates rendered by lockstep's Jinja interpreter (src/template), which reproduces the
// reference engine (@huggingface/jinja) byte for byte; no template is recognised by its text.
#include "tokenizer/chat_template.h"

#include "template/template.h"

namespace lockstep::tokenizer {

Status CheckChatTemplate(const std::string& template_text) {
  auto parsed = jinja::Template::Parse(template_text);
  if (!parsed.ok()) return parsed.status().WithContext("chat template");
  return Status::Ok();
}

Expected<std::string> RenderChat(const std::string& template_text, const nlohmann::json& messages,
                                 const ChatOptions& options) {
  if (!messages.is_array() || messages.empty())
    return Status::Error("chat template: messages must be a non-empty array");
  auto parsed = jinja::Template::Parse(template_text);
  if (!parsed.ok()) return parsed.status().WithContext("chat template");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = nlohmann::ordered_json(messages);
  context["bos_token"] = options.bos_token;
  context["add_generation_prompt"] = options.add_generation_prompt;
  if (options.enable_thinking.has_value()) context["enable_thinking"] = *options.enable_thinking;
  if (!options.tools.is_null()) context["tools"] = nlohmann::ordered_json(options.tools);
  auto text = parsed->Render(context);
  if (!text.ok()) return text.status().WithContext("chat template");
  return text;
}

}  // namespace lockstep::tokenizer
