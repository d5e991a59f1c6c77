#!/usr/bin/env python3
"""Goldens for the architectures added after llama and qwen2, made by llama.cpp itself.

For each case, gen-model writes a small random model (`gen-model --arch NAME --type T`,
the architecture's example shape, seed 42); then llama.cpp 0c1e570 gives
- teacher-forced logits of the first 64 tokens of ../shared/golden/text/story-a.txt
  (scripts/llama-cpp-tools/dump_logits.cpp, linked against the build's libllama: the first 256 values of
  the rows at a few positions, and an FNV-1a hash of every logit's bits),
- llama-completion's greedy text, and its text with context shift (`-c 64
  --context-shift`) and with Self-Extend (`--grp-attn-n 4 --grp-attn-w 128`), plus the
  longer runs of EXTRA_RUNS for some cases; each also with `-fa off` and with an F32
  KV cache, whose texts agree with the first up to `stable_bytes` (the rest of a
  random model's greedy text can hang on near-ties that float rounding decides),
- llama-perplexity's final estimate on story-a.txt with `-c 64`, and the estimates
  without flash attention and with an F32 KV cache (`ppl_variants`).
Writes tests/data/arch_goldens.json; tests/arch_goldens.rs makes the same models and
checks ours against it (no llama.cpp needed there).

Usage: scripts/arch_goldens/make_goldens.py [LLAMA_CPP_SRC] [LLAMA_CPP_BUILD]
(default /work/ref/llama.cpp-src and /work/ref/build, as benches/compare-llama-cpp.sh
builds it from the llama-cpp-python 0.3.36 source package). The build must compute the
AVX-512 build's bits: on a CPU without AVX-512, scripts/llama-cpp-avx512emu's
(/work/ref/llama.cpp-avx512emu-src /work/ref/build-avx512emu).
"""
import base64
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "llama-cpp-tools"))
import build  # noqa: E402
SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/llama.cpp-src"
BUILD = sys.argv[2] if len(sys.argv) > 2 else "/work/ref/build"
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
TEXT = os.path.join(SHARED, "golden", "text", "story-a.txt")

CASES = [
    ("qwen3", "f32", []), ("qwen3", "f16", []), ("qwen3", "q8_0", []), ("qwen3", "q4_k_m", []),
    # LongRoPE: the example is trained at 512 from an original 256, so the logits (n_ctx
    # 512) and the text (n_ctx 4096) use the long factors, the perplexity (-c 64) the
    # short ones.
    # With Phi-3's own vocabulary: llama.cpp gives special tokens of a model named
    # "phi3" its attributes and needs its special tokens there.
    *[("phi3", t, ["--vocab", "32064", "--vocab-file", "@S/models/llama-vocab/ggml-vocab-phi-3.gguf"])
      for t in ("f32", "f16", "q8_0", "q4_k_m")],
    # Eight experts, two per token (mul_mat_id on F32, F16 and quantized experts).
    ("qwen3moe", "f32", []), ("qwen3moe", "f16", []), ("qwen3moe", "q8_0", []), ("qwen3moe", "q4_k_m", []),
    # Llama 3's rope frequency factors (rope_freqs.weight).
    ("llama", "f32", ["--llama3-rope", "--rope-base", "500000"]),
    ("llama", "q8_0", ["--llama3-rope", "--rope-base", "500000"]),
    # The two architectures the shared goldens cover, through the same path: a check
    # of the script and the test themselves.
    ("qwen2", "f32", []), ("llama", "q4_0", []),
    # Sliding-window layers (window 16, every second layer global) with llama.cpp's
    # pair of caches; the long runs below make the windowed cache wrap around.
    ("gemma3", "f32", []), ("gemma3", "f16", []), ("gemma3", "q8_0", []), ("gemma3", "q4_k_m", []),
    # Another pattern and window, the windowed layers' own rope base, soft-capped logits.
    ("gemma3", "f32", ["--swa", "24", "--swa-pattern", "3", "--rope-base-swa", "20000", "--softcap", "30"]),
    # Real models' head shapes: heads of 80, 96 and 128, seven query heads on one K/V
    # head, and Gemma 3 270M's attention (four heads of 256 on one K/V head, five
    # windowed layers to a global one). tests/attention_shapes.rs checks every
    # attention path at these shapes bit for bit.
    ("llama", "q8_0", ["--embd", "320", "--heads", "4", "--kv-heads", "4", "--head-dim", "80"]),
    ("phi3", "f16", ["--embd", "384", "--heads", "4", "--kv-heads", "4", "--head-dim", "96"]),
    ("qwen2", "q4_k_m", ["--embd", "896", "--heads", "7", "--kv-heads", "1", "--head-dim", "128"]),
    ("qwen3", "q8_0", ["--heads", "8", "--kv-heads", "4", "--head-dim", "128"]),
    ("gemma3", "q4_k_m", ["--embd", "640", "--layers", "6", "--heads", "4", "--kv-heads", "1", "--head-dim", "256",
                          "--swa", "128", "--swa-pattern", "6"]),
]
# Runs only some cases make (by architecture and file type): the sliding window's
# cache wrapping around, the context shift it allows (-c 256: both caches 256 cells)
# and refuses (-c 512 -ub 64: a 256-cell windowed cache; llama.cpp then stops at a
# full context), --swa-full, and Self-Extend's KV-shift form over both caches.
PROMPT = "Once upon a time there was a"
EXTRA_RUNS = {
    ("gemma3", "f32"): [
        ["-p", PROMPT, "-c", "256", "--context-shift", "-n", "600", "--temp", "0", "-no-cnv"],
        ["-p", PROMPT, "-c", "512", "-ub", "64", "-b", "64", "--context-shift", "-n", "700", "--temp", "0",
         "-no-cnv"],
        ["-p", PROMPT, "-c", "512", "-ub", "64", "-b", "64", "--swa-full", "--context-shift", "-n", "700",
         "--temp", "0", "-no-cnv"],
        ["-p", PROMPT, "-c", "2048", "-ub", "64", "-b", "64", "--grp-attn-n", "4", "--grp-attn-w", "128",
         "-n", "600", "--temp", "0", "-no-cnv"],
    ],
    ("gemma3", "q8_0"): [
        ["-p", PROMPT, "-c", "1024", "-ub", "32", "-b", "32", "-n", "400", "--temp", "0", "-no-cnv"],
    ],
}
POSITIONS = [0, 31, 63]
ROW_VALUES = 256


def build_dump_logits(d):
    return build.tool("dump_logits", BUILD, SRC, d)


# llama-completion runs per case: greedy text, then the context window tools.
CLI_RUNS = [
    ["-p", "Once upon a time", "-n", "32", "--temp", "0", "--no-display-prompt", "-no-cnv"],
    ["-p", "Once upon a time there was a", "-c", "64", "--context-shift", "-n", "100", "--temp", "0",
     "-no-cnv"],
    ["-p", "Once upon a time there was a", "-c", "2048", "--grp-attn-n", "4", "--grp-attn-w", "128",
     "-n", "20", "--temp", "0", "-no-cnv"],
]


def completion(bin_dir, d, model, args):
    """llama-completion's stdout for `args`, trailing white space dropped. It prints
    through an asynchronous log thread that sometimes loses the last piece at exit (and
    more so through a pipe): the longest of a few runs into a file is its output."""
    path = os.path.join(d, "cli.txt")
    best = b""
    for _ in range(5):
        with open(path, "wb") as out:
            subprocess.run([os.path.join(bin_dir, "llama-completion"), "-m", model, "-t", "2", *args],
                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL,
                           check=True, timeout=600)
        with open(path, "rb") as f:
            best = max(best, f.read().rstrip(), key=len)
    return best


PPL_VARIANTS = [("default", []), ("fa_off", ["-fa", "off"]), ("f32_kv", ["-ctk", "f32", "-ctv", "f32"])]


def perplexity(bin_dir, d, model, variant):
    """llama-perplexity's final estimate on story-a.txt with -c 64. The estimate line
    too can be lost at exit: run until it is there."""
    ppl_path = os.path.join(d, "ppl.txt")
    for _ in range(5):
        with open(ppl_path, "wb") as ppl_out:
            subprocess.run([os.path.join(bin_dir, "llama-perplexity"), "-m", model, "-f", TEXT,
                            "-c", "64", "-t", "2", *variant], stdin=subprocess.DEVNULL, stdout=ppl_out,
                           stderr=subprocess.STDOUT, check=True, timeout=600)
        with open(ppl_path, "rb") as f:
            m = re.search(rb"Final estimate: PPL = ([0-9.]+)", f.read())
        if m:
            return float(m.group(1))
    raise RuntimeError(f"no perplexity estimate from {model} {variant}")


def run(args, **kw):
    return subprocess.run(args, capture_output=True, check=True, timeout=600, **kw)


def main():
    bin_dir = os.path.join(BUILD, "bin")
    subprocess.run(["cargo", "build", "--release", "--example", "gen-model"], cwd=ROOT, check=True)
    gen = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                       "release", "examples", "gen-model")
    cases = []
    with tempfile.TemporaryDirectory() as d:
        dump = build_dump_logits(d)
        for i, (arch, typ, extra) in enumerate(CASES):
            model = os.path.join(d, f"{i}-{arch}-{typ}.gguf")
            gen_args = ["--arch", arch, "--type", typ, "--seed", "42", *extra]
            run([gen, *[a.replace("@S", SHARED) for a in gen_args], "-o", model])
            logits = json.loads(run([dump, model, TEXT, "--n-tokens", "64", "-t", "2",
                                     "--positions", ",".join(map(str, POSITIONS))]).stdout)
            runs = CLI_RUNS + EXTRA_RUNS.get((arch, typ), [])
            cli = []
            for a in runs:
                text = completion(bin_dir, d, model, a)
                # A random model's next tokens are often near-ties: the bytes after
                # llama.cpp's own texts part (without flash attention, with an F32 KV
                # cache) depend on float rounding, not on the model, and are not
                # compared.
                stable = len(text)
                for variant in (["-fa", "off"], ["-ctk", "f32", "-ctv", "f32"]):
                    other = completion(bin_dir, d, model, [*a, *variant])
                    if other != text:
                        stable = min(stable, next((i for i, (x, y) in enumerate(zip(text, other))
                                                   if x != y), min(len(text), len(other))))
                cli.append({"args": a, "stdout_hex": text.hex(), "stable_bytes": stable})
            ppl = {name: perplexity(bin_dir, d, model, variant) for name, variant in PPL_VARIANTS}
            cases.append({
                "arch": arch, "type": typ, "gen_model": gen_args,
                "tokens": logits["tokens"], "n_vocab": logits["n_vocab"], "fnv64": logits["fnv64"],
                "positions": logits["positions"],
                # The first ROW_VALUES f32 values of each row, exactly (a Python float
                # holds an f32): large vocabularies would make the file megabytes.
                "rows": [list(struct.unpack(f"<{logits['n_vocab']}f", base64.b64decode(r)))[:ROW_VALUES]
                         for r in logits["rows"]],
                # Stdout as hex bytes: a random model's text need not be UTF-8.
                "cli": cli,
                "ppl_args": ["-f", "@S/golden/text/story-a.txt", "-c", "64"],
                "ppl": ppl["default"],
                # llama.cpp's own estimates without flash attention and with an F32
                # cache: how far its own float rounding moves the estimate.
                "ppl_variants": list(ppl.values()),
            })
            print(f"{arch} {typ} {' '.join(extra)}: ppl {ppl}, fnv {logits['fnv64']}", file=sys.stderr)
    out = {
        "about": "llama.cpp 0c1e570's AVX-512 (VNNI, no AMX) arithmetic, 2 threads, F16 KV cache, on "
                 "gen-model's models of each architecture and real models' head shapes; made by "
                 "scripts/arch_goldens/make_goldens.py (last with scripts/llama-cpp-avx512emu's build, "
                 "which reproduced the earlier cases unchanged)",
        "text": "golden/text/story-a.txt, first 64 tokens with BOS",
        "cases": cases,
    }
    with open(os.path.join(ROOT, "tests", "data", "arch_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
