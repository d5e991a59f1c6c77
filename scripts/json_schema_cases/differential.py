#!/usr/bin/env python3
"""Differential check of our converter against llama.cpp's C++ one on random schemas.

Writes N random schemas (a seeded generator mixing every keyword the converter
reads, odd property names, patterns built from supported and unsupported pieces,
floats, $refs, allOf/anyOf, type arrays) with the C++ converter's result for each, in
the cases.json format, then runs the lenient table test over that file:

    scripts/json_schema_cases/differential.py [-n 2000] [--seed 1]

The test reads the file named by JSON_SCHEMA_CASES instead of tests/data/.
"""

import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

NAMES = ["a", "b", "ab", "abc", "x-y", "-x", "a b", "string", "root", "number", "value",
         "é", "ü1", "", "*", "a.b", "q\"", "n1", "n2", "additional", "item", "dot"]
PATTERN_PIECES = ["a", "b", "[0-9]", "[a-z]", "[^\"]", ".", "\\.", "\\-", "\\x41", "\\u00e9", "é",
                  "(a|b)", "(?:xy)", "x*", "y+", "z?", "[0-9]{2}", "a{1,3}", "(ab){2,}", "q{,2}",
                  "|", "\\d", "(?=a)", "\"", "\\\\", "\\t", "{", "]", "("]


def rand_pattern(r):
    body = "".join(r.choice(PATTERN_PIECES) for _ in range(r.randint(0, 5)))
    roll = r.random()
    if roll < 0.8:
        return "^" + body + "$"
    if roll < 0.9:
        return body
    return ""


def rand_value(r, depth=0):
    kind = r.randint(0, 7)
    if kind == 0:
        return None
    if kind == 1:
        return r.choice([True, False])
    if kind == 2:
        return r.randint(-10**6, 10**6)
    if kind == 3:
        return r.choice([0.5, 1e100, 1e-7, -2.25, 3.0, 1e15, 123.456, 0.1])
    if kind == 4 or depth > 1:
        return r.choice(["a", "b", "x\ny", "q\"u", "é", "\u0001", "", "tab\t"])
    if kind == 5:
        return [rand_value(r, depth + 1) for _ in range(r.randint(0, 2))]
    return {r.choice(NAMES): rand_value(r, depth + 1) for _ in range(r.randint(0, 2))}


def rand_schema(r, depth, defs):
    if depth > 3:
        return {"type": r.choice(["string", "integer", "boolean", "null", "number"])}
    roll = r.randint(0, 15)
    if roll == 0 and defs:
        return {"$ref": "#/$defs/" + r.choice(defs)}
    if roll == 1:
        key = r.choice(["anyOf", "oneOf"])
        s = {key: [rand_schema(r, depth + 1, defs) for _ in range(r.randint(1, 3))]}
        if r.random() < 0.3:
            s["type"] = "object"
        return s
    if roll == 2:
        return {"allOf": [rand_object(r, depth + 1, defs) if r.random() < 0.7 else
                          {"enum": r.sample(["a", "b", "c", "d"], r.randint(1, 3))}
                          for _ in range(r.randint(1, 3))]}
    if roll == 3:
        return {"const": rand_value(r)}
    if roll == 4:
        return {"enum": [rand_value(r) for _ in range(r.randint(1, 4))]}
    if roll == 5:
        s = {"type": "integer"}
        for k in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]:
            if r.random() < 0.4:
                s[k] = r.choice([r.randint(-10**r.randint(0, 12), 10**r.randint(0, 12)), 0, 1, -1, 9, 10, 99, 2.5])
        return s
    if roll == 6:
        s = {"type": "string"}
        if r.random() < 0.4:
            s["pattern"] = rand_pattern(r)
        if r.random() < 0.3:
            s["format"] = r.choice(["date", "time", "date-time", "uuid", "uuid3", "email"])
        if r.random() < 0.4:
            s["minLength"] = r.randint(0, 4)
        if r.random() < 0.4:
            s["maxLength"] = r.randint(0, 6)
        return s
    if roll == 7:
        s = {"type": "array"}
        if r.random() < 0.7:
            if r.random() < 0.3:
                s["prefixItems" if r.random() < 0.5 else "items"] = [rand_schema(r, depth + 1, defs) for _ in range(r.randint(0, 3))]
            else:
                s["items"] = rand_schema(r, depth + 1, defs)
        if r.random() < 0.5:
            s["minItems"] = r.randint(0, 3)
        if r.random() < 0.5:
            s["maxItems"] = r.randint(0, 4)
        return s
    if roll == 8:
        return {"type": r.sample(["string", "integer", "null", "array", "object", "boolean"], r.randint(1, 3)),
                "maxLength": 3, "minimum": 2}
    if roll == 9:
        return {}
    if roll == 10:
        return {"type": r.choice(["number", "boolean", "null"])}
    return rand_object(r, depth, defs)


def rand_object(r, depth, defs):
    s = {}
    if r.random() < 0.8:
        s["type"] = "object"
    if r.random() < 0.8:
        names = r.sample(NAMES, r.randint(0, 4))
        s["properties"] = {n: rand_schema(r, depth + 1, defs) for n in names}
        if names and r.random() < 0.7:
            s["required"] = r.sample(names, r.randint(0, len(names)))
    roll = r.random()
    if roll < 0.3:
        s["additionalProperties"] = False
    elif roll < 0.45:
        s["additionalProperties"] = True
    elif roll < 0.6:
        s["additionalProperties"] = rand_schema(r, depth + 1, defs)
    return s


def gen(r):
    defs = {}
    names = r.sample(["n", "m", "k-1"], r.randint(0, 2))
    for n in names:
        defs[n] = rand_schema(r, 2, names)
    s = rand_schema(r, 0, names)
    if defs and isinstance(s, dict):
        s = dict(s)
        s["$defs"] = defs
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--driver", default="/tmp/jsg_driver")
    ap.add_argument("--out", default="/tmp/json_schema_differential.json")
    ap.add_argument("--no-test", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.driver):
        subprocess.run([os.path.join(HERE, "build_driver.sh"), args.driver], check=True)

    r = random.Random(args.seed)
    schemas = [gen(r) for _ in range(args.n)]
    cases = []
    for i, s in enumerate(schemas):
        line = json.dumps(s, ensure_ascii=False)
        p = subprocess.run([args.driver], input=line + "\n", capture_output=True, text=True, check=True)
        out = json.loads(p.stdout)
        cases.append({
            "name": f"random {args.seed}/{i}",
            "origin": "differential",
            "schema": line,
            "grammar": out.get("grammar") if out["ok"] else None,
            "error": None if out["ok"] else out["error"],
            "warnings": [w for w in p.stderr.splitlines() if w.startswith("WARNING")],
        })
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"source": "differential.py", "cases": cases}, f, ensure_ascii=False)
    ok = sum(1 for c in cases if c["grammar"] is not None)
    print(f"{len(cases)} schemas ({ok} converted, {len(cases) - ok} refused) written to {args.out}")
    if args.no_test:
        return
    env = dict(os.environ, JSON_SCHEMA_CASES=args.out)
    rc = subprocess.run(["cargo", "test", "--release", "--test", "json_schema_grammar", "--", "lenient"],
                        cwd=ROOT, env=env).returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
