// The KV cache: paged, copy-on-write blocks for full-attention layers and a bounded per-slot
// ring for sliding-window layers, in backend memory, with F32/F16/BF16 elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_view.h"
#include "core/dtype.h"
#include "core/status.h"

namespace lockstep::kv {

// One model layer as the cache needs it (plain data: the cache knows nothing of model/).
struct LayerShape {
  bool cached = false;   // false for KV-sharing layers (they read another layer's cache)
  bool sliding = false;  // sliding-window layer: stored in a ring
  int64_t k_width = 0, v_width = 0;
};

struct CacheConfig {
  std::vector<LayerShape> layers;  // one per model layer
  int n_seq_max = 1;               // sequence slots
  int n_ctx = 0;                   // max positions per sequence
  // Keys a sliding-layer query may read below the lowest position written in its step
  // (n_swa + 2 covers the drafter, which reads n_swa + 1 keys ending at pos - 1). 0: sliding
  // layers keep every position (no window known).
  int sliding_keep = 0;
  int max_step_rows = 1;  // most rows one sequence writes in one step (prefill chunk, verify K+1)
  int block = 16;         // positions per paged block (full layers)
  DType type_k = DType::F32, type_v = DType::F32;  // F32, F16 or BF16
  int n_blocks = 0;  // paged blocks in the pool; 0 = n_seq_max * ceil(n_ctx / block)
};

// "f32", "f16", "bf16" (llama.cpp's --cache-type-k/v names for these types).
Expected<DType> ParseCacheType(std::string_view name);

// llama.cpp's KV memory for one sequence of the same layers and cache type, for comparison
// (`inspect`, memory estimates). `n_swa` is the model's window, `n_ubatch` llama.cpp's
// micro-batch (default 512).
size_t LlamaCppBytesPerSequence(const CacheConfig& c, int n_ctx, int n_swa, int n_ubatch = 512);

class KvCache {
 public:
  static Expected<std::unique_ptr<KvCache>> Create(backend::Backend& be, const CacheConfig& c);

  // Makes positions [from, to) of `seq` writable this step: allocates missing blocks for every
  // position below `to`, and gives the sequence its own copy of any shared block it is about to
  // write (copy-on-write). Errors (changing nothing) when the pool runs out, to > n_ctx, the
  // step writes more than max_step_rows into a ring, or the ring no longer holds the keys the
  // step reads. No heap allocation.
  Status PrepareWrite(int seq, int from, int to);
  // Rollback: positions >= n_pos are forgotten; whole blocks past it return to the pool.
  void Truncate(int seq, int n_pos);
  // Frees every block of the slot; the slot is empty again.
  void Release(int seq);
  // dst's positions [0, n_pos) become src's: paged blocks shared (refcounted, copy-on-write),
  // sliding rings copied row by row. Errors when src does not hold those positions (never
  // written, or its ring has advanced past them) or dst is not empty.
  Status SharePrefix(int dst, int src, int n_pos);

  backend::KvLayerView View(int layer) const;
  // Uploads the block table if it changed, so that View() queues no copy (a replayable forward
  // calls this first: a capture must not contain the upload).
  void SyncTable() const;
  // A hash of every device address View() can return (storage, table) and the shapes they are
  // read with: equal keys mean a captured forward may be replayed on this cache.
  uint64_t AddressKey() const;
  bool has_layer(int layer) const;
  int n_seq() const { return config_.n_seq_max; }
  int n_ctx() const { return config_.n_ctx; }
  int ring() const { return ring_; }       // positions per slot in a sliding ring
  int length(int seq) const;               // positions held: one past the highest live position
  size_t bytes() const { return bytes_; }  // allocated storage
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int total_blocks() const { return n_blocks_; }
  const CacheConfig& config() const { return config_; }

  // Bytes one sequence of n_ctx positions needs with this config (full layers:
  // ceil(n_ctx/block)*block positions; sliding layers: the ring), with no allocation.
  static size_t BytesPerSequence(const CacheConfig& c, int n_ctx);
  // The ring a config gives sliding layers at context n_ctx.
  static int RingSize(const CacheConfig& c, int n_ctx);

 private:
  struct Storage {
    std::shared_ptr<void> k, v;
  };
  KvCache(backend::Backend& be, const CacheConfig& c);
  int32_t& entry(int seq, int b) {
    table_dirty_ = true;
    return table_[static_cast<size_t>(seq) * stride_ + b];
  }
  int32_t entry(int seq, int b) const { return table_[static_cast<size_t>(seq) * stride_ + b]; }
  void Unref(int32_t block);
  void CopyBlock(int32_t dst, int32_t src);
  // Lowest position whose ring row still holds it (later writes overwrote the rows below).
  int RingLow(int seq) const;
  Status CheckSlot(int seq, const char* what) const;

  backend::Backend& be_;
  CacheConfig config_;
  int ring_ = 0;        // sliding ring positions per slot (0 when no sliding layer is cached)
  int stride_ = 0;      // block table entries per slot: ceil(n_ctx / block)
  int n_blocks_ = 0;    // pool size
  bool paged_ = false;  // some full layer is cached
  size_t bytes_ = 0;
  std::vector<Storage> storage_;  // per layer; empty when not cached
  std::vector<int32_t> table_;    // [n_seq_max, stride_] block ids, -1 = none
  // The table as backend ops read it (device memory on device backends), uploaded by View()
  // when the host table changed since the last upload.
  mutable backend::IntTensor table_dev_;
  mutable bool table_dirty_ = true;
  std::vector<int32_t> refs_;     // per block: slots whose table holds it
  std::vector<int32_t> free_;     // free block ids (a stack; capacity n_blocks_)
  std::vector<int32_t> len_;      // per slot: positions held
  // Per slot: one past the highest position written to the ring since it was emptied (stale
  // rows of a rolled-back step count: they overwrote older rows), and the lowest position the
  // ring was given (a copied prefix starts there).
  std::vector<int32_t> ring_hi_, ring_lo_;
};

}  // namespace lockstep::kv
