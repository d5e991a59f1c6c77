#!/usr/bin/env bash
# Load run: our llama-server and llama.cpp's on the same model and flags, one after the
# other, with the same bounded client (benches/server_load.py), loopback only.
#   benches/server-load.sh [MODEL] [LLAMA_CPP_SERVER]
# Defaults: ../shared/models/stories260K.gguf and /work/ref/build/bin/llama-server.
# Environment: REQUESTS (64), CONCURRENCY (8), MAX_TOKENS (64), NP (4), THREADS (2),
# CTX (4096), ROUNDS (1).
# STREAMS="1 2 4 8": one server per count n with `-np n`, n clients at once and
# REQUESTS_PER_STREAM (4) × n requests; ours and llama.cpp's alternate for every count,
# ROUNDS times over, and a table of the medians ends the run.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/stories260K.gguf}
REF=${2:-/work/ref/build/bin/llama-server}
REQUESTS=${REQUESTS:-64} CONCURRENCY=${CONCURRENCY:-8} MAX_TOKENS=${MAX_TOKENS:-64}
NP=${NP:-4} THREADS=${THREADS:-2} CTX=${CTX:-4096} ROUNDS=${ROUNDS:-1}
STREAMS=${STREAMS:-} REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-4}
cargo build --release --example llama-server -q
OURS=target/release/examples/llama-server
RESULTS=$(mktemp /tmp/server-load-XXXXXX.jsonl)

run() { # label port np concurrency requests command...
    local label=$1 port=$2 np=$3 conc=$4 requests=$5; shift 5
    "$@" --port "$port" -m "$MODEL" -np "$np" -c "$CTX" -t "$THREADS" >"/tmp/server-load-$label.log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    python3 benches/server_load.py "http://127.0.0.1:$port" --requests "$requests" \
        --concurrency "$conc" --max-tokens "$MAX_TOKENS" --label "$label" --streams "$np" | tee -a "$RESULTS"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}

both() { # np concurrency requests
    run llamars 18181 "$@" "$OURS"
    if [ -x "$REF" ]; then
        run llama.cpp 18182 "$@" "$REF" --no-webui
    else
        echo "no llama.cpp server at $REF: only ours was measured" >&2
    fi
}

for _ in $(seq "$ROUNDS"); do
    if [ -z "$STREAMS" ]; then
        both "$NP" "$CONCURRENCY" "$REQUESTS"
    else
        for n in $STREAMS; do both "$n" "$n" $((n * REQUESTS_PER_STREAM)); done
    fi
done
python3 benches/server_load.py --summarize "$RESULTS"
