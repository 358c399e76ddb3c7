#!/usr/bin/env bash
# A/B/n of whole-file variants of the source tree, for device calls (scripts/device_quick.sh,
# step `abn`): several kernel variants measured in one call, one build each, instead of one
# call (cold start and full build) per variant.
#
# Usage: scripts/ab_variants.sh OUT_FILE DIR...
#   Each DIR holds replacement files at their repository paths (for example
#   scripts/abn/no-split-div/src/cuda/skinny/skinny_stream_kernel.cuh). Per round
#   (KBIT_AB_ROUNDS, default 1) the working tree as it is ("base") and then each DIR's files
#   in place of the tree's are built (KBIT_AB_BUILD, default `ninja -C build-dev kbit`) and
#   measured with KBIT_AB_CMD (under KBIT_AB_TIMEOUT seconds, default 120). The tree's files
#   are put back after every variant (with a new mtime, so the next build sees them) and
#   the base is rebuilt at the end (KBIT_AB_RESTORE=0: left to the next build, when this is
#   the call's last step). Everything printed goes to OUT_FILE.
# Keep the DIRs untracked and delete them before committing.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
build=${KBIT_AB_BUILD:-ninja -C build-dev kbit}
keep=$(mktemp -d)
{
  for r in $(seq "${KBIT_AB_ROUNDS:-1}"); do
    for v in base "$@"; do
      files=()
      if [ "$v" != base ]; then
        if [ ! -d "$v" ]; then echo "== $v: no such folder"; continue; fi
        mapfile -t files < <(cd "$v" && find . -type f | sed 's|^\./||' | sort)
      fi
      missing=0
      for f in "${files[@]}"; do [ -f "$f" ] || { echo "== $v: $f is not a file of the tree"; missing=1; }; done
      [ "$missing" = 1 ] && continue
      for f in "${files[@]}"; do mkdir -p "$keep/$(dirname "$f")" && cp "$f" "$keep/$f" && cp "$v/$f" "$f"; done
      if bash -c "$build" > "$keep/build.log" 2>&1; then
        echo "== $v (round $r)"
        timeout "${KBIT_AB_TIMEOUT:-120}" bash -c "${KBIT_AB_CMD:?KBIT_AB_CMD is not set}" 2>&1
      else
        echo "== $v (round $r): build failed"
        grep -E "error" "$keep/build.log" | head -10
      fi
      for f in "${files[@]}"; do cp "$keep/$f" "$f" && touch "$f"; done
    done
  done
} > "$out"
if [ "${KBIT_AB_RESTORE:-1}" = 1 ]; then bash -c "$build" > /dev/null 2>&1 || echo "rebuilding the base failed" >> "$out"; fi
rm -rf "$keep"
