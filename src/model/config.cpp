// Reads a Gemma 4 (or Gemma 4 assistant) configuration from GGUF metadata and tensor presence.
#include "model/config.h"

#include <cmath>

#include <fmt/format.h>

namespace lockstep::model {
namespace {

// Reads `<arch>.<key>` values with errors that name the file and key.
class KeyReader {
 public:
  KeyReader(const gguf::File& f, std::string prefix) : f_(f), prefix_(std::move(prefix)) {}

  const gguf::Value* Find(const std::string& key) const { return f_.Find(prefix_ + key); }

  Expected<int64_t> Int(const std::string& key, std::optional<int64_t> def = std::nullopt) const {
    const gguf::Value* v = Find(key);
    if (!v) {
      if (def) return *def;
      return Status::Errorf("{}: missing required key '{}{}'", f_.path(), prefix_, key);
    }
    auto x = v->AsInt();
    if (!x)
      return Status::Errorf("{}: key '{}{}' must be an integer, got {}", f_.path(), prefix_, key,
                            gguf::ValueTypeName(v->type));
    return *x;
  }

  Expected<float> Float(const std::string& key, std::optional<float> def = std::nullopt) const {
    const gguf::Value* v = Find(key);
    if (!v) {
      if (def) return *def;
      return Status::Errorf("{}: missing required key '{}{}'", f_.path(), prefix_, key);
    }
    auto x = v->AsFloat();
    if (!x)
      return Status::Errorf("{}: key '{}{}' must be a number, got {}", f_.path(), prefix_, key,
                            gguf::ValueTypeName(v->type));
    return static_cast<float>(*x);
  }

  // A per-layer value stored either as a scalar or as an array of length n_layer.
  Expected<std::vector<int64_t>> PerLayerInt(const std::string& key, int n_layer,
                                             std::optional<int64_t> def) const {
    const gguf::Value* v = Find(key);
    if (!v) {
      if (!def) return Status::Errorf("{}: missing required key '{}{}'", f_.path(), prefix_, key);
      return std::vector<int64_t>(n_layer, *def);
    }
    if (const gguf::Array* a = v->AsArray()) {
      if (static_cast<int>(a->items.size()) != n_layer)
        return Status::Errorf("{}: key '{}{}' has {} entries, block_count is {}", f_.path(),
                              prefix_, key, a->items.size(), n_layer);
      std::vector<int64_t> out;
      for (size_t i = 0; i < a->items.size(); ++i) {
        auto x = a->items[i].AsInt();
        if (!x && a->items[i].AsBool()) x = *a->items[i].AsBool() ? 1 : 0;
        if (!x)
          return Status::Errorf("{}: key '{}{}'[{}] is not an integer", f_.path(), prefix_, key, i);
        out.push_back(*x);
      }
      return out;
    }
    auto x = v->AsInt();
    if (!x && v->AsBool()) x = *v->AsBool() ? 1 : 0;
    if (!x)
      return Status::Errorf("{}: key '{}{}' must be an integer or array", f_.path(), prefix_, key);
    return std::vector<int64_t>(n_layer, *x);
  }

 private:
  const gguf::File& f_;
  std::string prefix_;
};

Status CheckPositive(const gguf::File& f, const char* what, int64_t v, int64_t max = 1 << 24) {
  if (v <= 0 || v > max)
    return Status::Errorf("{}: {} = {} is out of range (1..{})", f.path(), what, v, max);
  return Status::Ok();
}

// A float key that must be finite and inside [lo, hi] (open at lo when `lo_open`).
Status CheckFloat(const gguf::File& f, const std::string& key, float v, float lo, bool lo_open,
                  float hi) {
  if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi)
    return Status::Errorf("{}: {} = {} is not a finite value in {}{}, {}]", f.path(), key, v,
                          lo_open ? "(" : "[", lo, hi);
  return Status::Ok();
}

}  // namespace

int ModelConfig::last_kv_layer(bool sliding) const {
  for (int il = n_layer - 1; il >= 0; --il)
    if (layers[il].sliding == sliding && layers[il].has_kv) return il;
  return -1;
}

Expected<ModelConfig> LoadConfig(const gguf::File& f) {
  ModelConfig c;
  const gguf::Value* arch = f.Find("general.architecture");
  if (!arch || !arch->AsString())
    return Status::Errorf("{}: missing string key 'general.architecture'", f.path());
  c.arch = *arch->AsString();
  if (c.arch != "gemma4" && c.arch != "gemma4-assistant")
    return Status::Errorf(
        "{}: general.architecture is '{}'; lockstep runs 'gemma4' and "
        "'gemma4-assistant'",
        f.path(), c.arch);
  if (const gguf::Value* n = f.Find("general.name"); n && n->AsString()) c.name = *n->AsString();
  KeyReader k(f, c.arch + ".");

  LS_ASSIGN_OR_RETURN(int64_t n_embd, k.Int("embedding_length"));
  LS_ASSIGN_OR_RETURN(int64_t n_layer, k.Int("block_count"));
  LS_RETURN_IF_ERROR(CheckPositive(f, "embedding_length", n_embd));
  LS_RETURN_IF_ERROR(CheckPositive(f, "block_count", n_layer, 4096));
  c.n_embd = static_cast<int>(n_embd);
  c.n_layer = static_cast<int>(n_layer);
  const int L = c.n_layer;
  LS_ASSIGN_OR_RETURN(int64_t ctx, k.Int("context_length", 131072));
  c.n_ctx_train = static_cast<int>(ctx);
  LS_RETURN_IF_ERROR(CheckPositive(f, "context_length", ctx, int64_t{1} << 30));
  LS_ASSIGN_OR_RETURN(c.rms_eps, k.Float("attention.layer_norm_rms_epsilon", 1e-6f));
  LS_RETURN_IF_ERROR(
      CheckFloat(f, c.arch + ".attention.layer_norm_rms_epsilon", c.rms_eps, 0.0f, true, 1.0f));
  LS_ASSIGN_OR_RETURN(int64_t swa, k.Int("attention.sliding_window", 0));
  if (swa < 0 || swa > ctx)
    return Status::Errorf("{}: {}.attention.sliding_window = {} is out of range (0..{})", f.path(),
                          c.arch, swa, ctx);
  c.n_swa = static_cast<int>(swa);
  LS_ASSIGN_OR_RETURN(int64_t ple, k.Int("embedding_length_per_layer_input", 0));
  c.n_embd_per_layer = static_cast<int>(ple);
  LS_ASSIGN_OR_RETURN(int64_t shared, k.Int("attention.shared_kv_layers", 0));
  if (shared < 0 || shared > L)
    return Status::Errorf("{}: attention.shared_kv_layers = {} exceeds block_count {}", f.path(),
                          shared, L);
  c.n_shared_kv_layers = static_cast<int>(shared);
  LS_ASSIGN_OR_RETURN(int64_t n_expert, k.Int("expert_count", 0));
  LS_ASSIGN_OR_RETURN(int64_t n_used, k.Int("expert_used_count", 0));
  LS_ASSIGN_OR_RETURN(int64_t n_ff_exp, k.Int("expert_feed_forward_length", 0));
  c.n_expert = static_cast<int>(n_expert);
  c.n_expert_used = static_cast<int>(n_used);
  c.n_ff_exp = static_cast<int>(n_ff_exp);
  LS_ASSIGN_OR_RETURN(c.final_softcap, k.Float("final_logit_softcapping", 0.0f));
  LS_RETURN_IF_ERROR(
      CheckFloat(f, c.arch + ".final_logit_softcapping", c.final_softcap, 0.0f, false, 1e6f));

  LS_ASSIGN_OR_RETURN(auto n_head, k.PerLayerInt("attention.head_count", L, std::nullopt));
  // Checked here because the default head length divides by it.
  for (int il = 0; il < L; ++il)
    if (n_head[il] <= 0 || n_head[il] > 4096)
      return Status::Errorf("{}: {}.attention.head_count = {} (layer {}) is out of range (1..4096)",
                            f.path(), c.arch, n_head[il], il);
  LS_ASSIGN_OR_RETURN(auto n_head_kv, k.PerLayerInt("attention.head_count_kv", L, n_head[0]));
  LS_ASSIGN_OR_RETURN(auto pattern, k.PerLayerInt("attention.sliding_window_pattern", L, 0));
  LS_ASSIGN_OR_RETURN(auto n_ff, k.PerLayerInt("feed_forward_length", L, 0));
  LS_ASSIGN_OR_RETURN(int64_t hd_full, k.Int("attention.key_length", n_embd / n_head[0]));
  LS_ASSIGN_OR_RETURN(int64_t hdv_full, k.Int("attention.value_length", hd_full));
  LS_ASSIGN_OR_RETURN(int64_t hd_swa, k.Int("attention.key_length_swa", hd_full));
  LS_ASSIGN_OR_RETURN(int64_t hdv_swa, k.Int("attention.value_length_swa", hd_swa));
  if (hd_full != hdv_full || hd_swa != hdv_swa)
    return Status::Errorf("{}: key and value head lengths differ ({}/{}, swa {}/{})", f.path(),
                          hd_full, hdv_full, hd_swa, hdv_swa);
  LS_ASSIGN_OR_RETURN(int64_t n_rot_full, k.Int("rope.dimension_count", hd_full));
  LS_ASSIGN_OR_RETURN(int64_t n_rot_swa, k.Int("rope.dimension_count_swa", hd_swa));
  LS_ASSIGN_OR_RETURN(float base_full, k.Float("rope.freq_base", 10000.0f));
  LS_ASSIGN_OR_RETURN(float base_swa, k.Float("rope.freq_base_swa", 10000.0f));
  LS_RETURN_IF_ERROR(CheckFloat(f, c.arch + ".rope.freq_base", base_full, 1.0f, true, 1e12f));
  LS_RETURN_IF_ERROR(CheckFloat(f, c.arch + ".rope.freq_base_swa", base_swa, 1.0f, true, 1e12f));

  const gguf::TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2 || embd->ne[0] != n_embd)
    return Status::Errorf("{}: tensor 'token_embd.weight' missing or not {{{}, n_vocab}}", f.path(),
                          n_embd);
  c.n_vocab = static_cast<int>(embd->ne[1]);
  c.tied_output = f.FindTensor("output.weight") == nullptr;
  const bool has_rope_freqs = f.FindTensor("rope_freqs.weight") != nullptr;

  if (c.is_assistant()) {
    LS_ASSIGN_OR_RETURN(int64_t bb, k.Int("embedding_length_out"));
    LS_RETURN_IF_ERROR(CheckPositive(f, "embedding_length_out", bb));
    c.n_embd_backbone = static_cast<int>(bb);
    c.n_shared_kv_layers = L;  // a drafter owns no KV: every layer reads the target's
    LS_ASSIGN_OR_RETURN(int64_t nc, k.Int("num_centroids", 0));
    LS_ASSIGN_OR_RETURN(int64_t topk, k.Int("centroid_top_k", 0));
    c.n_centroids = static_cast<int>(nc);
    c.centroid_top_k = static_cast<int>(topk);
    const gguf::Value* ordered = k.Find("use_ordered_embeddings");
    c.ordered_embeddings = ordered && ordered->AsBool().value_or(false) &&
                           f.FindTensor("masked_embd_centroids.weight") != nullptr && nc > 0 &&
                           topk > 0;
  }

  const int kv_from_start = L - c.n_shared_kv_layers;
  c.layers.resize(L);
  for (int il = 0; il < L; ++il) {
    LayerConfig& lc = c.layers[il];
    const std::string blk = fmt::format("blk.{}.", il);
    lc.sliding = pattern[il] != 0;
    lc.head_dim = static_cast<int>(lc.sliding ? hd_swa : hd_full);
    lc.n_head = static_cast<int>(n_head[il]);
    lc.n_head_kv = static_cast<int>(n_head_kv[il]);
    lc.n_rot = static_cast<int>(lc.sliding ? n_rot_swa : n_rot_full);
    lc.rope_base = lc.sliding ? base_swa : base_full;
    lc.rope_freqs = !lc.sliding && has_rope_freqs;
    lc.has_kv = !c.is_assistant() && il < kv_from_start;
    lc.v_from_k = f.FindTensor(blk + "attn_v.weight") == nullptr;
    lc.n_ff = static_cast<int>(n_ff[il]);
    lc.moe = f.FindTensor(blk + "ffn_gate_inp.weight") != nullptr;
    lc.output_scale = f.FindTensor(blk + "layer_output_scale.weight") != nullptr;
    if (lc.n_head <= 0 || lc.head_dim <= 0 || lc.n_head_kv <= 0 || lc.n_head % lc.n_head_kv)
      return Status::Errorf("{}: layer {}: {} query heads cannot share {} kv heads of dim {}",
                            f.path(), il, lc.n_head, lc.n_head_kv, lc.head_dim);
    if (lc.n_ff <= 0 || lc.n_ff > (1 << 20))
      return Status::Errorf("{}: {}.feed_forward_length = {} (layer {}) is out of range", f.path(),
                            c.arch, lc.n_ff, il);
    if (lc.n_rot <= 0 || lc.n_rot > lc.head_dim || lc.n_rot % 2)
      return Status::Errorf("{}: layer {}: rope dimension count {} invalid for head dim {}",
                            f.path(), il, lc.n_rot, lc.head_dim);
    if (lc.sliding && c.n_swa <= 0)
      return Status::Errorf("{}: layer {} is sliding but attention.sliding_window is {}", f.path(),
                            il, c.n_swa);
    if (lc.moe && (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert ||
                   c.n_ff_exp <= 0))
      return Status::Errorf(
          "{}: layer {} has experts but expert_count/expert_used_count/"
          "expert_feed_forward_length are {}/{}/{}",
          f.path(), il, c.n_expert, c.n_expert_used, c.n_ff_exp);
  }
  // KV-shared layers read the last KV-owning layer of the same attention type (HF's rule).
  for (int il = 0; il < L; ++il) {
    LayerConfig& lc = c.layers[il];
    if (lc.has_kv) {
      lc.kv_source = il;
      continue;
    }
    lc.kv_source = -1;
    for (int j = kv_from_start - 1; j >= 0; --j)
      if (c.layers[j].sliding == lc.sliding) {
        lc.kv_source = j;
        break;
      }
    if (lc.kv_source < 0 && !c.is_assistant())
      return Status::Errorf("{}: layer {} shares KV but no earlier {} layer owns a cache", f.path(),
                            il, lc.sliding ? "sliding" : "full");
  }
  return c;
}

nlohmann::json ConfigToJson(const ModelConfig& c) {
  nlohmann::json j = {{"arch", c.arch},
                      {"name", c.name},
                      {"n_embd", c.n_embd},
                      {"n_layer", c.n_layer},
                      {"n_vocab", c.n_vocab},
                      {"n_ctx_train", c.n_ctx_train},
                      {"n_swa", c.n_swa},
                      {"rms_eps", c.rms_eps},
                      {"n_embd_per_layer", c.n_embd_per_layer},
                      {"n_shared_kv_layers", c.n_shared_kv_layers},
                      {"n_expert", c.n_expert},
                      {"n_expert_used", c.n_expert_used},
                      {"n_ff_exp", c.n_ff_exp},
                      {"final_softcap", c.final_softcap},
                      {"tied_output", c.tied_output}};
  if (c.is_assistant()) {
    j["n_embd_backbone"] = c.n_embd_backbone;
    j["ordered_embeddings"] = c.ordered_embeddings;
    j["n_centroids"] = c.n_centroids;
    j["centroid_top_k"] = c.centroid_top_k;
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : c.layers)
    layers.push_back({{"sliding", l.sliding},
                      {"head_dim", l.head_dim},
                      {"n_head", l.n_head},
                      {"n_head_kv", l.n_head_kv},
                      {"n_rot", l.n_rot},
                      {"rope_base", l.rope_base},
                      {"rope_freqs", l.rope_freqs},
                      {"has_kv", l.has_kv},
                      {"kv_source", l.kv_source},
                      {"v_from_k", l.v_from_k},
                      {"n_ff", l.n_ff},
                      {"moe", l.moe},
                      {"output_scale", l.output_scale}});
  j["layers"] = std::move(layers);
  return j;
}

std::string ConfigToTable(const ModelConfig& c) {
  std::string s = fmt::format(
      "{} \"{}\": n_embd {}, layers {}, vocab {}, window {}, PLE {}, experts {}/{} (ff {}), "
      "softcap {}{}\n",
      c.arch, c.name, c.n_embd, c.n_layer, c.n_vocab, c.n_swa, c.n_embd_per_layer, c.n_expert_used,
      c.n_expert, c.n_ff_exp, c.final_softcap,
      c.is_assistant() ? fmt::format(", backbone {}", c.n_embd_backbone) : std::string());
  s += "layer  type     hd  heads kv  rot  base       kv_src  v=k  n_ff   moe  scale\n";
  for (int il = 0; il < c.n_layer; ++il) {
    const auto& l = c.layers[il];
    s += fmt::format("{:<6} {:<8} {:<3} {:<5} {:<3} {:<4} {:<10g} {:<7} {:<4} {:<6} {:<4} {}\n", il,
                     l.sliding ? "sliding" : "full", l.head_dim, l.n_head, l.n_head_kv, l.n_rot,
                     l.rope_base, l.kv_source, l.v_from_k ? "yes" : "no", l.n_ff,
                     l.moe ? "yes" : "no", l.output_scale ? "yes" : "no");
  }
  return s;
}

}  // namespace lockstep::model
