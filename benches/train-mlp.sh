#!/usr/bin/env bash
# Training speed of the train-digits MLP (64-128-10, batches of 32, AdamW) at 1 and 2
# threads, ours against PyTorch on the CPU, in one run. PyTorch comes from PyPI into
# target/torch-venv (a large download; not part of CI).
#
#   benches/train-mlp.sh [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-30}
python3 scripts/fetch_digits.py >/dev/null
if ! target/torch-venv/bin/python -c "import torch" 2>/dev/null; then
    python3 -m venv target/torch-venv
    target/torch-venv/bin/pip install --quiet --disable-pip-version-check torch
fi
cargo build --release --example train-digits 2>/dev/null
for t in 1 2; do
    target/release/examples/train-digits --data target/data/digits --epochs "$EPOCHS" -t "$t" --silent 2>&1 | grep -E "^train:|accuracy"
    target/torch-venv/bin/python benches/train_mlp_torch.py target/data/digits "$EPOCHS" "$t" 128 32
done
