#!/usr/bin/env python3
"""Embedding goldens made by llama.cpp itself, at full float precision.

For each case a model (a file of ../shared, the real Gemma 3 270M, or a small random model
gen-model writes, seed 42) and a set of prompts go through `embd_dump.cpp` (this folder),
linked against llama.cpp 0c1e570's static libraries: every prompt tokenized as llama-embedding
tokenizes it, all of them in one batch (prompt k is sequence k), with the case's pooling,
flash attention setting and thread count; the raw embeddings (per sequence, per token for
pooling none, the classifier's scores for rank) are stored with 9 significant digits.
tests/embedding_goldens.rs makes the same models, computes the same batch with our library
and compares (bit for bit where the arithmetic is the same, else within 1e-6 relative).

Usage: scripts/embedding_goldens/make_goldens.py [LLAMA_CPP_SRC] [LLAMA_CPP_BUILD]
(default /work/ref/llama.cpp-avx512emu-src and /work/ref/build-avx512emu: a build whose
numbers are the AVX-512 build's, see scripts/llama-cpp-avx512emu). Writes
tests/data/embedding_goldens.json.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/llama.cpp-avx512emu-src"
BUILD = sys.argv[2] if len(sys.argv) > 2 else "/work/ref/build-avx512emu"
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
REAL = os.path.expanduser("~/.cache/llamars/real/gemma-3-270m-q4_k_m.gguf")

SENTENCES = [
    "Once upon a time there was a little girl named Lily.",
    "She liked to play in the park with her dog.",
    "The sun was hot",
    "Tom had a big red ball and he wanted to share it with his friends at school.",
]
LONG = " ".join(SENTENCES * 3)

# (name, model, pooling (-1: the model's), flash attention, threads, prompts)
# model: a path with @S for ../shared, @R for the real model, or gen-model arguments.
CASES = [
    ("stories-mean", "@S/models/stories260K.gguf", 1, 1, 2, SENTENCES),
    ("stories-cls", "@S/models/stories260K.gguf", 2, 1, 2, SENTENCES),
    ("stories-last", "@S/models/stories260K.gguf", 3, 1, 2, SENTENCES),
    ("stories-none", "@S/models/stories260K.gguf", 0, 1, 2, SENTENCES[:2]),
    ("stories-mean-nofa-1thread", "@S/models/stories260K.gguf", 1, 0, 1, SENTENCES),
    ("qwen2-q8_0-mean", "@S/models/synth-qwen2-q8_0.gguf", 1, 1, 2, SENTENCES),
    ("llama-q4_k_m-mean", "@S/models/synth-llama-q4_k_m.gguf", 1, 1, 2, SENTENCES),
    # Qwen3-Embedding's form: qwen3 with last-token pooling named in the file.
    ("qwen3-embedding-default", ["--arch", "qwen3", "--type", "q8_0", "--pooling", "last"], -1, 1, 2, SENTENCES),
    # Qwen3-Reranker's form: a yes/no head on the last token, softmax over the two.
    ("qwen3-reranker-rank", ["--arch", "qwen3", "--type", "q8_0", "--rerank"], -1, 1, 2, SENTENCES),
    # BERT: WordPiece, learned positions, layer norms, attention both ways.
    ("bert-f32-default", ["--arch", "bert", "--type", "f32"], -1, 1, 2, SENTENCES),
    ("bert-f16-cls", ["--arch", "bert", "--type", "f16"], 2, 1, 2, SENTENCES),
    ("bert-q8_0-mean-nofa", ["--arch", "bert", "--type", "q8_0"], 1, 0, 1, SENTENCES),
    ("bert-f32-none", ["--arch", "bert", "--type", "f32"], 0, 1, 2, SENTENCES[:2]),
    ("nomic-bert-f32-mean", ["--arch", "nomic-bert", "--type", "f32"], 1, 1, 2, SENTENCES),
    ("nomic-bert-q8_0-cls-nofa", ["--arch", "nomic-bert", "--type", "q8_0"], 2, 0, 2, SENTENCES),
    ("jina-bert-v2-f32-mean", ["--arch", "jina-bert-v2", "--type", "f32"], 1, 1, 2, SENTENCES),
    ("jina-bert-v2-f16-mean-nofa", ["--arch", "jina-bert-v2", "--type", "f16"], 1, 0, 2, SENTENCES),
    ("jina-bert-v2-reranker-rank", ["--arch", "jina-bert-v2", "--type", "f32", "--rerank"], -1, 1, 2,
     SENTENCES[:3]),
    ("bert-reranker-rank", ["--arch", "bert", "--type", "f32", "--rerank"], -1, 1, 2,
     ["what is a dog?\ta dog is an animal", "a b", SENTENCES[0]]),
    ("qwen3-q8_0-last", ["--arch", "qwen3", "--type", "q8_0"], 3, 1, 2, SENTENCES),
    ("qwen3-f16-mean-nofa", ["--arch", "qwen3", "--type", "f16"], 1, 0, 2, SENTENCES),
    # Sliding-window layers (window 16): the long prompt goes past the window.
    ("gemma3-q8_0-mean", ["--arch", "gemma3", "--type", "q8_0"], 1, 1, 2, [LONG, SENTENCES[1]]),
    ("gemma3-f32-last", ["--arch", "gemma3", "--type", "f32"], 3, 1, 2, [LONG, SENTENCES[1]]),
    ("phi3-q8_0-mean", ["--arch", "phi3", "--type", "q8_0", "--vocab", "32064", "--vocab-file",
                        "@S/models/llama-vocab/ggml-vocab-phi-3.gguf"], 1, 1, 2, SENTENCES[:2]),
    ("qwen3moe-q8_0-mean", ["--arch", "qwen3moe", "--type", "q8_0"], 1, 1, 2, SENTENCES[:2]),
    # EmbeddingGemma's form: both ways, a symmetric window of 16 (8 each side) on every
    # second layer, dense projections after the pooling.
    ("gemma-embedding-f32-mean", ["--arch", "gemma-embedding", "--type", "f32"], 1, 1, 2, [LONG, SENTENCES[1]]),
    ("gemma-embedding-q8_0-mean-nofa", ["--arch", "gemma-embedding", "--type", "q8_0"], 1, 0, 2, [LONG, SENTENCES[1]]),
    ("gemma-embedding-f16-none", ["--arch", "gemma-embedding", "--type", "f16"], 0, 1, 2, [SENTENCES[0]]),
    # The real trained model.
    ("gemma-270m-mean", "@R", 1, 1, 2, SENTENCES),
    ("gemma-270m-last", "@R", 3, 1, 2, SENTENCES),
]


def build_tool(out):
    lib = lambda *p: os.path.join(BUILD, *p)  # noqa: E731
    subprocess.run(["g++", "-O2", "-std=c++17", "-I", os.path.join(SRC, "include"),
                    "-I", os.path.join(SRC, "ggml", "include"),
                    os.path.join(ROOT, "scripts", "embedding_goldens", "embd_dump.cpp"),
                    lib("src", "libllama.a"), lib("ggml", "src", "libggml.a"),
                    lib("ggml", "src", "libggml-cpu.a"), lib("ggml", "src", "libggml-base.a"),
                    "-fopenmp", "-lpthread", "-ldl", "-o", out], check=True)


def main():
    subprocess.run(["cargo", "build", "--release", "--example", "gen-model"], cwd=ROOT, check=True)
    gen = os.path.join(ROOT, "target", "release", "examples", "gen-model")
    cases = []
    with tempfile.TemporaryDirectory() as d:
        tool = os.path.join(d, "embd-dump")
        build_tool(tool)
        for name, model, pooling, fa, threads, prompts in CASES:
            if isinstance(model, list):
                path = os.path.join(d, name + ".gguf")
                args = [a.replace("@S", SHARED) for a in model] + ["--seed", "42"]
                subprocess.run([gen, *args, "-o", path], check=True, capture_output=True)
            else:
                path = model.replace("@S", SHARED).replace("@R", REAL)
                if not os.path.exists(path):
                    sys.exit(f"missing {path}")
            out = subprocess.run([tool, path, str(pooling), str(fa), str(threads), *prompts],
                                 check=True, capture_output=True, text=True).stdout
            got = json.loads(out)
            case = {"name": name, "pooling_arg": pooling, "pooling": got["pooling"], "flash_attn": bool(fa),
                    "threads": threads, "prompts": prompts, "tokens": got["tokens"],
                    "embeddings": got["embeddings"]}
            if isinstance(model, list):
                case["gen_model"] = model + ["--seed", "42"]
            else:
                case["model"] = model
            cases.append(case)
            print(name, "ok", file=sys.stderr)
    doc = {"about": "Raw embeddings llama.cpp 0c1e570 (AVX-512 arithmetic) computes for each "
                    "case's prompts in one batch; made by scripts/embedding_goldens/make_goldens.py",
           "cases": cases}
    with open(os.path.join(ROOT, "tests", "data", "embedding_goldens.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
