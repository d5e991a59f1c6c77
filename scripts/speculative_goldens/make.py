#!/usr/bin/env python3
"""Goldens for llama-speculative and llama-lookup, made by llama.cpp's own programs.

Each case runs llama.cpp 0c1e570's `llama-speculative` or `llama-lookup` (the
AVX-512-emulating build, whose arithmetic is ours: see scripts/llama-cpp-avx512emu) with
greedy sampling and records what it printed on stdout (the prompt and every generated
token) and its draft counts (n_predict, n_drafted, n_accept). tests/golden_speculative.rs
runs ours with the same arguments and compares both: the same drafts verified in the same
batches give the same tokens and the same counts.

Models: files of ../shared (@S), the real Gemma 3 270M (@R), or small random models that
gen-model writes (`gen-model ARGS --seed N`): a draft is the target's weights quantized
(same seed, another type: most drafts accepted), another seed (few accepted), or a
smaller model of the same vocabulary (2 layers, width 64).

llama.cpp's logger drops the end of stdout at exit; logflush.c (scripts/embedding_cli) is
preloaded to wait for it.

Usage: scripts/speculative_goldens/make.py [LLAMA_CPP_BUILD]   (default /work/ref/build-avx512emu)
Writes tests/data/speculative_goldens.json.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build-avx512emu"
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
REAL = os.path.expanduser("~/.cache/llamars/real/gemma-3-270m-q4_k_m.gguf")

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside. "
         "One day, she saw a big red ball in the park. Once upon a time, there was a little "
         "girl named Lily. She loved to play")
EDIT = ("Repeat this text exactly: The quick brown fox jumps over the lazy dog. The dog "
        "sleeps under the old oak tree while the fox runs home.\nRepeated: The quick brown fox")

# The corpus of the static cache case (llama-lookup-create -p CORPUS).
CORPUS = " ".join([STORY, EDIT, STORY, "Once upon a time, there was a big dog named Max. Max loved to run."] * 3)

# The corpora of the merge check (llama-lookup-merge of their static caches).
MERGE_CORPORA = [CORPUS, " ".join([EDIT, "The dog ran to the park. The dog ran home."] * 4)]

# Decoder architectures, each as gen-model arguments.
ARCHS = {
    "llama": ["--arch", "llama"],
    "qwen2": ["--arch", "qwen2"],
    "qwen3": ["--arch", "qwen3"],
    "phi3": ["--arch", "phi3"],
    "qwen3moe": ["--arch", "qwen3moe"],
    "gemma3": ["--arch", "gemma3"],
}


def gen(args, seed, typ):
    return {"gen_model": args + ["--type", typ, "--seed", str(seed)]}


def shared(name):
    return {"path": "@S/models/" + name}


# (name, program, target, draft or None, arguments, prompt, runs)
CASES = []
for arch, args in ARCHS.items():
    CASES.append((f"spec-{arch}-f32-q4_0", "speculative", gen(args, 42, "f32"), gen(args, 42, "q4_0"),
                  ["-n", "40", "--temp", "0", "-t", "2", "--spec-draft-n-max", "4"], STORY, 1))
    CASES.append((f"spec-{arch}-other-seed", "speculative", gen(args, 42, "q8_0"), gen(args, 7, "q8_0"),
                  ["-n", "24", "--temp", "0", "-t", "1", "--spec-draft-n-max", "3"], STORY, 1))
    small = args + ["--layers", "2", "--embd", "64", "--heads", "2", "--kv-heads", "1", "--ff", "128"]
    if arch == "gemma3":
        small += ["--swa-pattern", "2"]
    if arch == "qwen3moe":
        small += ["--expert-ff", "64"]
    CASES.append((f"spec-{arch}-small-draft", "speculative", gen(args, 42, "q8_0"), gen(small, 5, "q8_0"),
                  ["-n", "32", "--temp", "0", "-t", "2", "--spec-draft-n-max", "5"], STORY, 1))
    CASES.append((f"lookup-{arch}", "lookup", gen(args, 42, "q8_0"), None,
                  ["-n", "40", "--temp", "0", "-t", "2", "--spec-draft-n-max", "6"], STORY, 1))
CASES += [
    ("spec-stories-self", "speculative", shared("stories260K.gguf"), shared("stories260K.gguf"),
     ["-n", "96", "--temp", "0", "-t", "2", "--spec-draft-n-max", "8"], "Once upon a time", 1),
    ("spec-synth-llama-f32-q4_0", "speculative", shared("synth-llama-f32.gguf"), shared("synth-llama-q4_0.gguf"),
     ["-n", "48", "--temp", "0", "-t", "2"], "Once upon a time", 1),
    ("spec-synth-qwen2-f32-q8_0-nofa", "speculative", shared("synth-qwen2-f32.gguf"), shared("synth-qwen2-q8_0.gguf"),
     ["-n", "48", "--temp", "0", "-t", "2", "-fa", "off", "--spec-draft-n-max", "5"], "Once upon a time", 1),
    ("lookup-stories", "lookup", shared("stories260K.gguf"), None,
     ["-n", "200", "--temp", "0", "-t", "2", "--spec-draft-n-max", "8"], STORY, 1),
    ("lookup-stories-draft3-1thread", "lookup", shared("stories260K.gguf"), None,
     ["-n", "120", "--temp", "0", "-t", "1"], STORY, 1),
    # A dynamic cache written by the first run and read by the second.
    ("lookup-stories-lcd", "lookup", shared("stories260K.gguf"), None,
     ["-n", "120", "--temp", "0", "-t", "2", "--spec-draft-n-max", "5", "-lcd", "@CACHE"], STORY, 2),
    # A static cache of a corpus, made by llama-lookup-create (ours in the test).
    ("lookup-stories-lcs", "lookup", shared("stories260K.gguf"), None,
     ["-n", "120", "--temp", "0", "-t", "2", "--spec-draft-n-max", "6", "-lcs", "@STATIC"], "Once upon a time", 1),
    ("lookup-real-gemma3", "lookup", {"path": "@R"}, None,
     ["-n", "64", "--temp", "0", "-t", "2", "--spec-draft-n-max", "8"], EDIT, 1),
    ("spec-real-gemma3-self", "speculative", {"path": "@R"}, {"path": "@R"},
     ["-n", "32", "--temp", "0", "-t", "2", "--spec-draft-n-max", "4"], EDIT, 1),
]


def model_path(m, tmp, gen_bin):
    if "path" in m:
        return m["path"].replace("@S", SHARED).replace("@R", REAL)
    name = "-".join(a.lstrip("-") for a in m["gen_model"]) + ".gguf"
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        subprocess.run([gen_bin] + m["gen_model"] + ["-o", path], check=True, capture_output=True)
    return path


def stat(err, key):
    m = re.search(r"\b" + key + r"\s*= (\d+)", err)
    return int(m.group(1)) if m else None


def main():
    subprocess.run(["cargo", "build", "--release", "--example", "gen-model"], cwd=ROOT, check=True)
    gen_bin = os.path.join(ROOT, "target", "release", "examples", "gen-model")
    tmp = tempfile.mkdtemp(prefix="llamars-spec-")
    so = os.path.join(tmp, "logflush.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", so,
                    os.path.join(ROOT, "scripts", "embedding_cli", "logflush.c")], check=True)
    env = dict(os.environ, LD_PRELOAD=so)
    out = []
    for name, prog, target, draft, args, prompt, runs in CASES:
        if "@R" in json.dumps([target, draft]) and not os.path.exists(REAL):
            print(f"skip {name}: no real model at {REAL}", file=sys.stderr)
            continue
        argv = ["-m", model_path(target, tmp, gen_bin)]
        if draft:
            argv += ["-md", model_path(draft, tmp, gen_bin)]
        cache = os.path.join(tmp, name + ".lcd")
        static = os.path.join(tmp, name + ".lcs")
        if any("@STATIC" in a for a in args):
            subprocess.run([os.path.join(BUILD, "bin", "llama-lookup-create"), "-m", argv[1],
                            "-p", CORPUS, "-lcs", static], check=True, capture_output=True, env=env)
        argv += [a.replace("@CACHE", cache).replace("@STATIC", static) for a in args] + ["-p", prompt]
        results = []
        for _ in range(runs):
            r = subprocess.run([os.path.join(BUILD, "bin", "llama-" + prog)] + argv,
                               capture_output=True, env=env)
            err = r.stderr.decode("utf-8", "replace")
            assert r.returncode == 0, f"{name}: {err[-2000:]}"
            results.append({
                "stdout_hex": r.stdout.hex(),
                # The dynamic cache as written after this run (llama.cpp's bytes).
                "lcd_hex": open(cache, "rb").read().hex() if os.path.exists(cache) else None,
                "n_predict": stat(err, "n_predict"),
                "n_drafted": stat(err, "n_drafted"),
                "n_accept": stat(err, "n_accept"),
            })
            print(name, results[-1]["n_predict"], results[-1]["n_drafted"], results[-1]["n_accept"], file=sys.stderr)
        case = {"name": name, "program": prog, "target": target, "draft": draft,
                "args": args, "prompt": prompt, "runs": results}
        if any("@STATIC" in a for a in args):
            case["corpus"] = CORPUS
            case["lcs_hex"] = open(static, "rb").read().hex()
        out.append(case)
    # llama-lookup-merge of two static caches (corpora MERGE_CORPORA, stories260K).
    parts = []
    for k, corpus in enumerate(MERGE_CORPORA):
        part = os.path.join(tmp, f"merge-{k}.lcs")
        subprocess.run([os.path.join(BUILD, "bin", "llama-lookup-create"), "-m", SHARED + "/models/stories260K.gguf",
                        "-p", corpus, "-lcs", part], check=True, capture_output=True, env=env)
        parts.append(part)
    merged = os.path.join(tmp, "merged.lcs")
    subprocess.run([os.path.join(BUILD, "bin", "llama-lookup-merge")] + parts + [merged],
                   check=True, capture_output=True, env=env)
    merge = {"corpora": MERGE_CORPORA, "merged_hex": open(merged, "rb").read().hex()}
    dst = os.path.join(ROOT, "tests", "data", "speculative_goldens.json")
    with open(dst, "w") as f:
        json.dump({"llama_cpp": "0c1e570 (AVX-512-emulating build)", "cases": out, "merge": merge}, f, indent=1)
    print("wrote", dst, len(out), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
