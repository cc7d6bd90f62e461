// A loaded Gemma 4 model (target or assistant drafter) and its forward pass.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace lockstep::model {

// Called with every named intermediate tensor (all batch rows) as the forward pass runs.
using TensorObserver = std::function<void(std::string_view name, const backend::Tensor& t)>;

// A forward's outputs, left in backend memory: views into the workspace, valid until the
// workspace's next forward. Only what the caller asks for crosses to the host.
struct StepOutputs {
  backend::Tensor logits;  // [n_out, n_vocab]
  backend::Tensor hidden;  // [n_out, n_embd]: post-final-norm state of each output row
  int n_out = 0;
};

// Host copies of a forward's outputs (tests and tools).
struct ForwardResult {
  std::vector<int32_t> rows;  // batch row of each output row
  int n_vocab = 0;
  int n_embd = 0;
  std::vector<float> logits;  // [rows.size(), n_vocab]
  std::vector<float> hidden;  // [rows.size(), n_embd]: post-final-norm state (drafter input)
  const float* logits_row(size_t i) const { return logits.data() + i * n_vocab; }
  const float* hidden_row(size_t i) const { return hidden.data() + i * n_embd; }
};

struct ForwardOptions {
  bool want_hidden = false;
  const TensorObserver* observer = nullptr;
};

// The cache layout a model of this config needs (Model::KvConfig; `inspect` uses it without
// loading weights).
kv::CacheConfig KvConfigFor(const ModelConfig& config, int n_seq, int n_ctx);

class Model {
 public:
  // Opens and validates the file, reads the config and binds the weights.
  static Expected<std::unique_ptr<Model>> Load(const std::string& path, backend::Backend& be);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::File& file() const { return *file_; }
  backend::Backend& backend() const { return *backend_; }
  // The cache layout this model needs: one shape per layer (KV-sharing layers uncached), V as
  // wide as K, sliding rings keeping n_swa + 2 keys (the drafter's reach) below each step.
  kv::CacheConfig KvConfig(int n_seq, int n_ctx) const;
  // A cache of KvConfig(n_seq, n_ctx) where one sequence writes at most max_step_rows rows per
  // Forward (the prefill chunk, or draft_max + 1 for speculative verify).
  Expected<std::unique_ptr<kv::KvCache>> NewKv(int n_seq, int n_ctx, int max_step_rows = 256,
                                               DType type_k = DType::F32,
                                               DType type_v = DType::F32) const;

  // Target forward: makes the batch rows' positions writable in `kv` (PrepareWrite), uploads
  // the batch into `ws`, writes the rows' K/V and leaves the output rows' logits and hidden
  // states in `ws`. Allocates nothing. Errors on ids, positions or slots outside the vocabulary
  // or the cache, or a cache that cannot take the step.
  Status Forward(const Batch& batch, kv::KvCache& kv, Workspace& ws, StepOutputs* out,
                 const TensorObserver* obs = nullptr) const;
  // The same through a workspace made for the call, with the outputs copied to the host
  // (tests and tools; the engine keeps one workspace and never copies logits).
  Status Forward(const Batch& batch, kv::KvCache& kv, ForwardResult* out,
                 const ForwardOptions& opt = {}) const;

 private:
  Model() = default;
  std::unique_ptr<gguf::File> file_;
  ModelConfig config_;
  ModelWeights weights_;
  backend::Backend* backend_ = nullptr;
};

}  // namespace lockstep::model
