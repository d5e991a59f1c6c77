#!/usr/bin/env python3
"""Run llama.cpp on the golden cases of ../shared/golden (cli/, real/, grammar/, ppl/)
and compare its output with them: a build that computes the reference's bits passes
all of them.
usage: check-goldens.py BIN_DIR [filter-substring ...]"""
import sys, os, shlex, subprocess, time, re, glob
SHARED = os.environ.get("LLAMA_SHARED_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared"))
G = os.path.join(SHARED, "golden")
S = SHARED
R = os.environ.get("LLAMA_REAL_MODELS_DIR", os.path.expanduser("~/.cache/llamars/real"))
bindir = os.path.abspath(sys.argv[1])
filters = sys.argv[2:]
def subst(a): return a.replace('@S', S).replace('@R', R)
cases = []
for d in ('cli', 'real', 'grammar'):
    for a in sorted(glob.glob(f'{G}/{d}/*.args')):
        name = os.path.basename(a)[:-5]
        if name.startswith('ppl-'): continue
        cases.append(('completion', f'{d}/{name}', a, a[:-5] + '.txt'))
for a in sorted(glob.glob(f'{G}/ppl/*.args')) + [f'{G}/real/ppl-apache.args']:
    cases.append(('perplexity', ('ppl/' if '/ppl/' in a else 'real/') + os.path.basename(a)[:-5], a, a[:-5] + '.ppl'))
npass = nfail = 0
for kind, name, af, ef in cases:
    if filters and not any(f in name for f in filters): continue
    args = shlex.split(subst(open(af).read().strip()))
    # grammar args reference files relative to golden/grammar
    exe = os.path.join(bindir, 'llama-' + kind)
    # llama.cpp's logger can drop the tail of stdout at exit: if the output is a strict prefix of the
    # golden text, run again (up to 3 tries) before calling it a failure
    for attempt in range(3):
        t0 = time.time()
        p = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=os.path.dirname(af))
        dt = time.time() - t0
        out = p.stdout
        if kind != 'completion': break
        exp0 = open(ef, 'rb').read()
        if not (len(out) < len(exp0) and exp0.startswith(out)): break
        print(f'  (retry {name}: stdout truncated at {len(out)}/{len(exp0)} bytes)')
    timing = ''
    m = re.search(rb'eval time =\s*([\d.]+) ms /\s*(\d+) runs.*?([\d.]+) tokens per second', p.stderr)
    m2 = re.search(rb'prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens.*?([\d.]+) tokens per second', p.stderr)
    if m2: timing += f' prompt {m2.group(2).decode()} tok {float(m2.group(3)):.1f} t/s;'
    evals = re.findall(rb'\n[^\n]*?\beval time =\s*([\d.]+) ms /\s*(\d+) runs.*?([\d.]+) tokens per second', p.stderr)
    for e in evals:
        pass
    m3 = re.findall(rb'common_perf_print:\s+eval time =\s*([\d.]+) ms /\s*(\d+) runs.*?([\d.]+) tokens per second', p.stderr)
    if m3: timing += f' gen {m3[-1][1].decode()} tok {float(m3[-1][2]):.1f} t/s;'
    if kind == 'completion':
        exp = open(ef, 'rb').read()
        ok = out.startswith(exp) or out.rstrip() == exp.rstrip()
        if ok:
            print(f'PASS {name} ({dt:.1f}s;{timing})')
        else:
            i = next((k for k in range(min(len(out), len(exp))) if out[k] != exp[k]), min(len(out), len(exp)))
            print(f'FAIL {name} ({dt:.1f}s) rc={p.returncode} first diff at byte {i}: got {out[max(0,i-20):i+40]!r} expected {exp[max(0,i-20):i+40]!r}')
    else:
        exp = open(ef).read().split()
        m = re.search(rb'Final estimate: PPL = ([\d.]+)', out + p.stderr)
        got = m.group(1).decode() if m else None
        ok = got is not None and got == exp[0]
        print(f'{"PASS" if ok else "FAIL"} {name} PPL got {got} expected {exp[0]} ({dt:.1f}s)')
    npass += ok; nfail += (not ok)
    sys.stdout.flush()
print(f'== {npass} passed, {nfail} failed')
