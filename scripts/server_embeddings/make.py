#!/usr/bin/env python3
"""Records llama.cpp's llama-server answers to embeddings and rerank requests into
tests/data/server_embeddings.json, the golden of tests/server_embeddings.rs.

Each case starts a fresh server (the AVX-512-emulating build, whose numbers equal
ours bit for bit) with the case's flags and sends its requests in order; a fresh server
per case keeps the slots each input lands on, and so the batch's row order, the same as
in our test. Usage:

    scripts/server_embeddings/make.py [--bin DIR] [--shared DIR] [--out FILE]

--bin defaults to /work/ref/build-avx512emu/bin, --shared to ../shared or
$LLAMA_SHARED_DIR. Model paths in a case are relative to the shared folder's models/;
"@gen-model ARGS" is a random-weight model our gen-model writes with ARGS (BERT and
Qwen3 rerankers, say); the test suite writes the same file with the same arguments.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = [
    {
        # Mean pooling: a batch of two inputs first, then single inputs of every shape.
        "name": "stories-mean",
        "model": "stories260K.gguf",
        "args": ["--embedding", "--pooling", "mean"],
        "requests": [
            ["/v1/embeddings", {"input": ["hello world", "Once upon a time"]}],
            ["/v1/embeddings", {"input": "Tom had a red ball", "encoding_format": "base64"}],
            ["/embedding", {"content": "Lily and her mom", "embd_normalize": -1}],
            ["/embeddings", {"input": [[1, 2, 3, 4]]}],
            ["/v1/embeddings", {"input": [1, "the cat"], "embd_normalize": 1}],
            ["/v1/embeddings", {"input": ""}],
        ],
    },
    {
        # No pooling: one vector per token, not normalised.
        "name": "stories-none",
        "model": "stories260K.gguf",
        "args": ["--embedding"],
        "requests": [
            ["/embedding", {"content": "hello world"}],
        ],
    },
    {
        # Last-token pooling on a quantized Qwen2: several inputs in one batch.
        "name": "qwen2-last",
        "model": "synth-qwen2-q8_0.gguf",
        "args": ["--embedding", "--pooling", "last"],
        "requests": [
            ["/v1/embeddings", {"input": ["hello world", "one two three four", "x"]}],
        ],
    },
    {
        # Last-token pooling may feed a prompt over several batches (llama.cpp's
        # can_split): 40 tokens through batches of 16.
        "name": "qwen2-last-split",
        "model": "synth-qwen2-q8_0.gguf",
        "args": ["--embedding", "--pooling", "last", "-b", "16", "-ub", "16"],
        "requests": [
            ["/v1/embeddings", {"input": [list(range(10, 50))]}],
        ],
    },
    {
        # A Qwen3 reranker (gen-model --rerank: a cls.output head of two classes,
        # yes/no, softmaxed): Jina's shape. Each rerank request of a causal model is its
        # own case: a later request lands on slots whose cells sit elsewhere in
        # llama.cpp's cache, which moves the scores' last bits.
        "name": "qwen3-rerank",
        "model": "@gen-model --arch qwen3 --rerank --type f32",
        "args": ["--rerank"],
        "requests": [
            ["/v1/rerank", {"query": "what do pandas eat?",
                            "documents": ["a red apple", "the giant panda", "bears eat bamboo", "x"]}],
        ],
    },
    {
        # TEI's shape: texts, return_text, top_n.
        "name": "qwen3-rerank-tei",
        "model": "@gen-model --arch qwen3 --rerank --type f32",
        "args": ["--rerank"],
        "requests": [
            ["/rerank", {"query": "which is a fruit?", "texts": ["a red apple", "a stone", "blue sky"],
                         "return_text": True, "top_n": 2}],
        ],
    },
    {
        # A BERT reranker (non-causal: no KV cache, each batch whole in one
        # micro-batch; cls and cls.output head), then BERT embeddings.
        "name": "bert-rerank",
        "model": "@gen-model --arch bert --rerank",
        "args": ["--rerank"],
        "requests": [
            ["/v1/rerank", {"query": "what do pandas eat?",
                            "documents": ["a red apple", "the giant panda", "bears eat bamboo", "x"]}],
            ["/rerank", {"query": "q", "texts": ["a", "b c"], "return_text": True}],
        ],
    },
    {
        "name": "bert-mean",
        "model": "@gen-model --arch bert --pooling mean",
        "args": ["--embedding"],
        "requests": [
            ["/v1/embeddings", {"input": ["hello world", "one two three four five", "x"]}],
            ["/embedding", {"content": ["a b", "c"], "embd_normalize": 0}],
        ],
    },
]


def gen_model(spec, tmp):
    """The model a "@gen-model ARGS" case names, written by our gen-model (the test
    suite writes the same file with the same arguments)."""
    args = spec.split()[1:]
    out = os.path.join(tmp, "-".join(a.strip("-") for a in args) + ".gguf")
    if not os.path.exists(out):
        subprocess.run(["cargo", "run", "--release", "--quiet", "--example", "gen-model", "--"]
                       + args + ["-o", out], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def run_case(bin_dir, shared, case, tmp):
    model = case["model"]
    if model.startswith("@gen-model "):
        model = gen_model(model, tmp)
    elif not os.path.isabs(model):
        model = os.path.join(shared, "models", model)
    port = free_port()
    cmd = [os.path.join(bin_dir, "llama-server"), "-m", model, "--port", str(port),
           "-t", "2"] + case["args"]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                with urllib.request.urlopen(base + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{case['name']}: the server did not start")
        answers = []
        for path, body in case["requests"]:
            code, got = post(base + path, body)
            if code != 200:
                raise RuntimeError(f"{case['name']}: {path} {body} -> {code} {got}")
            answers.append({"path": path, "body": body, "response": got})
        return {"name": case["name"], "model": case["model"], "args": case["args"],
                "answers": answers}
    finally:
        srv.terminate()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="/work/ref/build-avx512emu/bin")
    ap.add_argument("--shared", default=os.environ.get("LLAMA_SHARED_DIR",
                                                       os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "server_embeddings.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = {
            "about": "llama.cpp llama-server (build-avx512emu) answers; made by scripts/server_embeddings/make.py",
            "cases": [run_case(a.bin, a.shared, c, tmp) for c in CASES],
        }
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    print(f"wrote {a.out}: {len(out['cases'])} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
