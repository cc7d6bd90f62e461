"""Trains lockstep's default model pair on the GPU machine: a Gemma 4 target (Gemma4ForCausalLM)
and its MTP assistant (Gemma4AssistantForCausalLM) on permissively licensed Python source, then
measures held-out perplexity and acceptance under transformers' own assisted generation.

Usage (device): python3 train/train_pair.py OUT_DIR   — a smoke pass on a tiny config runs first,
so a bug costs seconds, not the whole lease. Every stage is bounded by wall clock."""
import gzip
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arch  # noqa: E402
import corpus  # noqa: E402
import tok as tokmod  # noqa: E402
from evaluate import eval_acceptance, eval_ppl, completions, parity_refs  # noqa: E402

T0 = float(os.environ.get("LOCKSTEP_T0", time.time()))


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def lr_at(step, progress, c):
    if step < c["warmup"]:
        return c["lr"] * (step + 1) / c["warmup"]
    frac = c["min_lr_frac"] + (1 - c["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return c["lr"] * frac


def make_opt(params_named, c, extra=()):
    decay = [p for n, p in params_named if p.requires_grad and p.dim() >= 2]
    nodecay = [p for n, p in params_named if p.requires_grad and p.dim() < 2] + list(extra)
    return torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                              {"params": nodecay, "weight_decay": 0.0}],
                             lr=c["lr"], betas=(0.9, 0.95), eps=1e-8, fused=True)


def sample_windows(data, n, length, gen):
    starts = torch.randint(0, data.numel() - length - 1, (n,), device=data.device, generator=gen)
    return data[starts[:, None] + torch.arange(length, device=data.device)[None, :]]


# ---------------------------------------------------------------------------------------- corpus


def build_data(cfg, smoke, files):
    tcfg = cfg["tokenizer"]
    rng = np.random.default_rng(cfg["seed"])
    if smoke:
        files = [files[i] for i in rng.permutation(len(files))[: cfg["smoke"]["files"]]]
    train_f = [f for f in files if not corpus.is_heldout(f[0], cfg["heldout_percent"])]
    held_f = [f for f in files if corpus.is_heldout(f[0], cfg["heldout_percent"])]
    if smoke and not held_f:
        held_f, train_f = train_f[:5], train_f[5:]
    order = rng.permutation(len(train_f))
    sample, size = [], 0
    for i in order if not os.environ.get("LOCKSTEP_RESUME") or smoke else []:
        if size >= tcfg["sample_bytes"]:
            break
        sample.append(train_f[i][3])
        size += len(sample[-1])
    vocab_size = cfg["smoke"]["vocab_size"] if smoke else tcfg["vocab_size"]
    resume = None if smoke else os.environ.get("LOCKSTEP_RESUME")
    if resume:  # reuse the committed target's tokenizer: ids must not change under it
        with open(os.path.join(resume, "tokenizer.json")) as f:
            tok_json = json.load(f)
        size = 0
    else:
        tok_json = tokmod.train(sample, vocab_size, tcfg["limit_alphabet"], tcfg["max_token_length"])
    log(f"tokenizer: {len(tok_json['model']['vocab'])} tokens, {len(tok_json['model']['merges'])} merges "
        f"(trained on {size / 1e6:.1f} MB)")
    fast = tokmod.fast_encoder(tok_json)
    enc = getattr(fast, "encode_batch_fast", fast.encode_batch)

    def encode(fs):
        docs = []
        for k in range(0, len(fs), 2048):
            docs += [e.ids for e in enc([f[3] for f in fs[k:k + 2048]])]
        return docs

    train_docs, held_docs = encode(train_f), encode(held_f)

    def stream(docs):
        parts = [np.array([tokmod.BOS] + d + [tokmod.EOS], dtype=np.int64) for d in docs]
        return np.concatenate(parts)

    info = {"train_files": len(train_f), "heldout_files": len(held_f),
            "train_bytes": sum(len(f[3].encode()) for f in train_f),
            "heldout_bytes": sum(len(f[3].encode()) for f in held_f)}
    tr, he = stream(train_docs), stream(held_docs)
    info.update(train_tokens=int(tr.size), heldout_tokens=int(he.size))
    log("data:", json.dumps(info))
    return tok_json, tr, he, held_docs, held_f, train_f, info


def check_tokenizer(tok_json, held_f, n=60):
    """The Gemma-form tokenizer.json (whole-text BPE, added tokens matched) must give the ids we
    trained on, and decoding must round-trip."""
    from tokenizers import Tokenizer
    full = Tokenizer.from_str(json.dumps(tok_json))
    fast = tokmod.fast_encoder(tok_json)
    same = rt = 0
    for f in held_f[:n]:
        a = full.encode(f[3], add_special_tokens=False).ids
        b = fast.encode(f[3]).ids
        same += a == b
        rt += full.decode(a, skip_special_tokens=False) == f[3]
    return {"files": min(n, len(held_f)), "ids_equal": same, "roundtrip_equal": rt}


# ---------------------------------------------------------------------------------------- target


def train_target(model, data, c, budget_s, steps_cap, gen, curve):
    model.cuda().train()
    scalars, hooks = [], []
    for layer in model.model.layers:
        # The layer's own layer_scalar is a buffer; train a parameter through a hook and
        # write it back afterwards (same maths: the whole residual stream is scaled).
        p = torch.nn.Parameter(torch.ones(1, device="cuda"))
        hooks.append(layer.register_forward_hook(lambda m, i, o, p=p: o * p.to(o.dtype)))
        scalars.append(p)
    opt = make_opt(list(model.named_parameters()), c, extra=scalars)
    V = model.config.vocab_size
    t_start, step, tokens = time.time(), 0, 0
    while True:
        progress = (time.time() - t_start) / budget_s
        if progress >= 1.0 or (steps_cap and step >= steps_cap):
            break
        lr = lr_at(step, progress, c)
        for g in opt.param_groups:
            g["lr"] = lr
        x = sample_windows(data, c["batch"], c["seq_len"] + 1, gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, V), x[:, 1:].reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(list(model.parameters()) + scalars, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens += x[:, 1:].numel()
        if step % 10 == 0 or step == 1:
            rec = {"step": step, "tokens": tokens, "t": round(time.time() - t_start, 2), "loss": loss.item(),
                   "lr": lr, "grad_norm": float(gn)}
            curve.append(rec)
            if step % 100 == 0 or step == 1:
                log("target", json.dumps(rec))
    for h in hooks:
        h.remove()
    with torch.no_grad():
        for layer, p in zip(model.model.layers, scalars):
            layer.layer_scalar.copy_(p.detach())
    model.eval()
    return {"steps": step, "tokens": tokens, "seconds": round(time.time() - t_start, 1),
            "layer_scalars": [round(p.item(), 5) for p in scalars]}


@torch.no_grad()
def self_generate(model, data, sg, budget_s, n_batches_cap, gen):
    """Greedy continuations by the target itself: what the drafter must learn to predict. A batch
    that would overrun the budget is cut short (all rows at the same length)."""
    model.eval()
    out, t0 = [], time.time()
    length = sg["total_len"]
    while time.time() - t0 < budget_s and (not n_batches_cap or len(out) < n_batches_cap):
        x = sample_windows(data, sg["batch"], sg["prompt_len"], gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            o = model(input_ids=x, use_cache=True, logits_to_keep=1)
            past, nxt = o.past_key_values, o.logits[:, -1].argmax(-1)
            toks = [x, nxt[:, None]]
            while x.shape[1] + len(toks) - 1 < length:
                if time.time() - t0 > budget_s:
                    length = x.shape[1] + len(toks) - 1
                    break
                o = model(input_ids=nxt[:, None], past_key_values=past, use_cache=True)
                past, nxt = o.past_key_values, o.logits[:, -1].argmax(-1)
                toks.append(nxt[:, None])
        out.append(torch.cat(toks, 1))
        del past
    seqs = torch.cat([o[:, :length] for o in out], 0)
    return seqs, {"sequences": int(seqs.shape[0]), "length": int(seqs.shape[1]),
                  "seconds": round(time.time() - t0, 1)}


# ---------------------------------------------------------------------------------------- drafter


def drafter_masks(T, window, stale, device):
    """Masks over the doubled K/V [real tokens ; stale tokens] (2T entries) for queries at 0..T-1.
    Query p sees the real entries j < p: what the candidate generator hands over once the target
    has verified everything before p. Where `stale[b, p]`, it also sees entry T + p: the K/V the
    target computed at position p for a token it then rejected — in transformers' generator that
    entry is still in the sliced cache after every round that ends in a rejection. Row 0 sees
    entry 0 so no softmax row is empty (its loss is masked out)."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    first = (i == 0) & (j == 0)
    zero = torch.zeros(T, T, dtype=torch.bool, device=device)
    eye = torch.cat([zero, i == j], 1)[None] & stale[:, :, None]
    full = torch.cat([(j < i) | first, zero], 1)[None] | eye
    swa = torch.cat([((j < i) & (i - j <= window)) | first, zero], 1)[None] | eye
    return {"full_attention": full[:, None], "sliding_attention": swa[:, None]}


def doubled_target_masks(T, window, device):
    """The target over [S ; D] at positions [0..T-1 ; 0..T-1]: S causally as usual; D_p sees S_<p
    and itself, so its K/V are those of token D_p right after the real prefix."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    zero = torch.zeros(T, T, dtype=torch.bool, device=device)
    eye = i == j
    full = torch.cat([torch.cat([j <= i, zero], 1), torch.cat([j < i, eye], 1)], 0)
    swa_c, swa_s = (j <= i) & (i - j < window), (j < i) & (i - j < window)
    swa = torch.cat([torch.cat([swa_c, zero], 1), torch.cat([swa_s, eye], 1)], 0)
    return {"full_attention": full[None, None], "sliding_attention": swa[None, None]}


def drafter_step(asst, tok_emb, h, masks, pos, kv):
    """One draft step exactly as Gemma4AssistantForCausalLM.forward computes it."""
    x = asst.pre_projection(torch.cat([tok_emb, h], dim=-1))
    o = asst.model(inputs_embeds=x, attention_mask=masks, position_ids=pos, shared_kv_states=kv, use_cache=False)
    hn = o.last_hidden_state
    return asst.lm_head(hn), asst.post_projection(hn)


@torch.no_grad()
def target_teacher(target, S, window, stale_prob, gen, checked):
    """Teacher log-probs, the hidden states the generator feeds the drafter, and the target's K/V
    for the real tokens followed by K/V for 'rejected' tokens (the target's best alternative to
    the real next token, standing in for a draft it turned down)."""
    B, T = S.shape
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = target(input_ids=S, output_hidden_states=True, return_shared_kv_states=True, use_cache=False)
        H = out.hidden_states[-1]
        teacher = out.logits.float().log_softmax(-1)
        top2 = teacher[:, :-1].topk(2, dim=-1).indices
        alt = torch.where(top2[..., 0] == S[:, 1:], top2[..., 1], top2[..., 0])
        D = torch.cat([S[:, :1], alt], 1)
        pos2 = torch.cat([torch.arange(T, device=S.device)] * 2)[None]
        out2 = target(input_ids=torch.cat([S, D], 1), attention_mask=doubled_target_masks(T, window, S.device),
                      position_ids=pos2, return_shared_kv_states=True, use_cache=False)
        kv = {k: (v[0], v[1]) for k, v in out2.shared_kv_states.items()}
        if not checked:
            base = target.model(input_ids=S[:2], use_cache=False).last_hidden_state
            real_kv = dict(out.shared_kv_states)
            checked.update({
                "hidden_states_len": len(out.hidden_states),
                "h_minus_normed_maxabs": float((H[:2] - base).abs().max()),
                "doubled_kv_real_part_maxabs": max(float((kv[k][0][:, :, :T] - real_kv[k][0]).abs().max())
                                                   for k in kv),
                "doubled_logits_real_part_maxabs": float((out2.logits[:, :T].float() - out.logits.float())
                                                         .abs().max()),
                "kv_shapes": {k: list(v[0].shape) for k, v in kv.items()}})
    stale = torch.rand(B, T, device=S.device, generator=gen) < stale_prob
    return teacher, H, kv, stale


def train_assistant(asst, target, data, gen_pool, c, budget_s, steps_cap, gen, curve, window):
    asst.cuda().train()
    for p in target.parameters():
        p.requires_grad_(False)
    target.eval()
    emb = target.get_input_embeddings()
    T, B, K = c["seq_len"], c["batch"], c["draft_len"]
    if gen_pool is not None and gen_pool.shape[1] < min(T, 128):
        gen_pool = None
    if gen_pool is not None:
        T = min(T, gen_pool.shape[1])
    pos = torch.arange(T, device="cuda")[None, :]
    opt = make_opt(list(asst.named_parameters()), c)
    n_gen = int(B * c["generated_share"]) if gen_pool is not None else 0
    t_start, step, checked = time.time(), 0, {}
    while True:
        progress = (time.time() - t_start) / budget_s
        if progress >= 1.0 or (steps_cap and step >= steps_cap):
            break
        lr = lr_at(step, progress, c)
        for g in opt.param_groups:
            g["lr"] = lr
        S = sample_windows(data, B - n_gen, T, gen)
        if n_gen:
            rows = torch.randint(0, gen_pool.shape[0], (n_gen,), device="cuda", generator=gen)
            S = torch.cat([S, gen_pool[rows, :T]], 0)
        first = not checked
        teacher, H, kv, stale = target_teacher(target, S, window, c["stale_prob"], gen, checked)
        if first:
            log("drafter input check", json.dumps(checked))
        masks = drafter_masks(T, window, stale, "cuda")
        h = torch.cat([torch.zeros_like(H[:, :1]), H[:, :-1]], 1).detach()
        total, rec = 0.0, {"step": step + 1}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for j in range(K):
                toks = torch.cat([S[:, j:], torch.zeros_like(S[:, :j])], 1)
                logits, h = drafter_step(asst, emb(toks), h, masks, pos, kv)
                lq = logits[:, 1:T - j].float().log_softmax(-1)
                tp = teacher[:, 1 + j:]
                kl = (tp.exp() * (tp - lq)).sum(-1).mean()
                total = total + kl
                if (step + 1) % 10 == 0 or step == 0:
                    rec[f"kl{j + 1}"] = kl.item()
                    rec[f"acc{j + 1}"] = (lq.argmax(-1) == tp.argmax(-1)).float().mean().item()
        total.backward()
        torch.nn.utils.clip_grad_norm_(asst.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if len(rec) > 1:
            rec.update(t=round(time.time() - t_start, 2), lr=lr, loss=total.item())
            curve.append(rec)
            if step % 100 == 0 or step == 1:
                log("assistant", json.dumps(rec))
    asst.eval()
    return {"steps": step, "seconds": round(time.time() - t_start, 1), "input_check": checked, "seq_len": T}


# ---------------------------------------------------------------------------------------- saving


def save_hf(model, d, tok_json, arch_name, extra_cfg):
    """f16 safetensors without the tied lm_head (as Google's checkpoints), config.json with the
    Gemma 4 keys a converter expects, and the tokenizer."""
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    sd = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()
          if k != "lm_head.weight"}
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    model.config.architectures = [arch_name]
    model.config.save_pretrained(d)
    model.generation_config.save_pretrained(d)
    p = os.path.join(d, "config.json")
    with open(p) as f:
        cj = json.load(f)
    for k, v in extra_cfg.items():
        if isinstance(v, dict):
            cj.setdefault(k, {}).update(v)
        else:
            cj[k] = v
    cj["dtype"] = "float16"
    with open(p, "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok_json, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tokmod.tokenizer_config(), f, indent=2)
    return sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d))


def load_target(d):
    from transformers import Gemma4ForCausalLM
    m = Gemma4ForCausalLM.from_pretrained(d, dtype=torch.float32)
    arch.set_attn(m, "sdpa")
    return m.cuda().eval()


def reload_check(cls, d, model, sample):
    m2, info = cls.from_pretrained(d, dtype=torch.float32, output_loading_info=True)
    m2.cuda().eval()
    return m2, {k: list(v) for k, v in info.items() if v}


# ---------------------------------------------------------------------------------------- driver


def write_corpus_record(cfg, files, dists, out):
    with gzip.open(os.path.join(out, "corpus_files.tsv.gz"), "wt") as f:
        f.write("path\tsource\tlicence\tbytes\tsplit\n")
        for p, tag, lic, text in files:
            split = "heldout" if corpus.is_heldout(p, cfg["heldout_percent"]) else "train"
            f.write(f"{p}\t{tag}\t{lic}\t{len(text.encode())}\t{split}\n")
    with open(os.path.join(out, "distributions.json"), "w") as f:
        json.dump(dists, f, indent=1)


def _dump(report, out):
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    pack(out, os.environ.get("LOCKSTEP_DEST") if not report.get("smoke") else None)


def pack(work, dest):
    """Copies what exists so far into the device's return folder (≤ 8 files, ≤ 16 MiB each),
    so a run cut short by the wall clock still returns its models and numbers."""
    if not dest:
        return
    import glob
    import io
    import shutil
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tf:
        for name in ("lockstep-code-target", "lockstep-code-assistant"):
            if os.path.isdir(os.path.join(work, name)):
                tf.add(os.path.join(work, name), arcname=name)
    data = buf.getvalue()
    for old in glob.glob(os.path.join(dest, "models.tgz.part*")):
        os.remove(old)
    for k, i in enumerate(range(0, len(data), 15 << 20)):
        with open(os.path.join(dest, f"models.tgz.part{k}"), "wb") as f:
            f.write(data[i:i + (15 << 20)])
    with tarfile.open(os.path.join(dest, "results.tgz"), "w:gz") as tf:
        for name in ("report.json", "curve_target.json", "curve_assistant.json", "completions.json",
                     "corpus_files.tsv.gz", "distributions.json", "parity_prompts.json"):
            if os.path.exists(os.path.join(work, name)):
                tf.add(os.path.join(work, name), arcname=name)
    for p in glob.glob(os.path.join(work, "parity_*.npz")):
        shutil.copy(p, dest)


def _assistant_and_eval(cfg, smoke, report, target, tok_json, data, held, held_docs, tcfg, acfg, sg, ac, ec,
                        a_budget, deadline, gen, out, tdir, adir):
    V = len(tok_json["model"]["vocab"])
    eval_reserve = ec["accept_budget_s"] + 45
    curve_a = []
    t_extra = {"global_head_dim": tcfg["global_head_dim"],
               "num_global_key_value_heads": tcfg["num_global_key_value_heads"]}
    torch.backends.cuda.matmul.allow_tf32 = True
    gen_pool = None
    try:
        gen_pool, report["selfgen"] = self_generate(target, data, sg, sg["budget_s"] if not smoke else 2,
                                                    1 if smoke else 0, gen)
        log("selfgen", json.dumps(report["selfgen"]))
    except Exception:  # the drafter can still learn from real text alone
        report["selfgen_error"] = traceback.format_exc()
        log(report["selfgen_error"])
    asst = arch.build_assistant(tcfg, acfg, V)
    arch.set_attn(asst.model, "sdpa")
    report["assistant_tied"] = arch.check_tied(asst)
    report["assistant_params"] = arch.unique_params(asst)
    log(f"assistant params {report['assistant_params']:,} tied={report['assistant_tied']}")
    a_budget = max(20.0, min(a_budget, deadline - time.time() - eval_reserve - 10)) if not smoke else a_budget
    report["train_assistant"] = train_assistant(asst, target, data, gen_pool, ac, a_budget,
                                                cfg["smoke"]["steps"] if smoke else 0, gen, curve_a,
                                                tcfg["sliding_window"])
    log("assistant done", json.dumps(report["train_assistant"]))
    with open(os.path.join(out, "curve_assistant.json"), "w") as f:
        json.dump(curve_a, f)
    arch.round_to_f16(asst)
    a_extra = {"text_config": t_extra}
    report["assistant_dir_bytes"] = save_hf(asst, adir, tok_json, "Gemma4AssistantForCausalLM", a_extra)
    _dump(report, out)
    del gen_pool
    torch.cuda.empty_cache()

    torch.backends.cuda.matmul.allow_tf32 = False
    from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM
    t2, report["target_reload"] = reload_check(Gemma4ForCausalLM, tdir, target, None)
    a2, report["assistant_reload"] = reload_check(Gemma4AssistantForCausalLM, adir, asst, None)
    with torch.no_grad():
        x = held[:256][None]
        report["target_reload_maxdiff"] = float((t2(input_ids=x).logits - target(input_ids=x).logits).abs().max())
    log("reload", report["target_reload"], report["assistant_reload"], report["target_reload_maxdiff"])
    budget = max(10.0, min(ec["accept_budget_s"], deadline - time.time() - 30))
    report["acceptance"] = eval_acceptance(t2, a2, held_docs, ec, budget, log)
    log("acceptance", json.dumps(report["acceptance"]))
    _dump(report, out)
    report["completions"] = completions(t2, held_docs, tok_json, ec, out)
    report["parity"] = parity_refs(tdir, held_docs, tok_json, ec["parity_lengths"], out)
    log("parity refs", json.dumps(report["parity"]))


def pipeline(cfg, smoke, files, dists, out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(cfg["seed"])
    gen = torch.Generator(device="cuda")
    gen.manual_seed(cfg["seed"])
    deadline = T0 + cfg["deadline_s"]
    report = {"smoke": smoke}
    tok_json, tr, he, held_docs, held_f, train_f, info = build_data(cfg, smoke, files)
    report["data"] = info
    if not smoke:
        write_corpus_record(cfg, files, dists, out)
    report["tokenizer_check"] = check_tokenizer(tok_json, held_f, 10 if smoke else 60)
    log("tokenizer check", report["tokenizer_check"])
    V = len(tok_json["model"]["vocab"])
    tcfg, acfg = dict(cfg["target"]), dict(cfg["assistant"])
    if smoke:
        s = cfg["smoke"]
        tcfg.update(hidden_size=s["hidden"], intermediate_size=s["inter"], num_hidden_layers=2,
                    layer_types=["sliding_attention", "full_attention"], sliding_window=16)
        acfg.update(hidden_size=s["asst_hidden"], intermediate_size=s["inter"])
    data = torch.from_numpy(tr).cuda()
    held = torch.from_numpy(he).cuda()

    torch.backends.cuda.matmul.allow_tf32 = True
    resume = None if smoke else os.environ.get("LOCKSTEP_RESUME")
    target = load_target(resume) if resume else arch.build_target(tcfg, V)
    report["target_tied"] = arch.check_tied(target)
    report["target_params"] = arch.unique_params(target)
    log(f"target params {report['target_params']:,} tied={report['target_tied']}")
    tc = dict(cfg["train_target"])
    sg = dict(cfg["selfgen"])
    ac = dict(cfg["train_assistant"])
    ec = dict(cfg["eval"])
    if smoke:
        tc.update(batch=4, seq_len=64, warmup=2)
        sg.update(batch=4, prompt_len=8, total_len=40)
        ac.update(batch=4, seq_len=32, warmup=2)
        ec.update(accept_prompt_len=16, accept_new_tokens=12, accept_max_prompts=2, ppl_max_tokens=2000,
                  parity_lengths=[6, 12], completion_prompts=1, completion_new_tokens=8, accept_budget_s=30)
    eval_reserve = ec["accept_budget_s"] + 45
    remaining = deadline - time.time() - eval_reserve - sg["budget_s"] - 20
    t_budget = 5 if smoke else max(45.0, remaining * tc["share_of_time"])
    a_budget = 5 if smoke else max(30.0, remaining * (1 - tc["share_of_time"]))
    log(f"budgets: target {t_budget:.0f}s, assistant {a_budget:.0f}s, remaining {remaining:.0f}s")
    curve_t = []
    tdir, adir = os.path.join(out, "lockstep-code-target"), os.path.join(out, "lockstep-code-assistant")
    if resume:
        a_budget += t_budget  # the target is reused: all training time goes to the drafter
        tdir = resume
        report["train_target"] = {"resumed_from": resume}
        log("target reused from", resume)
    else:
        report["train_target"] = train_target(target, data, tc, t_budget, cfg["smoke"]["steps"] if smoke else 0,
                                              gen, curve_t)
        report["train_target"]["final_loss_avg10"] = float(np.mean([r["loss"] for r in curve_t[-10:]]))
        log("target done", json.dumps(report["train_target"]))
        arch.round_to_f16(target)
        t_extra = {"global_head_dim": tcfg["global_head_dim"],
                   "num_global_key_value_heads": tcfg["num_global_key_value_heads"]}
        report["target_dir_bytes"] = save_hf(target, tdir, tok_json, "Gemma4ForCausalLM", t_extra)
        with open(os.path.join(out, "curve_target.json"), "w") as f:
            json.dump(curve_t, f)
        # Continue with the model as a reader of the saved files sees it (same loader as resume).
        target = load_target(tdir)
    _dump(report, out)
    torch.backends.cuda.matmul.allow_tf32 = False
    report["heldout"] = eval_ppl(target, held, tc["seq_len"], ec["ppl_max_tokens"], info)
    log("held-out", json.dumps(report["heldout"]))

    _dump(report, out)
    try:
        _assistant_and_eval(cfg, smoke, report, target, tok_json, data, held, held_docs, tcfg, acfg, sg, ac, ec,
                            a_budget, deadline, gen, out, tdir, adir)
    except Exception:
        if smoke:
            raise
        report["error"] = traceback.format_exc()
        log(report["error"])
    _dump(report, out)
    return report


def main():
    out = sys.argv[1]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")) as f:
        cfg = json.load(f)
    import transformers
    log("versions", torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))
    files, dists = corpus.collect(cfg["max_file_bytes"], cfg["exclude_dists"])
    log(f"corpus: {len(files)} files, {sum(len(f[3].encode()) for f in files) / 1e6:.1f} MB")
    try:
        pipeline(cfg, True, files, dists, "/tmp/smoke")
        log("SMOKE OK")
    except Exception:
        log("SMOKE FAILED\n" + traceback.format_exc())
        sys.exit(3)
    pipeline(cfg, False, files, dists, out)
    log("ALL DONE")


if __name__ == "__main__":
    main()
