"""Evaluation of the trained pair: held-out perplexity, acceptance under transformers' own
assisted generation (Gemma 4's SinglePositionMultiTokenCandidateGenerator), greedy completions
and reference logits for lockstep's parity check."""
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F


@torch.no_grad()
def eval_ppl(model, held, T, max_tokens, info):
    """Mean next-token NLL over non-overlapping windows of the held-out stream (f32, no TF32)."""
    model.eval()
    V = model.config.vocab_size
    n = min(held.numel() - 1, max_tokens) // T
    nll, cnt = 0.0, 0
    for b in range(0, n, 16):
        rows = torch.arange(b, min(n, b + 16), device=held.device)
        x = held[rows[:, None] * T + torch.arange(T + 1, device=held.device)[None, :]]
        logits = model(input_ids=x[:, :-1], use_cache=False).logits.float()
        nll += F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1), reduction="sum").item()
        cnt += x[:, 1:].numel()
    mean = nll / max(cnt, 1)
    bytes_per_token = info["heldout_bytes"] / max(info["heldout_tokens"], 1)
    return {"tokens": cnt, "nll": mean, "ppl": math.exp(mean), "bytes_per_token": bytes_per_token,
            "bits_per_byte": mean / math.log(2) / bytes_per_token}


def _patch_generator(stats):
    """Records, per drafting round, how many tokens were drafted and how many the target kept."""
    from transformers.generation import candidate_generator as cg
    cls = cg.SinglePositionMultiTokenCandidateGenerator
    cls._lockstep_stats = stats
    if getattr(cls, "_lockstep_patched", False):
        return
    orig_get, orig_upd = cls.get_candidates, cls.update_candidate_strategy

    def get_candidates(self, input_ids, *a, **kw):
        ids, logits = orig_get(self, input_ids, *a, **kw)
        self._lockstep_drafted = ids.shape[1] - input_ids.shape[1]
        return ids, logits

    def update(self, input_ids, scores, num_matches):
        d = getattr(self, "_lockstep_drafted", 0)
        if d > 0:
            cls._lockstep_stats.append((d, int(num_matches)))
        return orig_upd(self, input_ids, scores, num_matches)

    cls.get_candidates, cls.update_candidate_strategy = get_candidates, update
    cls._lockstep_patched = True


@torch.no_grad()
def eval_acceptance(target, asst, held_docs, ec, budget_s, log):
    K, P, N = ec["draft_len"], ec["accept_prompt_len"], ec["accept_new_tokens"]
    asst.generation_config.num_assistant_tokens = K
    asst.generation_config.num_assistant_tokens_schedule = "constant"
    stats = []
    _patch_generator(stats)
    docs = [d for d in held_docs if len(d) + 1 >= P + N]
    rng = np.random.default_rng(7)
    docs = [docs[i] for i in rng.permutation(len(docs))[: ec["accept_max_prompts"]]]
    t0, n_prompts, same, per_prompt = time.time(), 0, 0, []
    for d in docs:
        if time.time() - t0 > budget_s and n_prompts >= 2:
            break
        ids = torch.tensor([[2] + d[: P - 1]], device="cuda")
        am = torch.ones_like(ids)
        before = len(stats)
        a = target.generate(ids, attention_mask=am, assistant_model=asst, max_new_tokens=N, do_sample=False)
        g = target.generate(ids, attention_mask=am, max_new_tokens=N, do_sample=False)
        same += int(a.shape == g.shape and bool((a == g).all()))
        mine = stats[before:]
        per_prompt.append(sum(m for _, m in mine) / max(1, sum(dd for dd, _ in mine)))
        n_prompts += 1
    drafted = sum(d for d, _ in stats)
    matched = sum(m for _, m in stats)
    per_pos = []
    for k in range(1, K + 1):
        reached = [m for d, m in stats if d >= k and m >= k - 1]  # position k was judged
        per_pos.append({"position": k, "conditional": sum(m >= k for m in reached) / max(1, len(reached)),
                        "unconditional": sum(m >= k for d, m in stats if d >= k) /
                        max(1, sum(1 for d, _ in stats if d >= k))})
    return {"prompts": n_prompts, "rounds": len(stats), "drafted": drafted, "accepted": matched,
            "mean_acceptance": matched / max(1, drafted),
            "tokens_per_target_forward": (matched + len(stats)) / max(1, len(stats)),
            "per_position": per_pos, "per_prompt": [round(x, 4) for x in per_prompt],
            "assisted_equals_greedy": f"{same}/{n_prompts}", "seconds": round(time.time() - t0, 1),
            "draft_len": K, "prompt_len": P, "new_tokens": N}


def distinct_ngram_ratio(ids, n=4):
    """Distinct n-grams over all n-grams of one completion: 1.0 never repeats, a loop is near 0."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def function_prompts(held_docs, tok_json, count, length):
    """Held-out prompts that end right after a `def ...:` line, one per file, each exactly
    `length` tokens of the file (no <bos>: the window starts mid-file), so they batch unpadded."""
    import re
    from tokenizers import Tokenizer
    tk = Tokenizer.from_str(json.dumps(tok_json))
    nl = tok_json["model"]["vocab"].get("\n")
    if nl is None:
        return []
    sig = re.compile(r"^\s*def \w+\(.*\)( -> .+)?:$")
    out = []
    for k, d in enumerate(held_docs):
        for j in range(length - 1, len(d) - 1):
            if d[j] == nl and sig.match(tk.decode(d[max(0, j - 48):j]).split("\n")[-1]):
                out.append({"file": k, "ids": d[j + 1 - length:j + 1]})
                break
        if len(out) == count:
            break
    for p in out:
        p["text"] = tk.decode(p["ids"])
    return out


@torch.no_grad()
def completions(target, held_docs, tok_json, ec, out):
    """Greedy completions of held-out function signatures (what the demo shows) and how much
    they repeat themselves; the prompts are saved for lockstep's own measurements."""
    from tokenizers import Tokenizer
    tk = Tokenizer.from_str(json.dumps(tok_json))
    prompts = function_prompts(held_docs, tok_json, ec["completion_prompts"], ec["completion_prompt_len"])
    if not prompts:
        return {"prompts": 0}
    x = torch.tensor([p["ids"] for p in prompts], device="cuda")
    g = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=ec["completion_new_tokens"],
                        do_sample=False)[:, x.shape[1]:].tolist()
    res, ratios = [], []
    for p, ids in zip(prompts, g):
        ids = ids[:ids.index(1)] if 1 in ids else ids  # up to <eos>
        r = distinct_ngram_ratio(ids)
        ratios.append(r) if r is not None else None
        res.append({"prompt": p["text"], "completion": tk.decode(ids), "distinct_4gram": r})
    with open(os.path.join(out, "completions.json"), "w") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "eval_prompts.json"), "w") as f:
        json.dump(prompts, f, ensure_ascii=False)
    return {"prompts": len(res), "new_tokens": ec["completion_new_tokens"],
            "distinct_4gram_mean": float(np.mean(ratios)) if ratios else None}


@torch.no_grad()
def parity_refs(tdir, held_docs, tok_json, lengths, out, keep_rows=96):
    """Logits of the saved (f16) target in transformers on the CPU: f32 eager, and f64 as a
    tighter reference, for prompts of a few lengths (each <bos> + held-out tokens; the longest
    passes the sliding window). Only the last `keep_rows` positions of each prompt are kept."""
    from transformers import Gemma4ForCausalLM
    from tokenizers import Tokenizer
    tk = Tokenizer.from_str(json.dumps(tok_json))
    src = max(held_docs, key=len)
    prompts = [[2] + src[i * 7: i * 7 + n - 1] for i, n in enumerate(lengths)]
    meta, arrays = [], {}
    for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        m = Gemma4ForCausalLM.from_pretrained(tdir, dtype=dt, attn_implementation="eager").eval()
        for i, p in enumerate(prompts):
            lg = m(input_ids=torch.tensor([p])).logits[0, -keep_rows:]
            arrays[f"{tag}_{i}"] = lg.to(torch.float32).numpy()
        del m
    for i, p in enumerate(prompts):
        d = np.abs(arrays[f"f32_{i}"].astype(np.float64) - arrays[f"f64_{i}"].astype(np.float64))
        meta.append({"ids": p, "text": tk.decode(p[1:]), "first_row": max(0, len(p) - keep_rows),
                     "f32_vs_f64_maxabs": float(d.max()),
                     "argmax_f32": arrays[f"f32_{i}"].argmax(-1).tolist()})
    for tag in ("f32", "f64"):
        np.savez_compressed(os.path.join(out, f"parity_{tag}.npz"),
                            **{k: v for k, v in arrays.items() if k.startswith(tag)})
    with open(os.path.join(out, "parity_prompts.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False)
    return [{"len": len(x["ids"]), "f32_vs_f64_maxabs": x["f32_vs_f64_maxabs"]} for x in meta]
