// The Gemma 4 assistant (MTP drafter) forward pass, bound to the target whose KV cache it reads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace lockstep::model {

// One draft step's inputs, one row per drafting sequence.
struct DraftRows {
  std::span<const int32_t> tokens;  // token whose successor is drafted (not in the target KV)
  std::span<const float> h;         // [rows, n_embd_backbone]: target hidden, or previous h_next
  std::span<const int32_t> pos;     // position of `tokens` (RoPE); keys read are those < pos
  std::span<const int32_t> seq;     // target KV sequence slot
};

// A draft step's outputs in backend memory (views into the workspace, valid until its next step).
struct DraftOutputs {
  backend::Tensor logits;  // [n, n_vocab]; centroid head: non-candidates are -inf
  backend::Tensor h_next;  // [n, n_bb]
  int n = 0;
};

// Host copies of a draft step's outputs (tests and tools).
struct DraftResult {
  int n_vocab = 0;
  int n_bb = 0;
  std::vector<float> logits;  // [rows, n_vocab]; centroid head: non-candidates are -inf
  std::vector<float> h_next;  // [rows, n_bb]: post_projection(output_norm(x))
  const float* logits_row(size_t i) const { return logits.data() + i * n_vocab; }
  const float* h_row(size_t i) const { return h_next.data() + i * n_bb; }
};

// A drafter paired with its target. The pair is checked once (widths, vocabulary, the KV
// layers each drafter layer reads) so a step can run without further validation.
class Assistant {
 public:
  // Errors name both files and the mismatching field.
  static Expected<std::unique_ptr<Assistant>> Pair(const Model& target, const Model& drafter);

  const Model& target() const { return target_; }
  const Model& drafter() const { return drafter_; }
  int n_bb() const { return target_.config().n_embd; }
  // Target layer whose cache drafter layer `il` attends over.
  int kv_layer(int il) const { return kv_layer_[static_cast<size_t>(il)]; }

  // A workspace for the drafter: `max_rows` drafting sequences per step.
  Workspace NewWorkspace(int max_rows) const;

  // One drafter forward over the batch's rows (tokens whose successor is drafted, their
  // positions and target KV slots; every row is an output). The backbone hidden state of each
  // row must already be in ws.act.draft_h (rows 0..n-1). Reads (never writes) `target_kv`.
  // Intermediates are reported to `obs` as draft_inp, blk.<il>.*, result_norm, centroid_logits,
  // result_output, draft_h.
  Status Step(const Batch& batch, const kv::KvCache& target_kv, Workspace& ws, DraftOutputs* out,
              const TensorObserver* obs = nullptr) const;
  // The same from host rows, with the outputs copied to the host (tests and tools).
  Status Step(const DraftRows& in, const kv::KvCache& target_kv, DraftResult* out,
              const TensorObserver* obs = nullptr) const;

 private:
  Assistant(const Model& target, const Model& drafter) : target_(target), drafter_(drafter) {}
  Status CheckRows(const Batch& batch, const kv::KvCache& kv) const;
  void CentroidHead(Workspace& ws, const backend::Tensor& hn, backend::Tensor* logits,
                    const TensorObserver* obs) const;

  const Model& target_;
  const Model& drafter_;
  ModelConfig layer_config_;       // the drafter's config with the drafter's SWA key window
  std::vector<int> kv_layer_;      // per drafter layer
  std::vector<int32_t> ordering_;  // centroid head: [n_centroids, n_vocab / n_centroids] ids
};

}  // namespace lockstep::model
