#!/usr/bin/env python3
"""How far the untuned plans of kbit::linear are from the best, on recorded `kbit tune` logs.

Each tune log lists every candidate plan of each (shape, k, M) with its screened time. This
script asks `kbit plan` (on a machine without a GPU: the heuristic, planned for the H200) which
plan it picks for each case and looks that plan up among the candidates: the ratio to the
fastest candidate is what a shape outside the tuned table loses.

  python3 bench/analysis/untuned_plans.py build/kbit bench/results/h200-tune-m16-session56.txt.xz ...
"""
import lzma
import math
import re
import subprocess
import sys

CANDIDATE = re.compile(r'\s+(\w+)(?: n_tiles=(\d+) warps=(\d+) splits=(\d+) items=(\w+))? \(forced\)\s+([\d.]+) us \(screen\)')
CASE = re.compile(r'(\S+)\.(\S+)\s+k=(\d) M=(\d+)\s+best\s+([\d.]+) us')
PLAN = re.compile(r'(\w+)(?: n_tiles=(\d+) warps=(\d+) splits=(\d+) items=(\w+))? \(')


def read_cases(paths):
    cases = []  # (model, projection, k, M, {plan: us})
    for path in paths:
        opener = lzma.open if path.endswith('.xz') else open
        candidates = {}
        with opener(path, 'rt') as f:
            for line in f:
                m = CANDIDATE.match(line)
                if m:
                    candidates.setdefault(m.groups()[:5], float(m.group(6)))
                    continue
                m = CASE.match(line)
                if m:
                    cases.append((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), candidates))
                    candidates = {}
    return cases


def main():
    kbit, logs = sys.argv[1], sys.argv[2:]
    cases = [c for c in read_cases(logs) if c[4]]
    ms = sorted({c[3] for c in cases})
    if not cases:
        sys.exit("no tune cases with screened candidates in these logs")
    out = subprocess.run([kbit, 'plan', '--model', 'all', '--m', ','.join(map(str, ms)), '--bits', '2,3,4,5'],
                         capture_output=True, text=True, check=True).stdout.splitlines()[1:]
    plans = {}
    for line in out:
        model, proj, n, k, m, bits, plan = line.split(None, 6)
        plans[(model, proj, int(bits), int(m))] = PLAN.match(plan).groups()
    ratios, missing = {}, []
    for model, proj, bits, m, cand in cases:
        plan = plans[(model, proj, bits, m)]
        t = cand.get(plan)
        if t is None:
            missing.append((model, proj, bits, m, plan))
            continue
        ratios.setdefault('M <= 8' if m <= 8 else 'M = 9..16' if m <= 16 else 'M > 16', []).append(
            (t / min(cand.values()), f'{model}.{proj} k={bits} M={m}', plan))
    for group, rs in sorted(ratios.items()):
        gm = math.exp(sum(math.log(r[0]) for r in rs) / len(rs))
        worst = max(rs)
        print(f'{group}: {len(rs)} cases, untuned / best geomean {gm:.3f}, worst {worst[0]:.2f} ({worst[1]}: {worst[2]})')
    print(f'{len(missing)} cases whose plan the tune did not time' + (f', e.g. {missing[0]}' if missing else ''))


if __name__ == '__main__':
    main()
