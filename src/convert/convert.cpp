// HF Gemma 4 checkpoint -> GGUF: metadata keys, generated rope_freqs, dtype conversion, writing.
#include "convert/convert.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "convert/tensor_map.h"
#include "core/check.h"
#include "core/half.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::convert {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors and GGUF data are little-endian");

using gguf::Value;
using gguf::ValueType;

Value U32(int64_t x) {
  CHECKF(x >= 0 && x <= 0xffffffffll, "value {} does not fit u32", x);
  return Value::U32(static_cast<uint32_t>(x));
}

// A scalar when every layer agrees, else an INT32 array (what gguf-py writes for int lists).
Value PerLayer(const std::vector<int64_t>& v) {
  bool uniform = true;
  for (int64_t x : v) uniform = uniform && x == v[0];
  if (uniform) return U32(v[0]);
  std::vector<Value> items;
  for (int64_t x : v) items.push_back(Value::I32(static_cast<int32_t>(x)));
  return Value::Arr(ValueType::INT32, std::move(items));
}

uint32_t FileType(DType t) {
  switch (t) {
    case DType::F32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case DType::F16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case DType::BF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      CHECKF(false, "unsupported outtype {}", Name(t));
  }
  return 0;
}

void SetMetadata(const HfConfig& c, const std::string& name, DType outtype, gguf::Writer& w) {
  const std::string a = c.arch + ".";
  w.Set("general.architecture", Value::Str(c.arch));
  w.Set("general.name", Value::Str(name));
  w.Set("general.file_type", Value::U32(FileType(outtype)));
  w.Set("general.quantization_version", Value::U32(2));
  w.Set(a + "context_length", U32(c.ctx));
  w.Set(a + "embedding_length", U32(c.hidden));
  w.Set(a + "block_count", U32(c.n_layer));
  w.Set(a + "feed_forward_length", PerLayer(c.n_ff));
  w.Set(a + "attention.head_count", U32(c.n_head));
  w.Set(a + "attention.head_count_kv", PerLayer(c.n_kv_head));
  w.Set(a + "attention.key_length", U32(c.head_dim_full));
  w.Set(a + "attention.value_length", U32(c.head_dim_full));
  w.Set(a + "attention.key_length_swa", U32(c.head_dim_swa));
  w.Set(a + "attention.value_length_swa", U32(c.head_dim_swa));
  w.Set(a + "attention.layer_norm_rms_epsilon", Value::F32(static_cast<float>(c.rms_eps)));
  w.Set(a + "attention.sliding_window", U32(c.sliding_window));
  std::vector<Value> pattern;
  for (bool s : c.is_swa) pattern.push_back(Value::Bool(s));
  w.Set(a + "attention.sliding_window_pattern", Value::Arr(ValueType::BOOL, std::move(pattern)));
  w.Set(a + "attention.shared_kv_layers", U32(c.n_kv_shared));
  w.Set(a + "embedding_length_per_layer_input", U32(c.ple_dim));
  w.Set(a + "rope.freq_base", Value::F32(static_cast<float>(c.rope_theta_full)));
  w.Set(a + "rope.freq_base_swa", Value::F32(static_cast<float>(c.rope_theta_swa)));
  w.Set(a + "rope.dimension_count", U32(c.head_dim_full));
  w.Set(a + "rope.dimension_count_swa", U32(c.head_dim_swa));
  if (c.final_softcap)
    w.Set(a + "final_logit_softcapping", Value::F32(static_cast<float>(*c.final_softcap)));
  if (c.moe) {
    w.Set(a + "expert_count", U32(c.n_expert));
    w.Set(a + "expert_used_count", U32(c.n_expert_used));
    w.Set(a + "expert_feed_forward_length", U32(c.n_ff_exp));
  }
  if (c.assistant()) {
    w.Set(a + "embedding_length_out", U32(c.backbone_hidden));
    w.Set(a + "nextn_predict_layers", U32(c.n_layer));
    // lockstep extensions (llama.cpp ignores them): the centroid ("ordered embedding") head.
    w.Set(a + "use_ordered_embeddings", Value::Bool(c.use_ordered));
    if (c.use_ordered) {
      w.Set(a + "num_centroids", U32(c.num_centroids));
      w.Set(a + "centroid_top_k", U32(c.centroid_top_k));
    }
  }
}

float ReadFloat(const StTensor& t, int64_t i) {
  uint16_t h = 0;
  switch (t.dtype) {
    case StDType::F32: {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      return f;
    }
    case StDType::F16:
      std::memcpy(&h, t.data + 2 * i, 2);
      return HalfToFloat(h);
    case StDType::BF16:
      std::memcpy(&h, t.data + 2 * i, 2);
      return BF16ToFloat(h);
    default:
      CHECKF(false, "tensor {}: not a float dtype", t.name);
  }
  return 0;
}

// Element-wise dtype conversion; the planner has already checked dtypes and sizes.
void Fill(const PlannedTensor& p, uint8_t* dst) {
  const StTensor& t = *p.src;
  const int64_t n = t.n_elements();
  if (p.type == DType::I32) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      if (t.dtype == StDType::I64) {
        std::memcpy(&v, t.data + 8 * i, 8);
      } else {
        int32_t v32;
        std::memcpy(&v32, t.data + 4 * i, 4);
        v = v32;
      }
      const int32_t o = static_cast<int32_t>(v);
      std::memcpy(dst + 4 * i, &o, 4);
    }
    return;
  }
  if (p.type == DType::F32 && t.dtype == StDType::F32) {
    std::memcpy(dst, t.data, t.nbytes);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float f = ReadFloat(t, i);
    if (p.type == DType::F32) {
      std::memcpy(dst + 4 * i, &f, 4);
    } else {
      const uint16_t h = p.type == DType::F16 ? FloatToHalf(f) : FloatToBF16(f);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

// llama.cpp's generate_extra_tensors: 1.0 for the rotated pairs, 1e30 (no rotation) for the rest.
void FillRopeFreqs(const HfConfig& c, uint8_t* dst) {
  const int64_t n = c.head_dim_full / 2, ones = c.rope_rotated_pairs();
  for (int64_t i = 0; i < n; ++i) {
    const float v = i < ones ? 1.0f : 1e30f;
    std::memcpy(dst + 4 * i, &v, 4);
  }
}

Expected<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Errorf("{}: cannot open", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Errorf("{}: invalid JSON", path);
  return j;
}

}  // namespace

Status ConvertHfToGguf(const ConvertOptions& opts) {
  namespace fs = std::filesystem;
  if (opts.outtype != DType::F32 && opts.outtype != DType::F16 && opts.outtype != DType::BF16)
    return Status::Errorf("outtype {}: expected f32, f16 or bf16", Name(opts.outtype));
  const fs::path dir(opts.hf_dir);
  const std::string cfg_path = (dir / "config.json").string();
  LS_ASSIGN_OR_RETURN(const nlohmann::json root, ReadJson(cfg_path));
  LS_ASSIGN_OR_RETURN(const HfConfig cfg, ParseHfConfig(root, cfg_path));
  LS_ASSIGN_OR_RETURN(const auto ck, Checkpoint::Open(opts.hf_dir));
  LS_ASSIGN_OR_RETURN(const auto plan, PlanTensors(cfg, *ck, opts.outtype));

  gguf::Writer w;
  std::string name = fs::path(opts.hf_dir).lexically_normal().filename().string();
  if (name.empty() || name == ".")
    name = fs::path(opts.hf_dir).lexically_normal().parent_path().filename().string();
  SetMetadata(cfg, name, opts.outtype, w);
  const fs::path tok = dir / "tokenizer.json", tok_cfg = dir / "tokenizer_config.json";
  std::error_code ec;
  if (opts.tokenizer && fs::exists(tok, ec)) {
    LS_RETURN_IF_ERROR(tokenizer::AddTokenizerFromHfJson(
        tok.string(), fs::exists(tok_cfg, ec) ? tok_cfg.string() : "", w));
  } else if (opts.note) {
    opts.note(opts.tokenizer ? fmt::format("{}: no tokenizer.json; the GGUF gets no tokenizer keys",
                                           opts.hf_dir)
                             : "tokenizer skipped (--no-tokenizer)");
  }
  for (const auto& p : plan) {
    if (p.src == nullptr) {
      w.AddTensor(p.gguf_name, p.type, p.ne, [&cfg](uint8_t* d) { FillRopeFreqs(cfg, d); });
    } else {
      w.AddTensor(p.gguf_name, p.type, p.ne, [&p](uint8_t* d) { Fill(p, d); });
    }
  }
  if (opts.note)
    opts.note(fmt::format("{}: arch {}, {} layers, {} tensors, outtype {}", opts.hf_dir, cfg.arch,
                          cfg.n_layer, plan.size(), Name(opts.outtype)));
  return w.WriteFile(opts.out_path, opts.progress, opts.cancel);
}

}  // namespace lockstep::convert
