#!/usr/bin/env bash
# Session 72, H200 only (exits at once elsewhere, unless ANY_GPU=1): main's (edc8110) Qwen3 rows at M = 4096 against cuBLAS bf16, two
# rounds (issue 4's nine short rows, first H200 run of the 4 KB operand table), then every dense projection at the M
# in 1..16 that the sixty-first session's full table did not hold (3, 5-7, 9-15), k = 2..5.
# STEPS picks the parts: q (Qwen3 M = 4096), a (M = 3, 5, 6, 7), b (M = 9..15), c (all models at M = 512, 4096),
# m (Qwen3 experts at T = 1..16, k = 2..5, issue 5's "every T and k").
# g (GLM-4.7 experts at T = 1..16, k = 4; added in session 73).
set -u
O=${OUT:-/tmp/kbit-out}
[ "${ANY_GPU:-0}" = 1 ] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
B=build-dev/kbit_b
STEPS=${STEPS:-qab}
all() {  # name, M list, timeout
  timeout "$3" $B bench --model all --m "$2" --bits 2,3,4,5 --backend cublas_bf16,kbit_linear --no-routed-moe \
    --settle-ms 100 --repeats 9 --json "$O/$1.jsonl" > "$O/$1.txt" 2>&1; echo "$1 rc=$? $(date -u +%T)"
}
case $STEPS in *q*)
  for round in 1 2; do
    timeout 120 $B bench --model qwen3_coder_next --m 4096 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
      --no-routed-moe --repeats 5 --json $O/v_b_$round.jsonl > /dev/null 2>&1; echo "qwen3 m4096 round $round rc=$? $(date -u +%T)"
  done
  python3 bench/results/ab_summary.py vs-cublas "$O" b ;;
esac
case $STEPS in *a*) all m3-7 3,5,6,7 220 ;; esac
case $STEPS in *b*) all m9-15 9,10,11,12,13,14,15 300 ;; esac
case $STEPS in *c*) all m512-4096 512,4096 500 ;; esac
case $STEPS in *m*)
  timeout ${MOE_TIMEOUT:-300} $B bench moe --model qwen3_coder_next --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --bits 2,3,4,5 \
    --json "$O/moe-qwen3-t1-16.jsonl" > "$O/moe-qwen3-t1-16.txt" 2>&1; echo "moe rc=$? $(date -u +%T)" ;;
esac
# g (session 73): GLM-4.7 experts at every T = 1..16, k = 4 (issue 5's 75% and 3x bars at every T; the sixty-first
# session measured T = 1, 2, 4, 8, 16, the sixty-eighth T = 1, 4, 16 with the card's clock held at 1455-1830 MHz).
case $STEPS in *g*)
  timeout ${GLM_TIMEOUT:-330} $B bench moe --model glm47 --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --bits 4 \
    --json "$O/moe-glm47-t1-16-k4.jsonl" > "$O/moe-glm47-t1-16-k4.txt" 2>&1; echo "moe glm47 rc=$? $(date -u +%T)" ;;
esac
