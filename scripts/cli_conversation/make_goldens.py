#!/usr/bin/env python3
"""Goldens for llama-cli's conversation mode, made by llama.cpp's own llama-completion.

Writes tests/data/cli_conversation.json: the chat-templated models (stories260K with a
chat template, and a variant whose end-of-generation token is '.', so that replies end
by end-of-generation), and for each case the arguments, the scripted stdin and
llama.cpp's stdout. The test (tests/cli_conversation.rs) writes the same models and
runs llama-cli in-process on the same arguments and input.

Usage: scripts/cli_conversation/make_goldens.py [LLAMA_CPP_BIN_DIR]  (default
/work/ref/build/bin: a llama.cpp 0c1e570 build, see benches/compare-llama-cpp.sh)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = sys.argv[1] if len(sys.argv) > 1 else "/work/ref/build/bin"

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")

MODELS = {
    "chatml": {"chat_template": CHATML},
    # '.' (id 426 in stories260K's vocabulary) as end of generation: replies end there.
    "chatml-eos-dot": {"chat_template": CHATML, "eos_token_id": 426},
    # No chat template: conversation mode only with -cnv, as ChatML.
    "plain": {},
}

G = ["--temp", "0", "--simple-io"]
CASES = [
    ("prompt-then-input", "chatml", ["-p", "Tell me a story", "-n", "24", "-c", "256"], "What happened next?\n"),
    ("user-first-with-system", "chatml", ["-sys", "You are a storyteller.", "-n", "40", "-c", "256"], "Once upon a time\nAnd then?\n"),
    ("jinja-two-turns", "chatml", ["--jinja", "-p", "Tell me a story", "-n", "48", "-c", "256"], "And then?\nWhat did she say?\n"),
    ("builtin-llama3", "chatml", ["--chat-template", "llama3", "-p", "Tell me a story", "-n", "48", "-c", "256"], "And then?\n"),
    ("builtin-gemma-system", "chatml", ["--chat-template", "gemma", "-sys", "Be kind.", "-p", "Hi", "-n", "48", "-c", "256"], "And then?\n"),
    ("context-shift", "chatml", ["--context-shift", "-p", "Tell me a story", "-n", "60", "-c", "128"], "And then?\nMore!\nGo on\n"),
    ("context-full-no-shift", "chatml", ["-p", "Tell me a story", "-n", "60", "-c", "128"], "And then?\nMore!\nGo on\n"),
    ("keep-and-shift", "chatml", ["--keep", "8", "--context-shift", "-p", "Tell me a story", "-n", "40", "-c", "96"], "And then?\nWhy?\n"),
    ("self-extend", "chatml", ["--grp-attn-n", "4", "--grp-attn-w", "64", "-p", "Tell me a story", "-n", "40", "-c", "4096"], "And then?\n"),
    ("single-turn-from-input", "chatml", ["-st", "-n", "30", "-c", "256"], "Hello there\n"),
    ("single-turn-from-prompt", "chatml", ["-st", "-p", "Hello", "-n", "30", "-c", "256"], ""),
    ("no-cnv", "chatml", ["-no-cnv", "-p", "Hello", "-n", "30", "-c", "256"], "x\n"),
    ("continuation-lines", "chatml", ["-p", "Hello", "-n", "30", "-c", "256"], "a\\\nb\nc/\nd\n"),
    ("multiline-input", "chatml", ["-mli", "-p", "Hello", "-n", "30", "-c", "256"], "a\nb\n"),
    ("no-template-cnv-is-chatml", "plain", ["-cnv", "-p", "Tell me a story", "-n", "30", "-c", "256"], "And then?\n"),
    ("eog-ends-replies", "chatml-eos-dot", ["-p", "Tell me a story", "-n", "100", "-c", "512"], "And then?\nWhy?\nOk\n"),
    ("eog-jinja-system", "chatml-eos-dot", ["--jinja", "-sys", "Short answers.", "-p", "Tell me a story", "-n", "100", "-c", "512"], "And then?\nWhy?\nOk\n"),
    ("eog-reverse-prompt", "chatml-eos-dot", ["-r", "Lily", "-p", "Tell me a story", "-n", "100", "-c", "512"], "And then?\nWhy?\nOk\n"),
]


def main():
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "models.json")
        with open(spec, "w") as f:
            json.dump(MODELS, f)
        env = dict(os.environ, LLAMARS_WRITE_CONVERSATION_MODELS=d)
        subprocess.run(["cargo", "test", "--release", "--test", "cli_conversation", "--",
                        "--ignored", "write_conversation_models"], cwd=ROOT, env=env, check=True)
        cases = []
        for name, model, args, stdin in CASES:
            path = os.path.join(d, model + ".gguf")
            r = subprocess.run([os.path.join(BIN, "llama-completion"), "-m", path, "-t", "1", *G, *args],
                               input=stdin.encode(), capture_output=True, timeout=120)
            cases.append({"name": name, "model": model, "args": G + args, "stdin": stdin,
                          "exit_code": r.returncode, "stdout": r.stdout.decode("utf-8", "surrogateescape")})
            print(f"{name}: exit {r.returncode}, {len(r.stdout)} bytes", file=sys.stderr)
    out = {
        "about": "llama.cpp 0c1e570's llama-completion (-t 1) in conversation mode on stories260K with "
                 "a chat template written into it; made by scripts/cli_conversation/make_goldens.py",
        "models": MODELS,
        "cases": cases,
    }
    with open(os.path.join(ROOT, "tests", "data", "cli_conversation.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
