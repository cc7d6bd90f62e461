"""Trains the MTP assistant (drafter) against a frozen target the way transformers' assisted
generation drives it: the target's embedding of the last token and its last hidden state in, the
target's K/V of its last sliding and last full layer shared, stale K/V of rejected drafts
emulated, several draft steps unrolled at one position, KL to the target's distribution."""
import json

import torch

from trainutil import Schedule, log, make_opt, sample_windows


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
    sched, checked = Schedule(opt, c, budget_s, steps_cap), {}
    for lr in sched:
        step = sched.steps  # 0-based
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
        step += 1  # now steps done
        if len(rec) > 1:
            rec.update(t=round(sched.elapsed(), 2), lr=lr, loss=total.item())
            curve.append(rec)
            if step % 100 == 0 or step == 1:
                log("assistant", json.dumps(rec))
    asst.eval()
    return {"steps": sched.steps, "seconds": round(sched.elapsed(), 1), "input_check": checked, "seq_len": T}
