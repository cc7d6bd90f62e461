// config.json parsing for Gemma 4 text models and assistant drafters, with transformers' defaults.
#include "convert/hf_config.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

namespace lockstep::convert {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object and names "path: key 'prefix.key'" in errors.
class Fields {
 public:
  Fields(const json& obj, std::string path, std::string prefix)
      : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

  bool Has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  std::string Where(const char* key) const {
    return fmt::format("{}: key '{}{}'", path_, prefix_, key);
  }

  Expected<int64_t> Int(const char* key, std::optional<int64_t> def = std::nullopt) const {
    if (!Has(key)) {
      if (def) return *def;
      return Status::Errorf("{}: missing key '{}{}'", path_, prefix_, key);
    }
    const json& v = obj_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return Status::Errorf("{} = {}: expected a non-negative integer", Where(key), v.dump());
    return v.get<int64_t>();
  }
  Expected<double> Num(const char* key, std::optional<double> def = std::nullopt) const {
    if (!Has(key)) {
      if (def) return *def;
      return Status::Errorf("{}: missing key '{}{}'", path_, prefix_, key);
    }
    if (!obj_[key].is_number())
      return Status::Errorf("{} = {}: expected a number", Where(key), obj_[key].dump());
    return obj_[key].get<double>();
  }
  Expected<bool> Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    if (!obj_[key].is_boolean())
      return Status::Errorf("{} = {}: expected true/false", Where(key), obj_[key].dump());
    return obj_[key].get<bool>();
  }
  Expected<std::string> Str(const char* key, std::string def) const {
    if (!Has(key)) return def;
    if (!obj_[key].is_string())
      return Status::Errorf("{} = {}: expected a string", Where(key), obj_[key].dump());
    return obj_[key].get<std::string>();
  }
  const json& obj() const { return obj_; }

 private:
  const json& obj_;
  std::string path_, prefix_;
};

Status ParseLayerTypes(const Fields& f, HfConfig& c) {
  c.is_swa.assign(c.n_layer, true);
  if (f.Has("layer_types")) {
    const json& lt = f.obj()["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.n_layer)
      return Status::Errorf("{}: expected an array of {} layer types", f.Where("layer_types"),
                            c.n_layer);
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const json& t = lt[il];
      if (t == "sliding_attention")
        c.is_swa[il] = true;
      else if (t == "full_attention")
        c.is_swa[il] = false;
      else
        return Status::Errorf("{}[{}] = {}: expected sliding_attention or full_attention",
                              f.Where("layer_types"), il, t.dump());
    }
  } else {
    for (int64_t il = 0; il < c.n_layer; ++il)
      c.is_swa[il] = (il + 1) % 6 != 0;  // transformers' 5:1 default
  }
  if (c.n_layer > 0) c.is_swa[c.n_layer - 1] = false;  // transformers forces the last layer full
  return Status::Ok();
}

Status ParseRope(const Fields& f, HfConfig& c) {
  if (!f.Has("rope_parameters")) return Status::Ok();  // transformers' defaults (already set)
  const json& rp = f.obj()["rope_parameters"];
  const std::string prefix = f.Where("rope_parameters");
  for (const char* type : {"sliding_attention", "full_attention"}) {
    if (!rp.contains(type) || !rp[type].is_object())
      return Status::Errorf("{}: missing object '{}'", prefix, type);
    Fields r(rp[type], prefix, std::string(type) + ".");
    LS_ASSIGN_OR_RETURN(const std::string rt, r.Str("rope_type", "default"));
    LS_ASSIGN_OR_RETURN(const double theta, r.Num("rope_theta", 10000.0));
    if (std::string(type) == "sliding_attention") {
      if (rt != "default")
        return Status::Errorf("{}: sliding rope_type '{}' is not supported (expected default)",
                              prefix, rt);
      c.rope_theta_swa = theta;
    } else {
      if (rt != "default" && rt != "proportional")
        return Status::Errorf("{}: full rope_type '{}' is not supported (expected proportional)",
                              prefix, rt);
      c.rope_type_full = rt;
      c.rope_theta_full = theta;
      LS_ASSIGN_OR_RETURN(c.partial_rotary_full, r.Num("partial_rotary_factor", 1.0));
      if (rt == "default") c.partial_rotary_full = 1.0;
      if (!(c.partial_rotary_full > 0 && c.partial_rotary_full <= 1))
        return Status::Errorf("{}: partial_rotary_factor {} outside (0, 1]", prefix,
                              c.partial_rotary_full);
    }
  }
  return Status::Ok();
}

// Per-layer head dims and kv heads: `per_layer_config` (transformers >= 5 serialisation) or the
// older global_head_dim / num_global_key_value_heads keys, as Gemma4TextConfig resolves them.
Status ParseHeads(const Fields& f, HfConfig& c) {
  LS_ASSIGN_OR_RETURN(const int64_t hd, f.Int("head_dim"));
  LS_ASSIGN_OR_RETURN(const int64_t kv, f.Int("num_key_value_heads"));
  c.head_dim.assign(c.n_layer, hd);
  c.n_kv_head.assign(c.n_layer, kv);
  if (f.Has("per_layer_config")) {
    const json& plc = f.obj()["per_layer_config"];
    if (!plc.is_object())
      return Status::Errorf("{}: expected an object", f.Where("per_layer_config"));
    std::vector<bool> seen(static_cast<size_t>(c.n_layer), false);
    for (auto it = plc.begin(); it != plc.end(); ++it) {
      const std::string pfx = fmt::format("per_layer_config.{}.", it.key());
      // Decimal layer indices; transformers 5 pads them ("05" in a 12-layer model) so that
      // they sort, hence leading zeros are fine, but two keys for one layer are not.
      const std::string& key = it.key();
      const bool digits = !key.empty() && key.size() <= 9 &&
                          key.find_first_not_of("0123456789") == std::string::npos;
      const int64_t il = digits ? std::stoll(key) : -1;
      if (il < 0 || il >= c.n_layer || !it.value().is_object())
        return Status::Errorf("{}: key '{}' is not a layer index below {}",
                              f.Where("per_layer_config"), key, c.n_layer);
      if (seen[static_cast<size_t>(il)])
        return Status::Errorf("{}: layer {} is given twice (key '{}')", f.Where("per_layer_config"),
                              il, key);
      seen[static_cast<size_t>(il)] = true;
      Fields l(it.value(), f.Where("per_layer_config"), pfx);
      for (auto k = it.value().begin(); k != it.value().end(); ++k)
        if (k.key() != "head_dim" && k.key() != "num_key_value_heads")
          return Status::Errorf("{}: override '{}{}' is not supported", f.Where("per_layer_config"),
                                pfx, k.key());
      LS_ASSIGN_OR_RETURN(c.head_dim[il], l.Int("head_dim", hd));
      LS_ASSIGN_OR_RETURN(c.n_kv_head[il], l.Int("num_key_value_heads", kv));
    }
  } else {
    LS_ASSIGN_OR_RETURN(const int64_t ghd, f.Int("global_head_dim", 512));
    int64_t gkv = kv;
    if (c.k_eq_v && f.Has("num_global_key_value_heads")) {
      LS_ASSIGN_OR_RETURN(gkv, f.Int("num_global_key_value_heads"));
    }
    for (int64_t il = 0; il < c.n_layer; ++il)
      if (!c.is_swa[il]) c.head_dim[il] = ghd, c.n_kv_head[il] = gkv;
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    int64_t& slot = c.is_swa[il] ? c.head_dim_swa : c.head_dim_full;
    if (slot != 0 && slot != c.head_dim[il])
      return Status::Errorf(
          "{}: layer {} head_dim {} differs from {} on another {} layer (GGUF holds one per type)",
          f.Where("per_layer_config"), il, c.head_dim[il], slot, c.is_swa[il] ? "sliding" : "full");
    slot = c.head_dim[il];
    if (c.head_dim[il] == 0 || c.n_kv_head[il] == 0 || c.n_head % c.n_kv_head[il] != 0)
      return Status::Errorf("{}: layer {} has head_dim {} and {} kv heads for {} query heads",
                            f.Where("num_key_value_heads"), il, c.head_dim[il], c.n_kv_head[il],
                            c.n_head);
  }
  if (c.head_dim_swa == 0) c.head_dim_swa = c.head_dim_full;
  return Status::Ok();
}

Status ParseFfn(const Fields& f, HfConfig& c) {
  LS_ASSIGN_OR_RETURN(const int64_t ff, f.Int("intermediate_size"));
  LS_ASSIGN_OR_RETURN(const bool dw, f.Bool("use_double_wide_mlp", false));
  c.n_ff.assign(c.n_layer, ff);
  const int64_t first_shared = c.n_layer - c.n_kv_shared;
  for (int64_t il = 0; il < c.n_layer; ++il)
    if (dw && first_shared > 0 && il >= first_shared) c.n_ff[il] = 2 * ff;  // Gemma4TextMLP rule
  LS_ASSIGN_OR_RETURN(c.moe, f.Bool("enable_moe_block", false));
  if (c.moe) {
    LS_ASSIGN_OR_RETURN(c.n_expert, f.Int("num_experts"));
    LS_ASSIGN_OR_RETURN(c.n_expert_used, f.Int("top_k_experts"));
    LS_ASSIGN_OR_RETURN(c.n_ff_exp, f.Int("moe_intermediate_size"));
    if (c.n_expert == 0 || c.n_expert_used == 0 || c.n_expert_used > c.n_expert)
      return Status::Errorf("{}: top_k_experts {} with {} experts", f.Where("top_k_experts"),
                            c.n_expert_used, c.n_expert);
  }
  return Status::Ok();
}

Status ParseText(const Fields& f, HfConfig& c) {
  LS_ASSIGN_OR_RETURN(c.vocab, f.Int("vocab_size"));
  LS_ASSIGN_OR_RETURN(c.hidden, f.Int("hidden_size"));
  LS_ASSIGN_OR_RETURN(c.n_layer, f.Int("num_hidden_layers"));
  LS_ASSIGN_OR_RETURN(c.n_head, f.Int("num_attention_heads"));
  LS_ASSIGN_OR_RETURN(c.ctx, f.Int("max_position_embeddings"));
  LS_ASSIGN_OR_RETURN(c.sliding_window, f.Int("sliding_window"));
  LS_ASSIGN_OR_RETURN(c.rms_eps, f.Num("rms_norm_eps"));
  if (c.vocab == 0 || c.hidden == 0 || c.n_layer == 0 || c.n_head == 0)
    return Status::Errorf(
        "{}: vocab_size, hidden_size, num_hidden_layers, num_attention_heads must be > 0",
        f.Where("hidden_size"));
  if (c.n_layer > 4096)
    return Status::Errorf("{} = {}: implausibly many layers", f.Where("num_hidden_layers"),
                          c.n_layer);
  LS_RETURN_IF_ERROR(ParseLayerTypes(f, c));
  LS_ASSIGN_OR_RETURN(c.k_eq_v, f.Bool("attention_k_eq_v", false));
  LS_ASSIGN_OR_RETURN(c.n_kv_shared, f.Int("num_kv_shared_layers", 0));
  if (c.assistant() && c.n_kv_shared == 0)
    c.n_kv_shared = c.n_layer;  // Gemma4AssistantConfig default
  if (c.n_kv_shared > c.n_layer)
    return Status::Errorf("{} = {} exceeds num_hidden_layers {}", f.Where("num_kv_shared_layers"),
                          c.n_kv_shared, c.n_layer);
  LS_RETURN_IF_ERROR(ParseHeads(f, c));
  LS_RETURN_IF_ERROR(ParseFfn(f, c));
  LS_RETURN_IF_ERROR(ParseRope(f, c));
  // transformers' default; gemma4_unified has no such key (no per-layer embeddings).
  LS_ASSIGN_OR_RETURN(c.ple_dim, f.Int("hidden_size_per_layer_input", c.unified ? 0 : 256));
  LS_ASSIGN_OR_RETURN(const std::string bidi, f.Str("use_bidirectional_attention", "vision"));
  if (bidi == "all")  // "vision" keeps text tokens causal: text-only inference is unchanged
    return Status::Errorf(
        "{} = \"all\": bidirectional attention over text tokens is not supported (only causal "
        "text, as with \"vision\")",
        f.Where("use_bidirectional_attention"));
  if (c.ple_dim > 0) {
    LS_ASSIGN_OR_RETURN(c.ple_vocab, f.Int("vocab_size_per_layer_input", 262144));
  }
  if (f.Has("final_logit_softcapping")) {
    LS_ASSIGN_OR_RETURN(const double cap, f.Num("final_logit_softcapping"));
    if (cap != 0) c.final_softcap = cap;
  }
  return Status::Ok();
}

}  // namespace

int64_t HfConfig::rope_rotated_pairs() const {
  return static_cast<int64_t>(
      std::floor(partial_rotary_full * static_cast<double>(head_dim_full) / 2.0));
}

Expected<HfConfig> ParseHfConfig(const json& root, const std::string& path) {
  if (!root.is_object()) return Status::Errorf("{}: not a JSON object", path);
  HfConfig c;
  Fields top(root, path, "");
  LS_ASSIGN_OR_RETURN(c.model_type, top.Str("model_type", ""));
  const json* text = &root;
  std::string prefix;
  // gemma4_unified_* (the 12B) are the gemma4 types with the same tensor names.
  constexpr std::string_view kUnified = "gemma4_unified";
  c.unified = c.model_type.starts_with(kUnified);
  const std::string base =
      c.unified ? "gemma4" + c.model_type.substr(kUnified.size()) : c.model_type;
  if (base == "gemma4" || base == "gemma4_assistant") {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      return Status::Errorf("{}: missing object 'text_config' (model_type {})", path, c.model_type);
    text = &root["text_config"];
    prefix = "text_config.";
    c.multimodal = base == "gemma4";
    c.arch = c.multimodal ? "gemma4" : "gemma4-assistant";
    c.tensor_prefix = c.multimodal ? "model.language_model." : "model.";
  } else if (base == "gemma4_text") {
    c.arch = "gemma4";
    c.tensor_prefix = "model.";
  } else {
    return Status::Errorf(
        "{}: model_type '{}' is not a Gemma 4 text model (expected gemma4, gemma4_text, "
        "gemma4_assistant or their gemma4_unified forms)",
        path, c.model_type);
  }
  Fields f(*text, path, prefix);
  LS_RETURN_IF_ERROR(ParseText(f, c));
  LS_ASSIGN_OR_RETURN(c.tie_embeddings, top.Bool("tie_word_embeddings", true));
  if (c.assistant()) {
    LS_ASSIGN_OR_RETURN(c.backbone_hidden, top.Int("backbone_hidden_size", 1536));
    LS_ASSIGN_OR_RETURN(c.use_ordered, top.Bool("use_ordered_embeddings", false));
    LS_ASSIGN_OR_RETURN(c.num_centroids, top.Int("num_centroids", 2048));
    LS_ASSIGN_OR_RETURN(c.centroid_top_k, top.Int("centroid_intermediate_top_k", 32));
    if (c.ple_dim != 0 || c.moe || c.n_kv_shared != c.n_layer)
      return Status::Errorf(
          "{}: a gemma4_assistant needs hidden_size_per_layer_input 0, no MoE and every layer "
          "KV-shared",
          path);
    if (c.backbone_hidden == 0 || c.backbone_hidden == c.hidden)
      return Status::Errorf(
          "{}: backbone_hidden_size {} must be set and differ from hidden_size {}", path,
          c.backbone_hidden, c.hidden);
    if (c.use_ordered && (c.num_centroids == 0 || c.vocab % c.num_centroids != 0 ||
                          c.centroid_top_k == 0 || c.centroid_top_k > c.num_centroids))
      return Status::Errorf(
          "{}: num_centroids {} must divide vocab_size {} and exceed centroid_intermediate_top_k "
          "{}",
          path, c.num_centroids, c.vocab, c.centroid_top_k);
  }
  return c;
}

}  // namespace lockstep::convert
