#!/usr/bin/env bash
# Load run: our llama-server and llama.cpp's on the same model and flags, one after the
# other, with the same bounded client (benches/server_load.py), loopback only.
#   benches/server-load.sh [MODEL] [LLAMA_CPP_SERVER]
# Defaults: ../shared/models/stories260K.gguf and /work/ref/build/bin/llama-server.
# Environment: REQUESTS (64), CONCURRENCY (8), MAX_TOKENS (64), NP (4), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/stories260K.gguf}
REF=${2:-/work/ref/build/bin/llama-server}
REQUESTS=${REQUESTS:-64} CONCURRENCY=${CONCURRENCY:-8} MAX_TOKENS=${MAX_TOKENS:-64}
NP=${NP:-4} THREADS=${THREADS:-2} CTX=${CTX:-4096}
cargo build --release --example llama-server -q
OURS=target/release/examples/llama-server

run() { # label port command...
    local label=$1 port=$2; shift 2
    "$@" --port "$port" -m "$MODEL" -np "$NP" -c "$CTX" -t "$THREADS" >"/tmp/server-load-$label.log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    python3 benches/server_load.py "http://127.0.0.1:$port" --requests "$REQUESTS" \
        --concurrency "$CONCURRENCY" --max-tokens "$MAX_TOKENS" --label "$label"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}

run llamars 18181 "$OURS"
if [ -x "$REF" ]; then
    run llama.cpp 18182 "$REF" --no-webui
else
    echo "no llama.cpp server at $REF: only ours was measured" >&2
fi
