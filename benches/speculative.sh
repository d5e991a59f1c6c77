#!/usr/bin/env bash
# Speculative decoding side by side with llama.cpp, in one run: plain decoding, prompt
# lookup (n-gram drafts) and a draft model, ours and llama.cpp's, alternating, on a
# prompt whose answer repeats its input (the case speculation is for).
#   benches/speculative.sh [TARGET] [DRAFT]
# Defaults: the real Gemma 3 270M (scripts/fetch-real-models.py) as target and as its own
# draft. Environment: N (tokens, 192), DRAFT_MAX (8), THREADS (2), REPS (3),
# LLAMA_CPP_BIN (/work/ref/build/bin, llama.cpp's native build).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${1:-$HOME/.cache/llamars/real/gemma-3-270m-q4_k_m.gguf}
DRAFT=${2:-$TARGET}
N=${N:-192} DRAFT_MAX=${DRAFT_MAX:-8} THREADS=${THREADS:-2} REPS=${REPS:-3}
REF=${LLAMA_CPP_BIN:-/work/ref/build/bin}
cargo build --release --example llama-lookup --example llama-speculative -q
OURS=target/release/examples
TEXT="The committee met on Tuesday to review the budget for the new library. After a long discussion, the members agreed to increase funding for children's books, to repair the roof before winter, and to extend the opening hours on weekends. The chair thanked everyone for their work and closed the meeting at nine."
PROMPT="Copy the following paragraph word for word, twice.

$TEXT

Copy:
"
# speed MODE PROGRAM_DIR: prints "t/s accept%" from one run.
speed() {
    local mode=$1 dir=$2 args=(-m "$TARGET" -p "$PROMPT" -n "$N" --temp 0 -t "$THREADS" -c 2048)
    case $mode in
        plain) "$dir/llama-lookup" "${args[@]}" --spec-draft-n-max 0 ;;
        lookup) "$dir/llama-lookup" "${args[@]}" --spec-draft-n-max "$DRAFT_MAX" ;;
        draft) "$dir/llama-speculative" "${args[@]}" -md "$DRAFT" --spec-draft-n-max "$DRAFT_MAX" ;;
    esac 2>&1 >/dev/null | awk '/decoded/ { for (i = 1; i <= NF; i++) if ($i == "speed:") ts = $(i + 1) }
        /^(.* I )?accept *=/ { acc = $NF } END { printf "%s %s\n", ts, acc }'
}
printf "%-7s %-10s %10s %10s\n" mode program "t/s" accept
for mode in plain lookup draft; do
    for rep in $(seq "$REPS"); do
        printf "%-7s %-10s %10s %10s\n" "$mode" llamars $(speed "$mode" "$OURS")
        [ -x "$REF/llama-lookup" ] && printf "%-7s %-10s %10s %10s\n" "$mode" llama.cpp $(speed "$mode" "$REF")
    done
done
