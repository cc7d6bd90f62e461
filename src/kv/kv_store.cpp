// KvStore: allocates one K and one V tensor per KV-owning layer through the backend.
#include "kv/kv_store.h"

#include <algorithm>

#include "core/check.h"

namespace lockstep::backend {

KvStore::KvStore(Backend& backend, const model::ModelConfig& config, int n_seq, int n_ctx)
    : n_seq_(n_seq), n_ctx_(n_ctx), k_(config.n_layer), v_(config.n_layer) {
  CHECK(n_seq > 0 && n_ctx > 0);
  for (int il = 0; il < config.n_layer; ++il) {
    const auto& l = config.layers[il];
    if (!l.has_kv) continue;
    const int64_t width = static_cast<int64_t>(l.n_head_kv) * l.head_dim;
    k_[il] = backend.NewTensor(static_cast<int64_t>(n_seq) * n_ctx, width);
    v_[il] = backend.NewTensor(static_cast<int64_t>(n_seq) * n_ctx, width);
  }
}

Status KvStore::SharePrefix(int dst, int src, int n_pos) {
  if (dst == src || n_pos < 0 || n_pos > n_ctx_) return Status::Error("kv: bad prefix share");
  for (size_t il = 0; il < k_.size(); ++il) {
    if (k_[il].empty()) continue;
    for (Tensor* t : {&k_[il], &v_[il]})
      std::copy(t->row(row_index(src, 0)), t->row(row_index(src, n_pos)),
                t->row(row_index(dst, 0)));
  }
  return Status::Ok();
}

size_t KvStore::bytes() const {
  size_t b = 0;
  for (size_t i = 0; i < k_.size(); ++i)
    if (!k_[i].empty()) b += 2 * static_cast<size_t>(k_[i].rows() * k_[i].cols()) * sizeof(float);
  return b;
}

}  // namespace lockstep::backend
