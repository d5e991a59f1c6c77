#!/usr/bin/env python3
"""A bounded load run against an OpenAI-compatible server on this machine: a fixed
number of /v1/completions requests from a fixed number of client threads; prints
requests per second, generated tokens per second and latency percentiles.

Usage: server_load.py URL [--requests N] [--concurrency C] [--max-tokens T] [--label L]
                      [--streams S]
       server_load.py --summarize RESULTS.jsonl
The second form reads the lines the first printed (benches/server-load.sh collects
them) and prints a Markdown table of the median generated tokens/s per server and
stream count, with llama.cpp's as the reference.
Only loopback URLs are accepted: this is a local benchmark, not a load generator."""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

PROMPTS = ["Once upon a time", "The sun was", "Tom had a red", "Lily and her mom", "One day, a little",
           "The dog", "In the park", "A big bird", "The girl saw", "Max wanted to", "It was a rainy",
           "The cat and the", "Sue liked to", "Ben found a", "The tree was", "Mom said"]


def summarize(path):
    """Medians of gen_tok_per_s by (streams, label) from the JSON lines in `path`."""
    runs = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            runs.setdefault((r.get("streams", 0), r["label"]), []).append(r["gen_tok_per_s"])
    print("| streams | ours gen t/s (median) | llama.cpp gen t/s (median) | ours / llama.cpp | runs |")
    print("|---:|---:|---:|---:|---:|")
    for n in sorted({k[0] for k in runs}):
        ours = runs.get((n, "llamars"), [])
        ref = runs.get((n, "llama.cpp"), [])
        mo = statistics.median(ours) if ours else float("nan")
        mr = statistics.median(ref) if ref else float("nan")
        ratio = f"{mo / mr:.2f}x" if ours and ref else "-"
        print(f"| {n} | {mo:.1f} | {mr:.1f} | {ratio} | {max(len(ours), len(ref))} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url", nargs="?")
    ap.add_argument("--summarize", metavar="RESULTS")
    ap.add_argument("--streams", type=int, default=0, help="the server's -np, recorded in the output")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    if a.summarize:
        return summarize(a.summarize)
    if not a.url:
        ap.error("a URL or --summarize is needed")
    u = urllib.parse.urlparse(a.url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("refusing a non-loopback address: " + a.url)
    lock = threading.Lock()
    next_i = [0]
    lat, tokens, errors = [], [0], [0]

    def worker():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        while True:
            with lock:
                i = next_i[0]
                if i >= a.requests:
                    break
                next_i[0] += 1
            body = json.dumps({"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": a.max_tokens,
                               "temperature": 0, "ignore_eos": True, "cache_prompt": False})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            dt = time.perf_counter() - t0
            with lock:
                if r.status != 200:
                    errors[0] += 1
                    continue
                lat.append(dt)
                tokens[0] += json.loads(data)["usage"]["completion_tokens"]
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")
    print(json.dumps({"label": a.label, "streams": a.streams, "requests": len(lat), "errors": errors[0], "wall_s": round(wall, 3),
                      "req_per_s": round(len(lat) / wall, 2), "gen_tok_per_s": round(tokens[0] / wall, 1),
                      "p50_ms": round(pct(0.5), 1), "p90_ms": round(pct(0.9), 1)}))


if __name__ == "__main__":
    main()
