#!/usr/bin/env bash
# Session 73 A/B: the dense GEMV with its weight ring in shared memory (cp.async, one non-unrolled slot; the
# KBIT_GEMV_SMEM_RING experiment, bench/results/gemv-smem-ring-dropped-session73.patch) against main (a26a43d).
# Carried binaries: kbit_b (main), kbit_$R and tests_$R (the ring; R=r: 16 warps per CTA, the patch as it is; R=w:
# 20 warps, kGemvWarps = 20 on top of it; R=s: no ring, the dense split rule of launch_gemv_instance at 1.33x instead of
# 2x). Any card (an A/B within one call). BITS: the k list (2,3,4); QWEN=0 skips Qwen3's rows.
set -u
R=${R:-r} BITS=${BITS:-2,3,4} QWEN=${QWEN:-1} SAN=${SAN:-1}
# SHAPES: a shapes file for the glm47 rows (--shapes); TESTS: a gtest filter in place of the default one.
O=${OUT:-/tmp/kbit-out}
D=build-dev
echo "== GPU tests of the ring build $(date -u +%T)"
timeout 150 $D/tests_$R --gtest_filter="${TESTS:-GpuLinear.Gemv*:GpuLinear.AwkwardShapesEveryMEveryPath:GpuLinear.ModelShapes:GpuLinear.BitIdenticalRunToRunAndUnderGraphCapture:GpuLinear.PdlChainMatchesPlainLaunches:GpuLinear.SubnormalBlockScales:GpuLinear.BiasResidual*}" \
  > $O/tests_$R.log 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $O/tests_$R.log | head -12 | tr '\n' ' ')"
if [ "$SAN" = 1 ]; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $D/tests_$R --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition' > $O/memcheck_$R.log 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$R.log | tail -1)"
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/tests_$R --gtest_filter='GpuLinear.GemvDecodesEveryWeightPosition' > $O/racecheck_$R.log 2>&1
  echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $O/racecheck_$R.log | tail -1)"
fi
for round in 1 2; do
  for v in b $R; do
    timeout 100 $D/kbit_$v bench --model glm47 ${SHAPES:+--shapes $SHAPES} --m 1,2,4 --bits $BITS --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1; echo "glm47 $v round $round rc=$? $(date -u +%T)"
    [ "$QWEN" = 1 ] || continue
    timeout 60 $D/kbit_$v bench --model qwen3_coder_next --m 1 --bits $BITS --backend kbit_gemv --no-routed-moe --repeats 7 \
      --json $O/abq_${v}_$round.jsonl > /dev/null 2>&1; echo "qwen3 $v round $round rc=$? $(date -u +%T)"
  done
done
python3 - "$O" "$R" <<'PY'
import glob, json, statistics as st, sys
o, R = sys.argv[1], sys.argv[2]; t = {}
for f in glob.glob(o + '/ab*_*_*.jsonl'):
    v = f.split('/')[-1].split('_')[1]
    for line in open(f):
        r = json.loads(line)
        if r.get('backend') == 'kbit_gemv' and 'median_us' in r and r.get('valid', True):
            t.setdefault((r['shape'], r['m'], r['bits']), {}).setdefault(v, []).append(r['median_us'])
rat = {}
for (s, m, k), d in sorted(t.items()):
    if 'b' in d and R in d:
        b, r = st.mean(d['b']), st.mean(d[R])
        print(f"{s:24s} M={m} k={k} main {b:7.2f} ring {r:7.2f} ratio {r / b:.3f}")
        rat.setdefault((m, k), []).append(r / b)
for (m, k), v in sorted(rat.items()):
    print(f"M={m} k={k} geomean ring/main {st.geometric_mean(v):.3f} over {len(v)}")
PY
