#!/bin/sh
# Builds jsg_driver against the llama.cpp reference build (its static libraries).
set -e
REF=${REF:-/work/ref}
OUT=${1:-/tmp/jsg_driver}
g++ -std=c++17 -O1 -I"$REF/llama.cpp-src/common" -I"$REF/llama.cpp-src/include" \
    -I"$REF/llama.cpp-src/ggml/include" -I"$REF/llama.cpp-src/vendor" \
    "$(dirname "$0")/jsg_driver.cpp" -o "$OUT" \
    "$REF/build/common/libllama-common.a" "$REF/build/common/libllama-common-base.a" \
    "$REF/build/vendor/cpp-httplib/libcpp-httplib.a" "$REF/build/src/libllama.a" \
    "$REF/build/ggml/src/libggml.a" "$REF/build/ggml/src/libggml-cpu.a" \
    "$REF/build/ggml/src/libggml-base.a" -lgomp -lpthread
