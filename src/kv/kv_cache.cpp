// KvCache: block pool, block tables, refcounts and rings, all sized once at creation so the
// per-step calls (PrepareWrite, Truncate, Release) never touch the heap.
#include "kv/kv_cache.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/check.h"

namespace lockstep::kv {
namespace {

size_t ElemBytes(DType t) {
  return t == DType::F32 ? sizeof(float) : sizeof(uint16_t);
}
bool CacheType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
int CeilDiv(int a, int b) {
  return (a + b - 1) / b;
}

size_t RowBytes(const LayerShape& l, const CacheConfig& c) {
  return static_cast<size_t>(l.k_width) * ElemBytes(c.type_k) +
         static_cast<size_t>(l.v_width) * ElemBytes(c.type_v);
}

}  // namespace

Expected<DType> ParseCacheType(std::string_view name) {
  std::string lower(name);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "f32") return DType::F32;
  if (lower == "f16") return DType::F16;
  if (lower == "bf16") return DType::BF16;
  return Status::Errorf("unknown KV cache type '{}' (accepted: f32, f16, bf16)", name);
}

// llama.cpp's cache sizes, from its sources (read for the facts, nothing copied):
//  - src/llama-context.cpp pads the context: n_ctx = GGML_PAD(n_ctx, 256); with one sequence
//    that is the cell count of the non-SWA cache (src/llama-kv-cache-iswa.cpp: size_base).
//  - src/llama-kv-cache-iswa.cpp sizes the SWA cache as
//    GGML_PAD(min(size_base, n_swa * n_seq + n_ubatch), 256) cells ("always padded to 256").
//  - src/llama-kv-cache.cpp stores K and V for every layer that has its own KV (KV-sharing
//    layers have none), each cell n_embd_k_gqa / n_embd_v_gqa elements of type_k / type_v; V
//    is stored even where the model has K = V.
size_t LlamaCppBytesPerSequence(const CacheConfig& c, int n_ctx, int n_swa, int n_ubatch) {
  const auto pad = [](size_t x) { return (x + 255) / 256 * 256; };
  const size_t base = pad(static_cast<size_t>(n_ctx));
  const size_t swa = pad(std::min(base, static_cast<size_t>(n_swa) + n_ubatch));
  size_t b = 0;
  for (const LayerShape& l : c.layers)
    if (l.cached) b += RowBytes(l, c) * (l.sliding ? swa : base);
  return b;
}

// Why the ring is big enough. A slot's ring row for position p is p % ring, so it holds p until
// a write at p + ring. Every step of a sequence writes at most max_step_rows positions
// [from, to) and reads keys no lower than from - sliding_keep (a target query at `from` reads
// n_swa - 1 keys below it; a drafter at pos == from reads n_swa + 1 keys ending at from - 1).
// The highest position ever written, hi, may exceed `from` after a rollback: speculative
// verify writes K + 1 rows [p, p + K], keeps a prefix, and the next step starts at some
// from in (p, p + K] with the rejected rows still in the ring. Those stale rows came from one
// step, so hi <= from - 1 + max_step_rows, and after this step hi' <= from + max_step_rows.
// Rows still intact are those >= hi' - ring >= from + max_step_rows - ring = from -
// sliding_keep: exactly what the step reads. PrepareWrite checks this inequality each step, so
// a caller that rolls back further than one step gets an error instead of wrong keys.
int KvCache::RingSize(const CacheConfig& c, int n_ctx) {
  if (c.sliding_keep <= 0) return n_ctx;  // no window known: keep every position
  return std::min(n_ctx, c.sliding_keep + c.max_step_rows);
}

size_t KvCache::BytesPerSequence(const CacheConfig& c, int n_ctx) {
  const size_t full = static_cast<size_t>(CeilDiv(n_ctx, std::max(1, c.block))) *
                      static_cast<size_t>(std::max(1, c.block));
  const size_t ring = static_cast<size_t>(RingSize(c, n_ctx));
  size_t b = 0;
  for (const LayerShape& l : c.layers)
    if (l.cached) b += RowBytes(l, c) * (l.sliding ? ring : full);
  return b;
}

Expected<std::unique_ptr<KvCache>> KvCache::Create(backend::Backend& be, const CacheConfig& c) {
  if (c.n_seq_max < 1 || c.n_ctx < 1)
    return Status::Errorf("kv cache: {} slots of {} positions (need at least one of each)",
                          c.n_seq_max, c.n_ctx);
  if (c.block < 1 || c.max_step_rows < 1 || c.sliding_keep < 0 || c.n_blocks < 0)
    return Status::Errorf(
        "kv cache: block {}, max_step_rows {}, sliding_keep {}, n_blocks {} out of range", c.block,
        c.max_step_rows, c.sliding_keep, c.n_blocks);
  if (!CacheType(c.type_k) || !CacheType(c.type_v))
    return Status::Errorf("kv cache: element types {}/{}; accepted: f32, f16, bf16", Name(c.type_k),
                          Name(c.type_v));
  for (size_t il = 0; il < c.layers.size(); ++il)
    if (c.layers[il].cached && (c.layers[il].k_width <= 0 || c.layers[il].v_width <= 0))
      return Status::Errorf("kv cache: layer {} is cached with widths {}/{}", il,
                            c.layers[il].k_width, c.layers[il].v_width);
  return std::unique_ptr<KvCache>(new KvCache(be, c));
}

KvCache::KvCache(backend::Backend& be, const CacheConfig& c)
    : be_(be), config_(c), storage_(c.layers.size()) {
  stride_ = CeilDiv(c.n_ctx, c.block);
  const int n_seq = c.n_seq_max;
  bool any_sliding = false;
  for (const LayerShape& l : c.layers) {
    paged_ |= l.cached && !l.sliding;
    any_sliding |= l.cached && l.sliding;
  }
  ring_ = any_sliding ? RingSize(c, c.n_ctx) : 0;
  n_blocks_ = paged_ ? (c.n_blocks > 0 ? c.n_blocks : n_seq * stride_) : 0;
  for (size_t il = 0; il < c.layers.size(); ++il) {
    const LayerShape& l = c.layers[il];
    if (!l.cached) continue;
    const size_t rows =
        l.sliding ? static_cast<size_t>(n_seq) * ring_ : static_cast<size_t>(n_blocks_) * c.block;
    const size_t kb = rows * static_cast<size_t>(l.k_width) * ElemBytes(c.type_k);
    const size_t vb = rows * static_cast<size_t>(l.v_width) * ElemBytes(c.type_v);
    storage_[il] = {be.NewBuffer(kb), be.NewBuffer(vb)};
    bytes_ += kb + vb;
  }
  table_.assign(static_cast<size_t>(n_seq) * stride_, -1);
  table_dev_ = be.NewIntTensor(static_cast<int64_t>(table_.size()));
  refs_.assign(static_cast<size_t>(n_blocks_), 0);
  free_.reserve(static_cast<size_t>(n_blocks_));
  for (int b = n_blocks_ - 1; b >= 0; --b) free_.push_back(b);  // pops hand out 0, 1, 2, ...
  len_.assign(static_cast<size_t>(n_seq), 0);
  ring_hi_.assign(static_cast<size_t>(n_seq), 0);
  ring_lo_.assign(static_cast<size_t>(n_seq), 0);
}

Status KvCache::CheckSlot(int seq, const char* what) const {
  if (seq < 0 || seq >= config_.n_seq_max)
    return Status::Errorf("kv cache: {} slot {} outside {} slots", what, seq, config_.n_seq_max);
  return Status::Ok();
}

int KvCache::length(int seq) const {
  CHECK(seq >= 0 && seq < config_.n_seq_max);
  return len_[static_cast<size_t>(seq)];
}

int KvCache::RingLow(int seq) const {
  const size_t s = static_cast<size_t>(seq);
  return std::max({0, ring_lo_[s], ring_hi_[s] - ring_});
}

Status KvCache::PrepareWrite(int seq, int from, int to) {
  LS_RETURN_IF_ERROR(CheckSlot(seq, "write"));
  if (from < 0 || from >= to || to > config_.n_ctx)
    return Status::Errorf("kv cache: write of positions [{}, {}) outside the context of {}", from,
                          to, config_.n_ctx);
  const size_t s = static_cast<size_t>(seq);
  const bool wraps = ring_ > 0 && ring_ < config_.n_ctx;
  if (wraps) {
    if (to - from > config_.max_step_rows)
      return Status::Errorf("kv cache: one step writes {} rows of slot {}, above max_step_rows {}",
                            to - from, seq, config_.max_step_rows);
    const int need_lo = std::max(0, from - config_.sliding_keep);
    if (from > 0 && need_lo < RingLow(seq))
      return Status::Errorf(
          "kv cache: slot {} writes from {} but its sliding ring holds positions from {} only "
          "(rolled back further than one step?)",
          seq, from, RingLow(seq));
  }
  const int nb = paged_ ? CeilDiv(to, config_.block) : 0;
  const int first_written = from / config_.block;
  int needed = 0;
  for (int b = 0; b < nb; ++b) {
    const int32_t id = entry(seq, b);
    if (id < 0 || (b >= first_written && refs_[static_cast<size_t>(id)] > 1)) ++needed;
  }
  if (needed > free_blocks())
    return Status::Errorf("kv cache: slot {} needs {} more blocks of {} positions, {} free of {}",
                          seq, needed, config_.block, free_blocks(), n_blocks_);
  for (int b = 0; b < nb; ++b) {
    int32_t& id = entry(seq, b);
    if (id >= 0 && (b < first_written || refs_[static_cast<size_t>(id)] == 1)) continue;
    const int32_t fresh = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(fresh)] = 1;
    if (id >= 0) {  // shared block about to be written: this slot gets its own copy
      CopyBlock(fresh, id);
      Unref(id);
    }
    id = fresh;
  }
  if (from == 0) ring_lo_[s] = 0;
  ring_hi_[s] = std::max(ring_hi_[s], to);
  len_[s] = std::max(len_[s], to);
  return Status::Ok();
}

void KvCache::Truncate(int seq, int n_pos) {
  CHECK(seq >= 0 && seq < config_.n_seq_max && n_pos >= 0);
  const size_t s = static_cast<size_t>(seq);
  if (n_pos == 0) ring_hi_[s] = ring_lo_[s] = 0;  // nothing left to protect in the ring
  if (n_pos >= len_[s]) return;
  if (paged_)
    for (int b = CeilDiv(n_pos, config_.block); b < stride_; ++b) {
      int32_t& id = entry(seq, b);
      if (id >= 0) Unref(id);
      id = -1;
    }
  // The ring keeps ring_hi_: rows past n_pos are stale but still overwrote older positions.
  len_[s] = n_pos;
}

void KvCache::Release(int seq) {
  Truncate(seq, 0);
}

Status KvCache::SharePrefix(int dst, int src, int n_pos) {
  LS_RETURN_IF_ERROR(CheckSlot(dst, "share destination"));
  LS_RETURN_IF_ERROR(CheckSlot(src, "share source"));
  const size_t d = static_cast<size_t>(dst), s = static_cast<size_t>(src);
  if (dst == src) return Status::Errorf("kv cache: slot {} cannot share with itself", dst);
  if (len_[d] != 0 || ring_hi_[d] != 0)
    return Status::Errorf("kv cache: share destination slot {} is not empty", dst);
  if (n_pos <= 0 || n_pos > len_[s])
    return Status::Errorf("kv cache: slot {} holds {} positions; cannot share {}", src, len_[s],
                          n_pos);
  int copy_lo = 0;
  if (ring_ > 0) {
    // dst's next step reads keys down to n_pos - sliding_keep (all of them without a window).
    const int need_lo = config_.sliding_keep > 0 ? std::max(0, n_pos - config_.sliding_keep) : 0;
    if (need_lo < RingLow(src))
      return Status::Errorf(
          "kv cache: slot {}'s sliding ring holds positions from {}; sharing {} positions needs "
          "them from {}",
          src, RingLow(src), n_pos, need_lo);
    copy_lo = std::max(RingLow(src), n_pos - ring_);
  }
  for (size_t il = 0; il < storage_.size(); ++il) {
    const LayerShape& l = config_.layers[il];
    if (!l.cached || !l.sliding) continue;
    const size_t kr = static_cast<size_t>(l.k_width) * ElemBytes(config_.type_k);
    const size_t vr = static_cast<size_t>(l.v_width) * ElemBytes(config_.type_v);
    auto* k = static_cast<uint8_t*>(storage_[il].k.get());
    auto* v = static_cast<uint8_t*>(storage_[il].v.get());
    for (int p = copy_lo; p < n_pos; ++p) {  // same slot offset p % ring in both rings
      const size_t rd = static_cast<size_t>(dst) * ring_ + p % ring_;
      const size_t rs = static_cast<size_t>(src) * ring_ + p % ring_;
      be_.CopyBytes(k + rd * kr, k + rs * kr, kr);
      be_.CopyBytes(v + rd * vr, v + rs * vr, vr);
    }
  }
  if (paged_)
    for (int b = 0; b < CeilDiv(n_pos, config_.block); ++b) {
      const int32_t id = entry(src, b);
      CHECK(id >= 0);
      entry(dst, b) = id;
      ++refs_[static_cast<size_t>(id)];
    }
  ring_lo_[d] = copy_lo;
  ring_hi_[d] = n_pos;
  len_[d] = n_pos;
  return Status::Ok();
}

void KvCache::Unref(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  CHECK(r > 0);
  if (--r == 0) free_.push_back(block);  // capacity n_blocks_ was reserved: no allocation
}

void KvCache::CopyBlock(int32_t dst, int32_t src) {
  const size_t bl = static_cast<size_t>(config_.block);
  for (size_t il = 0; il < storage_.size(); ++il) {
    const LayerShape& l = config_.layers[il];
    if (!l.cached || l.sliding) continue;
    const size_t kb = bl * static_cast<size_t>(l.k_width) * ElemBytes(config_.type_k);
    const size_t vb = bl * static_cast<size_t>(l.v_width) * ElemBytes(config_.type_v);
    auto* k = static_cast<uint8_t*>(storage_[il].k.get());
    auto* v = static_cast<uint8_t*>(storage_[il].v.get());
    be_.CopyBytes(k + static_cast<size_t>(dst) * kb, k + static_cast<size_t>(src) * kb, kb);
    be_.CopyBytes(v + static_cast<size_t>(dst) * vb, v + static_cast<size_t>(src) * vb, vb);
  }
}

bool KvCache::has_layer(int layer) const {
  return layer >= 0 && static_cast<size_t>(layer) < storage_.size() &&
         storage_[static_cast<size_t>(layer)].k != nullptr;
}

void KvCache::SyncTable() const {
  if (!table_dirty_) return;
  be_.Upload(table_, &table_dev_);
  table_dirty_ = false;
}

uint64_t KvCache::AddressKey() const {
  // FNV-1a over the addresses and the few values that shape every view.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const Storage& s : storage_) {
    mix(reinterpret_cast<uintptr_t>(s.k.get()));
    mix(reinterpret_cast<uintptr_t>(s.v.get()));
  }
  mix(reinterpret_cast<uintptr_t>(table_dev_.data()));
  mix(static_cast<uint64_t>(config_.n_seq_max));
  mix(static_cast<uint64_t>(config_.n_ctx));
  mix(static_cast<uint64_t>(ring_));
  mix(static_cast<uint64_t>(stride_));
  return h;
}

backend::KvLayerView KvCache::View(int layer) const {
  CHECKF(has_layer(layer), "kv cache: layer {} has no cache", layer);
  const LayerShape& l = config_.layers[static_cast<size_t>(layer)];
  backend::KvLayerView v;
  v.k = storage_[static_cast<size_t>(layer)].k.get();
  v.v = storage_[static_cast<size_t>(layer)].v.get();
  v.type_k = config_.type_k;
  v.type_v = config_.type_v;
  v.k_width = l.k_width;
  v.v_width = l.v_width;
  if (l.sliding) {
    v.ring = ring_;
  } else {
    v.block = config_.block;
    SyncTable();
    v.table = table_dev_.data();
    v.table_stride = stride_;
  }
  v.n_seq = config_.n_seq_max;
  v.n_ctx = config_.n_ctx;
  return v;
}

}  // namespace lockstep::kv
