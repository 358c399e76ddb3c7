#!/usr/bin/env bash
# Session 71: the operand dequantize's pair-table replicas. a = 4f4076f (32 KB), b = main 5c28e17 (4 at k = 3, 4;
# 1 at k = 5), c = 1 at every k, e = 2 at k = 3, 4. GPU tests of c and e, then kbit_dequant_cublas forced on Qwen3
# at M = 512 (where the dequantize is visible), rounds a b c e x 2. On an H200 also the dispatcher against cuBLAS
# bf16 at M = 4096 for a and b (issue 4's nine short rows).
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
for v in c e; do
  timeout 60 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*:GpuLinear.AwkwardShapes*:GpuLinear.DequantCublas*' > $O/tests_$v.log 2>&1; echo "tests $v rc=$?"; tail -n 1 $O/tests_$v.log
done
for round in 1 2; do
  for v in a b c e; do
    timeout 40 $B/kbit_$v bench --model qwen3_coder_next --m 512 --bits 2,3,4,5 --backend kbit_dequant_cublas \
      --no-routed-moe --repeats 5 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "$v round $round rc=$?"
  done
done
if [ "${AB_H200_M4096:-1}" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for round in 1 2; do
    for v in a b; do
      timeout 60 $B/kbit_$v bench --model qwen3_coder_next --m 4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
        --no-routed-moe --repeats 5 --json $O/v_${v}_$round.jsonl > /dev/null 2>&1; echo "h200 m4096 $v round $round rc=$?"
    done
  done
fi
python3 - "$O" <<'PY'
import json, sys, glob, statistics as st
o = sys.argv[1]; t = {}
for f in glob.glob(o + '/ab_*_*.jsonl'):
    v = f.split('/')[-1].split('_')[1]
    for l in open(f):
        r = json.loads(l)
        if r['backend'] == 'kbit_dequant_cublas': t.setdefault((r['shape'].split('.')[-1], r['m'], r['bits']), {}).setdefault(v, []).append(r['median_us'])
rat = {}
for (s, m, k), d in sorted(t.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
    a = st.mean(d['a']); line = f"{s:9s} M={m:4d} k={k} a {a:6.2f}"
    for v in 'bce':
        if v in d:
            x = st.mean(d[v]); small = s in ('k', 'v', 'shared_dn', 'moe_dn', 'shared_gu', 'moe_gu')
            rat.setdefault((k == 2, small, v), []).append(x / a); line += f" {v} {x:6.2f} ({x/a:.3f})"
    print(line)
for (k2, small, v), r in sorted(rat.items()): print(f"{'k=2' if k2 else 'k>=3'} {'small' if small else 'large'} {v}/a {st.geometric_mean(r):.4f} ({min(r):.3f}-{max(r):.3f})")
PY
# H200 M = 4096 rows (cuBLAS rows carry bits = 0: matched by (shape, M)).
ls $O/v_*.jsonl > /dev/null 2>&1 && python3 - "$O" <<'PY'
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
