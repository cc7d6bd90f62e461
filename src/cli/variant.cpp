// Gemma 4 variants by shape: (layers, width, per-layer embeddings, experts) as released
// (../shared/spec/gemma4-arch.md's table; llama.cpp also keys its type names on the layer count).
#include "cli/variant.h"

#include <fmt/format.h>

namespace lockstep::cli {
namespace {

struct Shape {
  const char* name;
  int n_layer, n_embd;
  bool per_layer_embeddings, experts;
};

constexpr Shape kReleased[] = {
    {"E2B", 35, 1536, true, false},  {"E4B", 42, 2560, true, false},
    {"12B", 48, 3840, false, false}, {"26B-A4B", 30, 2816, false, true},
    {"31B", 60, 5376, false, false},
};

}  // namespace

std::string VariantName(const model::ModelConfig& c) {
  if (c.is_assistant()) return "assistant (MTP drafter)";
  const bool ple = c.n_embd_per_layer > 0, moe = c.n_expert > 0;
  for (const Shape& s : kReleased)
    if (s.n_layer == c.n_layer && s.n_embd == c.n_embd && s.per_layer_embeddings == ple &&
        s.experts == moe)
      return s.name;
  return fmt::format("unknown {}{}, {} layers x {}", moe ? "MoE" : "dense",
                     ple ? " with per-layer embeddings" : "", c.n_layer, c.n_embd);
}

}  // namespace lockstep::cli
