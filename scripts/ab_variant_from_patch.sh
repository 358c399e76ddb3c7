#!/usr/bin/env bash
# scripts/ab_variant_from_patch.sh NAME PATCH: writes the files that PATCH (a `git diff` of
# the tree) changes, patched, under scripts/abn/NAME/ at their repository paths, for
# scripts/ab_variants.sh (device step abn). The tree itself ends unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
patch=$2
mapfile -t files < <(git apply --numstat "$patch" | cut -f3)
for f in "${files[@]}"; do git diff --quiet -- "$f" || { echo "$f has uncommitted changes: commit or stash them first"; exit 1; }; done
git apply "$patch"
for f in "${files[@]}"; do mkdir -p "scripts/abn/$name/$(dirname "$f")" && cp "$f" "scripts/abn/$name/$f"; done
git apply -R "$patch"
echo "scripts/abn/$name: ${files[*]}"
