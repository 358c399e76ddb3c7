#!/usr/bin/env bash
# Sixty-first session, call 2 (untracked): issue 4's full table at M = 1..64 on the carried binary, then the
# untuned plans against the tuned ones at M = 48..128 (the new tile rule for small W).
set -uo pipefail
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
timeout 330 build-dev/kbit bench --model all --m 1,2,4,8,16,32,64 --bits 2,3,4,5 --backend cublas_bf16,kbit_linear \
  --settle-ms 100 --repeats 9 --json $R/full_m1_64.jsonl > $R/full_m1_64.txt 2> $R/full_m1_64_progress.txt
echo "full table rc=$? $(( $(date +%s) - t0 ))s" | tee -a $R/summary.txt
timeout $(( 560 - ($(date +%s) - t0) )) build-dev/kbit bench --model all --m 48,64,96,128 --bits 2,3,4,5 \
  --backend kbit_linear,kbit_linear_untuned --no-routed-moe --settle-ms 100 --repeats 7 \
  --json $R/untuned_m48_128.jsonl > $R/untuned_m48_128.txt 2> $R/untuned_m48_128_progress.txt
echo "untuned rc=$? $(( $(date +%s) - t0 ))s" | tee -a $R/summary.txt
grep -E "^TOTAL|^M =" $R/full_m1_64.txt | head -40
(cd $OUT && tar czf /tmp/r.tgz r && rm -rf r && mv /tmp/r.tgz r.tgz)
