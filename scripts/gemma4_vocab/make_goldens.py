#!/usr/bin/env python3
"""Golden tokenizations for the Gemma 4 tokenizer (`tokenizer.ggml.model = gemma4`),
made by llama.cpp 0c1e570's own llama-tokenize.

A small vocabulary of Gemma 4's form (SentencePiece-style BPE: `▁` for spaces, merges
over raw UTF-8, `<bos>`/`<eos>`/`<turn|>` control tokens, newline tokens, and the 256
byte-fallback tokens `<0x00>`..`<0xFF>` that take what no piece covers) is learned
here by a few dozen BPE merges on a short text, written into a vocabulary-only GGUF by
the ignored test `write_gemma4_vocab` in tests/tokenizer_gemma4.rs, and tokenized by
llama-tokenize. Writes tests/data/gemma4_vocab.json (spec and cases); the test makes the
same file and checks ours. Usage: scripts/gemma4_vocab/make_goldens.py [LLAMA_CPP_BIN]
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build/bin"
SP = "\u2581"

CORPUS = ("the cat sat on the mat. the dog sat on the log! then the cat and the dog "
          "went to the market, where they met a caf\u00e9 owner named Ren\u00e9e.\n\n"
          "Was it 2024 or 2025? They thought about it, then they ate.")

CASES = [
    "the cat sat on the mat",
    " the  cat",
    "Hello world",
    "the dog\n\nthe cat\n",
    "\n\n\n",
    "caf\u00e9 Ren\u00e9e ate",
    "<bos>the<turn|> cat<eos>",
    "2025? then they met.",
    "  leading and trailing  ",
    "\u00fcber \u4e2d\u6587 \U0001F600",
    # Characters no piece covers: byte-fallback tokens, nothing lost.
    "na\u00efve \U0001F980 crab \u2603",
]


def learn():
    words = collections.Counter(CORPUS.replace(" ", SP).split("\n"))
    seqs = {w: list(w) for w in words if w}
    chars = sorted({c for w in seqs for c in w})
    merges = []
    for _ in range(60):
        pairs = collections.Counter()
        for w, s in seqs.items():
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += words[w]
        if not pairs:
            break
        (a, b), n = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if n < 2:
            break
        merges.append(f"{a} {b}")
        for w, s in seqs.items():
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<turn|>"]
    pieces = [m.replace(" ", "") for m in merges]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tokens = (specials + byte_tokens + ["\n", "\n\n"] + chars
              + [p for p in dict.fromkeys(pieces) if p not in chars])
    types = [3] * len(specials) + [6] * len(byte_tokens) + [1] * (len(tokens) - len(specials) - 256)
    return {"tokens": tokens, "token_type": types, "merges": merges,
            "bos_token_id": 2, "eos_token_id": 1, "unknown_token_id": 3, "padding_token_id": 0,
            "add_bos_token": False}


def main():
    spec = learn()
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "spec.json"), "w") as f:
            json.dump(spec, f)
        env = dict(os.environ, LLAMARS_WRITE_GEMMA4_VOCAB=d)
        subprocess.run(["cargo", "test", "--release", "--test", "tokenizer_gemma4", "--", "--ignored",
                        "write_gemma4_vocab"], cwd=ROOT, env=env, check=True)
        vocab = os.path.join(d, "gemma4.gguf")
        cases = []
        for text in CASES:
            for parse_special in (True, False):
                args = [os.path.join(BIN, "llama-tokenize"), "-m", vocab, "--ids", "--log-disable",
                        "-p", text]
                if not parse_special:
                    args.append("--no-parse-special")
                r = subprocess.run(args, capture_output=True, check=True)
                ids = json.loads(r.stdout.decode().strip().splitlines()[-1])
                cases.append({"text": text, "parse_special": parse_special, "ids": ids})
    with open(os.path.join(ROOT, "tests", "data", "gemma4_vocab.json"), "w") as f:
        json.dump({"about": "llama.cpp 0c1e570 llama-tokenize on a small Gemma 4 vocabulary; "
                   "made by scripts/gemma4_vocab/make_goldens.py", "vocab": spec, "cases": cases},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
