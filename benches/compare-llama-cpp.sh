#!/usr/bin/env bash
# Compares this runtime's llama-bench with llama.cpp's on the same generated models,
# threads and tests, and prints t/s side by side with the ratio (ours / llama.cpp).
#
#   benches/compare-llama-cpp.sh [options] [-- extra llama-bench args for both]
#
# Options:
#   --quick               tiny shapes (tiny-llama, tiny-qwen2), -p 64 -n 16 -r 3: a smoke run
#   --presets "A B"       gen-model presets (default: "qwen2-0.5b llama-1b")
#   --types "A B"         file types (default: "f16 q8_0 q4_0 q4_k_m"); "all": every type
#                         both quantizers write (f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k
#                         q3_k_m q4_k_m q5_k_m q6_k iq4_nl iq4_xs)
#   -p N, -n N, -r N      prompt length, generated tokens, repetitions (default 512, 128, 5)
#   -d N                  also generation at depth N (tg at -d N; default 4096, 0: none)
#   --quantizer Q         who writes the quantized files: gen-model (this project's
#                         quantization), llama.cpp (gen-model writes F32, llama.cpp's
#                         llama-quantize converts it: the files users download), or both
#                         (default: both when $LLAMA_CPP_BIN has llama-quantize)
#   -t N[,N]              threads (default: all cores)
#   --rounds N            run the two programs alternately N times per model (default 1);
#                         the table shows the mean of the rounds
#   --models-dir DIR      where generated models go (default: $MODELS_DIR, else
#                         /tmp/llamars-bench-models); kept between runs
#   --regen               regenerate the models even if present
#   --no-build            do not build this project's programs (use target/release)
#   --build-llama-cpp DIR download the llama-cpp-python source package from PyPI (pip
#                         download; a package already in DIR/dl is reused) and build its
#                         vendored llama.cpp's llama-bench in DIR/build (AVX-512 on, AMX off);
#                         otherwise $LLAMA_CPP_BIN (default /work/ref/llama.cpp/build/bin)
#   --out DIR             keep the raw JSON of every run here (default: a temp dir)
#   --fast-int8           also run our prompt tests with --fast-int8 (Q8_0/Q5_0 prompts
#                         through the int8 GEMM, not llama.cpp's float order): two more
#                         columns
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
presets="qwen2-0.5b llama-1b"
types="f16 q8_0 q4_0 q4_k_m"
n_prompt=512
n_gen=128
reps=5
depth=4096
quantizer=""
set_d=0
threads=$(nproc)
rounds=1
models_dir=${MODELS_DIR:-/tmp/llamars-bench-models}
regen=0
build=1
build_cpp=""
out_dir=""
extra=()
set_p=0 set_n=0 set_r=0 set_presets=0
fast=0

die() { echo "compare-llama-cpp: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick=1 ;;
        --fast-int8) fast=1 ;;
        --presets) presets=$2; set_presets=1; shift ;;
        --types) types=$2; shift ;;
        -p) n_prompt=$2; set_p=1; shift ;;
        -n) n_gen=$2; set_n=1; shift ;;
        -r) reps=$2; set_r=1; shift ;;
        -d) depth=$2; set_d=1; shift ;;
        --quantizer) quantizer=$2; shift ;;
        -t) threads=$2; shift ;;
        --rounds) rounds=$2; shift ;;
        --models-dir) models_dir=$2; shift ;;
        --regen) regen=1 ;;
        --no-build) build=0 ;;
        --build-llama-cpp) build_cpp=$2; shift ;;
        --out) out_dir=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

if [[ $types == all ]]; then
    types="f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_m q4_k_m q5_k_m q6_k iq4_nl iq4_xs"
fi

if [[ $quick == 1 ]]; then
    [[ $set_presets == 1 ]] || presets="tiny-llama tiny-qwen2"
    [[ $set_p == 1 ]] || n_prompt=64
    [[ $set_n == 1 ]] || n_gen=16
    [[ $set_r == 1 ]] || reps=3
    [[ $set_d == 1 ]] || depth=256
fi

# --- llama.cpp -------------------------------------------------------------------
if [[ -n $build_cpp ]]; then
    mkdir -p "$build_cpp"
    build_cpp=$(cd "$build_cpp" && pwd)
    if [[ ! -x $build_cpp/build/bin/llama-bench ]]; then
        mkdir -p "$build_cpp/dl"
        sdist=$(ls "$build_cpp"/dl/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1 || true)
        if [[ -z $sdist ]]; then
            echo "compare-llama-cpp: downloading llama-cpp-python's source package into $build_cpp/dl" >&2
            # Source for this package only: with --no-binary :all: pip would also build
            # the build backend's dependencies (cmake, ninja) from source to read the
            # metadata, which takes many minutes.
            pip download --no-binary llama-cpp-python --no-deps llama-cpp-python -d "$build_cpp/dl" >&2
            sdist=$(ls "$build_cpp"/dl/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1 || true)
        fi
        [[ -n $sdist ]] || die "no llama_cpp_python source package in $build_cpp/dl"
        tar -xzf "$sdist" -C "$build_cpp"
        src=$(ls -d "$build_cpp"/llama_cpp_python-*/vendor/llama.cpp | head -n1)
        [[ -f $src/CMakeLists.txt ]] || die "no vendored llama.cpp in $sdist"
        echo "compare-llama-cpp: building llama-bench and llama-quantize from $src" >&2
        # AVX-512 on, AMX off (AMX crashes in this VM); no network features, static.
        cmake -S "$src" -B "$build_cpp/build" -DCMAKE_BUILD_TYPE=Release \
            -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
            -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
            -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
            -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >&2
        cmake --build "$build_cpp/build" --target llama-bench llama-quantize -j"$(nproc)" >&2
    fi
    LLAMA_CPP_BIN=$build_cpp/build/bin
fi
LLAMA_CPP_BIN=${LLAMA_CPP_BIN:-/work/ref/llama.cpp/build/bin}
cpp_bench=$LLAMA_CPP_BIN/llama-bench
[[ -x $cpp_bench ]] || die "no llama.cpp llama-bench at $cpp_bench (set LLAMA_CPP_BIN or use --build-llama-cpp DIR)"

# --- this project ----------------------------------------------------------------
target=${CARGO_TARGET_DIR:-$repo/target}
if [[ $build == 1 ]]; then
    (cd "$repo" && cargo build --release --example llama-bench --example gen-model >&2)
fi
our_bench=$target/release/examples/llama-bench
gen_model=$target/release/examples/gen-model
[[ -x $our_bench && -x $gen_model ]] || die "missing $our_bench or $gen_model (build without --no-build)"

# --- models ----------------------------------------------------------------------
cpp_quantize=$LLAMA_CPP_BIN/llama-quantize
if [[ -z $quantizer ]]; then
    if [[ -x $cpp_quantize ]]; then quantizer=both; else quantizer=gen-model; fi
fi
case $quantizer in
    gen-model) quantizers="gen-model" ;;
    llama.cpp) quantizers="llama.cpp" ;;
    both) quantizers="gen-model llama.cpp" ;;
    *) die "--quantizer must be gen-model, llama.cpp or both" ;;
esac
[[ $quantizers != *llama.cpp* || -x $cpp_quantize ]] || die "no llama-quantize at $cpp_quantize"
mkdir -p "$models_dir"
models=()
for preset in $presets; do
    for q in $quantizers; do
        for typ in $types; do
            if [[ $q == gen-model ]]; then
                m=$models_dir/$preset-$typ.gguf
                if [[ $regen == 1 || ! -s $m ]]; then
                    "$gen_model" --preset "$preset" --type "$typ" -o "$m.tmp" >&2
                    mv "$m.tmp" "$m"
                fi
            else
                # llama-quantize from the F32 file gen-model writes ("-lq": llama.cpp's quantization).
                m=$models_dir/$preset-$typ-lq.gguf
                f32=$models_dir/$preset-f32.gguf
                if [[ $regen == 1 || ! -s $f32 ]]; then
                    "$gen_model" --preset "$preset" --type f32 -o "$f32.tmp" >&2
                    mv "$f32.tmp" "$f32"
                fi
                if [[ $regen == 1 || ! -s $m ]]; then
                    "$cpp_quantize" "$f32" "$m.tmp" "${typ^^}" "$(nproc)" > "$m.log" 2>&1 \
                        || die "llama-quantize failed on $f32 (see $m.log)"
                    mv "$m.tmp" "$m"
                fi
            fi
            models+=("$m")
        done
    done
done

# --- runs ------------------------------------------------------------------------
if [[ -z $out_dir ]]; then
    out_dir=$(mktemp -d /tmp/llamars-compare.XXXXXX)
fi
mkdir -p "$out_dir"
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)
common=(-p "$n_prompt" -n "$n_gen" -r "$reps" -t "$threads" -o json "${extra[@]}")
for m in "${models[@]}"; do
    name=$(basename "$m" .gguf)
    # An earlier run into the same --out (killed, or with other tests) must not
    # leave results the table would read as this run's.
    rm -f "$out_dir/$name".*.json
    for ((round = 1; round <= rounds; round++)); do
        echo "compare-llama-cpp: $name round $round/$rounds: llama.cpp" >&2
        "$cpp_bench" -m "$m" "${common[@]}" > "$out_dir/$name.$round.llama.cpp.json" 2> "$out_dir/$name.$round.llama.cpp.log" \
            || die "llama.cpp failed on $m (see $out_dir/$name.$round.llama.cpp.log)"
        echo "compare-llama-cpp: $name round $round/$rounds: ours" >&2
        "$our_bench" -m "$m" "${common[@]}" > "$out_dir/$name.$round.ours.json" 2> "$out_dir/$name.$round.ours.log" \
            || die "llama-bench failed on $m (see $out_dir/$name.$round.ours.log)"
        if [[ $fast == 1 ]]; then
            echo "compare-llama-cpp: $name round $round/$rounds: ours, --fast-int8 prompts" >&2
            "$our_bench" -m "$m" -p "$n_prompt" -n 0 -r "$reps" -t "$threads" -o json --fast-int8 "${extra[@]}" \
                > "$out_dir/$name.$round.fast.json" 2>> "$out_dir/$name.$round.ours.log" \
                || die "llama-bench --fast-int8 failed on $m"
        fi
        if [[ $depth -gt 0 ]]; then
            deep=(-p 0 -n "$n_gen" -d "$depth" -r "$reps" -t "$threads" -o json "${extra[@]}")
            echo "compare-llama-cpp: $name round $round/$rounds: tg$n_gen at depth $depth" >&2
            "$cpp_bench" -m "$m" "${deep[@]}" > "$out_dir/$name.$round.deep.llama.cpp.json" 2>> "$out_dir/$name.$round.llama.cpp.log" \
                || die "llama.cpp failed at depth $depth on $m"
            "$our_bench" -m "$m" "${deep[@]}" > "$out_dir/$name.$round.deep.ours.json" 2>> "$out_dir/$name.$round.ours.log" \
                || die "llama-bench failed at depth $depth on $m"
        fi
    done
done

# --- table -----------------------------------------------------------------------
cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
commit=$(git -C "$repo" describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)
python3 - "$out_dir" "$cpu" "$(nproc)" "$commit" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" "${models[@]}" <<'EOF'
import datetime, glob, json, os, sys

out_dir, cpu, cores, commit, load_start, load = sys.argv[1:7]
models = sys.argv[7:]

def runs(name, who):
    res = {}
    for f in sorted(glob.glob(os.path.join(out_dir, f"{name}.*.{who}.json"))):
        for t in json.load(open(f)):
            test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else (
                f"tg{t['n_gen']}" if t["n_prompt"] == 0 else f"pp{t['n_prompt']}+tg{t['n_gen']}")
            if t.get("n_depth", 0):
                test += f" @ d{t['n_depth']}"
            key = (test, t["n_threads"], t.get("flash_attn", -1))
            r = res.setdefault(key, {"ts": [], "sd": [], "type": t["model_type"], "build": t["build_commit"]})
            r["ts"].append(t["avg_ts"])
            r["sd"].append(t["stddev_ts"])
    return res

now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
builds = set()
rows = []
for m in models:
    name = os.path.basename(m)[:-5]
    cpp, ours, fast = runs(name, "llama.cpp"), runs(name, "ours"), runs(name, "fast")
    mean = lambda v: sum(v) / len(v) if v else float("nan")
    for key in cpp:
        c, c_sd = mean(cpp[key]["ts"]), mean(cpp[key]["sd"])
        builds.add(cpp[key]["build"])
        o = ours.get(key, {"ts": [], "sd": []})
        o, o_sd = mean(o["ts"]), mean(o["sd"])
        f = fast.get(key)
        fcols = ("", "")
        if f:
            fm, f_sd = mean(f["ts"]), mean(f["sd"])
            fcols = (f"{fm:.2f} ± {f_sd:.2f}", f"{fm / c:.2f}" if c else "nan")
        rows.append((name, key[0], key[1], f"{c:.2f} ± {c_sd:.2f}", f"{o:.2f} ± {o_sd:.2f}", o / c if c else float("nan"), fcols))

print(f"# llamars vs llama.cpp: {now}")
print()
print(f"machine: {cpu}, {cores} cores; load average at the start {load_start}, at the end {load}")
print(f"llama.cpp: {', '.join(sorted(builds))}; llamars: {commit}")
print("t/s: mean ± stddev over the repetitions (averaged over rounds); ratio of the means")
print("models: gen-model's random weights of the preset's shape; '-lq': quantized from its F32 file by llama.cpp's llama-quantize")
print()
has_fast = any(fc[0] for *_, fc in rows)
head = f"| {'model':<24} | {'test':>10} | {'threads':>7} | {'llama.cpp t/s':>20} | {'ours t/s':>20} | {'ours/llama.cpp':>14} |"
rule = f"| {'-' * 24} | {'-' * 9}: | {'-' * 6}: | {'-' * 19}: | {'-' * 19}: | {'-' * 13}: |"
if has_fast:
    head += f" {'ours --fast-int8 t/s':>20} | {'fast/llama.cpp':>14} |"
    rule += f" {'-' * 19}: | {'-' * 13}: |"
print(head)
print(rule)
for name, test, th, c, o, r, fc in rows:
    line = f"| {name:<24} | {test:>10} | {th:>7} | {c:>20} | {o:>20} | {r:>14.2f} |"
    if has_fast:
        line += f" {fc[0]:>20} | {fc[1]:>14} |"
    print(line)
print()
print(f"raw results: {out_dir}")
EOF
