"""Compiles one of the small llama.cpp programs in this folder (dump_logits.cpp,
split_logits.cpp: only llama.h's public API) against a llama.cpp build's static
libraries, for the golden scripts.

    import build  # with this folder on sys.path
    exe = build.tool("split_logits", BUILD_DIR, SRC_DIR, OUT_DIR)
"""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = ("src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a")


def tool(name, build_dir, src_dir, out_dir):
    """Builds HERE/NAME.cpp into OUT_DIR/NAME and returns its path; raises
    CalledProcessError when g++ fails (a build without the static libraries, say)."""
    exe = os.path.join(out_dir, name)
    subprocess.run(["g++", "-O2", "-std=c++17",
                    "-I", os.path.join(src_dir, "include"), "-I", os.path.join(src_dir, "ggml", "include"),
                    os.path.join(HERE, f"{name}.cpp"), *[os.path.join(build_dir, lib) for lib in LIBS],
                    "-fopenmp", "-lpthread", "-ldl", "-o", exe], check=True)
    return exe
