#!/usr/bin/env bash
# A/B: operand dequantize pair table with fewer replicas (b), and with four warps per unit too (d), against main (a).
set -u
O=${OUT:-/tmp/kbit-out}
B=build-dev
for v in b d; do
  timeout 40 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*:GpuLinearDense.*:GpuLinear.AwkwardShapes*' > $O/tests_$v.log 2>&1; echo "tests $v rc=$?"; tail -n 1 $O/tests_$v.log
done
for v in b d; do for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests_$v --gtest_brief=1 --gtest_filter='GpuMma16.Operand*' > $O/${tool}_$v.log 2>&1; echo "$tool $v rc=$?"; tail -n 1 $O/${tool}_$v.log
done; done
for round in 1 2; do
  for v in a b d; do
    timeout 40 $B/kbit_$v bench --model qwen3_coder_next --m 512,4096 --bits 2,3,4,5 --backend kbit_dequant_cublas \
      --no-routed-moe --repeats 5 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "$v round $round rc=$?"
  done
done
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
    if 'a' not in d: continue
    a = st.mean(d['a']); line = f"{s:9s} M={m:4d} k={k} a {a:6.2f}"
    for v in 'bd':
        if v in d:
            x = st.mean(d[v]); small = s in ('k','v','shared_dn','moe_dn','shared_gu','moe_gu')
            rat.setdefault((m, k == 2, small, v), []).append(x / a); line += f" {v} {x:6.2f} ({x/a:.3f})"
    print(line)
for (m, k2, small, v), r in sorted(rat.items()): print(f"M={m} {'k=2' if k2 else 'k>=3'} {'small' if small else 'large'} {v}/a {st.geometric_mean(r):.4f} ({min(r):.3f}-{max(r):.3f})")
PY
