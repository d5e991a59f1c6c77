#!/usr/bin/env bash
# Regenerates the figures of docs/self-extend.md: per-position NLL of stories260K on a
# 2048-token text for plain attention, context shift, llama.cpp's Self-Extend (as is,
# and sign-corrected) and exact Self-Extend, as a table (docs/self-extend-table.md)
# and a plot (docs/self-extend.png); the raw CSV goes to target/self-extend.csv.
# Needs ../shared (or LLAMA_SHARED_DIR) and matplotlib. Takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
cargo run --release --example self-extend-nll -- -o target/self-extend.csv "$@" | tee docs/self-extend-table.md
python3 scripts/plot-self-extend.py target/self-extend.csv docs/self-extend.png
