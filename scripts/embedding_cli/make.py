#!/usr/bin/env python3
"""Goldens for llama-embedding, made by llama.cpp's own llama-embedding.

Writes tests/data/embedding_cli.json: for each case a name, the model (`stories260K`,
`../shared/models/stories260K.gguf`, or `gemma-3-270m`, the real Gemma 3 270M that
scripts/fetch-real-models.py puts in ~/.cache/llamars/real, or one of the small qwen3
rerankers that the test writes: `cargo test --release --test golden_embedding_cli
write_rerank_models -- --ignored` with LLAMARS_WRITE_RERANK_MODELS=DIR, run here), the
arguments (`@M` is
the model's path) and llama.cpp's stdout (`stdout`, or `stdout_hex` when it is not
UTF-8). tests/golden_embedding_cli.rs runs our
llama-embedding in-process with the same arguments and wants the same bytes.

llama.cpp's logger writes from a thread that is never joined, so its last lines are
often lost when the program exits; logflush.c (compiled here, preloaded) waits for it
at exit. Each case is run twice and must print the same both times.

Usage:
    scripts/embedding_cli/make.py [LLAMA_CPP_BIN_DIR]
        (default /work/ref/build-avx512emu/bin, the build whose numbers are ours bit
        for bit; see scripts/llama-cpp-avx512emu)
    scripts/embedding_cli/make.py --check OUR_LLAMA_EMBEDDING [LLAMA_CPP_BIN_DIR]
        compares our program (a built examples/llama-embedding) against llama.cpp on
        every case without writing anything; prints the cases that differ.
Needs gcc (for the preloaded shim). Gemma cases are skipped when the model is absent.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
REAL = os.environ.get("LLAMA_REAL_MODELS_DIR", os.path.expanduser("~/.cache/llamars/real"))
MODELS = {
    "stories260K": os.path.join(SHARED, "models", "stories260K.gguf"),
    "gemma-3-270m": os.path.join(REAL, "gemma-3-270m-q4_k_m.gguf"),
}
# Small qwen3 rerankers written by the test itself (write_rerank_models), here into a
# temporary folder.
RERANKERS = ["rerank", "rerank-template", "rerank-labels"]
OUT = os.path.join(ROOT, "tests", "data", "embedding_cli.json")

THREE = "Once upon a time\nthe cat sat\nhello"
MIXED = "The little dog ran home.\nA girl saw a big tree.\nThe dog ran to the girl.\nSun"
SIX = "the cat sat\nthe dog ran\nthe big tree"
T = ["-t", "2"]


def cases():
    out = []
    # Every pooling with every normalisation, default printout.
    for pooling in ["mean", "cls", "last", "none"]:
        for norm in ["-1", "0", "1", "2", "3"]:
            out.append((f"{pooling}-norm{norm}", "stories260K",
                        ["-p", THREE, "--pooling", pooling, "--embd-normalize", norm]))
    # Every output format, pooled and per token.
    for pooling in ["mean", "none"]:
        for fmt in ["json", "json+", "array", "raw"]:
            out.append((f"{pooling}-{fmt}", "stories260K",
                        ["-p", THREE, "--pooling", pooling, "--embd-output-format", fmt]))
    out += [
        ("json-norm0", "stories260K", ["-p", MIXED, "--pooling", "last", "--embd-output-format", "json+",
                                       "--embd-normalize", "0"]),
        ("raw-norm-1", "stories260K", ["-p", MIXED, "--pooling", "cls", "--embd-output-format", "raw",
                                       "--embd-normalize", "-1"]),
        # One prompt: the whole vector.
        ("single-mean", "stories260K", ["-p", "Once upon a time there was a little girl", "--pooling", "mean"]),
        ("single-json+", "stories260K", ["-p", "hello", "--pooling", "mean", "--embd-output-format", "json+"]),
        # Separators, escapes, an empty prompt, bytes cut in the matrix's labels.
        ("separator", "stories260K", ["-p", "one dog<#sep#>two cats<#sep#>three birds", "--embd-separator", "<#sep#>",
                                      "--pooling", "mean"]),
        ("escapes-empty-line", "stories260K", ["-p", "a cat\\n\\nthe end\\n", "--pooling", "last"]),
        ("utf8-labels", "stories260K", ["-p", "héllo wörld\nçà et là\nzz", "--pooling", "mean"]),
        # Batching: several batches, -np sequences per batch. llama.cpp needs
        # n_seq_max <= n_batch (to reserve its outputs), and with -np > 1 it splits a
        # batch into equal-count micro-batches: pooled cases use prompts of one length
        # (6 tokens each) so that no sequence is cut.
        ("batches-b12-np2", "stories260K", ["-p", SIX, "--pooling", "mean", "-b", "12", "-np", "2"]),
        ("batches-b8-none", "stories260K", ["-p", THREE, "--pooling", "none", "-b", "8", "-np", "3"]),
        ("parallel-np4", "stories260K", ["-p", SIX, "--pooling", "cls", "-np", "4"]),
        ("ctx-raises-batch", "stories260K", ["-p", THREE, "--pooling", "mean", "-c", "4096", "-b", "16"]),
        ("verbose-prompt", "stories260K", ["-p", THREE, "--pooling", "mean", "--verbose-prompt"]),
        ("no-flash-attn", "stories260K", ["-p", MIXED, "--pooling", "mean", "-fa", "off"]),
        ("default-pooling", "stories260K", ["-p", THREE]),
        # The real Gemma 3 270M.
        ("gemma-mean", "gemma-3-270m", ["-p", MIXED, "--pooling", "mean", "-c", "512"]),
        ("gemma-last", "gemma-3-270m", ["-p", MIXED, "--pooling", "last", "-c", "512"]),
        ("gemma-last-json", "gemma-3-270m", ["-p", THREE, "--pooling", "last", "-c", "512",
                                             "--embd-output-format", "json+"]),
    ]
    # Rerankers: query<TAB>document pairs, a line without a pair, a custom separator,
    # the default and raw printouts. Scores only without normalisation: llama.cpp
    # normalises (and prints in JSON) n_embd values per score vector of n_cls_out,
    # reading past its end, which prints whatever memory follows.
    pairs = "what is a cat?\ta cat is a small animal\nwhat is a cat?\tthe sky is blue\nno pair here"
    for model in RERANKERS:
        out += [
            (f"{model}-scores", model, ["-p", pairs, "--embd-normalize", "-1"]),
            (f"{model}-raw-format", model, ["-p", pairs, "--embd-normalize", "-1", "--embd-output-format", "raw"]),
        ]
    out += [
        ("rerank-cls-separator", "rerank", ["-p", "q one<#>doc one\nq two<#>doc two<#>more", "--cls-separator", "<#>",
                                            "--embd-normalize", "-1", "--pooling", "rank"]),
        ("rerank-as-mean", "rerank", ["-p", pairs, "--pooling", "mean"]),
    ]
    return [(n, m, a + T) for n, m, a in out]


def shim():
    so = os.path.join(tempfile.gettempdir(), f"llamars-logflush-{os.getpid()}.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", so, os.path.join(HERE, "logflush.c")], check=True)
    return so


def run(cmd, args, env=None):
    r = subprocess.run([cmd] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if r.returncode != 0:
        sys.exit(f"{cmd} {args} failed ({r.returncode}):\n{r.stderr.decode(errors='replace')[-2000:]}")
    return r.stdout


def reference(binary, so, args):
    env = dict(os.environ, LD_PRELOAD=so)
    a = run(binary, args, env)
    b = run(binary, args, env)
    if a != b:
        sys.exit(f"llama.cpp printed two different outputs for {args}")
    return a


def main():
    argv = sys.argv[1:]
    ours = None
    if argv[:1] == ["--check"]:
        ours = argv[1]
        argv = argv[2:]
    bin_dir = argv[0] if argv else "/work/ref/build-avx512emu/bin"
    ref = os.path.join(bin_dir, "llama-embedding")
    so = shim()
    made, bad = [], []
    models = tempfile.mkdtemp(prefix="llamars-rerankers-")
    subprocess.run(["cargo", "test", "--release", "--test", "golden_embedding_cli", "write_rerank_models",
                    "--", "--ignored"], cwd=ROOT, check=True, env=dict(os.environ, LLAMARS_WRITE_RERANK_MODELS=models),
                   stdout=subprocess.DEVNULL)
    for name in RERANKERS:
        MODELS[name] = os.path.join(models, name + ".gguf")
    try:
        # ONLY=part-of-a-name: just those cases (with --check; never when writing).
        only = os.environ.get("ONLY") if ours is not None else None
        for name, model, args in cases():
            if only and only not in name:
                continue
            path = MODELS[model]
            if not os.path.exists(path):
                print(f"skipping {name}: {path} not found", file=sys.stderr)
                continue
            real_args = ["-m", path] + args
            want = reference(ref, so, real_args)
            if ours is not None:
                got = run(ours, real_args)
                status = "same" if got == want else "DIFFERS"
                print(f"{status}: {name}")
                if got != want:
                    bad.append(name)
            case = {"name": name, "model": model, "args": ["-m", "@M"] + args}
            try:
                case["stdout"] = want.decode("utf-8")
            except UnicodeDecodeError:
                # A label cut inside a character (C's %.10s counts bytes).
                case["stdout_hex"] = want.hex()
            made.append(case)
    finally:
        os.remove(so)
        shutil.rmtree(models)
    if ours is not None:
        print(f"{len(made) - len(bad)}/{len(made)} the same")
        sys.exit(1 if bad else 0)
    with open(OUT, "w") as f:
        json.dump({"llama_cpp": "0c1e570 (build-avx512emu)", "cases": made}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(made)} cases to {OUT}")


if __name__ == "__main__":
    main()
