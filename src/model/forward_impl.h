// Pieces of the forward pass shared by the target and the assistant drafter.
#pragma once

#include <span>
#include <string_view>

#include <fmt/format.h>

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace lockstep::model {

struct LayerCtx {
  backend::Backend& be;
  const ModelConfig& c;
  const ModelWeights& w;
  backend::RowInfo rows;
  const TensorObserver* obs;
  int n;  // rows in the batch

  backend::Tensor New(int64_t cols) { return be.NewTensor(n, cols); }
  // Names are "blk.<il>.<what>" for layer tensors and "<what>" for global ones (il < 0).
  void Emit(int il, std::string_view what, const backend::Tensor& t) {
    if (!obs) return;
    if (il < 0) (*obs)(what, t);
    else (*obs)(fmt::format("blk.{}.{}", il, what), t);
  }
};

// Which cache a layer attends over, and whether it writes its own rows there first.
struct LayerKv {
  const kv::KvCache* store;
  int layer;
  bool write;         // compute this layer's K/V and store them before attending
  bool include_self;  // the query's own position is in the cache (false for a drafter)
};

backend::Tensor DecoderLayer(LayerCtx& ctx, int il, const backend::Tensor& x, const LayerKv& kv,
                             const backend::Tensor* per_layer);
void OutputHead(LayerCtx& ctx, const backend::Tensor& x, std::span<const int32_t> out_rows,
                ForwardResult* out, bool want_hidden);

}  // namespace lockstep::model
