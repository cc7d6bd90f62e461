"""Trains lockstep's default model pair on the GPU machine: a Gemma 4 target (Gemma4ForCausalLM)
and its MTP assistant (Gemma4AssistantForCausalLM) on permissively licensed Python source, then
measures held-out perplexity and acceptance under transformers' own assisted generation.

Usage (device): python3 train/train_pair.py WORK_DIR [all|target|assistant] — a smoke pass on a tiny config runs first,
so a bug costs seconds, not the whole lease. Every stage is bounded by wall clock."""
import gzip
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arch  # noqa: E402
from drafter import train_assistant  # noqa: E402
from trainutil import T0, Schedule, log, make_opt, sample_windows  # noqa: E402
import corpus  # noqa: E402
import gguf_tokenizer  # noqa: E402
import tok as tokmod  # noqa: E402
from evaluate import eval_acceptance, eval_ppl, completions, parity_refs  # noqa: E402

# ---------------------------------------------------------------------------------------- corpus


def reused_tokenizer(cfg):
    """The tokenizer to reuse instead of training one: the resumed target's tokenizer.json, else
    the config's `tokenizer.reuse` (a GGUF or tokenizer.json, relative to the repository root),
    else None."""
    resume = os.environ.get("LOCKSTEP_RESUME")
    if resume:
        return os.path.join(resume, "tokenizer.json")
    rel = cfg["tokenizer"].get("reuse")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), rel) if rel else None


def save_data_cache(d, tr, he, held_docs, info):
    """The token streams for the next stage's call (the same machine, seconds apart)."""
    lens = np.array([len(x) for x in held_docs], dtype=np.int64)
    flat = np.concatenate([np.asarray(x, dtype=np.int32) for x in held_docs])
    np.savez(os.path.join(d, "data_cache.npz"), train=tr.astype(np.int32), heldout=he.astype(np.int32),
             held_flat=flat, held_lens=lens, info=json.dumps(info))


def load_data_cache(d):
    z = np.load(os.path.join(d, "data_cache.npz"))
    offs = np.concatenate([[0], np.cumsum(z["held_lens"])])
    held_docs = [z["held_flat"][offs[i]:offs[i + 1]].tolist() for i in range(len(offs) - 1)]
    return z["train"].astype(np.int64), z["heldout"].astype(np.int64), held_docs, json.loads(str(z["info"]))


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
    for i in order if smoke or not reused_tokenizer(cfg) else []:
        if size >= tcfg["sample_bytes"]:
            break
        sample.append(train_f[i][3])
        size += len(sample[-1])
    vocab_size = cfg["smoke"]["vocab_size"] if smoke else tcfg["vocab_size"]
    reuse = None if smoke else reused_tokenizer(cfg)
    if reuse:  # reuse the committed tokenizer: ids (and so perplexities) stay comparable
        tok_json = gguf_tokenizer.load(reuse)
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
    sched, tokens = Schedule(opt, c, budget_s, steps_cap), 0
    for lr in sched:
        x = sample_windows(data, c["batch"], c["seq_len"] + 1, gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, V), x[:, 1:].reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(list(model.parameters()) + scalars, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step = sched.steps + 1  # steps done, this one included
        tokens += x[:, 1:].numel()
        if step % 10 == 0 or step == 1:
            rec = {"step": step, "tokens": tokens, "t": round(sched.elapsed(), 2), "loss": loss.item(),
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
    return {"steps": sched.steps, "tokens": tokens, "seconds": round(sched.elapsed(), 1),
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
    """Copies the figures so far into the device's return folder, so a run cut short by the
    wall clock still returns its numbers. The models come back as GGUF files, which
    train/run_device.sh converts and quantizes after this script (f16 safetensors of the
    target would not fit the return limits)."""
    if not dest:
        return
    import shutil
    import tarfile
    with tarfile.open(os.path.join(dest, "results.tgz"), "w:gz") as tf:
        for name in ("report.json", "curve_target.json", "curve_assistant.json", "completions.json",
                     "eval_prompts.json", "corpus_files.tsv.gz", "distributions.json", "parity_prompts.json"):
            if os.path.exists(os.path.join(work, name)):
                tf.add(os.path.join(work, name), arcname=name)
    if os.path.exists(os.path.join(work, "parity_f32.npz")):
        shutil.copy(os.path.join(work, "parity_f32.npz"), dest)


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
    report["parity"] = parity_refs(tdir, held_docs, tok_json, ec["parity_lengths"], out)
    log("parity refs", json.dumps(report["parity"]))


def _stage_configs(cfg, smoke):
    tcfg, acfg = dict(cfg["target"]), dict(cfg["assistant"])
    tc, sg, ac, ec = (dict(cfg[k]) for k in ("train_target", "selfgen", "train_assistant", "eval"))
    if smoke:
        s = cfg["smoke"]
        tcfg.update(hidden_size=s["hidden"], intermediate_size=s["inter"], num_hidden_layers=2,
                    layer_types=["sliding_attention", "full_attention"], sliding_window=16)
        acfg.update(hidden_size=s["asst_hidden"], intermediate_size=s["inter"])
        tc.update(batch=4, seq_len=64, warmup=2)
        sg.update(batch=4, prompt_len=8, total_len=40)
        ac.update(batch=4, seq_len=32, warmup=2)
        ec.update(accept_prompt_len=16, accept_new_tokens=12, accept_max_prompts=2, ppl_max_tokens=2000,
                  parity_lengths=[6, 12], completion_prompts=1, completion_prompt_len=24, completion_new_tokens=8,
                  accept_budget_s=30)
    return tcfg, acfg, tc, sg, ac, ec


def _target_stage(cfg, smoke, report, tok_json, data, held, held_docs, info, tcfg, tc, ec, gen, deadline, out, tdir):
    """Trains the target until the stage's deadline (less what evaluating it takes), saves it
    as f16 and measures it: held-out perplexity and greedy completions of held-out functions."""
    V = len(tok_json["model"]["vocab"])
    torch.backends.cuda.matmul.allow_tf32 = True
    target = arch.build_target(tcfg, V)
    report["target_tied"] = arch.check_tied(target)
    report["target_params"] = arch.unique_params(target)
    log(f"target params {report['target_params']:,} tied={report['target_tied']}")
    t_budget = 5 if smoke else max(45.0, deadline - time.time() - tc["eval_reserve_s"])
    log(f"target budget {t_budget:.0f}s")
    curve_t = []
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
    _dump(report, out)
    target = load_target(tdir)  # measure the model as a reader of the saved files sees it
    torch.backends.cuda.matmul.allow_tf32 = False
    report["heldout"] = eval_ppl(target, held, tc["seq_len"], ec["ppl_max_tokens"], info)
    log("held-out", json.dumps(report["heldout"]))
    _dump(report, out)
    report["completions"] = completions(target, held_docs, tok_json, ec, out)
    log("completions", json.dumps(report["completions"]))
    return target


def pipeline(cfg, smoke, files, dists, out, stage="all"):
    """stage "all" runs everything in one call (the smoke pass does); "target" and "assistant"
    split the work over two device calls on the same machine: the first leaves the saved target
    and the token streams in `out` for the second."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(cfg["seed"] + (1 if stage == "assistant" else 0))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(cfg["seed"] + (1 if stage == "assistant" else 0))
    deadline = T0 + cfg["deadline_s"]
    report_path = os.path.join(out, "report.json")
    report = {"smoke": smoke}
    if stage == "assistant":
        with open(report_path) as f:
            report = json.load(f)  # the target stage's figures stay in the one report
        tr, he, held_docs, info = load_data_cache(out)
        with open(os.path.join(out, "lockstep-code-target", "tokenizer.json")) as f:
            tok_json = json.load(f)
    else:
        tok_json, tr, he, held_docs, held_f, train_f, info = build_data(cfg, smoke, files)
        report["data"] = info
        if not smoke:
            write_corpus_record(cfg, files, dists, out)
            save_data_cache(out, tr, he, held_docs, info)
        report["tokenizer_check"] = check_tokenizer(tok_json, held_f, 10 if smoke else 60)
        log("tokenizer check", report["tokenizer_check"])
    tcfg, acfg, tc, sg, ac, ec = _stage_configs(cfg, smoke)
    data = torch.from_numpy(tr).cuda()
    held = torch.from_numpy(he).cuda()
    tdir, adir = os.path.join(out, "lockstep-code-target"), os.path.join(out, "lockstep-code-assistant")
    resume = None if smoke else os.environ.get("LOCKSTEP_RESUME")
    if stage == "assistant" or resume:
        tdir = resume or tdir
        target = load_target(tdir)
        report.setdefault("train_target", {"resumed_from": tdir})
        log("target loaded from", tdir)
        if resume:
            torch.backends.cuda.matmul.allow_tf32 = False
            report["heldout"] = eval_ppl(target, held, tc["seq_len"], ec["ppl_max_tokens"], info)
            log("held-out", json.dumps(report["heldout"]))
    else:
        target = _target_stage(cfg, smoke, report, tok_json, data, held, held_docs, info, tcfg, tc, ec, gen,
                               deadline if stage == "target" else deadline - ac["min_budget_s"], out, tdir)
    _dump(report, out)
    if stage == "target":
        return report
    try:
        _assistant_and_eval(cfg, smoke, report, target, tok_json, data, held, held_docs, tcfg, acfg, sg, ac, ec,
                            5 if smoke else 1e9, deadline, gen, out, tdir, adir)
    except Exception:
        if smoke:
            raise
        report["error"] = traceback.format_exc()
        log(report["error"])
    _dump(report, out)
    return report


def main():
    """python3 train/train_pair.py WORK_DIR [all|target|assistant]: the "assistant" stage reads
    what a "target" stage left in WORK_DIR. A smoke pass over every stage runs first, except
    in the "assistant" stage (the "target" call ran it on the same code seconds earlier)."""
    out = sys.argv[1]
    stage = sys.argv[2] if len(sys.argv) > 2 else "all"
    if stage not in ("all", "target", "assistant"):
        sys.exit(f"unknown stage {stage!r}: use all, target or assistant")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")) as f:
        cfg = json.load(f)
    import transformers
    log("versions", torch.__version__, transformers.__version__, torch.cuda.get_device_name(0), "stage", stage)
    if stage == "assistant":
        if not os.path.exists(os.path.join(out, "data_cache.npz")):
            sys.exit(f"{out}: no target stage output here (the machine was not the same one)")
        files, dists = [], {}
    else:
        files, dists = corpus.collect(cfg["max_file_bytes"], cfg["exclude_dists"])
        log(f"corpus: {len(files)} files, {sum(len(f[3].encode()) for f in files) / 1e6:.1f} MB")
        try:
            pipeline(cfg, True, files, dists, "/tmp/smoke")
            log("SMOKE OK")
        except Exception:
            log("SMOKE FAILED\n" + traceback.format_exc())
            sys.exit(3)
    pipeline(cfg, False, files, dists, out, stage)
    log("ALL DONE")


if __name__ == "__main__":
    main()
