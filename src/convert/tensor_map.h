// Maps Hugging Face Gemma 4 tensor names to llama.cpp GGUF names and checks shapes and presence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "core/dtype.h"
#include "core/status.h"

namespace lockstep::convert {

// One output tensor. `src` is null for generated tensors (rope_freqs.weight).
struct PlannedTensor {
  std::string gguf_name;
  const StTensor* src = nullptr;
  std::vector<int64_t> ne;  // ggml order (reversed PyTorch shape)
  DType type = DType::F32;
};

// Every checkpoint tensor must map to a known name (multimodal towers of gemma4 checkpoints and
// a tied lm_head are skipped), have the shape config.json implies, and every tensor the GGUF
// needs must be present. `outtype` (F32/F16/BF16) applies to matrices; vectors, router
// matrices, rope_freqs and scales stay F32; the centroid ordering becomes I32.
Expected<std::vector<PlannedTensor>> PlanTensors(const HfConfig& c, const Checkpoint& ck,
                                                 DType outtype);

}  // namespace lockstep::convert
