// The assistant drafter forward: pre-projection of [target embedding; backbone hidden], Q-only
// decoder layers over the target's KV cache, output norm, dense or centroid head, and the
// post-projection back to the target width. Matches transformers' Gemma4AssistantForCausalLM.
#include "model/assistant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "model/forward_impl.h"
#include "sample/sampler.h"

namespace lockstep::model {
namespace {

using backend::Tensor;

Status CheckLayers(const Model& target, const Model& drafter, std::vector<int>* kv_layer) {
  const ModelConfig& tc = target.config();
  const ModelConfig& dc = drafter.config();
  for (int il = 0; il < dc.n_layer; ++il) {
    const LayerConfig& l = dc.layers[il];
    const char* type = l.sliding ? "sliding" : "full";
    if (l.moe || dc.n_embd_per_layer > 0)
      return Status::Errorf(
          "{}: drafter layer {} has experts or per-layer inputs; an assistant "
          "layer is a plain dense decoder layer",
          drafter.file().path(), il);
    const int t = tc.last_kv_layer(l.sliding);
    if (t < 0)
      return Status::Errorf("{}: drafter layer {} is {} but target {} has no KV-owning {} layer",
                            drafter.file().path(), il, type, target.file().path(), type);
    const LayerConfig& tl = tc.layers[t];
    if (tl.head_dim != l.head_dim || tl.n_head_kv != l.n_head_kv)
      return Status::Errorf(
          "{}: drafter layer {} ({}) expects {} kv heads of dim {}, but target "
          "{} layer {} caches {} kv heads of dim {}",
          drafter.file().path(), il, type, l.n_head_kv, l.head_dim, target.file().path(), t,
          tl.n_head_kv, tl.head_dim);
    kv_layer->push_back(t);
  }
  return Status::Ok();
}

// The centroid head's token ordering, read from the file (it is an index table, not a weight
// the backend computes with) and checked: every id must be a vocabulary id.
Expected<std::vector<int32_t>> ReadOrdering(const Model& drafter) {
  const ModelConfig& dc = drafter.config();
  const std::string& path = drafter.file().path();
  if (dc.n_centroids <= 0 || dc.n_vocab % dc.n_centroids != 0)
    return Status::Errorf("{}: num_centroids {} does not divide the vocabulary of {}", path,
                          dc.n_centroids, dc.n_vocab);
  if (dc.centroid_top_k <= 0 || dc.centroid_top_k > dc.n_centroids)
    return Status::Errorf("{}: centroid_top_k {} outside [1, num_centroids = {}]", path,
                          dc.centroid_top_k, dc.n_centroids);
  const gguf::TensorInfo* t = drafter.file().FindTensor("masked_embd_ordering");
  if (!t || t->type != DType::I32 || t->ne.size() != 1 || t->ne[0] != dc.n_vocab)
    return Status::Errorf("{}: tensor 'masked_embd_ordering' missing or not I32 {{{}}}", path,
                          dc.n_vocab);
  std::vector<int32_t> ids(static_cast<size_t>(dc.n_vocab));
  std::memcpy(ids.data(), drafter.file().TensorData(*t), ids.size() * sizeof(int32_t));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= dc.n_vocab)
      return Status::Errorf("{}: masked_embd_ordering[{}] = {} is not a token id (vocabulary {})",
                            path, i, ids[i], dc.n_vocab);
  return ids;
}

}  // namespace

Expected<std::unique_ptr<Assistant>> Assistant::Pair(const Model& target, const Model& drafter) {
  const ModelConfig& tc = target.config();
  const ModelConfig& dc = drafter.config();
  const std::string& tp = target.file().path();
  const std::string& dp = drafter.file().path();
  if (!dc.is_assistant())
    return Status::Errorf(
        "{}: general.architecture is '{}'; a drafter must be "
        "'gemma4-assistant'",
        dp, dc.arch);
  if (tc.is_assistant())
    return Status::Errorf("{}: the target is itself a 'gemma4-assistant' drafter", tp);
  if (dc.n_embd_backbone != tc.n_embd)
    return Status::Errorf(
        "{}: embedding_length_out (backbone width) is {}, but target {} has "
        "embedding_length {}",
        dp, dc.n_embd_backbone, tp, tc.n_embd);
  if (dc.n_vocab != tc.n_vocab)
    return Status::Errorf("{}: vocabulary of {} tokens, but target {} has {}", dp, dc.n_vocab, tp,
                          tc.n_vocab);
  std::unique_ptr<Assistant> a(new Assistant(target, drafter));
  LS_RETURN_IF_ERROR(CheckLayers(target, drafter, &a->kv_layer_));
  if (dc.ordered_embeddings) {
    LS_ASSIGN_OR_RETURN(a->ordering_, ReadOrdering(drafter));
  }
  a->layer_config_ = dc;
  // transformers' drafter mask reads the n_swa + 1 cached keys ending at pos - 1 on sliding
  // layers (testdata/parity/*_draft/meta.json, visible_kv_positions). Attention without the
  // query's own key reads (pos - window, pos - 1], so the window is n_swa + 2.
  if (dc.n_swa > 0) a->layer_config_.n_swa = dc.n_swa + 2;
  return a;
}

Workspace Assistant::NewWorkspace(int max_rows) const {
  return Workspace(drafter_.backend(), drafter_.config(), max_rows, max_rows);
}

Status Assistant::CheckRows(const Batch& batch, const kv::KvCache& kv) const {
  const ModelConfig& dc = drafter_.config();
  const int n = batch.size();
  if (n == 0) return Status::Error("draft: empty batch");
  if (static_cast<int>(batch.out_rows.size()) != n)
    return Status::Errorf("draft: {} rows but {} outputs (every draft row is an output)", n,
                          batch.out_rows.size());
  for (int r = 0; r < n; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= dc.n_vocab)
      return Status::Errorf("draft: token id {} outside vocabulary of {}", batch.tokens[r],
                            dc.n_vocab);
    // At least one cached key (pos >= 1); positions up to n_ctx read keys inside the cache.
    if (batch.pos[r] < 1 || batch.pos[r] > kv.n_ctx())
      return Status::Errorf("draft: position {} outside [1, {}]", batch.pos[r], kv.n_ctx());
    if (batch.seq[r] < 0 || batch.seq[r] >= kv.n_seq())
      return Status::Errorf("draft: sequence slot {} outside {} slots", batch.seq[r], kv.n_seq());
  }
  for (int t : kv_layer_)
    if (!kv.has_layer(t)) return Status::Errorf("draft: the KV cache has no layer {}", t);
  // A sliding ring keeps a bounded number of keys; the drafter's window must fit in it.
  if (kv.ring() > 0 && kv.ring() < kv.n_ctx() && layer_config_.n_swa > kv.ring())
    return Status::Errorf("draft: sliding window of {} keys exceeds the cache's ring of {}",
                          layer_config_.n_swa, kv.ring());
  return Status::Ok();
}

Status Assistant::Step(const Batch& batch, const kv::KvCache& kv, Workspace& ws, DraftOutputs* out,
                       const TensorObserver* obs) const {
  LS_RETURN_IF_ERROR(CheckRows(batch, kv));
  const ModelConfig& dc = drafter_.config();
  const int64_t bb = n_bb();
  ws.Upload(batch);
  const StepInputs& in = ws.in;
  Activations& a = ws.act;
  const int n = in.n_rows;
  backend::Backend& be = drafter_.backend();
  const ModelWeights& w = drafter_.weights();
  LayerCtx ctx{be, layer_config_, w, a, in.rows(), obs, n};
  Tensor emb = ctx.View(a.draft_emb, bb), h_in = ctx.View(a.draft_h, bb);
  Tensor inp = ctx.View(a.draft_inp, 2 * bb);
  // The TARGET's embedding table, scaled by sqrt of the target width (Gemma's scaled embedding).
  be.GetRows(target_.weights().token_embd, in.tokens.first(n), std::sqrt(static_cast<float>(bb)),
             &emb);
  be.Concat(emb, h_in, &inp);
  ctx.Emit(-1, "draft_inp", inp);
  Tensor x = ctx.View(a.draft_x, dc.n_embd);
  be.MatMul(w.nextn_pre_projection, inp, &x);
  for (int il = 0; il < dc.n_layer; ++il) {
    LayerKv lkv{&kv, kv_layer_[static_cast<size_t>(il)], /*write=*/false, /*include_self=*/false};
    Tensor y = ctx.View(a.layer_io[il % 2], dc.n_embd);
    DecoderLayer(ctx, il, x, lkv, nullptr, &y);
    x = y;
  }
  Tensor hn = ctx.View(a.result_norm, dc.n_embd);
  be.RmsNorm(x, &w.output_norm, dc.rms_eps, dc.n_embd, 1.0f, &hn);
  ctx.Emit(-1, "result_norm", hn);

  Tensor logits = ctx.View(a.logits, dc.n_vocab);
  if (dc.ordered_embeddings) {
    CentroidHead(ws, hn, &logits, obs);
  } else {  // no final softcap on the drafter (transformers and llama.cpp agree)
    be.MatMul(dc.tied_output ? w.token_embd : w.output, hn, &logits);
  }
  Tensor h_next = ctx.View(a.draft_h_next, bb);
  be.MatMul(w.nextn_post_projection, hn, &h_next);
  ctx.Emit(-1, "draft_h", h_next);
  out->logits = logits;
  out->h_next = h_next;
  out->n = n;
  return Status::Ok();
}

Status Assistant::Step(const DraftRows& in, const kv::KvCache& kv, DraftResult* out,
                       const TensorObserver* obs) const {
  const int n = static_cast<int>(in.tokens.size());
  const int64_t bb = n_bb();
  if (in.h.size() != static_cast<size_t>(n * bb) || in.pos.size() != static_cast<size_t>(n) ||
      in.seq.size() != static_cast<size_t>(n))
    return Status::Errorf("draft: {} rows but {} hidden values, {} positions, {} slots", n,
                          in.h.size(), in.pos.size(), in.seq.size());
  Batch batch;
  for (int r = 0; r < n; ++r) batch.Add(in.tokens[r], in.pos[r], in.seq[r], true);
  Workspace ws = NewWorkspace(std::max(1, n));
  if (n > 0) {
    Tensor h_in = ws.act.draft_h.View(n, bb);
    drafter_.backend().FromHost(in.h, &h_in);
  }
  DraftOutputs step;
  LS_RETURN_IF_ERROR(Step(batch, kv, ws, &step, obs));
  out->n_vocab = drafter_.config().n_vocab;
  out->n_bb = static_cast<int>(bb);
  drafter_.backend().ToHost(step.logits, &out->logits);
  drafter_.backend().ToHost(step.h_next, &out->h_next);
  return Status::Ok();
}

// Scores only the tokens of the top-k centroids: centroid logits, top-k clusters (ties to the
// lower cluster id), their token ids from the ordering table, a row-restricted LM head. Other
// tokens get -inf, so a softmax (the draft probability) covers the candidates only.
// The top-k and the scatter run on the host for now (scratch kept in the workspace).
void Assistant::CentroidHead(Workspace& ws, const Tensor& hn, Tensor* logits,
                             const TensorObserver* obs) const {
  backend::Backend& be = drafter_.backend();
  const ModelConfig& dc = drafter_.config();
  const ModelWeights& w = drafter_.weights();
  const int rows = static_cast<int>(hn.rows());
  const int nc = dc.n_centroids, k = dc.centroid_top_k, per = dc.n_vocab / nc;
  const int64_t n_cand = static_cast<int64_t>(k) * per;
  Tensor cl = ws.act.centroid_logits.View(rows, nc);
  be.MatMul(w.centroids, hn, &cl);
  if (obs) (*obs)("centroid_logits", cl);
  std::vector<float>& c_host = ws.host_floats;
  be.ToHost(cl, &c_host);
  std::vector<int32_t>& ids = ws.host_ids;
  ids.resize(static_cast<size_t>(rows * n_cand));
  std::vector<int32_t>& order = ws.host_order;
  order.resize(static_cast<size_t>(nc));
  for (int r = 0; r < rows; ++r) {
    const float* c = c_host.data() + static_cast<size_t>(r) * nc;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [c](int32_t a, int32_t b) { return sample::RanksBefore(c, a, b); });
    int32_t* dst = ids.data() + r * n_cand;
    for (int j = 0; j < k; ++j)
      std::copy_n(ordering_.data() + static_cast<size_t>(order[j]) * per, per, dst + j * per);
  }
  be.Upload(ids, &ws.in.candidate_ids);
  Tensor cand = ws.act.draft_candidates.View(rows, n_cand);
  be.MatMulRows(dc.tied_output ? w.token_embd : w.output, hn,
                ws.in.candidate_ids.first(rows * n_cand), n_cand, &cand);
  std::vector<float>& cand_host = ws.host_floats;
  be.ToHost(cand, &cand_host);
  std::vector<float>& full = ws.host_logits;
  full.assign(static_cast<size_t>(rows) * dc.n_vocab, -std::numeric_limits<float>::infinity());
  for (int r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n_cand; ++i)
      full[static_cast<size_t>(r) * dc.n_vocab + ids[r * n_cand + i]] = cand_host[r * n_cand + i];
  be.FromHost(full, logits);
}

}  // namespace lockstep::model
