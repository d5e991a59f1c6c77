#!/usr/bin/env python3
"""Builds tests/data/json_schema/cases.json: JSON schemas and the grammar (or error)
that llama.cpp 0c1e570's C++ converter gives for each.

Cases come from llama.cpp's tests/test-json-schema-to-grammar.cpp (every `test({...})`
and the two checks in its main()) and from extra_schemas.json beside this script.
Each schema is run through jsg_driver (built by build_driver.sh against the llama.cpp
reference build), so the recorded grammar is what the converter really emits; the C++
test's own expectation is kept beside it (trimmed as the C++ test trims), and
`cpp_test_agrees` says whether the two match.

Usage: scripts/json_schema_cases/extract.py [--src LLAMA_CPP_SRC] [--driver PATH]
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cpp_string_literals(text):
    """Yields (kind, value) for the tokens of `text` that matter: C++ string literals
    (raw R"delim(...)delim" and ordinary "..."), and identifiers."""
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.index("\n", i) if "\n" in text[i:] else n
        elif c == "R" and i + 1 < n and text[i + 1] == '"':
            open_paren = text.index("(", i + 2)
            delim = text[i + 2:open_paren]
            end = text.index(")" + delim + '"', open_paren + 1)
            yield ("str", text[open_paren + 1:end])
            i = end + len(delim) + 2
        elif c == '"':
            j = i + 1
            out = []
            while text[j] != '"':
                if text[j] == "\\":
                    esc = text[j + 1]
                    out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "r": "\r"}[esc])
                    j += 2
                else:
                    out.append(text[j])
                    j += 1
            yield ("str", "".join(out))
            i = j + 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            yield ("ident", text[i:j])
            i = j
        else:
            i += 1


def cpp_trim(s):
    """The C++ test's trim(): strip the ends, drop each line's leading blanks."""
    s = s.strip(" \n\r\t")
    return re.sub(r"(^|\n)[ \t]+", r"\1", s)


def block_end(text, start):
    """Index just past the `)` closing the `(` at `start`, skipping string literals."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == "R" and text[i + 1] == '"':
            open_paren = text.index("(", i + 2)
            delim = text[i + 2:open_paren]
            i = text.index(")" + delim + '"', open_paren + 1) + len(delim) + 2
            continue
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced test block")


def extract_tests(src):
    text = open(src, encoding="utf-8").read()
    cases = []
    for m in re.finditer(r"\btest\(\{", text):
        body = text[m.start() + 4:block_end(text, m.start() + 4)]
        toks = list(cpp_string_literals(body))
        status = next(v for k, v in toks if k == "ident" and v in ("SUCCESS", "FAILURE"))
        strs = [v for k, v in toks if k == "str"]
        if len(strs) != 3:
            raise ValueError(f"test block with {len(strs)} strings: {body[:80]}")
        name, schema, expected = strs
        cases.append({
            "name": name,
            "origin": "test-json-schema-to-grammar.cpp",
            "schema": schema,
            "cpp_test_status": status,
            "cpp_test_expected": cpp_trim(expected) if status == "SUCCESS" else None,
        })

    # main(): a recursive document converted twice must agree (recorded as a plain case)
    main = text[text.index("int main()"):]
    m = re.search(r'"- parsed document\\n"\);\s*auto schema = common_json::parse\(R"""\((.*?)\)"""\)', main, re.S)
    cases.append({
        "name": "parsed document",
        "origin": "test-json-schema-to-grammar.cpp main()",
        "schema": m.group(1),
        "cpp_test_status": "SUCCESS",
        "cpp_test_expected": None,
    })
    # main(): the first property of a document added with build_grammar's add_schema
    m = re.search(r'"- sub-schema \$ref\\n"\);\s*auto parameters = common_json::parse\(R"""\((.*?)\)"""\);.*?"sub-schema \$ref",\s*"",\s*R"""\((.*?)\)"""', main, re.S)
    cases.append({
        "name": "sub-schema $ref",
        "origin": "test-json-schema-to-grammar.cpp main()",
        "schema": m.group(1),
        "cpp_test_status": "SUCCESS",
        "cpp_test_expected": cpp_trim(m.group(2)),
        "builder": "first_property",
    })
    return cases


def run_driver(driver, schema_text):
    """The C++ converter's result for one schema: (ok, grammar or error, warnings)."""
    # the text itself (on one line), so that duplicate keys and number spellings reach
    # the C++ parser as they are; raw line breaks cannot occur inside JSON strings
    line = schema_text.replace("\r", " ").replace("\n", " ")
    p = subprocess.run([driver], input=line + "\n", capture_output=True, text=True, check=True)
    out = json.loads(p.stdout)
    warnings = [w for w in p.stderr.splitlines() if w.startswith("WARNING")]
    return out, warnings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default="/work/ref/llama.cpp-src")
    ap.add_argument("--driver", default="/tmp/jsg_driver")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/json_schema/cases.json"))
    args = ap.parse_args()

    if not os.path.exists(args.driver):
        subprocess.run([os.path.join(HERE, "build_driver.sh"), args.driver], check=True)

    cases = extract_tests(os.path.join(args.src, "tests/test-json-schema-to-grammar.cpp"))
    for extra in json.load(open(os.path.join(HERE, "extra_schemas.json"), encoding="utf-8")):
        case = {"name": extra["name"], "origin": "extra", "cpp_test_status": None, "cpp_test_expected": None}
        if "builder" in extra:
            # a build_grammar script: add_rule / add_schema calls in order (see jsg_driver.cpp)
            case["schema"] = json.dumps({"__builder__": extra["builder"], "dotall": extra.get("dotall", False)}, ensure_ascii=False)
            case["builder"] = "script"
        else:
            case["schema"] = extra["schema"] if isinstance(extra["schema"], str) else json.dumps(extra["schema"], ensure_ascii=False)
        cases.append(case)

    for case in cases:
        if case.get("builder") == "first_property":
            # build_grammar + add_schema("root", <first property>) in the C++ test: its
            # expectation is the converter's (checked by the C++ test itself)
            case["grammar"] = case["cpp_test_expected"] + "\n"
            case["error"] = None
            case["warnings"] = []
            case["cpp_test_agrees"] = True
            continue
        out, warnings = run_driver(args.driver, case["schema"])
        case["grammar"] = out.get("grammar") if out["ok"] else None
        case["error"] = None if out["ok"] else out["error"]
        case["warnings"] = warnings
        if case["cpp_test_status"] is None:
            case["cpp_test_agrees"] = None
        elif case["cpp_test_status"] == "FAILURE":
            case["cpp_test_agrees"] = not out["ok"]
        elif case["cpp_test_expected"] is None:
            case["cpp_test_agrees"] = out["ok"]
        else:
            case["cpp_test_agrees"] = out["ok"] and cpp_trim(out["grammar"]) == case["cpp_test_expected"]
        if case["cpp_test_agrees"] is False:
            print(f"note: the C++ test's expectation differs from the converter: {case['name']}", file=sys.stderr)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({
            "source": "llama.cpp 0c1e570 common/json-schema-to-grammar.cpp via scripts/json_schema_cases/jsg_driver.cpp",
            "cases": cases,
        }, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
