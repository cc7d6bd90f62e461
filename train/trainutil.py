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


class Schedule:
    """The optimizer steps a wall-clock budget allows (at most `steps_cap` when set), each one's
    learning rate set on `opt` before the loop body runs: `for lr in sched:`; inside the body
    `sched.steps` is the 0-based index of the step, after the loop the number of steps done."""

    def __init__(self, opt, c, budget_s, steps_cap):
        self.opt, self.c, self.budget_s, self.steps_cap = opt, c, budget_s, steps_cap
        self.t_start, self.steps = time.time(), 0

    def elapsed(self):
        return time.time() - self.t_start

    def __iter__(self):
        while True:
            progress = self.elapsed() / self.budget_s
            if progress >= 1.0 or (self.steps_cap and self.steps >= self.steps_cap):
                return
            lr = lr_at(self.steps, progress, self.c)
            for g in self.opt.param_groups:
                g["lr"] = lr
            yield lr
            self.steps += 1
