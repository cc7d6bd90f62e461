"""Draws the training curves (target cross-entropy, assistant KL per draft step) as one SVG,
with no plotting library: usage `python3 train/plot.py curve_target.json curve_assistant.json OUT.svg`."""
import gzip
import json
import math
import sys

W, H, PAD = 900, 360, 60


def load_curve(path):
    """A curve file, plain or gzipped (older runs' curves are kept gzipped: the repository's size)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def panel(x0, title, series, xlabel, ylabel):
    """series: list of (label, colour, [(x, y)]); returns SVG elements for one panel."""
    pw, ph = W / 2 - PAD - 20, H - 2 * PAD
    xs = [x for _, _, pts in series for x, _ in pts]
    ys = [y for _, _, pts in series for _, y in pts]
    xmin, xmax = min(xs), max(xs)
    ymin, ymax = 0.0, math.ceil(max(ys))

    def sx(x):
        return x0 + PAD + (x - xmin) / max(xmax - xmin, 1e-9) * pw

    def sy(y):
        return PAD + ph - (y - ymin) / max(ymax - ymin, 1e-9) * ph

    out = [f'<rect x="{x0 + PAD}" y="{PAD}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>',
           f'<text x="{x0 + PAD + pw / 2}" y="{PAD - 12}" text-anchor="middle" font-size="14">{title}</text>',
           f'<text x="{x0 + PAD + pw / 2}" y="{H - 15}" text-anchor="middle" font-size="12">{xlabel}</text>',
           f'<text x="{x0 + 15}" y="{PAD + ph / 2}" font-size="12" transform="rotate(-90 {x0 + 15} {PAD + ph / 2})"'
           f' text-anchor="middle">{ylabel}</text>']
    for k in range(5):
        y = ymin + (ymax - ymin) * k / 4
        out.append(f'<text x="{x0 + PAD - 5}" y="{sy(y) + 4}" text-anchor="end" font-size="10">{y:.1f}</text>')
        out.append(f'<line x1="{x0 + PAD}" x2="{x0 + PAD + pw}" y1="{sy(y)}" y2="{sy(y)}" stroke="#eee"/>')
        x = xmin + (xmax - xmin) * k / 4
        out.append(f'<text x="{sx(x)}" y="{PAD + ph + 15}" text-anchor="middle" font-size="10">{x:.3g}</text>')
    for i, (label, colour, pts) in enumerate(series):
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out.append(f'<text x="{x0 + PAD + pw - 5}" y="{PAD + 15 + 14 * i}" text-anchor="end" font-size="11"'
                   f' fill="{colour}">{label}</text>')
    return out


def main():
    ct, ca, dest = sys.argv[1:4]
    t, a = load_curve(ct), load_curve(ca)
    els = panel(0, "Target: train cross-entropy (nats/token)",
                [("train loss", "#1f77b4", [(r["tokens"] / 1e6, r["loss"]) for r in t])], "tokens (millions)", "loss")
    colours = ["#d62728", "#2ca02c", "#9467bd"]
    els += panel(W / 2, "Assistant: KL(target || draft) per draft step",
                 [(f"step {k}", colours[k - 1], [(r["step"], r[f"kl{k}"]) for r in a if f"kl{k}" in r])
                  for k in (1, 2, 3)], "optimizer step", "KL (nats)")
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>'] + els + ["</svg>"]
    with open(dest, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
