"""Measures a target/drafter pair with lockstep itself on the held-out prompts a training run saved
(eval_prompts.json: windows of held-out files ending right after a `def ...:` line): greedy
completions and their distinct 4-gram ratio, then the same prompts speculatively at one fixed
draft length (every round drafts K tokens), with acceptance per draft position and a check that the tokens equal the plain ones.
Standard library only, so it runs on the dev machine next to the build.

Usage: python3 train/eval_lockstep.py TARGET.gguf DRAFT.gguf eval_prompts.json OUT.json
       [--bin build/src/lockstep] [-n 128] [--draft-max 3] [--threads 2]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def distinct_ngram_ratio(ids, n=4):
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def run_prompts(args, prompts, draft):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for p in prompts:
            f.write(json.dumps(p["ids"]) + "\n")
        path = f.name
    cmd = [args.bin, "generate", "-m", args.target, "--prompts-file", path, "-n", str(args.n), "--temp", "0",
           "--threads", str(args.threads), "--parallel", "1", "--no-hash"]
    if draft:
        cmd += ["--draft", args.draft, "--draft-max", str(args.draft_max), "--fixed-draft"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=3600).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"{' '.join(cmd)} failed ({e.returncode}): {e.stderr.strip()}")
    finally:
        os.unlink(path)
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["index"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("prompts")
    ap.add_argument("out")
    ap.add_argument("--bin", default="build/src/lockstep")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--draft-max", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with open(args.prompts) as f:
        prompts = json.load(f)

    plain = run_prompts(args, prompts, draft=False)
    spec = run_prompts(args, prompts, draft=True)
    ratios = [distinct_ngram_ratio(r["tokens"]) for r in plain]
    ratios = [r for r in ratios if r is not None]
    k = args.draft_max
    drafted_at, accepted_at = [0] * k, [0] * k
    for r in spec:
        for i in range(min(k, len(r["draft"]["drafted_at"]))):
            drafted_at[i] += r["draft"]["drafted_at"][i]
            accepted_at[i] += r["draft"]["accepted_at"][i]
    drafted = sum(r["draft"]["drafted"] for r in spec)
    accepted = sum(r["draft"]["accepted"] for r in spec)
    rounds = sum(r["draft"]["rounds"] for r in spec)
    report = {
        "target": os.path.basename(args.target), "draft": os.path.basename(args.draft),
        "prompts": len(prompts), "new_tokens": args.n, "draft_max": k,
        "distinct_4gram_mean": sum(ratios) / len(ratios) if ratios else None,
        "distinct_4gram_per_prompt": [round(x, 3) for x in ratios],
        "speculative_equals_plain": f"{sum(a['tokens'] == b['tokens'] for a, b in zip(plain, spec))}/{len(plain)}",
        "drafted": drafted, "accepted": accepted, "acceptance": accepted / max(drafted, 1),
        "rounds": rounds, "tokens_per_target_pass": (accepted + rounds) / max(rounds, 1),
        "per_position": [{"position": i + 1, "drafted": drafted_at[i], "accepted": accepted_at[i],
                          "rate": accepted_at[i] / max(drafted_at[i], 1)} for i in range(k)],
        "completions": [{"prompt": p.get("text", ""), "completion": r["text"]} for p, r in zip(prompts, plain)],
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
    summary = {x: report[x] for x in ("distinct_4gram_mean", "speculative_equals_plain", "acceptance",
                                      "tokens_per_target_pass", "per_position")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
