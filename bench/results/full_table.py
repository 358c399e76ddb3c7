#!/usr/bin/env python3
"""Issue 4's tables from `kbit bench --json` files (later files replace earlier rows of the same case):
per M, the dense rows where kbit_linear beats cuBLAS bf16 (and at 0.9x or better), their geomean and slowest row;
then, for the M given with --detail, every projection's times and speedups by k.
  python3 bench/results/full_table.py [--detail 1,16] FILE.jsonl..."""
import json, math, sys
from collections import defaultdict

args = sys.argv[1:]
detail = []
if args[:1] == ["--detail"]:
    detail = [int(m) for m in args[1].split(",")]
    args = args[2:]
if not args:
    sys.exit(__doc__)
cublas, kbit = {}, {}
for path in args:
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if not r.get("valid", True):
            continue
        key = (r["shape"], r["m"], bool(r.get("residual")))
        if r["backend"] == "cublas_bf16":
            cublas[key] = r["median_us"]
        elif r["backend"] == "kbit_linear":
            kbit[key + (r["bits"],)] = r["median_us"]
by_m = defaultdict(list)
for (shape, m, res, bits), us in kbit.items():
    if (shape, m, res) in cublas:
        by_m[m].append((cublas[(shape, m, res)] / us, shape, bits))
print("| M | dense rows faster than cuBLAS bf16 | at 0.9x or better | geomean | slowest |")
print("|---|---|---|---|---|")
for m in sorted(by_m):
    rows = by_m[m]
    geo = math.exp(sum(math.log(s) for s, _, _ in rows) / len(rows))
    worst = min(rows)
    print(f"| {m} | {sum(s > 1 for s, _, _ in rows)} of {len(rows)} | {sum(s >= 0.9 for s, _, _ in rows)} | "
          f"{geo:.2f}x | {worst[0]:.2f}x ({worst[1]} k = {worst[2]}) |")
for m in detail:
    shapes = sorted({(s, res) for (s, mm, res, _) in kbit if mm == m})
    print(f"\n| M = {m} | cuBLAS bf16 | k = 2 | k = 3 | k = 4 | k = 5 |\n|---|---|---|---|---|---|")
    for shape, res in shapes:
        base = cublas.get((shape, m, res))
        cells = []
        for bits in (2, 3, 4, 5):
            us = kbit.get((shape, m, res, bits))
            cells.append("-" if us is None else f"{us:.2f}" + (f" ({base / us:.2f}x)" if base else ""))
        base_cell = f"{base:.2f}" if base else "-"
        print(f"| {shape} | {base_cell} | " + " | ".join(cells) + " |")
