// Whole-model quantization: llama.cpp-style type mixes (which tensor gets which block format)
// and a streaming GGUF-to-GGUF rewrite that is byte-identical for any thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace lockstep::quant {

// A named quantization mix (the TYPE argument of `lockstep quantize`).
enum class Mix { F16, BF16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q2_K };

// Case-insensitive lookup ("q4_k_m" == "Q4_K_M"); nullopt for unknown names.
std::optional<Mix> MixFromName(std::string_view name);
std::string_view MixName(Mix mix);
// "F16, BF16, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q2_K" for error messages.
std::string ValidMixNames();
// llama.cpp's LLAMA_FTYPE_* number stored as general.file_type.
uint32_t FileTypeOf(Mix mix);

// The output type of every tensor of `file` under `mix`, in file order. Tensors that must stay
// exact (1-D, norms, scales, the router, rope_freqs, token ordering, centroids) keep their type,
// and so do tensors that are already block-quantized unless `requantize`; a tensor whose ne[0]
// does not fit the chosen block size falls back to a smaller block (then F16).
std::vector<DType> PlanTypes(const gguf::File& file, Mix mix, bool requantize = false);

// What a mix needs to know of the whole model before typing its tensors one by one.
struct MixModel {
  int64_t n_layer = 0;
  int64_t n_attn_v = 0;      // attn_v tensors in the model
  bool has_output = false;   // an output.weight (else token_embd is the tied head)
  std::vector<int64_t> gqa;  // n_head / n_head_kv per layer (Q2_K's attn_v rule); may be empty
};

// PlanTypes one tensor at a time, for writers that produce a model in a mix directly (the
// synthetic full-size models): call Next for every tensor in file order, with its source type.
class MixPlanner {
 public:
  // requantize: block-quantized tensors are typed like float ones (else they keep their type).
  MixPlanner(Mix mix, MixModel model, bool requantize = false);
  DType Next(const gguf::TensorInfo& t);

 private:
  Mix mix_;
  MixModel model_;
  bool requantize_;
  int64_t i_attn_v_ = 0;
};

struct QuantizeProgress {
  size_t tensor = 0;  // 1-based index of the tensor just written
  size_t n_tensors = 0;
  uint64_t bytes_in = 0;   // source bytes consumed so far
  uint64_t bytes_out = 0;  // output tensor bytes written so far
  uint64_t total_out = 0;  // output tensor bytes in all
};

struct QuantizeOptions {
  int threads = 1;
  std::function<void(const QuantizeProgress&)> progress;  // may be empty
  // Checked between tensors (and between row chunks); when set, the write stops, OUT.tmp is
  // removed and QuantizeModel returns an error whose message starts with "interrupted".
  const std::atomic<bool>* cancel = nullptr;
  // Quantize tensors that are already block-quantized too, from their dequantized values (two
  // roundings compound; llama.cpp's --allow-requantize). Without it such a file is refused.
  bool allow_requantize = false;
};

// Reads `in_path`, writes `out_path` (via out_path.tmp + rename) with every tensor converted to
// its PlanTypes type, all metadata copied, general.file_type and general.quantization_version
// (2) set. Each row is quantized from its own values only, so the bytes do not depend on
// `threads`. Errors: unreadable input, same input and output file, write failures.
Status QuantizeModel(const std::string& in_path, const std::string& out_path, Mix mix,
                     const QuantizeOptions& opts = {});

}  // namespace lockstep::quant
