// Pieces shared by the plain and speculative generation loops: context sizing, chunked
// prefill, emitting a token, timing. The loops themselves stay separate on purpose: the plain
// loop is the reference the speculative one is tested against.
#pragma once

#include <chrono>
#include <span>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "spec/generate.h"

namespace lockstep::spec {

inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The context a run needs (opt.n_ctx, or prompt + n_predict + 1), or an error if too small.
Expected<int> ContextSize(std::span<const int32_t> prompt, const GenerateOptions& opt);

// Prefills `prompt` into slot 0 of `kv` in chunks of opt.prefill_chunk; `out` holds the last
// row's logits (and hidden state when `want_hidden`).
Status Prefill(const model::Model& target, std::span<const int32_t> prompt,
               const GenerateOptions& opt, bool want_hidden, kv::KvCache& kv,
               model::ForwardResult* out);

// Appends `tok`; true when generation must end (a stop token, or n_predict reached).
bool Emit(const GenerateOptions& opt, int32_t tok, GenerateResult* res);

}  // namespace lockstep::spec
