#!/usr/bin/env bash
# Session 71: main with the 1-4 KB operand pair tables (kbit_b, tests_b) on a GPU: every GPU test, then
# Qwen3 M = 512 / 4096 against cuBLAS bf16 beside the previous main (kbit_a), rounds a b a b.
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
timeout 300 $B/tests_b --gtest_brief=1 > $O/gpu_tests.log 2>&1; echo "gpu tests rc=$?"; tail -n 3 $O/gpu_tests.log
for round in 1 2; do
  for v in a b; do
    timeout 60 $B/kbit_$v bench --model qwen3_coder_next --m 512,4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
      --no-routed-moe --repeats 5 --json $O/v_${v}_$round.jsonl > $O/v_${v}_$round.txt 2>&1; echo "$v round $round rc=$?"
  done
done
# cuBLAS rows carry bits = 0: matched to kbit's by (shape, M).
python3 - "$O" <<'PY'
import json, sys, glob, statistics as st
o = sys.argv[1]; t = {}; cb = {}
for f in glob.glob(o + '/v_*_*.jsonl'):
    v = f.split('/')[-1].split('_')[1]
    for l in open(f):
        r = json.loads(l); s = r['shape'].split('.')[-1]
        if r['backend'] == 'cublas_bf16': cb.setdefault((s, r['m']), {}).setdefault(v, []).append(r['median_us'])
        else: t.setdefault((s, r['m'], r['bits']), {}).setdefault(v, []).append(r['median_us'])
short = {'a': 0, 'b': 0}; rat = {}
for key, d in sorted(t.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
    line = f"{key[0]:9s} M={key[1]:4d} k={key[2]}"
    for v in 'ab':
        c = cb[(key[0], key[1])][v]; k = d[v]
        x = st.mean(c) / st.mean(k); line += f"  {v}: cublas {st.mean(c):7.2f} kbit {st.mean(k):7.2f} ({'/'.join(f'{z:.2f}' for z in k)}) x{x:.3f}"
        if x < 0.9: short[v] += 1
    line += f"  b/a {st.mean(d['b'])/st.mean(d['a']):.3f}"
    print(line)
print('rows under 0.9x:', short)
PY
