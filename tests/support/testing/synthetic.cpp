// Writes a random-weight Gemma 4 model with llama.cpp's tensor names and metadata keys.
#include "testing/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "sample/sampler.h"
#include "testing/quant_weights.h"

namespace lockstep::model {
namespace {

// splitmix64: the next value of a counter-based stream.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

using gguf::Value;
using gguf::ValueType;

bool IsFull(const SyntheticSpec& s, int il) {
  return SyntheticLayerIsFull(s.n_layer, s.full_every, il);
}

// What quant::MixPlanner needs of the model, from the spec (the tensors WriteLayer adds).
quant::MixModel MixModelOf(const SyntheticSpec& s) {
  quant::MixModel m;
  m.n_layer = s.n_layer;
  for (int il = 0; il < s.n_layer; ++il) {
    const bool full = IsFull(s, il);
    m.n_attn_v += !(full && s.k_eq_v);
    m.gqa.push_back(s.n_head / (full ? s.n_head_kv_full : s.n_head_kv_swa));
  }
  return m;
}

class Filler {
 public:
  Filler(const SyntheticSpec& s, gguf::Writer& w) : s_(s), w_(w) {
    if (s.mix) planner_.emplace(*s.mix, MixModelOf(s));
  }

  // Matrix {in, out} with uniform values of standard deviation 1/sqrt(in), in the spec's type
  // or the type its mix plans for this tensor.
  void Matrix(const std::string& name, std::vector<int64_t> ne) {
    const float scale = std::sqrt(3.0f / static_cast<float>(ne[0]));
    DType type = s_.weight_type;
    if (planner_) type = planner_->Next({name, s_.weight_type, ne});
    Add(name, type, std::move(ne), -scale, scale);
  }
  // 1-D F32 tensor with values in [lo, hi].
  void Vector(const std::string& name, int64_t n, float lo, float hi) {
    Add(name, DType::F32, {n}, lo, hi);
  }
  void Raw(const std::string& name, std::vector<float> v) {
    auto data = std::make_shared<std::vector<float>>(std::move(v));
    const int64_t n = static_cast<int64_t>(data->size());
    w_.AddTensor(name, DType::F32, {n}, [data](uint8_t* dst) {
      std::memcpy(dst, data->data(), data->size() * sizeof(float));
    });
  }

 private:
  void Add(const std::string& name, DType type, std::vector<int64_t> ne, float lo, float hi) {
    int64_t n = 1;
    for (auto v : ne) n *= v;
    const uint64_t key = s_.seed * 1000003ull + counter_++;
    const int64_t row = ne[0];
    const bool random_blocks = s_.random_blocks && Info(type).block_size > 1;
    w_.AddTensor(name, type, ne, [=](uint8_t* dst) {
      const size_t rb = RowBytes(type, row);
      auto fill = [&](int64_t r0, int64_t r1) {
        std::vector<float> buf(static_cast<size_t>(random_blocks ? 0 : row));
        for (int64_t r = r0; r < r1; ++r) {
          if (random_blocks) {
            // A counter-based stream per (tensor, row): the same bytes at any thread count.
            uint64_t state = key * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r);
            auto bits = [&state] { return SplitMix64(state); };
            const float d = (hi - lo) / 64.0f;
            auto scale = [&] { return d * (0.5f + static_cast<float>(bits() >> 40) * 0x1p-24f); };
            testing::FillWellFormedBlocks(type, dst + r * rb, rb, bits, scale);
            continue;
          }
          for (int64_t i = 0; i < row; ++i)
            buf[i] = lo + (hi - lo) * static_cast<float>(sample::UniformAt(key, r, i));
          quant::QuantizeRow(type, buf.data(), dst + r * rb, row);
        }
      };
      // Every value depends only on (key, row, column), so row ranges fill on separate threads
      // with the same bytes as one thread. Large tensors (a 262k-vocabulary embedding is 400M
      // draws) spread over the cores; small fixtures stay on the calling thread.
      const int64_t rows = n / row;
      const int64_t n_threads =
          n < (int64_t{1} << 22) ? 1 : std::max<int64_t>(1, std::thread::hardware_concurrency());
      std::vector<std::thread> workers;
      for (int64_t t = 1; t < n_threads; ++t)
        workers.emplace_back(fill, rows * t / n_threads, rows * (t + 1) / n_threads);
      fill(0, rows / n_threads);
      for (auto& w : workers) w.join();
    });
  }
  const SyntheticSpec& s_;
  gguf::Writer& w_;
  std::optional<quant::MixPlanner> planner_;
  uint64_t counter_ = 0;
};

void WriteMetadata(const SyntheticSpec& s, gguf::Writer& w) {
  const std::string a = "gemma4.";
  w.Set("general.architecture", Value::Str("gemma4"));
  w.Set("general.name", Value::Str("lockstep-synthetic"));
  w.Set(a + "context_length", Value::U32(static_cast<uint32_t>(s.context_length)));
  w.Set(a + "embedding_length", Value::U32(s.n_embd));
  w.Set(a + "block_count", Value::U32(s.n_layer));
  w.Set(a + "feed_forward_length", Value::U32(s.n_ff));
  WriteSyntheticAttentionKeys({s.n_layer, s.full_every, s.n_head, s.n_head_kv_swa, s.n_head_kv_full,
                               s.head_dim_swa, s.head_dim_full, s.n_swa, s.n_shared_kv},
                              a, w);
  w.Set(a + "embedding_length_per_layer_input", Value::U32(s.n_embd_per_layer));
  w.Set(a + "final_logit_softcapping", Value::F32(s.softcap));
  if (s.n_expert > 0) {
    w.Set(a + "expert_count", Value::U32(s.n_expert));
    w.Set(a + "expert_used_count", Value::U32(s.n_expert_used));
    w.Set(a + "expert_feed_forward_length", Value::U32(s.n_ff_exp));
  }
}

void WriteLayer(const SyntheticSpec& s, int il, Filler& f) {
  const bool full = IsFull(s, il);
  const int64_t d = s.n_embd, hd = full ? s.head_dim_full : s.head_dim_swa;
  const int64_t kvw = hd * (full ? s.n_head_kv_full : s.n_head_kv_swa);
  auto n = [il](const char* x) { return fmt::format("blk.{}.{}", il, x); };
  f.Vector(n("attn_norm.weight"), d, 0.5f, 1.5f);
  f.Matrix(n("attn_q.weight"), {d, hd * s.n_head});
  f.Matrix(n("attn_k.weight"), {d, kvw});
  if (!(full && s.k_eq_v)) f.Matrix(n("attn_v.weight"), {d, kvw});
  f.Vector(n("attn_q_norm.weight"), hd, 0.5f, 1.5f);
  f.Vector(n("attn_k_norm.weight"), hd, 0.5f, 1.5f);
  f.Matrix(n("attn_output.weight"), {hd * s.n_head, d});
  f.Vector(n("post_attention_norm.weight"), d, 0.5f, 1.5f);
  f.Vector(n("ffn_norm.weight"), d, 0.5f, 1.5f);
  f.Matrix(n("ffn_gate.weight"), {d, s.n_ff});
  f.Matrix(n("ffn_up.weight"), {d, s.n_ff});
  f.Matrix(n("ffn_down.weight"), {s.n_ff, d});
  f.Vector(n("post_ffw_norm.weight"), d, 0.5f, 1.5f);
  f.Vector(n("layer_output_scale.weight"), 1, 0.4f, 1.2f);
  if (s.n_expert > 0) {
    f.Matrix(n("ffn_gate_inp.weight"), {d, s.n_expert});
    f.Vector(n("ffn_gate_inp.scale"), d, 0.5f, 1.5f);
    f.Vector(n("pre_ffw_norm_2.weight"), d, 0.5f, 1.5f);
    f.Vector(n("post_ffw_norm_1.weight"), d, 0.5f, 1.5f);
    f.Vector(n("post_ffw_norm_2.weight"), d, 0.5f, 1.5f);
    f.Matrix(n("ffn_gate_up_exps.weight"), {d, 2 * s.n_ff_exp, s.n_expert});
    f.Matrix(n("ffn_down_exps.weight"), {s.n_ff_exp, d, s.n_expert});
    f.Vector(n("ffn_down_exps.scale"), s.n_expert, 0.5f, 1.5f);
  }
  if (s.n_embd_per_layer > 0) {
    f.Matrix(n("inp_gate.weight"), {d, s.n_embd_per_layer});
    f.Matrix(n("proj.weight"), {s.n_embd_per_layer, d});
    f.Vector(n("post_norm.weight"), d, 0.5f, 1.5f);
  }
}

}  // namespace

bool SyntheticLayerIsFull(int n_layer, int full_every, int il) {
  return il == n_layer - 1 || (il + 1) % full_every == 0;
}

void WriteSyntheticAttentionKeys(const SyntheticAttention& s, const std::string& a,
                                 gguf::Writer& w) {
  w.Set(a + "attention.head_count", Value::U32(s.n_head));
  std::vector<Value> kv, pattern;
  for (int il = 0; il < s.n_layer; ++il) {
    const bool full = SyntheticLayerIsFull(s.n_layer, s.full_every, il);
    kv.push_back(Value::I32(full ? s.n_head_kv_full : s.n_head_kv_swa));
    pattern.push_back(Value::Bool(!full));
  }
  w.Set(a + "attention.head_count_kv", Value::Arr(ValueType::INT32, kv));
  w.Set(a + "attention.sliding_window_pattern", Value::Arr(ValueType::BOOL, pattern));
  w.Set(a + "attention.key_length", Value::U32(s.head_dim_full));
  w.Set(a + "attention.value_length", Value::U32(s.head_dim_full));
  w.Set(a + "attention.key_length_swa", Value::U32(s.head_dim_swa));
  w.Set(a + "attention.value_length_swa", Value::U32(s.head_dim_swa));
  w.Set(a + "attention.layer_norm_rms_epsilon", Value::F32(1e-6f));
  w.Set(a + "attention.sliding_window", Value::U32(s.n_swa));
  w.Set(a + "attention.shared_kv_layers", Value::U32(s.n_shared_kv));
  w.Set(a + "rope.freq_base", Value::F32(1e6f));
  w.Set(a + "rope.freq_base_swa", Value::F32(1e4f));
  w.Set(a + "rope.dimension_count", Value::U32(s.head_dim_full));
  w.Set(a + "rope.dimension_count_swa", Value::U32(s.head_dim_swa));
}

Status WriteSyntheticModel(const SyntheticSpec& s, const std::string& path) {
  gguf::Writer w;
  WriteMetadata(s, w);
  Filler f(s, w);
  f.Matrix("token_embd.weight", {s.n_embd, s.n_vocab});
  f.Vector("output_norm.weight", s.n_embd, 0.5f, 1.5f);
  // Proportional RoPE: the first partial*hd/2 pairs rotate, the rest get factor 1e30 (identity).
  std::vector<float> freqs(static_cast<size_t>(s.head_dim_full / 2), 1e30f);
  const int rotated = static_cast<int>(s.head_dim_full * s.partial_rotary_full / 2);
  for (int i = 0; i < rotated; ++i) freqs[i] = 1.0f;
  f.Raw("rope_freqs.weight", std::move(freqs));
  if (s.n_embd_per_layer > 0) {
    const int64_t pl = static_cast<int64_t>(s.n_embd_per_layer) * s.n_layer;
    f.Matrix("per_layer_token_embd.weight", {pl, s.n_vocab});
    f.Matrix("per_layer_model_proj.weight", {s.n_embd, pl});
    f.Vector("per_layer_proj_norm.weight", s.n_embd_per_layer, 0.5f, 1.5f);
  }
  for (int il = 0; il < s.n_layer; ++il) WriteLayer(s, il, f);
  return w.WriteFile(path);
}

namespace {

// Gemma 4's released shapes (the text backbone; every preset K=V on full layers except E4B).
SyntheticSpec GemmaShape(int n_layer, int d, int n_head, int kv_swa, int kv_full, int n_ff,
                         int n_swa) {
  SyntheticSpec s;
  s.n_vocab = 262144;
  s.n_embd = d;
  s.n_layer = n_layer;
  s.full_every = 6;
  s.n_head = n_head;
  s.n_head_kv_swa = kv_swa;
  s.n_head_kv_full = kv_full;
  s.head_dim_swa = 256;
  s.head_dim_full = 512;
  s.n_swa = n_swa;
  s.n_ff = n_ff;
  s.k_eq_v = true;
  s.weight_type = DType::F16;
  s.context_length = 131072;
  return s;
}

}  // namespace

std::optional<SyntheticSpec> SyntheticPreset(std::string_view name) {
  if (name == "e4b") {
    SyntheticSpec s = GemmaShape(42, 2560, 8, 2, 2, 10240, 512);
    s.k_eq_v = false;
    s.n_embd_per_layer = 256;
    s.n_shared_kv = 18;
    return s;
  }
  if (name == "26b-a4b") {
    SyntheticSpec s = GemmaShape(30, 2816, 16, 8, 2, 2112, 1024);
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 704;
    return s;
  }
  if (name == "31b") return GemmaShape(60, 5376, 32, 16, 4, 21504, 1024);
  if (name == "moe4b") {
    // 26B-A4B's layer layout (128 experts of 704, top-8, its heads and dense MLP) at width
    // 2048 and 6 layers: 4.10B parameters, 0.45B active per token besides the tied 262k-row
    // head (0.54B). The 704-wide down rows take Q5_0 / Q8_0 in Q4_K_M, as the real model's do.
    SyntheticSpec s = GemmaShape(6, 2048, 16, 8, 2, 2112, 1024);
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 704;
    return s;
  }
  if (name != "d17b") return std::nullopt;
  SyntheticSpec s;
  s.n_vocab = 262144;
  s.n_embd = 2048;
  s.n_layer = 18;
  s.full_every = 6;
  s.n_head = 8;
  s.n_head_kv_swa = 4;
  s.n_head_kv_full = 2;
  s.head_dim_swa = 256;
  s.head_dim_full = 512;
  s.n_swa = 512;
  s.n_ff = 8192;
  s.k_eq_v = true;
  s.weight_type = DType::F16;
  return s;
}

}  // namespace lockstep::model
