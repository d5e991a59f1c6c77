#!/usr/bin/env python3
"""Plots the per-position NLL written by `examples/self-extend-nll.rs`.

usage: scripts/plot-self-extend.py [CSV] [PNG]   (defaults: target/self-extend.csv,
docs/self-extend.png). Needs matplotlib (`pip install matplotlib`).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {
    "plain": "plain attention (one long context)",
    "shift": "context shift (512-token window)",
    "ga_llamacpp": "llama.cpp Self-Extend (KV shift, its seq_div sign)",
    "ga_fixed": "llama.cpp Self-Extend, sign corrected",
    "exact": "exact Self-Extend (bi-level attention)",
}
SMOOTH = 64


def moving_average(v, n):
    out, s = [], 0.0
    for i, x in enumerate(v):
        s += x
        if i >= n:
            s -= v[i - n]
        out.append(s / min(i + 1, n))
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "target/self-extend.csv"
    dst = sys.argv[2] if len(sys.argv) > 2 else "docs/self-extend.png"
    with open(src) as f:
        rows = list(csv.DictReader(f))
    pos = [int(r["position"]) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    for key, label in LABELS.items():
        if key in rows[0]:
            ax.plot(pos, moving_average([float(r[key]) for r in rows], SMOOTH), label=label, lw=1.4)
    ax.axvline(512, color="grey", ls="--", lw=1)
    ax.text(520, 0.06, "trained context (512)", color="grey")
    ax.set_xlabel("position in the text (tokens)")
    ax.set_ylabel(f"negative log-likelihood (moving average of {SMOOTH})")
    ax.set_title("stories260K past its trained context: G = 4, W = 256")
    ax.set_yscale("log")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
