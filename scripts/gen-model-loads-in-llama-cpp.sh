#!/usr/bin/env bash
# Every file gen-model writes must load in llama.cpp: for each architecture (its small
# example shape, synthesized or copied vocabulary) and each preset (one layer, to keep
# the files small; the vocabulary and the shapes are the preset's), in two file types,
# run llama.cpp's llama-completion for four tokens and fail on any load error.
#
#   scripts/gen-model-loads-in-llama-cpp.sh [LLAMA_CPP_BIN]   (default /work/ref/build/bin)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-/work/ref/build/bin}
[[ -x $bin/llama-completion ]] || { echo "no llama-completion in $bin" >&2; exit 1; }
(cd "$repo" && cargo build --release --example gen-model >&2)
gen=${CARGO_TARGET_DIR:-$repo/target}/release/examples/gen-model
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    local name=$1; shift
    if ! "$gen" "$@" -o "$tmp/m.gguf" >"$tmp/gen.log" 2>&1; then
        echo "FAIL $name: gen-model: $(tail -1 "$tmp/gen.log")"; fail=1; return
    fi
    if "$bin/llama-completion" -m "$tmp/m.gguf" -p "Once upon a time" -n 4 -no-cnv --temp 0 \
        </dev/null >"$tmp/out.txt" 2>"$tmp/err.txt"; then
        echo "ok   $name"
    else
        echo "FAIL $name: $(grep -m1 -i 'error' "$tmp/err.txt")"; fail=1
    fi
}
for arch in llama qwen2 qwen3 qwen3moe phi3 gemma3; do
    for type in f32 q4_k_m; do
        check "--arch $arch --type $type" --arch "$arch" --type "$type"
    done
    check "--arch $arch --vocab-file none" --arch "$arch" --vocab-file none --type q8_0
done
for preset in tiny-llama tiny-qwen2 qwen2-0.5b llama-1b qwen3-0.6b gemma3-1b phi3-mini; do
    check "--preset $preset" --preset "$preset" --layers 1 --type q8_0
done
exit $fail
