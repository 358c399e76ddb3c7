# Sourced by the A/B scripts (bench/results/ab-*-session76.sh and later): the carried binaries are build-dev/kbit_V and
# build-dev/tests_V (scripts/carry_pack.sh, scripts/device_carried.sh); a script's rows go under $OUT/DIR (ab_start)
# and leave as one tarball (ab_tar: only 8 files come back from a device call).
R=${OUT:-/tmp/kbit-out}
D=build-dev
ab_start() { O=$R/$1; mkdir -p "$O"; }
# ab_tests V TIMEOUT FILTER: variant V's GPU tests ($TESTS overrides the filter), a one-line verdict.
ab_tests() {
  echo "== GPU tests of $1 $(date -u +%T)"
  timeout "$2" $D/tests_$1 --gtest_filter="${TESTS:-$3}" > "$O/tests_$1.log" 2>&1
  echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]|tests from .* ran' "$O/tests_$1.log" | head -12 | tr '\n' ' ')"
}
# ab_bench LABEL PREFIX V ROUND TIMEOUT ARGS...: kbit_V ARGS... with its rows in PREFIX_V_ROUND.jsonl
# (ab_summary.py pair reads ab*_V_ROUND.jsonl).
ab_bench() {
  local label=$1 prefix=$2 v=$3 round=$4 limit=$5
  shift 5
  timeout "$limit" $D/kbit_$v "$@" --json "$O/${prefix}_${v}_$round.jsonl" > "$O/${prefix}_${v}_$round.txt" 2>&1
  echo "$label $v round $round rc=$? $(date -u +%T)"
}
# ab_summary BO [timing-only]: variant O against B per row and geomeans (ab_summary.py pair), geomeans printed.
ab_summary() {
  python3 bench/results/ab_summary.py pair "$O" "$1" ${2:-} > "$O/summary_$1.txt"
  echo "== $1"; grep -E 'geomean' "$O/summary_$1.txt"
}
ab_tar() { tar -C "$O" -cJf "$R/$1.tar.xz" . && rm -rf "$O"; }
