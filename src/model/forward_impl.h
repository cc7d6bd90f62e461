// Pieces of the forward pass shared by the target and the assistant drafter.
#pragma once

#include <span>
#include <string_view>

#include <fmt/format.h>

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/workspace.h"

namespace lockstep::model {

struct LayerCtx {
  backend::Backend& be;
  const ModelConfig& c;
  const ModelWeights& w;
  Activations& act;
  backend::RowInfo rows;
  const TensorObserver* obs;
  int n;  // rows in the batch

  // The step's view of a workspace buffer: n rows of `cols` values.
  backend::Tensor View(const backend::Tensor& buf, int64_t cols) const { return buf.View(n, cols); }
  // Names are "blk.<il>.<what>" for layer tensors and "<what>" for global ones (il < 0).
  void Emit(int il, std::string_view what, const backend::Tensor& t) {
    if (!obs) return;
    if (il < 0)
      (*obs)(what, t);
    else
      (*obs)(fmt::format("blk.{}.{}", il, what), t);
  }
};

// Which cache a layer attends over, and whether it writes its own rows there first.
struct LayerKv {
  const kv::KvCache* store;
  int layer;
  bool write;         // compute this layer's K/V and store them before attending
  bool include_self;  // the query's own position is in the cache (false for a drafter)
};

// One decoder layer from `x` into `out` (distinct buffers).
void DecoderLayer(LayerCtx& ctx, int il, const backend::Tensor& x, const LayerKv& kv,
                  const backend::Tensor* per_layer, backend::Tensor* out);
// Sets `out` to the workspace views the output head fills (by the output-row count).
void OutputViews(const Activations& a, const ModelConfig& c, const StepInputs& in,
                 StepOutputs* out);
// Final norm of every row, then the output rows' hidden states and logits (softcapped) into the
// views OutputViews set.
void OutputHead(LayerCtx& ctx, const backend::Tensor& x, const StepInputs& in,
                const StepOutputs& out);

}  // namespace lockstep::model
