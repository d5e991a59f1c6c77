#!/usr/bin/env python3
"""Attention at the head shapes real models use, against llama.cpp's own kernels.

For each case gen-model writes a small random model with one of the head shapes of
the architectures supported here (head sizes 64, 80, 96, 128 and 256; one to seven
query heads per K/V head; Gemma 3's windowed and global layers), and llama.cpp 0c1e570
(scripts/llama-cpp-tools/split_logits.cpp linked against its libllama) gives the last
token's logits (an FNV-1a hash of their bits) of a 600-token prompt decoded in several
splits, so that every attention path runs:
- flash attention's tiled path (whole prompt: micro-batches of 512 and 88 queries),
- its split-KV decode path (the last token alone against 599 keys; 1, 2 and 3 threads:
  llama.cpp cuts the keys by its thread count),
- its one-row path (40 queries against 560 keys; micro-batches of 32),
- the same with Q8_0 and Q4_0 K and V caches (one-row throughout),
- and without flash attention (the KQ and KQV matrix products, F16 and F32 caches);
and llama-completion's greedy text through context shifts with a Q8_0 cache (the
K-shift turns rotated keys back before the rope and forward after it).
Writes tests/data/attention_goldens.json; tests/attention_shapes.rs makes the same
models and checks ours bit for bit.

The build must compute the reference's bits (a real AVX-512 build, or
scripts/llama-cpp-avx512emu on a CPU without AVX-512).
Usage: scripts/attention_goldens/make_goldens.py [BUILD [SRC]]
  (default /work/ref/build-avx512emu and /work/ref/llama.cpp-avx512emu-src)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "llama-cpp-tools"))
import build  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build-avx512emu"
SRC = sys.argv[2] if len(sys.argv) > 2 else "/work/ref/llama.cpp-avx512emu-src"

# (name, gen-model arguments): small models (two or three layers, a 512-token
# synthesized vocabulary) with real models' head shapes.
CASES = [
    ("llama-d64-gqa4", ["--arch", "llama", "--embd", "512", "--layers", "2", "--heads", "8",
                        "--kv-heads", "2", "--head-dim", "64", "--ff", "1024"]),
    ("llama-d80-mha", ["--arch", "llama", "--embd", "320", "--layers", "2", "--heads", "4",
                       "--kv-heads", "4", "--head-dim", "80", "--ff", "640"]),
    ("phi3-d96-mha", ["--arch", "phi3", "--embd", "384", "--layers", "2", "--heads", "4",
                      "--kv-heads", "4", "--head-dim", "96", "--ff", "768"]),
    ("qwen2-d128-gqa7", ["--arch", "qwen2", "--embd", "896", "--layers", "2", "--heads", "7",
                         "--kv-heads", "1", "--head-dim", "128", "--ff", "1024"]),
    ("qwen3-d128-gqa2", ["--arch", "qwen3", "--embd", "512", "--layers", "2", "--heads", "8",
                         "--kv-heads", "4", "--head-dim", "128", "--ff", "1024"]),
    # Gemma 3 270M's attention: 4 heads of 256 on one K/V head, windowed layers (a
    # 128-token window here, so that 600 tokens pass it) and a global one.
    ("gemma3-d256-gqa4-swa", ["--arch", "gemma3", "--embd", "640", "--layers", "3", "--heads", "4",
                              "--kv-heads", "1", "--head-dim", "256", "--ff", "1024", "--swa", "128",
                              "--swa-pattern", "3"]),
]
N_TOKENS = 600
# (split, flash attention, micro-batch, threads, K type, V type).
RUNS = [
    ([600], 1, 512, 2, "f16", "f16"),
    ([599, 1], 1, 512, 2, "f16", "f16"),
    ([599, 1], 1, 512, 1, "f16", "f16"),
    ([599, 1], 1, 512, 3, "f16", "f16"),
    ([560, 40], 1, 512, 2, "f16", "f16"),
    ([600], 1, 32, 2, "f16", "f16"),
    ([600], 1, 512, 2, "f32", "f32"),
    ([599, 1], 1, 512, 2, "f32", "f32"),
    ([600], 1, 512, 2, "q8_0", "q8_0"),
    ([599, 1], 1, 512, 2, "q8_0", "q8_0"),
    ([599, 1], 1, 512, 2, "q4_0", "q4_0"),
    ([600], 0, 512, 2, "f16", "f16"),
    ([599, 1], 0, 512, 2, "f16", "f16"),
    ([599, 1], 0, 512, 2, "f32", "f32"),
]


# llama-completion runs per case (the model's path and -t 2 are added): generation
# past a 256-token context, shifting a Q8_0 cache (Gemma 3 needs --swa-full to shift).
CLI_RUNS = [
    ["-p", "Once upon a time", "-c", "256", "-n", "400", "--context-shift", "-ctk", "q8_0", "-ctv", "q8_0",
     "--temp", "0", "-no-cnv", "--no-display-prompt"],
]


def completion(model, args):
    """llama-completion's stdout (the longest of a few runs: its log thread can lose
    the tail at exit), or None when it fails."""
    best = None
    for _ in range(3):
        r = subprocess.run([os.path.join(BUILD, "bin", "llama-completion"), "-m", model, "-t", "2", *args],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=1800)
        if r.returncode != 0:
            return None
        best = max(best or b"", r.stdout, key=len)
    return best


def tokens(n, n_vocab, seed):
    """The test's pseudo-random token ids (tests/attention_shapes.rs draws the same)."""
    x = (seed * 2654435761) & 0xFFFFFFFF or 1
    out = []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(x % (n_vocab - 3) + 3)
    return out


def main():
    subprocess.run(["cargo", "build", "--release", "--example", "gen-model"], cwd=ROOT, check=True)
    gen = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                       "release", "examples", "gen-model")
    cases = []
    with tempfile.TemporaryDirectory() as d:
        exe = build.tool("split_logits", BUILD, SRC, d)
        for k, (name, args) in enumerate(CASES):
            model = os.path.join(d, f"{name}.gguf")
            gen_args = [*args, "--type", "f16", "--vocab", "512", "--seed", "42"]
            subprocess.run([gen, *gen_args, "-o", model], check=True, capture_output=True)
            toks = tokens(N_TOKENS, 512, k + 1)
            tok_path = os.path.join(d, "tokens.txt")
            with open(tok_path, "w") as f:
                f.write(" ".join(map(str, toks)))
            runs = []
            for split, fa, ub, t, ctk, ctv in RUNS:
                r = subprocess.run([exe, model, tok_path, ",".join(map(str, split)), "--fa", str(fa),
                                    "--ub", str(ub), "-t", str(t), "--ctk", ctk, "--ctv", ctv],
                                   capture_output=True, timeout=1800)
                if r.returncode == 0:
                    run = json.loads(r.stdout)
                else:
                    # llama.cpp refuses the context (a quantized cache whose rows are not
                    # whole blocks, head size 80 or 96 with Q8_0): ours must too.
                    run = {"split": split, "n_ubatch": ub, "flash_attn": fa, "n_threads": t,
                           "type_k": ctk, "type_v": ctv, "refused": r.stderr.decode().strip()}
                runs.append(run)
                print(f"{name}: split {split} fa {fa} ub {ub} t {t} {ctk}/{ctv}: "
                      f"{run.get('fnv64', 'refused')}", file=sys.stderr)
            cli = []
            for a in CLI_RUNS:
                a = [*a, "--swa-full"] if name.startswith("gemma3") else a
                text = completion(model, a)
                # None: llama.cpp failed (it crashes shifting a quantized K whose heads
                # are not a multiple of 64); nothing to compare then.
                cli.append({"args": a, "stdout_hex": None if text is None else text.hex()})
                print(f"{name}: cli {' '.join(a)}: {'failed' if text is None else len(text)}",
                      file=sys.stderr)
            cases.append({"name": name, "gen_model": gen_args, "token_seed": k + 1,
                          "tokens": toks, "runs": runs, "cli": cli})
    out = {
        "about": "llama.cpp 0c1e570 (AVX-512 VNNI build, or scripts/llama-cpp-avx512emu): the last "
                 "token's logits after each split, on gen-model's models with real head shapes; made "
                 "by scripts/attention_goldens/make_goldens.py",
        "cases": cases,
    }
    with open(os.path.join(ROOT, "tests", "data", "attention_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
