// The Gemma 4 forward pass, written once against backend ops. It reads top to bottom in the
// order of llama.cpp's graph and transformers' Gemma4TextDecoderLayer; every intermediate is
// named so dump and compare tools need no model changes.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "model/forward_impl.h"
#include "model/model.h"

namespace lockstep::model {

using backend::Tensor;

// The MLP (and, on MoE layers, the routed experts beside it) of one layer, normalized and added
// to the residual stream attn_out: out.
void FeedForward(LayerCtx& ctx, int il, const Tensor& attn_out, Tensor* out) {
  const LayerConfig& l = ctx.c.layers[il];
  const LayerWeights& w = ctx.w.layers[il];
  Activations& a = ctx.act;
  auto& be = ctx.be;
  const float eps = ctx.c.rms_eps;
  const int64_t d = ctx.c.n_embd;
  // The MLP's input; on MoE layers also the router's and the experts' (one op: one read of the
  // row). The router's is normalised without weight, times 1/sqrt(d) and the learned
  // per-channel scale.
  Tensor ffn_norm = ctx.View(a.ffn_norm, d), router_in, moe_in;
  backend::Backend::NormOut norms[3] = {{&w.ffn_norm, 1.0f, &ffn_norm}};
  size_t n_norms = 1;
  if (l.moe) {
    router_in = ctx.View(a.router_in, d);
    moe_in = ctx.View(a.moe_in, d);
    norms[n_norms++] = {&w.ffn_gate_inp_scale, 1.0f / std::sqrt(static_cast<float>(d)), &router_in};
    norms[n_norms++] = {&w.pre_ffw_norm_2, 1.0f, &moe_in};
  }
  be.RmsNorms(attn_out, eps, std::span(norms, n_norms));
  Tensor gate = ctx.View(a.ffn_gate, l.n_ff), up = ctx.View(a.ffn_up, l.n_ff);
  Tensor act = ctx.View(a.ffn_act, l.n_ff);
  const backend::Backend::MatMulOut gate_up[] = {{&w.ffn_gate, &gate}, {&w.ffn_up, &up}};
  be.MatMuls(ffn_norm, gate_up);
  be.GeluMul(gate, 0, up, 0, l.n_ff, &act);
  Tensor mlp = ctx.View(a.ffn_mlp, d);
  be.MatMul(w.ffn_down, act, &mlp);
  ctx.Emit(il, "ffn_mlp", mlp);
  if (!l.moe) {
    be.RmsNormAdd(mlp, &w.post_ffw_norm, eps, attn_out, out);
    return;
  }

  Tensor router_logits = ctx.View(a.router_logits, ctx.c.n_expert);
  be.MatMul(w.ffn_gate_inp, router_in, &router_logits);
  ctx.Emit(il, "ffn_moe_logits", router_logits);
  Tensor moe_out = ctx.View(a.moe_out, d);
  const bool fused = static_cast<bool>(w.ffn_gate_up_exps);
  be.MoeFfn(moe_in, router_logits, fused ? w.ffn_gate_up_exps : w.ffn_gate_exps,
            fused ? nullptr : &w.ffn_up_exps, w.ffn_down_exps,
            w.ffn_down_exps_scale ? &w.ffn_down_exps_scale : nullptr, ctx.c.n_expert_used,
            &moe_out);
  ctx.Emit(il, "ffn_moe_out", moe_out);
  // The shared MLP's and the routed experts' outputs, each normalised, summed, normalised.
  Tensor mlp_post = ctx.View(a.mlp_post_norm, d), sum = ctx.View(a.ffn_sum, d);
  Tensor* const work[2] = {&mlp_post, &sum};
  be.RmsNormSumNormAdd(mlp, &w.post_ffw_norm_1, moe_out, &w.post_ffw_norm_2, &w.post_ffw_norm, eps,
                       attn_out, work, out);
}

// Attention of one layer from the residual stream `x` into act.attn_out (residual added).
Tensor AttentionBlock(LayerCtx& ctx, int il, const Tensor& x, const LayerKv& kv) {
  const LayerConfig& l = ctx.c.layers[il];
  const LayerWeights& w = ctx.w.layers[il];
  Activations& a = ctx.act;
  auto& be = ctx.be;
  const float eps = ctx.c.rms_eps;
  const int64_t d = ctx.c.n_embd, q_width = static_cast<int64_t>(l.n_head) * l.head_dim;
  const backend::Weight* freqs = l.rope_freqs ? &ctx.w.rope_freqs : nullptr;

  Tensor attn_norm = ctx.View(a.attn_norm, d);
  be.RmsNorm(x, &w.attn_norm, eps, d, 1.0f, &attn_norm);
  ctx.Emit(il, "attn_norm", attn_norm);
  // Q, K and V read the same normalised input: one matmul op (K=V layers have no V weight;
  // KV-sharing layers project only Q).
  const int64_t kv_width = static_cast<int64_t>(l.n_head_kv) * l.head_dim;
  Tensor q = ctx.View(a.q, q_width), k, v;
  backend::Backend::MatMulOut qkv[3] = {{&w.attn_q, &q}};
  size_t n_qkv = 1;
  if (kv.write) {
    k = ctx.View(a.k, kv_width);
    v = ctx.View(a.v, kv_width);
    qkv[n_qkv++] = {&w.attn_k, &k};
    if (!l.v_from_k) qkv[n_qkv++] = {&w.attn_v, &v};
  }
  be.MatMuls(attn_norm, std::span(qkv, n_qkv));
  be.RmsNormRope(q, &w.attn_q_norm, eps, l.head_dim, ctx.rows.pos, l.n_rot, l.rope_base, freqs, &q);
  ctx.Emit(il, "q", q);
  if (kv.write) {
    if (l.v_from_k) be.CopyCols(k, 0, kv_width, &v);  // K=V layers: V is the raw K projection
    be.RmsNormRope(k, &w.attn_k_norm, eps, l.head_dim, ctx.rows.pos, l.n_rot, l.rope_base, freqs,
                   &k);
    be.RmsNorm(v, nullptr, eps, l.head_dim, 1.0f, &v);
    ctx.Emit(il, "k", k);
    ctx.Emit(il, "v", v);
    be.KvWrite(kv.store->View(kv.layer), k, v, ctx.rows);
  }
  Tensor attn = ctx.View(a.attn, q_width);
  be.Attention(q, kv.store->View(kv.layer), l.n_head, l.n_head_kv, l.head_dim,
               l.sliding ? ctx.c.n_swa : 0, kv.include_self, ctx.rows, &attn);
  ctx.Emit(il, "attn", attn);
  Tensor attn_proj = ctx.View(a.attn_proj, d);
  be.MatMul(w.attn_output, attn, &attn_proj);
  Tensor attn_out = ctx.View(a.attn_out, d);
  be.RmsNormAdd(attn_proj, &w.post_attention_norm, eps, x, &attn_out);
  ctx.Emit(il, "attn_out", attn_out);
  return attn_out;
}

void DecoderLayer(LayerCtx& ctx, int il, const Tensor& x, const LayerKv& kv,
                  const Tensor* per_layer, Tensor* out) {
  const LayerConfig& l = ctx.c.layers[il];
  const LayerWeights& w = ctx.w.layers[il];
  Activations& a = ctx.act;
  auto& be = ctx.be;
  const float eps = ctx.c.rms_eps;
  const int64_t d = ctx.c.n_embd;

  const Tensor attn_out = AttentionBlock(ctx, il, x, kv);
  FeedForward(ctx, il, attn_out, out);
  ctx.Emit(il, "ffn_out", *out);

  if (per_layer) {  // per-layer embeddings (E2B/E4B)
    const int64_t P = ctx.c.n_embd_per_layer;
    Tensor gate = ctx.View(a.ple_gate, P), slice = ctx.View(a.ple_slice, P);
    Tensor mixed = ctx.View(a.ple_mixed, P);
    be.MatMul(w.inp_gate, *out, &gate);
    be.Gelu(gate, &gate);
    be.CopyCols(*per_layer, il * P, P, &slice);
    be.Mul(gate, slice, &mixed);
    Tensor proj = ctx.View(a.ple_proj, d);
    be.MatMul(w.proj, mixed, &proj);
    be.RmsNorm(proj, &w.post_norm, eps, d, 1.0f, &proj);
    be.Add(*out, proj, out);
  }
  if (l.output_scale) be.ScaleByWeight(*out, w.layer_output_scale, out);
  ctx.Emit(il, "out", *out);
}

// Per-layer embedding inputs for all layers, [n, P * n_layer].
Tensor PerLayerInputs(LayerCtx& ctx, std::span<const int32_t> tokens, const Tensor& x) {
  auto& be = ctx.be;
  Activations& a = ctx.act;
  const int64_t P = ctx.c.n_embd_per_layer, PL = P * ctx.c.n_layer;
  Tensor tok = ctx.View(a.per_layer_tok, PL);
  be.GetRows(ctx.w.per_layer_token_embd, tokens, std::sqrt(static_cast<float>(P)), &tok);
  Tensor proj = ctx.View(a.per_layer_proj, PL);
  be.MatMul(ctx.w.per_layer_model_proj, x, &proj);
  be.Scale(proj, 1.0f / std::sqrt(static_cast<float>(ctx.c.n_embd)), &proj);
  be.RmsNorm(proj, &ctx.w.per_layer_proj_norm, ctx.c.rms_eps, P, 1.0f, &proj);
  Tensor inp = ctx.View(a.per_layer_inp, PL);
  be.Add(proj, tok, &inp);
  be.Scale(inp, 1.0f / std::sqrt(2.0f), &inp);
  ctx.Emit(-1, "inp_per_layer", inp);
  return inp;
}

// The step's outputs: views of the workspace fixed by the output-row count (none for a prefill
// chunk that does not end its prompt).
void OutputViews(const Activations& a, const ModelConfig& c, const StepInputs& in,
                 StepOutputs* out) {
  out->n_out = in.n_out;
  out->hidden = in.n_out == 0 ? Tensor() : a.out_hidden.View(in.n_out, c.n_embd);
  out->logits = in.n_out == 0 ? Tensor() : a.logits.View(in.n_out, c.n_vocab);
}

void OutputHead(LayerCtx& ctx, const Tensor& x, const StepInputs& in, const StepOutputs& out) {
  auto& be = ctx.be;
  Activations& a = ctx.act;
  const int64_t d = ctx.c.n_embd;
  Tensor norm = ctx.View(a.result_norm, d);
  be.RmsNorm(x, &ctx.w.output_norm, ctx.c.rms_eps, d, 1.0f, &norm);
  ctx.Emit(-1, "result_norm", norm);
  if (in.n_out == 0) return;
  Tensor hidden = out.hidden, logits = out.logits;
  be.GatherRows(norm, in.out_rows.first(in.n_out), &hidden);
  be.MatMul(ctx.c.tied_output ? ctx.w.token_embd : ctx.w.output, hidden, &logits);
  if (ctx.c.final_softcap > 0.0f) be.Softcap(logits, ctx.c.final_softcap, &logits);
  if (ctx.obs) (*ctx.obs)("result_output", logits);
}

namespace {

// What fixes every launch of a forward pass: the row and output counts and the cache's
// addresses (the workspace owns the replays, so its own addresses are fixed).
uint64_t StepKey(const StepInputs& in, const kv::KvCache& kv) {
  uint64_t h = kv.AddressKey();
  h = (h ^ static_cast<uint64_t>(in.n_rows)) * 1099511628211ull;
  h = (h ^ (static_cast<uint64_t>(in.n_out) << 32)) * 1099511628211ull;
  return h == 0 ? 1 : h;  // 0 means "never replay"
}

}  // namespace

// Makes each sequence's written positions [lowest, highest + 1) writable before any layer
// writes them.
Status PrepareRows(const Batch& batch, kv::KvCache& kv) {
  const int n = batch.size();
  for (int r = 0; r < n; ++r) {
    bool seen = false;
    for (int e = 0; e < r && !seen; ++e) seen = batch.seq[e] == batch.seq[r];
    if (seen) continue;
    int lo = batch.pos[r], hi = batch.pos[r];
    for (int e = r + 1; e < n; ++e)
      if (batch.seq[e] == batch.seq[r])
        lo = std::min(lo, batch.pos[e]), hi = std::max(hi, batch.pos[e]);
    LS_RETURN_IF_ERROR(kv.PrepareWrite(batch.seq[r], lo, hi + 1).WithContext("forward"));
  }
  return Status::Ok();
}

Status CheckBatch(const Batch& batch, const ModelConfig& c, const kv::KvCache& kv) {
  const int n = batch.size();
  if (n == 0) return Status::Error("forward: empty batch");
  for (int r = 0; r < n; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= c.n_vocab)
      return Status::Errorf("forward: token id {} outside vocabulary of {}", batch.tokens[r],
                            c.n_vocab);
    if (batch.pos[r] < 0 || batch.pos[r] >= kv.n_ctx())
      return Status::Errorf("forward: position {} outside the context of {}", batch.pos[r],
                            kv.n_ctx());
    if (batch.seq[r] < 0 || batch.seq[r] >= kv.n_seq())
      return Status::Errorf("forward: sequence slot {} outside {} slots", batch.seq[r], kv.n_seq());
  }
  return Status::Ok();
}

Status Model::Forward(const Batch& batch, kv::KvCache& kv, Workspace& ws, StepOutputs* out,
                      const TensorObserver* obs) const {
  if (config_.is_assistant())
    return Status::Errorf("{}: an assistant (drafter) model has no target forward", file_->path());
  LS_RETURN_IF_ERROR(CheckBatch(batch, config_, kv));
  LS_RETURN_IF_ERROR(PrepareRows(batch, kv));
  ws.Upload(batch);
  kv.SyncTable();  // every upload before the replayable part
  const StepInputs& in = ws.in;
  Activations& a = ws.act;
  const int n = in.n_rows;
  LayerCtx ctx{*backend_, config_, weights_, a, in.rows(), obs, n};
  auto& be = *backend_;
  OutputViews(a, config_, in, out);
  // Observed passes report tensors to the host as they go: those are never replayed.
  const uint64_t key = obs ? 0 : StepKey(in, kv);
  be.RunReplayable(ws.replays.get(), key, [&] {
    Tensor x = ctx.View(a.inp_embd, config_.n_embd);
    const auto tokens = in.tokens.first(n);
    be.GetRows(weights_.token_embd, tokens, std::sqrt(static_cast<float>(config_.n_embd)), &x);
    ctx.Emit(-1, "inp_embd", x);
    Tensor per_layer;
    if (config_.n_embd_per_layer > 0) per_layer = PerLayerInputs(ctx, tokens, x);
    for (int il = 0; il < config_.n_layer; ++il) {
      const LayerConfig& l = config_.layers[il];
      LayerKv lkv{&kv, l.kv_source, l.has_kv, true};
      Tensor y = ctx.View(a.layer_io[il % 2], config_.n_embd);
      DecoderLayer(ctx, il, x, lkv, per_layer.empty() ? nullptr : &per_layer, &y);
      x = y;
    }
    OutputHead(ctx, x, in, *out);
  });
  return Status::Ok();
}

Status Model::Forward(const Batch& batch, kv::KvCache& kv, ForwardResult* out,
                      const ForwardOptions& opt) const {
  const int n_out = std::max<int>(1, static_cast<int>(batch.out_rows.size()));
  Workspace ws(*backend_, config_, std::max(1, batch.size()), n_out);
  StepOutputs step;
  LS_RETURN_IF_ERROR(Forward(batch, kv, ws, &step, opt.observer));
  out->rows = batch.out_rows;
  out->n_vocab = config_.n_vocab;
  out->n_embd = config_.n_embd;
  backend_->ToHost(step.logits, &out->logits);
  if (opt.want_hidden)
    backend_->ToHost(step.hidden, &out->hidden);
  else
    out->hidden.clear();
  return Status::Ok();
}

}  // namespace lockstep::model
