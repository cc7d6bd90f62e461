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

Tensor FeedForward(LayerCtx& ctx, int il, const Tensor& a) {
  const LayerConfig& l = ctx.c.layers[il];
  const LayerWeights& w = ctx.w.layers[il];
  auto& be = ctx.be;
  const float eps = ctx.c.rms_eps;
  Tensor u = ctx.New(ctx.c.n_embd);
  be.RmsNorm(a, &w.ffn_norm, eps, ctx.c.n_embd, 1.0f, &u);
  Tensor g = ctx.New(l.n_ff), up = ctx.New(l.n_ff), act = ctx.New(l.n_ff);
  const backend::Backend::MatMulOut gate_up[] = {{&w.ffn_gate, &g}, {&w.ffn_up, &up}};
  be.MatMuls(u, gate_up);
  be.GeluMul(g, 0, up, 0, l.n_ff, &act);
  Tensor m = ctx.New(ctx.c.n_embd);
  be.MatMul(w.ffn_down, act, &m);
  ctx.Emit(il, "ffn_mlp", m);
  if (!l.moe) return m;

  // Shared MLP beside the routed experts.
  Tensor m1 = ctx.New(ctx.c.n_embd);
  be.RmsNorm(m, &w.post_ffw_norm_1, eps, ctx.c.n_embd, 1.0f, &m1);
  // Router input is the residual stream `a`, normalised without weight, times 1/sqrt(d) and
  // the learned per-channel scale.
  Tensor r = ctx.New(ctx.c.n_embd);
  be.RmsNorm(a, &w.ffn_gate_inp_scale, eps, ctx.c.n_embd,
             1.0f / std::sqrt(static_cast<float>(ctx.c.n_embd)), &r);
  Tensor logits = ctx.New(ctx.c.n_expert);
  be.MatMul(w.ffn_gate_inp, r, &logits);
  ctx.Emit(il, "ffn_moe_logits", logits);
  Tensor e_in = ctx.New(ctx.c.n_embd);
  be.RmsNorm(a, &w.pre_ffw_norm_2, eps, ctx.c.n_embd, 1.0f, &e_in);
  Tensor moe = ctx.New(ctx.c.n_embd);
  const bool fused = static_cast<bool>(w.ffn_gate_up_exps);
  be.MoeFfn(e_in, logits, fused ? w.ffn_gate_up_exps : w.ffn_gate_exps,
            fused ? nullptr : &w.ffn_up_exps, w.ffn_down_exps,
            w.ffn_down_exps_scale ? &w.ffn_down_exps_scale : nullptr, ctx.c.n_expert_used, &moe);
  ctx.Emit(il, "ffn_moe_out", moe);
  Tensor m2 = ctx.New(ctx.c.n_embd);
  be.RmsNorm(moe, &w.post_ffw_norm_2, eps, ctx.c.n_embd, 1.0f, &m2);
  Tensor f = ctx.New(ctx.c.n_embd);
  be.Add(m1, m2, &f);
  return f;
}

Tensor DecoderLayer(LayerCtx& ctx, int il, const Tensor& x, const LayerKv& kv,
                    const Tensor* per_layer) {
  const LayerConfig& l = ctx.c.layers[il];
  const LayerWeights& w = ctx.w.layers[il];
  auto& be = ctx.be;
  const float eps = ctx.c.rms_eps;
  const int64_t d = ctx.c.n_embd, q_width = static_cast<int64_t>(l.n_head) * l.head_dim;
  const backend::Weight* freqs = l.rope_freqs ? &ctx.w.rope_freqs : nullptr;

  Tensor h = ctx.New(d);
  be.RmsNorm(x, &w.attn_norm, eps, d, 1.0f, &h);
  ctx.Emit(il, "attn_norm", h);
  // Q, K and V read the same normalised input: one matmul op (K=V layers have no V weight;
  // KV-sharing layers project only Q).
  const int64_t kv_width = static_cast<int64_t>(l.n_head_kv) * l.head_dim;
  Tensor q = ctx.New(q_width), k, v;
  backend::Backend::MatMulOut qkv[3] = {{&w.attn_q, &q}};
  size_t n_qkv = 1;
  if (kv.write) {
    k = ctx.New(kv_width);
    v = ctx.New(kv_width);
    qkv[n_qkv++] = {&w.attn_k, &k};
    if (!l.v_from_k) qkv[n_qkv++] = {&w.attn_v, &v};
  }
  be.MatMuls(h, std::span(qkv, n_qkv));
  be.RmsNorm(q, &w.attn_q_norm, eps, l.head_dim, 1.0f, &q);
  be.Rope(&q, ctx.rows.pos, l.head_dim, l.n_rot, l.rope_base, freqs);
  ctx.Emit(il, "q", q);
  if (kv.write) {
    if (l.v_from_k) be.CopyCols(k, 0, kv_width, &v);  // K=V layers: V is the raw K projection
    be.RmsNorm(k, &w.attn_k_norm, eps, l.head_dim, 1.0f, &k);
    be.RmsNorm(v, nullptr, eps, l.head_dim, 1.0f, &v);
    be.Rope(&k, ctx.rows.pos, l.head_dim, l.n_rot, l.rope_base, freqs);
    ctx.Emit(il, "k", k);
    ctx.Emit(il, "v", v);
    be.KvWrite(kv.store->View(kv.layer), k, v, ctx.rows);
  }
  Tensor attn = ctx.New(q_width);
  be.Attention(q, kv.store->View(kv.layer), l.n_head, l.n_head_kv, l.head_dim,
               l.sliding ? ctx.c.n_swa : 0, kv.include_self, ctx.rows, &attn);
  ctx.Emit(il, "attn", attn);
  Tensor o = ctx.New(d);
  be.MatMul(w.attn_output, attn, &o);
  Tensor a = ctx.New(d);
  be.RmsNorm(o, &w.post_attention_norm, eps, d, 1.0f, &a);
  be.Add(a, x, &a);
  ctx.Emit(il, "attn_out", a);

  Tensor f = FeedForward(ctx, il, a);
  Tensor out = ctx.New(d);
  be.RmsNorm(f, &w.post_ffw_norm, eps, d, 1.0f, &out);
  be.Add(out, a, &out);
  ctx.Emit(il, "ffn_out", out);

  if (per_layer) {  // per-layer embeddings (E2B/E4B)
    const int64_t P = ctx.c.n_embd_per_layer;
    Tensor g = ctx.New(P), gp = ctx.New(P), pl = ctx.New(P);
    be.MatMul(w.inp_gate, out, &g);
    be.Gelu(g, &g);
    be.CopyCols(*per_layer, il * P, P, &pl);
    be.Mul(g, pl, &gp);
    Tensor pj = ctx.New(d);
    be.MatMul(w.proj, gp, &pj);
    be.RmsNorm(pj, &w.post_norm, eps, d, 1.0f, &pj);
    be.Add(out, pj, &out);
  }
  if (l.output_scale) be.ScaleByWeight(out, w.layer_output_scale, &out);
  ctx.Emit(il, "out", out);
  return out;
}

// Per-layer embedding inputs for all layers, [n, P * n_layer].
Tensor PerLayerInputs(LayerCtx& ctx, std::span<const int32_t> tokens, const Tensor& x) {
  auto& be = ctx.be;
  const int64_t P = ctx.c.n_embd_per_layer, PL = P * ctx.c.n_layer;
  Tensor tok = ctx.New(PL);
  be.GetRows(ctx.w.per_layer_token_embd, tokens, std::sqrt(static_cast<float>(P)), &tok);
  Tensor proj = ctx.New(PL);
  be.MatMul(ctx.w.per_layer_model_proj, x, &proj);
  be.Scale(proj, 1.0f / std::sqrt(static_cast<float>(ctx.c.n_embd)), &proj);
  be.RmsNorm(proj, &ctx.w.per_layer_proj_norm, ctx.c.rms_eps, P, 1.0f, &proj);
  Tensor pl = ctx.New(PL);
  be.Add(proj, tok, &pl);
  be.Scale(pl, 1.0f / std::sqrt(2.0f), &pl);
  ctx.Emit(-1, "inp_per_layer", pl);
  return pl;
}

// Final norm, output-row selection, LM head and softcap.
void OutputHead(LayerCtx& ctx, const Tensor& x, std::span<const int32_t> out_rows,
                ForwardResult* out, bool want_hidden) {
  auto& be = ctx.be;
  Tensor norm = ctx.New(ctx.c.n_embd);
  be.RmsNorm(x, &ctx.w.output_norm, ctx.c.rms_eps, ctx.c.n_embd, 1.0f, &norm);
  ctx.Emit(-1, "result_norm", norm);
  const int64_t n_out = static_cast<int64_t>(out_rows.size());
  Tensor sel = be.NewTensor(n_out, ctx.c.n_embd);
  be.GatherRows(norm, out_rows, &sel);
  Tensor logits = be.NewTensor(n_out, ctx.c.n_vocab);
  be.MatMul(ctx.c.tied_output ? ctx.w.token_embd : ctx.w.output, sel, &logits);
  if (ctx.c.final_softcap > 0.0f) be.Softcap(logits, ctx.c.final_softcap, &logits);
  out->rows.assign(out_rows.begin(), out_rows.end());
  out->n_vocab = ctx.c.n_vocab;
  out->n_embd = ctx.c.n_embd;
  be.ToHost(logits, &out->logits);
  if (want_hidden)
    be.ToHost(sel, &out->hidden);
  else
    out->hidden.clear();
  if (ctx.obs) (*ctx.obs)("result_output", logits);
}

namespace {

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

}  // namespace

Status Model::Forward(const Batch& batch, kv::KvCache& kv, ForwardResult* out,
                      const ForwardOptions& opt) const {
  CHECK(!config_.is_assistant());
  const int n = batch.size();
  if (n == 0) return Status::Error("forward: empty batch");
  for (int r = 0; r < n; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= config_.n_vocab)
      return Status::Errorf("forward: token id {} outside vocabulary of {}", batch.tokens[r],
                            config_.n_vocab);
    if (batch.pos[r] < 0 || batch.pos[r] >= kv.n_ctx())
      return Status::Errorf("forward: position {} outside the context of {}", batch.pos[r],
                            kv.n_ctx());
    if (batch.seq[r] < 0 || batch.seq[r] >= kv.n_seq())
      return Status::Errorf("forward: sequence slot {} outside {} slots", batch.seq[r], kv.n_seq());
  }
  LS_RETURN_IF_ERROR(PrepareRows(batch, kv));
  LayerCtx ctx{*backend_, config_, weights_, {batch.pos, batch.seq}, opt.observer, n};
  auto& be = *backend_;
  Tensor x = ctx.New(config_.n_embd);
  be.GetRows(weights_.token_embd, batch.tokens, std::sqrt(static_cast<float>(config_.n_embd)), &x);
  ctx.Emit(-1, "inp_embd", x);
  Tensor per_layer;
  if (config_.n_embd_per_layer > 0) per_layer = PerLayerInputs(ctx, batch.tokens, x);
  for (int il = 0; il < config_.n_layer; ++il) {
    const LayerConfig& l = config_.layers[il];
    LayerKv lkv{&kv, l.kv_source, l.has_kv, true};
    x = DecoderLayer(ctx, il, x, lkv, per_layer.empty() ? nullptr : &per_layer);
  }
  std::vector<int32_t> rows;
  for (int r = 0; r < n; ++r)
    if (batch.output[r]) rows.push_back(r);
  OutputHead(ctx, x, rows, out, opt.want_hidden);
  return Status::Ok();
}

}  // namespace lockstep::model
