#!/usr/bin/env python3
"""Builds tiny random-weight Gemma 4 models with transformers and dumps reference activations.

Run on a machine with torch + transformers (tested with transformers 5.17, torch 2.11):
    python3 scripts/hf_reference.py --out OUTDIR
It writes OUTDIR/hf/<name>/ (config.json + model.safetensors) and OUTDIR/parity/<name>/
(meta.json + raw little-endian float32 .f32 files). docs/parity.md describes the format.
Everything runs on the CPU in float32 with eager attention so the dump is reproducible.
"""
import argparse
import json
import os
import sys
import traceback

import numpy as np
import torch

import transformers
from transformers import Gemma4Config, Gemma4TextConfig
from transformers import Gemma4ForCausalLM, Gemma4ForConditionalGeneration
from transformers.models.gemma4_assistant import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

try:  # gemma4_unified (the 12B) came with transformers 5.17
    from transformers import (Gemma4UnifiedAssistantConfig, Gemma4UnifiedAssistantForCausalLM, Gemma4UnifiedConfig,
                              Gemma4UnifiedForConditionalGeneration, Gemma4UnifiedTextConfig)
except ImportError:
    Gemma4UnifiedTextConfig = None

VOCAB = 512
SEED = 20260601
S, F = "sliding_attention", "full_attention"


def text_config(**kw):
    base = dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
        sliding_window=8, max_position_embeddings=4096, rms_norm_eps=1e-6,
        final_logit_softcapping=15.0, tie_word_embeddings=True, hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0, layer_types=[S, S, F, S, S, F],
        hidden_activation="gelu_pytorch_tanh",
    )
    base.update(kw)
    return base


# What each target exercises is listed in docs/parity.md.
TARGETS = {
    # 26B-A4B-like: dense MLP + routed experts on every layer, K=V on full layers, per-layer kv heads.
    "moe": dict(kind="causal", cfg=text_config(
        enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=16,
        attention_k_eq_v=True, num_global_key_value_heads=1)),
    # E2B-like: per-layer embeddings, KV sharing (layers 4..7 reuse 2/3), double-wide MLP there.
    "ple": dict(kind="causal", cfg=text_config(
        num_hidden_layers=8, layer_types=[S, S, S, F, S, S, S, F], num_key_value_heads=1,
        hidden_size_per_layer_input=16, vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=4,
        use_double_wide_mlp=True, intermediate_size=48)),
    # 31B-like dense with K=V, saved as Gemma4ForConditionalGeneration (model.language_model.*).
    "dense": dict(kind="cond", cfg=text_config(
        intermediate_size=128, attention_k_eq_v=True, num_global_key_value_heads=1)),
}

# 12B-like (gemma4_unified): no PLE/MoE keys at all, no softcap (None), 12 layers so transformers
# writes per_layer_config keys zero-padded ("05"), saved as Gemma4UnifiedForConditionalGeneration.
UNIFIED_TEXT = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=12,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
    num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=8,
    max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
    layer_types=[S, S, S, S, S, F] * 2, hidden_activation="gelu_pytorch_tanh")
TARGETS["unified"] = dict(kind="unified", cfg=UNIFIED_TEXT)

DRAFTERS = {
    "moe_draft": dict(target="moe", ordered=False, cfg=dict(
        hidden_size=48, intermediate_size=96, num_hidden_layers=4, layer_types=[S, S, S, F],
        num_attention_heads=2, num_key_value_heads=2, attention_k_eq_v=True,
        num_global_key_value_heads=1)),
    "ple_draft": dict(target="ple", ordered=True, cfg=dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=4, layer_types=[S, S, S, F],
        num_attention_heads=2, num_key_value_heads=1)),
    "unified_draft": dict(target="unified", ordered=False, cfg=dict(
        hidden_size=48, intermediate_size=96, num_hidden_layers=4, layer_types=[S, S, S, F],
        num_attention_heads=2)),
}


def randomize(model, seed):
    """Deterministic weights with norms/scales away from 1 so missing or shifted ones show."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            if p.dim() == 1 and ("norm" in name or name.endswith(".scale") or "per_expert_scale" in name):
                v = rng.uniform(0.5, 1.5, shape)
            elif "embed_tokens" in name:
                v = rng.normal(0.0, 1.0, shape)
            else:
                v = rng.normal(0.0, 1.0 / np.sqrt(shape[-1]), shape)
            p.copy_(torch.from_numpy(v.astype(np.float32)))
        for name, b in sorted(model.named_buffers(), key=lambda kv: kv[0]):
            if name.endswith("layer_scalar"):
                b.copy_(torch.from_numpy(rng.uniform(0.3, 1.5, tuple(b.shape)).astype(np.float32)))
            elif name.endswith("token_ordering"):
                b.copy_(torch.from_numpy(rng.permutation(b.shape[0]).astype(np.int64)))


def text_model_of(model):
    inner = model.model
    return inner.language_model if hasattr(inner, "language_model") else inner


class Dumper:
    def __init__(self, root, name):
        self.dir = os.path.join(root, "parity", name)
        os.makedirs(self.dir, exist_ok=True)

    def save(self, tensors, prefix, key, t):
        a = t.detach().to(torch.float32).cpu().numpy()
        a = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(1, -1)
        fname = f"{prefix}{key}.f32"
        a.astype("<f4").tofile(os.path.join(self.dir, fname))
        tensors[key] = {"file": fname, "shape": list(a.shape)}


def run_target(model, ids):
    """Forward over `ids` with hooks; returns captured activations and the model output."""
    tm = text_model_of(model)
    cap = {}
    hooks = [tm.embed_tokens.register_forward_hook(
        lambda m, i, o: cap.setdefault("inp_embd", o))]
    for il, layer in enumerate(tm.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, i, o, il=il: cap.__setitem__(f"blk.{il}.out", o[0] if isinstance(o, tuple) else o)))
    hooks.append(tm.norm.register_forward_hook(lambda m, i, o: cap.__setitem__("result_norm", o)))
    x = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=x, use_cache=False, output_hidden_states=True,
                    return_shared_kv_states=True)
        if getattr(tm, "hidden_size_per_layer_input", 0):
            emb = cap["inp_embd"]
            pl = tm.project_per_layer_inputs(emb, tm.get_per_layer_inputs(x, emb))
            cap["inp_per_layer"] = pl.reshape(1, len(ids), -1)
    for h in hooks:
        h.remove()
    return cap, out


def dump_target(root, name, model, seqs, log):
    d = Dumper(root, name)
    meta = {"model": f"{name}.gguf", "hf_class": type(model).__name__, "sequences": []}
    n_layer = len(text_model_of(model).layers)
    for si, ids in enumerate(seqs):
        cap, out = run_target(model, ids)
        tensors = {}
        keys = ["inp_embd"] + (["inp_per_layer"] if "inp_per_layer" in cap else [])
        keys += [f"blk.{il}.out" for il in range(n_layer)] + ["result_norm"]
        for k in keys:
            d.save(tensors, f"s{si}.", k, cap[k][0])
        d.save(tensors, f"s{si}.", "result_output", out.logits[0])
        meta["sequences"].append({"tokens": ids, "positions": list(range(len(ids))), "tensors": tensors})
        log(f"{name} seq{si}: n={len(ids)} argmax_last={int(out.logits[0, -1].argmax())}")
    with open(os.path.join(d.dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def visible(mask, n_kv):
    if mask is None:
        return list(range(n_kv))
    m = mask[0, 0, 0]
    ok = m if m.dtype == torch.bool else (m == 0)
    return [int(i) for i in torch.nonzero(ok).flatten()]


def dump_drafter(root, name, spec, drafter, target, seqs, log):
    """Drives the drafter as SinglePositionMultiTokenCandidateGenerator does right after prefill."""
    d = Dumper(root, name)
    cfg = drafter.config
    meta = {"model": f"{name}.gguf", "target": spec["target"],
            "target_model": f"../{spec['target']}/{spec['target']}.gguf", "draft_steps": 3,
            "use_ordered_embeddings": bool(cfg.use_ordered_embeddings), "sequences": []}
    tm = text_model_of(target)
    cap = {}
    hooks = [drafter.model.norm.register_forward_hook(lambda m, i, o: cap.__setitem__("hn", o))]
    if drafter.masked_embedding is not None:
        hooks.append(drafter.masked_embedding.centroids.register_forward_hook(
            lambda m, i, o: cap.__setitem__("centroid_logits", o)))
    for si, ids in enumerate(seqs):
        tcap, out = run_target(target, ids)
        n = len(ids)
        tensors = {}
        last_hidden = out.hidden_states[-1][:, -1:]  # what the generator reads (row of id_last)
        post_norm = bool(torch.equal(last_hidden[0, 0], tcap["result_norm"][0, -1]))
        id_last = int(out.logits[0, -1].argmax())
        kv = out.shared_kv_states
        attn_mask = torch.ones(1, n + 1, dtype=torch.long)  # generate's mask covers ids + id_last
        pos = torch.tensor([[n]], dtype=torch.long)  # input_ids.shape[1] - 1 with id_last appended
        d.save(tensors, f"s{si}.", "target.h", last_hidden[0])
        tok = torch.tensor([[id_last]], dtype=torch.long)
        h = last_hidden
        drafted = []
        with torch.no_grad():
            masks = drafter.create_attention_masks(
                drafter.pre_projection(torch.cat([tm.embed_tokens(tok), h], dim=-1)), attn_mask, kv)
            vis = {k: visible(masks[k], kv[k][0].shape[2]) for k in (S, F)}
            for j in range(3):
                emb = tm.embed_tokens(tok)
                inp = torch.cat([emb, h], dim=-1)
                o = drafter(inputs_embeds=inp, attention_mask=attn_mask, position_ids=pos,
                            shared_kv_states=kv, use_cache=False)
                d.save(tensors, f"s{si}.", f"draft.inp.step{j}", inp[0])
                d.save(tensors, f"s{si}.", f"draft.hn.step{j}", cap["hn"][0])
                if "centroid_logits" in cap:
                    d.save(tensors, f"s{si}.", f"draft.centroid_logits.step{j}", cap["centroid_logits"][0])
                    d.save(tensors, f"s{si}.", f"draft.dense_logits.step{j}", drafter.lm_head(cap["hn"])[0])
                d.save(tensors, f"s{si}.", f"draft.logits.step{j}", o.logits[0])
                d.save(tensors, f"s{si}.", f"draft.h.step{j}", o.last_hidden_state[0])
                tok = o.logits.argmax(dim=-1)
                h = o.last_hidden_state
                drafted.append(int(tok[0, 0]))
        meta["sequences"].append({
            "prefix_tokens": ids, "prefix_positions": list(range(n)), "id_last": id_last,
            "draft_position": n, "draft_tokens": drafted, "target_h_is_post_norm": post_norm,
            "visible_kv_positions": vis, "tensors": tensors})
        log(f"{name} seq{si}: id_last={id_last} drafts={drafted} h_post_norm={post_norm} "
            f"swa_visible={vis[S][:3]}..{vis[S][-3:]} ({len(vis[S])}) full={len(vis[F])}")
    for hk in hooks:
        hk.remove()
    with open(os.path.join(d.dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def build_target(name, spec):
    if spec["kind"] == "unified":
        tc = Gemma4UnifiedTextConfig(**spec["cfg"])
        cfg = Gemma4UnifiedConfig(text_config=tc.to_dict(), vision_config=None, audio_config=None)
        cfg._attn_implementation = "eager"
        cfg.text_config._attn_implementation = "eager"
        return Gemma4UnifiedForConditionalGeneration(cfg)
    tc = Gemma4TextConfig(**spec["cfg"])
    if spec["kind"] == "cond":
        cfg = Gemma4Config(text_config=tc.to_dict(), vision_config=None, audio_config=None)
        cfg._attn_implementation = "eager"
        cfg.text_config._attn_implementation = "eager"
        model = Gemma4ForConditionalGeneration(cfg)
    else:
        tc._attn_implementation = "eager"
        model = Gemma4ForCausalLM(tc)
    return model


def build_drafter(spec, target):
    tcfg = text_model_of(target).config
    if tcfg.model_type == "gemma4_unified_text":  # the same assistant, typed for the unified model
        c = dict(UNIFIED_TEXT, **spec["cfg"])  # the target's head geometry, the drafter's sizes
        c.update(sliding_window=tcfg.sliding_window, num_kv_shared_layers=c["num_hidden_layers"])
        cfg = Gemma4UnifiedAssistantConfig(text_config=c, backbone_hidden_size=tcfg.hidden_size,
                                           use_ordered_embeddings=spec["ordered"])
        cfg._attn_implementation = "eager"
        cfg.text_config._attn_implementation = "eager"
        return Gemma4UnifiedAssistantForCausalLM(cfg)
    c = text_config(**spec["cfg"])
    c["sliding_window"] = tcfg.sliding_window
    c["num_kv_shared_layers"] = c["num_hidden_layers"]
    c["final_logit_softcapping"] = None
    cfg = Gemma4AssistantConfig(text_config=c, backbone_hidden_size=tcfg.hidden_size,
                                use_ordered_embeddings=spec["ordered"], num_centroids=32,
                                centroid_intermediate_top_k=4)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    return Gemma4AssistantForCausalLM(cfg)


def save_and_reload(model, root, name, cls, log):
    path = os.path.join(root, "hf", name)
    model.save_pretrained(path)
    re = cls.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
    re.eval()
    a, b = dict(model.state_dict()), dict(re.state_dict())
    worst = max(float((a[k].double() - b[k].double()).abs().max()) for k in a if k in b)
    log(f"{name}: saved {sorted(os.listdir(path))}; reload max|diff| over {len(a)} tensors = {worst}")
    return re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    torch.manual_seed(SEED)
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    logf = open(os.path.join(args.out, "hf_reference.log"), "w")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    log(f"transformers {transformers.__version__} torch {torch.__version__}")
    rng = np.random.default_rng(SEED)
    seqs = [[2] + [int(t) for t in rng.integers(5, VOCAB, 39)],
            [2] + [int(t) for t in rng.integers(5, VOCAB, 4)]]
    targets = {}
    for i, (name, spec) in enumerate(TARGETS.items()):
        if only and name not in only and not any(DRAFTERS[d]["target"] == name for d in only if d in DRAFTERS):
            continue
        try:
            m = build_target(name, spec)
            randomize(m, SEED + i)
            cls = type(m)
            log(f"{name}: lm_head tied = {m.lm_head.weight.data_ptr() == text_model_of(m).embed_tokens.weight.data_ptr()}")
            m = save_and_reload(m, args.out, name, cls, log)
            dump_target(args.out, name, m, seqs, log)
            targets[name] = m
        except Exception:
            log(f"{name}: FAILED\n{traceback.format_exc()}")
    for i, (name, spec) in enumerate(DRAFTERS.items()):
        if only and name not in only:
            continue
        try:
            target = targets[spec["target"]]
            m = build_drafter(spec, target)
            randomize(m, SEED + 100 + i)
            m = save_and_reload(m, args.out, name, type(m), log)
            dump_drafter(args.out, name, spec, m, target, seqs, log)
        except Exception:
            log(f"{name}: FAILED\n{traceback.format_exc()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
