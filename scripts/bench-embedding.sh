#!/usr/bin/env bash
# Embeddings per second, ours against llama.cpp's llama-embedding: 64 sentences of
# about 30 tokens each, mean pooling, on a generated 0.5B-shaped model (gen-model
# --preset qwen2-0.5b, q8_0 by default; the real Qwen2 vocabulary), one batch of all
# 64 (-c 2048 -b 2048), the same threads for both. The two programs run alternately
# --reps times; each run's time is read from its llama_perf_context_print lines, model
# loading excluded: ours, prompt eval + eval (the decode); llama.cpp's, the total time
# from the end of its warm-up (its prompt eval time stays near 0 for embeddings, as the
# computation is waited for elsewhere), which adds its tokenizing and printing, a few
# ms. The table shows the median and the best run's embeddings per second and the
# ratios ours / llama.cpp.
#
#   scripts/bench-embedding.sh [options]
#
# Options:
#   -t N            threads (default: all cores)
#   -r, --reps N    runs of each program (default 3)
#   --type T        the model's file type (default q8_0)
#   --preset P      gen-model preset (default qwen2-0.5b)
#   --models-dir D  where the model goes (default $MODELS_DIR, else
#                   /tmp/llamars-bench-models); kept between runs
#   --no-build      use target/release as it is
# Environment: LLAMA_CPP_BIN, the folder of llama.cpp's llama-embedding (default
# /work/ref/build/bin, a native build: the AVX-512-emulating one is slow by design).
# Needs gcc: llama.cpp's log thread loses its last lines at exit unless
# scripts/embedding_cli/logflush.c is preloaded.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=$(nproc)
reps=3
type=q8_0
preset=qwen2-0.5b
models_dir=${MODELS_DIR:-/tmp/llamars-bench-models}
build=1
llama_bin=${LLAMA_CPP_BIN:-/work/ref/build/bin}

while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads=$2; shift 2 ;;
        -r|--reps) reps=$2; shift 2 ;;
        --type) type=$2; shift 2 ;;
        --preset) preset=$2; shift 2 ;;
        --models-dir) models_dir=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1 (see -h)" >&2; exit 1 ;;
    esac
done

theirs="$llama_bin/llama-embedding"
[ -x "$theirs" ] || { echo "no llama.cpp llama-embedding at $theirs (set LLAMA_CPP_BIN)" >&2; exit 1; }
if [ "$build" = 1 ]; then
    (cd "$repo" && cargo build --release --example llama-embedding --example gen-model)
fi
ours="$repo/target/release/examples/llama-embedding"

mkdir -p "$models_dir"
model="$models_dir/$preset-$type.gguf"
if [ ! -f "$model" ]; then
    "$repo/target/release/examples/gen-model" --preset "$preset" --type "$type" -o "$model"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -shared -fPIC -O2 -o "$work/logflush.so" "$repo/scripts/embedding_cli/logflush.c"

# 64 sentences of about 30 tokens, each different.
subjects=(fox dog cat bird horse child farmer sailor)
places=("the river bank" "the old mill" "the quiet harbour" "the green valley" "the busy market" "the dark forest" "the snowy pass" "the sandy beach")
for i in $(seq 0 63); do
    s=${subjects[$((i % 8))]}
    p=${places[$((i / 8))]}
    echo "Sentence $i: the quick brown $s walks past $p while the evening sun sets slowly behind the distant hills and the wind grows cold."
done > "$work/sentences.txt"

common=(-m "$model" -f "$work/sentences.txt" -t "$threads" -c 2048 -b 2048 --pooling mean)

# The sum in ms of the llama_perf_context_print lines of log $1 whose name matches $2.
perf_ms() {
    awk -v want="$2" '/llama_perf_context_print:/ && $0 ~ want { for (i = 1; i <= NF; i++) if ($i == "=") { t += $(i + 1); break } }
         END { if (t == "") exit 1; print t }' "$1"
}

n_tokens=$("$ours" "${common[@]}" 2>&1 >/dev/null | awk '/prompt eval time/ { for (i = 1; i <= NF; i++) if ($i == "/") { print $(i + 1); exit } }')
echo "model: $model ($preset $type), 64 sentences, $n_tokens tokens, $threads threads, $reps runs each"

ours_ms=()
theirs_ms=()
for r in $(seq 1 "$reps"); do
    "$ours" "${common[@]}" > /dev/null 2> "$work/ours.log"
    ours_ms+=("$(perf_ms "$work/ours.log" ' eval time')")
    LD_PRELOAD="$work/logflush.so" "$theirs" "${common[@]}" -v > /dev/null 2> "$work/theirs.log"
    theirs_ms+=("$(perf_ms "$work/theirs.log" 'total time')")
    echo "run $r: ours ${ours_ms[-1]} ms, llama.cpp ${theirs_ms[-1]} ms"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
best() { printf '%s\n' "$@" | sort -g | head -1; }
# The median, and the best run (the better estimate on a machine shared with other work).
awk -v mo="$(median "${ours_ms[@]}")" -v mt="$(median "${theirs_ms[@]}")" \
    -v bo="$(best "${ours_ms[@]}")" -v bt="$(best "${theirs_ms[@]}")" 'BEGIN {
    printf "%-12s %12s %16s %12s %16s\n", "", "median ms", "embeddings/s", "best ms", "embeddings/s"
    printf "%-12s %12.1f %16.2f %12.1f %16.2f\n", "ours", mo, 64000 / mo, bo, 64000 / bo
    printf "%-12s %12.1f %16.2f %12.1f %16.2f\n", "llama.cpp", mt, 64000 / mt, bt, 64000 / bt
    printf "ratio ours / llama.cpp (embeddings/s): median %.3f, best %.3f\n", mt / mo, bt / bo
}'
