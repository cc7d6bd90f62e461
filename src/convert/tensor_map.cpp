// The HF -> GGUF tensor table for Gemma 4 (llama.cpp's LLM_ARCH_GEMMA4 / GEMMA4_ASSISTANT names).
#include "convert/tensor_map.h"

#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lockstep::convert {
namespace {

using Shape = std::vector<int64_t>;  // PyTorch order
using ShapeFn = std::function<Shape(const HfConfig&, int64_t il)>;

// When a tensor must be present: always, on layers that own KV, on layers with a V projection,
// on MoE / PLE models, on drafters with a centroid head, or never (optional).
enum class Need { kAlways, kKv, kV, kMoe, kPle, kCentroids, kOptional };

struct Rule {
  const char* hf;    // suffix after the model prefix (+ "layers.N." for layer rules)
  const char* gguf;  // suffix after "blk.N." for layer rules
  Need need;
  ShapeFn shape;
};

int64_t Q(const HfConfig& c, int64_t il) {
  return c.n_head * c.head_dim[il];
}
int64_t KV(const HfConfig& c, int64_t il) {
  return c.n_kv_head[il] * c.head_dim[il];
}

const std::vector<Rule>& LayerRules() {
  static const std::vector<Rule> rules = {
      {"input_layernorm.weight", "attn_norm.weight", Need::kAlways,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"self_attn.q_proj.weight", "attn_q.weight", Need::kAlways,
       [](auto& c, auto il) {
         return Shape{Q(c, il), c.hidden};
       }},
      {"self_attn.k_proj.weight", "attn_k.weight", Need::kKv,
       [](auto& c, auto il) {
         return Shape{KV(c, il), c.hidden};
       }},
      {"self_attn.v_proj.weight", "attn_v.weight", Need::kV,
       [](auto& c, auto il) {
         return Shape{KV(c, il), c.hidden};
       }},
      {"self_attn.o_proj.weight", "attn_output.weight", Need::kAlways,
       [](auto& c, auto il) {
         return Shape{c.hidden, Q(c, il)};
       }},
      {"self_attn.q_norm.weight", "attn_q_norm.weight", Need::kAlways,
       [](auto& c, auto il) { return Shape{c.head_dim[il]}; }},
      {"self_attn.k_norm.weight", "attn_k_norm.weight", Need::kKv,
       [](auto& c, auto il) { return Shape{c.head_dim[il]}; }},
      {"post_attention_layernorm.weight", "post_attention_norm.weight", Need::kAlways,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"layer_scalar", "layer_output_scale.weight", Need::kOptional,
       [](auto&, auto) { return Shape{1}; }},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight", Need::kAlways,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"mlp.gate_proj.weight", "ffn_gate.weight", Need::kAlways,
       [](auto& c, auto il) {
         return Shape{c.n_ff[il], c.hidden};
       }},
      {"mlp.up_proj.weight", "ffn_up.weight", Need::kAlways,
       [](auto& c, auto il) {
         return Shape{c.n_ff[il], c.hidden};
       }},
      {"mlp.down_proj.weight", "ffn_down.weight", Need::kAlways,
       [](auto& c, auto il) {
         return Shape{c.hidden, c.n_ff[il]};
       }},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", Need::kAlways,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"router.proj.weight", "ffn_gate_inp.weight", Need::kMoe,
       [](auto& c, auto) {
         return Shape{c.n_expert, c.hidden};
       }},
      {"router.scale", "ffn_gate_inp.scale", Need::kMoe,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", Need::kMoe,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"experts.gate_up_proj", "ffn_gate_up_exps.weight", Need::kMoe,
       [](auto& c, auto) {
         return Shape{c.n_expert, 2 * c.n_ff_exp, c.hidden};
       }},
      {"experts.down_proj", "ffn_down_exps.weight", Need::kMoe,
       [](auto& c, auto) {
         return Shape{c.n_expert, c.hidden, c.n_ff_exp};
       }},
      {"router.per_expert_scale", "ffn_down_exps.scale", Need::kMoe,
       [](auto& c, auto) { return Shape{c.n_expert}; }},
      {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", Need::kMoe,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", Need::kMoe,
       [](auto& c, auto) { return Shape{c.hidden}; }},
      {"per_layer_input_gate.weight", "inp_gate.weight", Need::kPle,
       [](auto& c, auto) {
         return Shape{c.ple_dim, c.hidden};
       }},
      {"per_layer_projection.weight", "proj.weight", Need::kPle,
       [](auto& c, auto) {
         return Shape{c.hidden, c.ple_dim};
       }},
      {"post_per_layer_input_norm.weight", "post_norm.weight", Need::kPle,
       [](auto& c, auto) { return Shape{c.hidden}; }},
  };
  return rules;
}

// Global rules; names starting with '/' are at the checkpoint root instead of under the prefix.
const std::vector<Rule>& GlobalRules() {
  static const std::vector<Rule> rules = {
      {"embed_tokens.weight", "token_embd.weight", Need::kAlways,
       [](auto& c, auto) {
         return Shape{c.vocab, c.hidden};
       }},
      {"embed_tokens_per_layer.weight", "per_layer_token_embd.weight", Need::kPle,
       [](auto& c, auto) {
         return Shape{c.ple_vocab, c.n_layer * c.ple_dim};
       }},
      {"per_layer_model_projection.weight", "per_layer_model_proj.weight", Need::kPle,
       [](auto& c, auto) {
         return Shape{c.n_layer * c.ple_dim, c.hidden};
       }},
      {"per_layer_projection_norm.weight", "per_layer_proj_norm.weight", Need::kPle,
       [](auto& c, auto) { return Shape{c.ple_dim}; }},
      {"norm.weight", "output_norm.weight", Need::kAlways,
       [](auto& c, auto) { return Shape{c.hidden}; }},
  };
  return rules;
}

const std::vector<Rule>& AssistantRules() {
  static const std::vector<Rule> rules = {
      {"pre_projection.weight", "nextn.pre_projection.weight", Need::kAlways,
       [](auto& c, auto) {
         return Shape{c.hidden, 2 * c.backbone_hidden};
       }},
      {"post_projection.weight", "nextn.post_projection.weight", Need::kAlways,
       [](auto& c, auto) {
         return Shape{c.backbone_hidden, c.hidden};
       }},
      {"masked_embedding.centroids.weight", "masked_embd_centroids.weight", Need::kCentroids,
       [](auto& c, auto) {
         return Shape{c.num_centroids, c.hidden};
       }},
      {"masked_embedding.token_ordering", "masked_embd_ordering", Need::kCentroids,
       [](auto& c, auto) { return Shape{c.vocab}; }},
  };
  return rules;
}

bool Required(const HfConfig& c, Need n, int64_t il) {
  switch (n) {
    case Need::kAlways:
      return true;
    case Need::kKv:
      return c.has_kv(il);
    case Need::kV:
      return c.has_kv(il) && !(c.k_eq_v && !c.is_swa[il]);
    case Need::kMoe:
      return c.moe;
    case Need::kPle:
      return c.ple_dim > 0;
    case Need::kCentroids:
      return c.use_ordered;
    case Need::kOptional:
      return false;
  }
  return false;
}

// A present tensor the config says cannot exist would change the graph (e.g. a V projection on a
// K=V layer), so it is an error rather than silently written.
bool Forbidden(const HfConfig& c, Need n, int64_t il) {
  switch (n) {
    case Need::kV:
      return c.has_kv(il) && c.k_eq_v && !c.is_swa[il];
    case Need::kMoe:
      return !c.moe;
    case Need::kPle:
      return c.ple_dim == 0;
    case Need::kCentroids:
      return !c.use_ordered;
    default:
      return false;
  }
}

DType OutType(const std::string& gguf, size_t ndim, DType outtype) {
  if (gguf == "masked_embd_ordering") return DType::I32;
  if (ndim <= 1) return DType::F32;
  // llama.cpp keeps the router matrix in F32 whatever the output type.
  if (gguf.size() >= 19 && gguf.compare(gguf.size() - 19, 19, "ffn_gate_inp.weight") == 0)
    return DType::F32;
  return outtype;
}

Status CheckTensor(const StTensor& t, const Shape& want, bool is_index, const HfConfig& c) {
  if (t.shape != want)
    return Status::Errorf("{}: tensor '{}' has shape [{}], expected [{}] from config.json", t.file,
                          t.name, fmt::join(t.shape, ", "), fmt::join(want, ", "));
  const bool is_float =
      t.dtype == StDType::F32 || t.dtype == StDType::F16 || t.dtype == StDType::BF16;
  if (is_index) {
    if (t.dtype != StDType::I64 && t.dtype != StDType::I32)
      return Status::Errorf("{}: tensor '{}' has dtype {}, expected I64 or I32", t.file, t.name,
                            StDTypeName(t.dtype));
    for (int64_t i = 0; i < t.n_elements(); ++i) {
      int64_t v = 0;
      if (t.dtype == StDType::I64) {
        std::memcpy(&v, t.data + 8 * i, 8);
      } else {
        int32_t v32 = 0;
        std::memcpy(&v32, t.data + 4 * i, 4);
        v = v32;
      }
      if (v < 0 || v >= c.vocab)
        return Status::Errorf("{}: tensor '{}' element {} = {} is not a token id below {}", t.file,
                              t.name, i, v, c.vocab);
    }
  } else if (!is_float) {
    return Status::Errorf("{}: tensor '{}' has dtype {}, expected F32, F16 or BF16", t.file, t.name,
                          StDTypeName(t.dtype));
  }
  return Status::Ok();
}

Status Add(const HfConfig& c, const StTensor& t, const Rule& r, int64_t il, const std::string& gguf,
           DType outtype, std::vector<PlannedTensor>& out) {
  const Shape want = r.shape(c, il);
  LS_RETURN_IF_ERROR(CheckTensor(t, want, std::string(r.gguf) == "masked_embd_ordering", c));
  PlannedTensor p{gguf, &t, Shape(want.rbegin(), want.rend()), OutType(gguf, want.size(), outtype)};
  out.push_back(std::move(p));
  return Status::Ok();
}

}  // namespace

Expected<std::vector<PlannedTensor>> PlanTensors(const HfConfig& c, const Checkpoint& ck,
                                                 DType outtype) {
  std::vector<PlannedTensor> out;
  std::set<std::string> used;
  if (c.rope_type_full == "proportional")
    out.push_back(PlannedTensor{"rope_freqs.weight", nullptr, {c.head_dim_full / 2}, DType::F32});
  auto place = [&](const Rule& r, const std::string& hf, int64_t il,
                   const std::string& gguf) -> Status {
    const StTensor* t = ck.Find(hf);
    if (t == nullptr) {
      if (Required(c, r.need, il))
        return Status::Errorf("checkpoint: required tensor '{}' (GGUF {}) is missing", hf, gguf);
      return Status::Ok();
    }
    used.insert(hf);
    if (Forbidden(c, r.need, il))
      return Status::Errorf(
          "{}: tensor '{}' is present but config.json rules it out (layer {}, {})", t->file, hf, il,
          r.need == Need::kV ? "attention_k_eq_v on a full layer" : "feature disabled");
    return Add(c, *t, r, il, gguf, outtype, out);
  };
  for (const auto& r : GlobalRules())
    LS_RETURN_IF_ERROR(place(r, c.tensor_prefix + r.hf, -1, r.gguf));
  if (c.assistant())
    for (const auto& r : AssistantRules()) LS_RETURN_IF_ERROR(place(r, r.hf, -1, r.gguf));
  for (int64_t il = 0; il < c.n_layer; ++il)
    for (const auto& r : LayerRules())
      LS_RETURN_IF_ERROR(place(r, fmt::format("{}layers.{}.{}", c.tensor_prefix, il, r.hf), il,
                               fmt::format("blk.{}.{}", il, r.gguf)));
  // A separate lm_head must equal the tied embedding to be dropped; otherwise it is the output.
  if (const StTensor* lm = ck.Find("lm_head.weight")) {
    used.insert("lm_head.weight");
    if (!c.tie_embeddings) {
      Rule r{"lm_head.weight", "output.weight", Need::kAlways, [](auto& cc, auto) {
               return Shape{cc.vocab, cc.hidden};
             }};
      LS_RETURN_IF_ERROR(Add(c, *lm, r, -1, "output.weight", outtype, out));
    }
  } else if (!c.tie_embeddings) {
    return Status::Errorf(
        "checkpoint: tie_word_embeddings is false but 'lm_head.weight' is missing");
  }
  static const char* kSkipped[] = {"model.vision_tower.", "model.audio_tower.",
                                   "model.embed_vision.", "model.embed_audio."};
  for (const auto& [name, t] : ck.tensors()) {
    if (used.count(name)) continue;
    bool skip = false;
    for (const char* s : kSkipped) skip = skip || (c.multimodal && name.rfind(s, 0) == 0);
    if (!skip)
      return Status::Errorf(
          "{}: unknown tensor '{}' for model_type {} (not in the Gemma 4 name table)", t->file,
          name, c.model_type);
  }
  return out;
}

}  // namespace lockstep::convert
