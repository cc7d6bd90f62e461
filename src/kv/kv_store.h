// KV cache storage: per KV-owning layer, K and V rows for every (sequence slot, position).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/config.h"

namespace lockstep::backend {

// Positions are absolute; a row at position p of slot s lives at row s * n_ctx + p, so
// attention reads keys in position order whatever batch wrote them. Rolling a sequence back is
// the caller forgetting positions: attention never reads past the query's own position, and
// the next write overwrites them.
class KvStore {
 public:
  KvStore(Backend& backend, const model::ModelConfig& config, int n_seq, int n_ctx);

  int n_seq() const { return n_seq_; }
  int n_ctx() const { return n_ctx_; }
  bool has_layer(int layer) const { return !k_[layer].empty(); }
  const Tensor& k(int layer) const { return k_[layer]; }
  const Tensor& v(int layer) const { return v_[layer]; }
  Tensor& k(int layer) { return k_[layer]; }
  Tensor& v(int layer) { return v_[layer]; }
  int64_t row_index(int seq, int pos) const { return static_cast<int64_t>(seq) * n_ctx_ + pos; }
  size_t bytes() const;
  // Slot bookkeeping (a contiguous store needs none: positions are overwritten as written).
  void Release(int) {}
  void Truncate(int, int) {}
  // dst's positions [0, n_pos) become a copy of src's.
  Status SharePrefix(int dst, int src, int n_pos);

 private:
  int n_seq_, n_ctx_;
  std::vector<Tensor> k_, v_;  // empty for layers without their own cache
};

}  // namespace lockstep::backend
