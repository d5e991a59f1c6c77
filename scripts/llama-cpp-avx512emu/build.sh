#!/usr/bin/env bash
# llama.cpp 0c1e570 (the tree vendored by llama-cpp-python 0.3.36, from PyPI) with
# ggml-cpu's AVX-512 code paths compiled against SIMDe, so that it runs on an x86-64
# CPU with only AVX2/FMA/F16C and computes bit for bit what the reference build of
# ../shared/golden (-DGGML_AVX512=ON, VBMI, VNNI, BF16; no AMX; GCC 12) computes.
# README.md here says how, and what was checked.
#
#   scripts/llama-cpp-avx512emu/build.sh [DIR]     (default /work/ref)
#
# DIR/dl holds the source package (downloaded once), DIR/llama.cpp-avx512emu-src the
# patched copy, DIR/build-avx512emu the build: bin/ llama-completion,
# llama-perplexity, llama-server, llama-tokenize, plus the static libraries the
# golden scripts link their small programs against. Env: JOBS (default 2), TARGETS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${1:-/work/ref}
mkdir -p "$dir/dl"
dir=$(cd "$dir" && pwd)
jobs=${JOBS:-2}
targets=${TARGETS:-llama llama-completion llama-perplexity llama-server llama-tokenize}

# 1. SIMDe (header-only; Debian bookworm ships 0.7.4~rc2, the version checked).
if [[ ! -f /usr/include/simde/x86/avx512.h ]]; then
    sudo=$([[ $(id -u) == 0 ]] || echo sudo)
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libsimde-dev >/dev/null
fi

# 2. The source: llama-cpp-python's source package, its vendored llama.cpp copied and
#    patched (a CMake option for the shim, and the float loops GCC vectorizes by width).
sdist=$(ls "$dir"/dl/llama_cpp_python-0.3.36.tar.gz 2>/dev/null || true)
if [[ -z $sdist ]]; then
    pip download --no-binary llama-cpp-python --no-deps "llama-cpp-python==0.3.36" -d "$dir/dl" >&2
    sdist=$dir/dl/llama_cpp_python-0.3.36.tar.gz
fi
src=$dir/llama.cpp-avx512emu-src
rm -rf "$src" "$dir/sdist-tmp"
mkdir -p "$dir/sdist-tmp" "$src"
tar -xzf "$sdist" -C "$dir/sdist-tmp"
(cd "$dir"/sdist-tmp/llama_cpp_python-*/vendor/llama.cpp &&
    tar --exclude=./models --exclude=./docs --exclude=./.git -cf - .) | tar -C "$src" -xf -
rm -rf "$dir/sdist-tmp"
patch -d "$src" -p1 --no-backup-if-mismatch <"$here/llama.cpp.patch" >/dev/null

# 3. Configure as the reference build, with the shim in place of -mavx512*.
command -v cmake >/dev/null && command -v ninja >/dev/null || pip install --quiet cmake ninja
build=$dir/build-avx512emu
cmake -G Ninja -S "$src" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DGGML_AVX512_EMU_SHIM="$here/shim.h" >/dev/null

# 4. Build.
cmake --build "$build" --target $targets -j "$jobs"

# 5. No AVX-512 instruction may have reached ggml-cpu (this CPU could not run it).
bad=0
for o in $(find "$build/ggml/src/CMakeFiles/ggml-cpu.dir" -name '*.o'); do
    n=$(objdump -d --no-show-raw-insn "$o" | grep -cE '%zmm|%k[0-7]\b|\{1to|%[xy]mm(1[6-9]|2[0-9]|3[01])' || true)
    if [[ $n != 0 ]]; then echo "AVX-512 instructions in $o: $n" >&2; bad=1; fi
done
[[ $bad == 0 ]] || { echo "build.sh: AVX-512 instructions were emitted" >&2; exit 1; }
echo "llama.cpp with emulated AVX-512: $build/bin" >&2
