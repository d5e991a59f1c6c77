#!/usr/bin/env python3
"""Goldens on the real model (Gemma 3 270M) beyond ../shared/golden/real, made by
llama.cpp 0c1e570 itself: what its arithmetic gives for each split of a prompt into
batches, and what its server answers to the same chat request sent twice.

- Splits (scripts/llama-cpp-tools/split_logits.cpp, linked against the build's libllama): the last token's
  logits (an FNV-1a hash of their bits, and the first values) of a short and a long
  prompt decoded whole, with the last token alone, a token at a time, in batches of
  12 and of 4, across micro-batches of 512, 128 and 64, with flash attention on and
  off, on 2 threads.
- Server: llama-server's answer (text, and each token's log-probability with the top
  5) to greedy chat requests through the built-in `gemma` format, each sent twice: the
  second send finds its prompt cached but for the last token.

The build must compute the reference's bits: a real AVX-512 build, or on a CPU without
AVX-512 the emulated one of scripts/llama-cpp-avx512emu (it reproduces every shared
golden). Writes tests/data/real_goldens.json; tests/real_model.rs checks ours against it.

Usage: scripts/real_goldens/make_goldens.py [BUILD]   (default /work/ref/build-avx512emu)
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "llama-cpp-tools"))
import build  # noqa: E402
BUILD = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build-avx512emu"
SRC = os.path.join(os.path.dirname(BUILD), "llama.cpp-avx512emu-src")
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
MODELS = os.environ.get("LLAMA_REAL_MODELS_DIR", os.path.expanduser("~/.cache/llamars/real"))
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL = os.path.join(MODELS, MODEL_FILE)

SHORT = "The old lighthouse keeper walked up the winding stairs every evening to light the lamp, and"
LONG_TOKENS = 600


def short_splits(n):
    fours = [4] * (n // 4) + ([n % 4] if n % 4 else [])
    return [[n], [n - 1, 1], [1] * n, [12, n - 12], fours]


def long_splits(n):
    return [[n], [n - 1, 1], [512, n - 512], [100] * (n // 100) + [n % 100] * (n % 100 > 0)]


def run(args, **kw):
    return subprocess.run(args, capture_output=True, check=True, timeout=1800, **kw)


def build_split_logits(d):
    return build.tool("split_logits", BUILD, SRC, d)


def tokenize(text):
    r = run([os.path.join(BUILD, "bin", "llama-tokenize"), "-m", MODEL, "--ids", "--log-disable",
             "-p", text])
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def splits_cases(d, exe):
    with open(os.path.join(SHARED, "golden", "real", "apache-head.txt")) as f:
        long_text = f.read()
    prompts = {"short": tokenize(SHORT), "long": tokenize(long_text)[:LONG_TOKENS]}
    cases = []
    for name, toks in prompts.items():
        path = os.path.join(d, f"{name}.tokens")
        with open(path, "w") as f:
            f.write(" ".join(map(str, toks)))
        n = len(toks)
        runs = []
        for split in (short_splits(n) if name == "short" else long_splits(n)):
            for fa in (1, 0):
                runs.append((split, fa, 512))
        ubs = [128, 64] if name == "long" else [4]
        for ub in ubs:
            runs.append(([n], 1, ub))
        results = []
        for split, fa, ub in runs:
            r = json.loads(run([exe, MODEL, path, ",".join(map(str, split)), "--fa", str(fa),
                                "--ub", str(ub), "-t", "2"]).stdout)
            results.append(r)
            print(f"{name} split {split[:4]}{'...' if len(split) > 4 else ''} fa {fa} ub {ub}: "
                  f"{r['fnv64']}", file=sys.stderr)
        cases.append({"prompt": name, "tokens": toks, "runs": results})
    return cases


CHATS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "You are a lighthouse keeper on a rocky island. Answer in the voice "
                                   "of an old sailor, with short sentences and no lists."},
     {"role": "user", "content": "What do you see from the top of the tower at night, and what do you "
                                 "do when a storm comes in from the west?"}],
]
SERVER_ARGS = ["--no-jinja", "--chat-template", "gemma", "-c", "4096", "-np", "1", "--seed", "1", "-t", "2"]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def server_cases():
    port = 18765
    log = open(os.path.join(tempfile.gettempdir(), "real-goldens-server.log"), "wb")
    proc = subprocess.Popen([os.path.join(BUILD, "bin", "llama-server"), "-m", MODEL, "--port", str(port),
                             *SERVER_ARGS], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        cases = []
        for messages in CHATS:
            body = {"messages": messages, "temperature": 0, "max_tokens": 32, "logprobs": True,
                    "top_logprobs": 5}
            sends = []
            for _ in range(2):
                v = post(port, "/v1/chat/completions", body)
                c = v["choices"][0]
                sends.append({
                    "content": c["message"]["content"],
                    "prompt_tokens": v["usage"]["prompt_tokens"],
                    "cached_tokens": v["usage"].get("prompt_tokens_details", {}).get("cached_tokens"),
                    "logprobs": [{"token": t["token"], "logprob": t["logprob"],
                                  "top": [[x["token"], x["logprob"]] for x in t["top_logprobs"]]}
                                 for t in c["logprobs"]["content"]],
                })
            print(f"chat {len(messages)} messages: {sends[0]['content']!r}; second send the same: "
                  f"{sends[0] == {**sends[1], 'cached_tokens': sends[0]['cached_tokens']}}", file=sys.stderr)
            cases.append({"body": body, "sends": sends})
        return cases
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    with tempfile.TemporaryDirectory() as d:
        exe = build_split_logits(d)
        splits = splits_cases(d, exe)
    server = server_cases()
    out = {
        "about": "llama.cpp 0c1e570 (AVX-512 VNNI build, or scripts/llama-cpp-avx512emu), 2 threads, "
                 "on Gemma 3 270M Q4_K_M; made by scripts/real_goldens/make_goldens.py",
        "model": MODEL_FILE,
        "splits": splits,
        "server_args": SERVER_ARGS,
        "server": server,
    }
    with open(os.path.join(ROOT, "tests", "data", "real_goldens.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
