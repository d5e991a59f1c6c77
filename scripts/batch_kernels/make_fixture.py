#!/usr/bin/env python3
"""Write tests/data/batch_kernels.json from llama.cpp's own mul_mat outputs.

Usage: make_fixture.py HARNESS > tests/data/batch_kernels.json, HARNESS being
harness.cpp built as its header says. One case per repack, tiled and tinyBLAS_Q0 path
(see docs/quants.md, "Which kernel llama.cpp uses").
"""
import json
import struct
import subprocess
import sys
import tempfile


def case(harness, tmp, t, k, m, n, repack, seed):
    prefix = f"{tmp}/{t}_{repack}"
    args = [harness, t, str(k), str(m), str(n), str(int(repack)), "2", prefix, str(seed)]
    subprocess.run(args, check=True, capture_output=True)
    y = open(prefix + ".y", "rb").read()
    bits = [f"{v:08x}" for v in struct.unpack(f"<{m * n}I", y)]
    return {"type": t, "k": k, "m": m, "n": n, "repack": repack, "seed": seed, "y": bits}


def main():
    harness = sys.argv[1]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        # repack: 4 src1 rows through the GEMM, 3 through the GEMV
        for i, t in enumerate(["q4_0", "iq4_nl", "q4_K", "q2_K"]):
            cases.append(case(harness, tmp, t, 512, 16, 7, True, 100 + i))
        # tiled: 9 src1 rows
        for i, t in enumerate(["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"]):
            cases.append(case(harness, tmp, t, 512, 16, 9, False, 200 + i))
        # tinyBLAS_Q0: 3 src1 rows, 13 weight rows
        for i, t in enumerate(["q4_0", "q5_0", "q8_0", "iq4_nl"]):
            cases.append(case(harness, tmp, t, 512, 13, 3, False, 300 + i))
    about = (
        "llama.cpp 0c1e570 (the golden outputs' build: AVX-512 VNNI, no AMX) mul_mat of "
        "ggml_quantize_chunk(type, w) times x, w then x drawn from one xorshift stream "
        "(tests/common xorshift_data); `repack`: weights in the CPU_REPACK buffer; y: the "
        "[n][m] outputs' f32 bits; made by scripts/batch_kernels"
    )
    lines = ["{", '"about": ' + json.dumps(about) + ",", '"cases": [']
    lines += [json.dumps(c) + ("," if i + 1 < len(cases) else "") for i, c in enumerate(cases)]
    lines += ["]", "}"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
