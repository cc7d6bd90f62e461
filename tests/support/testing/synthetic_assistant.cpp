// Writes a random-weight gemma4-assistant GGUF with llama.cpp's names and the centroid-head
// keys lockstep reads (num_centroids, centroid_top_k, use_ordered_embeddings).
#include "testing/synthetic_assistant.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "sample/sampler.h"
#include "testing/synthetic.h"

namespace lockstep::model {
namespace {

using gguf::Value;
using gguf::ValueType;

bool IsFull(const SyntheticAssistantSpec& s, int il) {
  return SyntheticLayerIsFull(s.n_layer, s.full_every, il);
}

// Seeded tensors: each tensor's values come from (seed, tensor counter, row, column) alone.
class Tensors {
 public:
  Tensors(const SyntheticAssistantSpec& s, gguf::Writer& w) : s_(s), w_(w) {}

  // {in, out} uniform with standard deviation scale/sqrt(in).
  void Matrix(const std::string& name, std::vector<int64_t> ne, float scale = 1.0f) {
    const float a = scale * std::sqrt(3.0f / static_cast<float>(ne[0]));
    Fill(name, s_.weight_type, std::move(ne),
         [a](int64_t, int64_t, double u) { return static_cast<float>(-a + 2.0 * a * u); });
  }
  void Vector(const std::string& name, int64_t n, float lo, float hi) {
    Fill(name, DType::F32, {n},
         [lo, hi](int64_t, int64_t, double u) { return static_cast<float>(lo + (hi - lo) * u); });
  }
  // {in, out} with value(r, i) for output row r, input i (plus `noise` uniform jitter).
  void Pattern(const std::string& name, std::vector<int64_t> ne, float noise,
               float (*value)(int64_t r, int64_t i, int64_t bb), int64_t bb) {
    const float a = noise * std::sqrt(3.0f / static_cast<float>(ne[0]));
    Fill(name, DType::F32, std::move(ne), [=](int64_t r, int64_t i, double u) {
      return value(r, i, bb) + static_cast<float>(-a + 2.0 * a * u);
    });
  }
  void Raw(const std::string& name, DType type, std::vector<int64_t> ne,
           std::shared_ptr<std::vector<uint8_t>> bytes) {
    w_.AddTensor(name, type, std::move(ne),
                 [bytes](uint8_t* dst) { std::memcpy(dst, bytes->data(), bytes->size()); });
  }
  uint64_t NextKey() { return s_.seed * 1000003ull + counter_++; }

 private:
  template <typename F>
  void Fill(const std::string& name, DType type, std::vector<int64_t> ne, F f) {
    int64_t n = 1;
    for (auto v : ne) n *= v;
    const uint64_t key = NextKey();
    const int64_t row = ne[0];
    w_.AddTensor(name, type, ne, [=](uint8_t* dst) {
      std::vector<float> buf(static_cast<size_t>(row));
      const size_t rb = RowBytes(type, row);
      for (int64_t r = 0; r < n / row; ++r) {
        for (int64_t i = 0; i < row; ++i) buf[i] = f(r, i, sample::UniformAt(key, r, i));
        quant::QuantizeRow(type, buf.data(), dst + r * rb, row);
      }
    });
  }
  const SyntheticAssistantSpec& s_;
  gguf::Writer& w_;
  uint64_t counter_ = 0;
};

void WriteMetadata(const SyntheticAssistantSpec& s, gguf::Writer& w) {
  const std::string a = "gemma4-assistant.";
  w.Set("general.architecture", Value::Str("gemma4-assistant"));
  w.Set("general.name", Value::Str("lockstep-synthetic-assistant"));
  w.Set(a + "context_length", Value::U32(4096));
  w.Set(a + "embedding_length", Value::U32(s.n_embd));
  w.Set(a + "embedding_length_out", Value::U32(s.n_bb));
  w.Set(a + "block_count", Value::U32(s.n_layer));
  w.Set(a + "nextn_predict_layers", Value::U32(s.n_layer));
  w.Set(a + "feed_forward_length", Value::U32(s.n_ff));
  // A drafter owns no KV: every layer is shared with the target.
  WriteSyntheticAttentionKeys({s.n_layer, s.full_every, s.n_head, s.n_head_kv_swa, s.n_head_kv_full,
                               s.head_dim_swa, s.head_dim_full, s.n_swa, s.n_layer},
                              a, w);
  if (s.ordered) {
    w.Set(a + "use_ordered_embeddings", Value::Bool(true));
    w.Set(a + "num_centroids", Value::U32(s.n_centroids));
    w.Set(a + "centroid_top_k", Value::U32(s.centroid_top_k));
  }
}

void WriteLayer(const SyntheticAssistantSpec& s, int il, bool echo, Tensors& t) {
  const bool full = IsFull(s, il);
  const int64_t d = s.n_embd, hd = full ? s.head_dim_full : s.head_dim_swa;
  auto n = [il](const char* x) { return fmt::format("blk.{}.{}", il, x); };
  t.Vector(n("attn_norm.weight"), d, 0.5f, 1.5f);
  t.Matrix(n("attn_q.weight"), {d, hd * s.n_head});
  t.Vector(n("attn_q_norm.weight"), hd, 0.5f, 1.5f);
  t.Matrix(n("attn_output.weight"), {hd * s.n_head, d});
  // Post-norms rescale a branch to unit RMS, so the echo's small branches come from them.
  const float lo = echo ? 0.5f * s.echo_noise : 0.5f, hi = echo ? 1.5f * s.echo_noise : 1.5f;
  t.Vector(n("post_attention_norm.weight"), d, lo, hi);
  t.Vector(n("ffn_norm.weight"), d, 0.5f, 1.5f);
  t.Matrix(n("ffn_gate.weight"), {d, s.n_ff});
  t.Matrix(n("ffn_up.weight"), {d, s.n_ff});
  t.Matrix(n("ffn_down.weight"), {s.n_ff, d});
  t.Vector(n("post_ffw_norm.weight"), d, lo, hi);
  if (echo)
    t.Vector(n("layer_output_scale.weight"), 1, 1.0f, 1.0f);
  else
    t.Vector(n("layer_output_scale.weight"), 1, 0.4f, 1.2f);
}

// A seeded permutation of the vocabulary, viewed as [n_centroids, n_vocab / n_centroids].
std::shared_ptr<std::vector<uint8_t>> Ordering(const SyntheticAssistantSpec& s, uint64_t key) {
  std::vector<int32_t> ids(static_cast<size_t>(s.n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  for (int i = s.n_vocab - 1; i > 0; --i) {
    const int j = static_cast<int>(sample::UniformAt(key, 0, i) * (i + 1));
    std::swap(ids[i], ids[j]);
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(ids.size() * sizeof(int32_t));
  std::memcpy(bytes->data(), ids.data(), bytes->size());
  return bytes;
}

float PassHidden(int64_t r, int64_t i, int64_t bb) {
  return i == bb + r ? 1.0f : 0.0f;
}
float Identity(int64_t r, int64_t i, int64_t) {
  return i == r ? 1.0f : 0.0f;
}

}  // namespace

SyntheticAssistantSpec AssistantSpecFor(const SyntheticSpec& t) {
  SyntheticAssistantSpec s;
  s.n_vocab = t.n_vocab;
  s.n_bb = t.n_embd;
  s.n_head_kv_swa = t.n_head_kv_swa;
  s.n_head_kv_full = t.n_head_kv_full;
  s.head_dim_swa = t.head_dim_swa;
  s.head_dim_full = t.head_dim_full;
  s.partial_rotary_full = t.partial_rotary_full;
  s.n_swa = t.n_swa;
  s.seed = t.seed + 100;
  return s;
}

Status WriteSyntheticAssistant(const SyntheticAssistantSpec& s, const std::string& path) {
  if (s.ordered && (s.n_centroids <= 0 || s.n_vocab % s.n_centroids != 0))
    return Status::Errorf("synthetic assistant: {} centroids do not divide {} tokens",
                          s.n_centroids, s.n_vocab);
  std::unique_ptr<gguf::File> target;
  const gguf::TensorInfo* target_embd = nullptr;
  const bool echo = !s.echo_target.empty();
  if (echo) {
    LS_ASSIGN_OR_RETURN(target, gguf::File::Open(s.echo_target));
    target_embd = target->FindTensor("token_embd.weight");
    if (s.n_embd != s.n_bb || !target_embd || target_embd->ne.size() != 2 ||
        target_embd->ne[0] != s.n_bb || target_embd->ne[1] != s.n_vocab)
      return Status::Errorf(
          "{}: an echo drafter needs n_embd == n_bb == {} and token_embd "
          "{{{}, {}}}",
          s.echo_target, s.n_bb, s.n_bb, s.n_vocab);
  }
  gguf::Writer w;
  WriteMetadata(s, w);
  Tensors t(s, w);
  const int64_t d = s.n_embd, bb = s.n_bb;
  if (echo) {
    w.AddTensorCopy("token_embd.weight", target_embd->type, target_embd->ne,
                    target->TensorData(*target_embd));
    t.Vector("output_norm.weight", d, 1.0f, 1.0f);
    t.Pattern("nextn.pre_projection.weight", {2 * bb, d}, s.echo_noise, PassHidden, bb);
    t.Pattern("nextn.post_projection.weight", {d, bb}, s.echo_noise, Identity, bb);
  } else {
    t.Matrix("token_embd.weight", {d, s.n_vocab});
    t.Vector("output_norm.weight", d, 0.5f, 1.5f);
    t.Matrix("nextn.pre_projection.weight", {2 * bb, d});
    t.Matrix("nextn.post_projection.weight", {d, bb});
  }
  std::vector<float> freqs(static_cast<size_t>(s.head_dim_full / 2), 1e30f);
  const int rotated = static_cast<int>(s.head_dim_full * s.partial_rotary_full / 2);
  for (int i = 0; i < rotated; ++i) freqs[i] = 1.0f;
  auto fbytes = std::make_shared<std::vector<uint8_t>>(freqs.size() * sizeof(float));
  std::memcpy(fbytes->data(), freqs.data(), fbytes->size());
  t.Raw("rope_freqs.weight", DType::F32, {static_cast<int64_t>(freqs.size())}, fbytes);
  for (int il = 0; il < s.n_layer; ++il) WriteLayer(s, il, echo, t);
  if (s.ordered) {
    t.Matrix("masked_embd_centroids.weight", {d, s.n_centroids});
    t.Raw("masked_embd_ordering", DType::I32, {s.n_vocab}, Ordering(s, t.NextKey()));
  }
  return w.WriteFile(path);  // reads the echo target's bytes now, while `target` is open
}

}  // namespace lockstep::model
