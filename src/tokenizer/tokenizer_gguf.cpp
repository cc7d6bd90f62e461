// Reads llama.cpp's tokenizer.* GGUF keys into VocabData and builds a Tokenizer.
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::tokenizer {
namespace {

Expected<const gguf::Array*> GetArray(const gguf::File& f, const std::string& key,
                                      gguf::ValueType elem, bool required) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) {
    if (required) return Status::Errorf("{}: missing key {}", f.path(), key);
    return static_cast<const gguf::Array*>(nullptr);
  }
  const gguf::Array* a = v->AsArray();
  if (a == nullptr || a->elem_type != elem)
    return Status::Errorf("{}: key {} must be an array of {}", f.path(), key,
                          gguf::ValueTypeName(elem));
  return a;
}

Status ReadId(const gguf::File& f, const std::string& key, int32_t& out) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) return Status::Ok();
  const auto i = v->AsInt();
  if (!i || *i < -1 || *i > INT32_MAX)
    return Status::Errorf("{}: key {} = {} is not a token id", f.path(), key, gguf::ToString(*v));
  out = static_cast<int32_t>(*i);
  return Status::Ok();
}

Status ReadBool(const gguf::File& f, const std::string& key, bool& out) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) return Status::Ok();
  const auto b = v->AsBool();
  if (!b) return Status::Errorf("{}: key {} must be a bool", f.path(), key);
  out = *b;
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& f) {
  VocabData d;
  const gguf::Value* model = f.Find("tokenizer.ggml.model");
  if (model == nullptr || model->AsString() == nullptr)
    return Status::Errorf("{}: missing string key tokenizer.ggml.model", f.path());
  d.model = *model->AsString();
  if (d.model != "gemma4")
    return Status::Errorf("{}: tokenizer.ggml.model = '{}' is not supported (only 'gemma4')",
                          f.path(), d.model);
  LS_ASSIGN_OR_RETURN(const gguf::Array* toks,
                      GetArray(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING, true));
  d.tokens.reserve(toks->items.size());
  for (const auto& v : toks->items) d.tokens.push_back(*v.AsString());
  LS_ASSIGN_OR_RETURN(const gguf::Array* scores,
                      GetArray(f, "tokenizer.ggml.scores", gguf::ValueType::FLOAT32, false));
  if (scores != nullptr) {
    d.scores.reserve(scores->items.size());
    for (const auto& v : scores->items) d.scores.push_back(static_cast<float>(*v.AsFloat()));
  }
  LS_ASSIGN_OR_RETURN(const gguf::Array* types,
                      GetArray(f, "tokenizer.ggml.token_type", gguf::ValueType::INT32, false));
  if (types != nullptr) {
    d.types.reserve(types->items.size());
    for (const auto& v : types->items) d.types.push_back(static_cast<int32_t>(*v.AsInt()));
  }
  LS_ASSIGN_OR_RETURN(const gguf::Array* merges,
                      GetArray(f, "tokenizer.ggml.merges", gguf::ValueType::STRING, false));
  if (merges != nullptr) {
    d.merges.reserve(merges->items.size());
    for (const auto& v : merges->items) d.merges.push_back(*v.AsString());
  }
  LS_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.bos_token_id", d.bos_id));
  LS_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eos_token_id", d.eos_id));
  LS_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.unknown_token_id", d.unk_id));
  LS_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.padding_token_id", d.pad_id));
  LS_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eot_token_id", d.eot_id));
  LS_RETURN_IF_ERROR(ReadBool(f, "tokenizer.ggml.add_bos_token", d.add_bos));
  LS_RETURN_IF_ERROR(ReadBool(f, "tokenizer.ggml.add_space_prefix", d.add_space_prefix));
  if (const gguf::Value* t = f.Find("tokenizer.chat_template"); t != nullptr) {
    if (t->AsString() == nullptr)
      return Status::Errorf("{}: tokenizer.chat_template must be a string", f.path());
    d.chat_template = *t->AsString();
  }
  auto tok = Create(std::move(d));
  if (!tok.ok()) return tok.status().WithContext(f.path());
  return tok;
}

}  // namespace lockstep::tokenizer
