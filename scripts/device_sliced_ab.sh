#!/usr/bin/env bash
# The KBIT_DEQUANT_SLICE_ROWS experiment (issue 4, M = 512..2048) on carried binaries: glm47's four
# large projections at k = 4 through dequantize + cuBLASLt whole (rows 0, with cuBLAS bf16 and the
# automatic plan beside it) and in row slices of 1024 and 2048, one process per setting (the
# workspace reads the variable when it is made). Run from scripts/device_verify.sh's cmd step.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kbit-out}
shapes=$(mktemp --suffix=.json)
python3 -c "import json, sys; d = json.load(open('data/shapes.json')); g = d['glm47']
g['projections'] = [p for p in g['projections'] if p['name'] in ('q', 'o', 'shared_gu', 'shared_dn')]
json.dump({'glm47': g}, open(sys.argv[1], 'w'))" "$shapes"
for rows in ${SLICED_ROWS:-0 1024 2048}; do
  backends=kbit_dequant_cublas
  [ "$rows" = 0 ] && backends=cublas_bf16,kbit_dequant_cublas,kbit_linear
  KBIT_DEQUANT_SLICE_ROWS=$rows build-dev/kbit bench --shapes "$shapes" --m "${SLICED_M:-512,2048}" --bits 4 \
    --backend "$backends" --settle-ms 50 --repeats 7 --json "$OUT/sliced_$rows.jsonl" > "$OUT/sliced_$rows.txt" 2>&1
  echo "rows $rows rc=$?"
  grep -E "glm47" "$OUT/sliced_$rows.txt" | head -12
done
rm -f "$shapes"
