#!/usr/bin/env python3
"""Expected embeddings of the encoder architectures (and Qwen3 as an embedder and a
reranker), made by llama.cpp's own `llama-embedding`.

For each case, gen-model writes a small random model (`gen-model --arch NAME --type T`
plus the case's flags, the architecture's example shape, seed 42); then
`llama-embedding -m FILE -p PROMPTS --embd-normalize -1 --embd-output-format array
--pooling P -fa on|off --verbose-prompt -t 2` gives, per run, the tokens of each
prompt and the embeddings (one per prompt when pooled, one per token with pooling
none, the scores with rank pooling), printed with 7 decimals. The prompts go in one
batch, one sequence each, as llama-embedding does; each is also run alone.

Writes tests/data/encoder_models.json; tests/encoder_models.rs makes the same models
in-process and checks ours against it within 2e-6 (no llama.cpp needed there).

Usage (from the repository root, after `cargo build --release --example gen-model`):

    scripts/encoder_models/make.py [LLAMA_EMBEDDING]

LLAMA_EMBEDDING defaults to /work/ref/build-avx512emu/bin/llama-embedding (llama.cpp
0c1e570 computing the AVX-512 build's bits, as ours do).

llama.cpp's logger is a leaked singleton whose worker thread prints asynchronously
(llama.cpp issue 22142): llama-embedding often exits before the end of its output is
printed. The script preloads a tiny shim (built with `cc`) whose destructor waits a
moment at exit, so that the worker prints everything, and checks the output is whole.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMBEDDING = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build-avx512emu/bin/llama-embedding"
GEN_MODEL = os.path.join(ROOT, "target", "release", "examples", "gen-model")
OUT = os.path.join(ROOT, "tests", "data", "encoder_models.json")
# "@S" in a case's flags: the shared test data (../shared, or $LLAMA_SHARED_DIR).
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))

PROMPTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris!",
]
# Query and document, separated by llama-embedding's --cls-separator (a tab).
PAIRS = [
    ["what is the capital of france?", "Paris is the capital of France."],
    ["what is the capital of france?", "The cat sat on the mat."],
]

# (name, gen-model flags, [(pooling, inputs)]): inputs "prompts" or "pairs"; each run
# with flash attention off and on.
EMBED_RUNS = [("none", "prompts"), ("mean", "prompts"), ("cls", "prompts")]
CASES = [
    ("bert-f32", ["--arch", "bert", "--type", "f32"], EMBED_RUNS),
    ("bert-f16", ["--arch", "bert", "--type", "f16"], [("mean", "prompts")]),
    ("bert-q8_0", ["--arch", "bert", "--type", "q8_0"], [("mean", "prompts")]),
    ("bert-q4_k_m", ["--arch", "bert", "--type", "q4_k_m"], [("mean", "prompts")]),
    ("nomic-bert-f32", ["--arch", "nomic-bert", "--type", "f32"], [("none", "prompts"), ("mean", "prompts")]),
    ("nomic-bert-f16", ["--arch", "nomic-bert", "--type", "f16"], [("mean", "prompts")]),
    ("nomic-bert-q8_0", ["--arch", "nomic-bert", "--type", "q8_0"], [("mean", "prompts")]),
    ("jina-bert-v2-f32", ["--arch", "jina-bert-v2", "--type", "f32"], [("none", "prompts"), ("mean", "prompts")]),
    ("jina-bert-v2-f16", ["--arch", "jina-bert-v2", "--type", "f16"], [("mean", "prompts")]),
    ("jina-bert-v2-q4_k_m", ["--arch", "jina-bert-v2", "--type", "q4_k_m"], [("mean", "prompts")]),
    # BGE's real WordPiece vocabulary (30522 tokens, from the shared vocabularies).
    ("bert-bge-vocab", ["--arch", "bert", "--type", "f16", "--vocab", "30522", "--vocab-file",
                        "@S/models/llama-vocab/ggml-vocab-bert-bge.gguf"], [("mean", "prompts")]),
    ("bert-rerank", ["--arch", "bert", "--type", "f32", "--rerank"], [("rank", "pairs")]),
    ("jina-bert-v2-rerank", ["--arch", "jina-bert-v2", "--type", "f32", "--rerank"], [("rank", "pairs")]),
    ("qwen3-last", ["--arch", "qwen3", "--type", "f32", "--pooling", "last"],
     [("last", "prompts"), ("mean", "prompts")]),
    ("qwen3-rerank", ["--arch", "qwen3", "--type", "f32", "--rerank"], [("rank", "pairs")]),
]

TOKEN_LINE = re.compile(r"^\s*(\d+) -> '")


def gen_model(flags, path):
    flags = [f.replace("@S", SHARED) for f in flags]
    subprocess.run([GEN_MODEL, *flags, "--seed", "42", "-o", path], check=True,
                   stdout=subprocess.DEVNULL)


SHIM = r"""
#include <unistd.h>
__attribute__((destructor)) static void let_the_logger_finish(void) { usleep(300000); }
"""


def build_shim(tmp):
    src = os.path.join(tmp, "shim.c")
    lib = os.path.join(tmp, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True)
    return lib


def embed(model, pooling, inputs, flash, shim):
    prompt = "\n".join("\t".join(p) if isinstance(p, list) else p for p in inputs)
    cmd = [EMBEDDING, "-m", model, "-p", prompt, "--embd-normalize", "-1",
           "--embd-output-format", "array", "--pooling", pooling,
           "-fa", "on" if flash else "off", "--verbose-prompt", "-t", "2"]
    env = dict(os.environ, LD_PRELOAD=shim)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    tokens, cur = [], None
    for line in out.splitlines():
        m = TOKEN_LINE.match(line)
        if m:
            if cur is None:
                cur = []
                tokens.append(cur)
            cur.append(int(m.group(1)))
        elif cur is not None and line.strip() == "":
            cur = None
    start = out.index("[[")
    text = out[start:out.index("]]", start) + 2]
    # With rank pooling llama-embedding prints n_embd values per row of which only the
    # first n_cls_out are scores (it reads past them): those past may be anything.
    rows = json.loads(re.sub(r"-?(nan|inf)", "null", text))
    return tokens, rows


def main():
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        shim = build_shim(tmp)
        for name, flags, runs in CASES:
            # Qwen3 rerankers score two classes (yes, no), BERT's one.
            n_cls_out = 2 if "qwen3" in flags else 1
            path = os.path.join(tmp, name + ".gguf")
            gen_model(flags, path)
            done = []
            for pooling, which in runs:
                inputs = PROMPTS if which == "prompts" else PAIRS
                for flash in (False, True):
                    tokens, rows = embed(path, pooling, inputs, flash, shim)
                    if pooling == "rank":
                        rows = [r[:n_cls_out] for r in rows]
                    assert len(tokens) == len(inputs), (name, pooling, tokens)
                    # Each input alone as well: a causal model's flash attention
                    # gives other bits when the batch holds other sequences.
                    alone = []
                    for inp in inputs:
                        _, r = embed(path, pooling, [inp], flash, shim)
                        alone.extend([x[:n_cls_out] for x in r] if pooling == "rank" else r)
                    if alone == rows:
                        alone = None  # the test then reads "embeddings"
                    done.append({
                        "pooling": pooling,
                        "inputs": which,
                        "flash_attn": flash,
                        "tokens": tokens,
                        "embeddings": rows,
                        "alone": alone,
                    })
            cases.append({"name": name, "gen_model": flags, "runs": done})
            print(f"{name}: {len(done)} runs", file=sys.stderr)
    data = {
        "about": "llama-embedding (llama.cpp 0c1e570, AVX-512-emulating build) on gen-model's "
                 "models, --embd-normalize -1, 7 decimals; made by scripts/encoder_models/make.py",
        "prompts": PROMPTS,
        "pairs": PAIRS,
        "cases": cases,
    }
    # One line per vector: compact, and diffs still show which changed.
    text = json.dumps(data, indent=1)
    text = re.sub(r"\[\s+(-?[\d.]+(?:,\s+-?[\d.]+)*)\s+\]",
                  lambda m: "[" + re.sub(r",\s+", ",", m.group(1)) + "]", text)
    with open(OUT, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
