#!/usr/bin/env bash
# Session 74, later device calls. Carried (scripts/carry_pack.sh): kbit_b and tests_b = main e3d162f (the GEMV splits
# at 1.33x for k = 2..4), kbit_o = 7c2595e (k = 4 whole stripes, as before). PARTS picks, in order:
#   t  main's GPU tests (GEMV, linear, experts, MoE), any card;
#   o  A/B kbit_o / kbit_b on glm47 shared_gu (q, o controls) at M = 1..4, k = 4, 5, two rounds, kbit_linear;
#   p  kbit bench gemv-probe (--per-cta) of main (kbit_b) and of the even-ranges build (kbit_n,
#      gemv-even-ranges-dropped-session74.patch) on glm47 kv k = 4 and q k = 2, M = 1: why kv ran 1.3x slower;
#   then, on an H200 only, the steps of h200-m4096-and-m3-15-main-session72.sh named by H200_STEPS (q a b c m g),
#   with kbit_b as its binary.
set -u
R=${OUT:-/tmp/kbit-out}
O=$R/w; mkdir -p $O  # everything under w/, tarred at the end (only 8 files come back)
D=build-dev
PARTS=${PARTS:-t}
h200() { nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; }
case $PARTS in *t*)
  timeout 200 $D/tests_b --gtest_filter="${TESTS:-GpuLinear*:GpuGemv*:GpuExpert*:GpuMoe*}" > $O/tests_b.log 2>&1
  echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' $O/tests_b.log | head -12 | tr '\n' ' ')" ;;
esac
case $PARTS in *o*)
  for round in 1 2; do
    for v in o b; do
      timeout 100 $D/kbit_$v bench --model glm47 --shapes bench/results/shapes-split-rule-session73.json --m 1,2,3,4 \
        --bits 4,5 --backend kbit_linear --no-routed-moe --repeats 7 --json $O/ab_${v}_$round.jsonl > /dev/null 2>&1
      echo "glm47 $v round $round rc=$? $(date -u +%T)"
    done
  done
  python3 bench/results/ab_summary.py pair "$O" ob
  ;;
esac
case $PARTS in *p*)
  for v in b n; do
    for sk in kv:4 q:2; do
      timeout 60 $D/kbit_$v bench gemv-probe --shape glm47.${sk%:*} --bits ${sk#*:} --per-cta > $O/probe_${v}_${sk%:*}.txt 2>&1
      echo "probe $v $sk rc=$? $(grep -E 'first entry to last exit' $O/probe_${v}_${sk%:*}.txt)"
    done
  done ;;
esac
if [ -n "${H200_STEPS:-}" ] && h200; then OUT=$O STEPS=$H200_STEPS bash bench/results/h200-m4096-and-m3-15-main-session72.sh; fi
h200 || echo "not an H200: no H200 steps"
tar -C $O -cJf $R/session74.tar.xz . && rm -rf $O
