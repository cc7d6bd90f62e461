"""Shared by the training stages: the run's clock and log, the learning-rate schedule, the
optimizer and random training windows."""
import math
import os
import time

import torch

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
