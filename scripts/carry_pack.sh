#!/usr/bin/env bash
# Pack binaries built on the CPU machine (sm_90a, cudart static) for a device call, so that the
# call spends no device time on builds: scripts/carry_pack.sh NAME=PATH... writes
# build-gz/binaries.tar.xz, the stripped binaries in one solid xz stream with a dictionary
# larger than one binary: builds of one tree share most bytes, so four kbit-sized binaries
# pack into ~4.2 MB where one alone takes ~3.6. Then call the device with carry ["build-gz"]
# and a command that starts with scripts/device_carried.sh. The device's copy of the tree
# plus the carried paths must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-gz && mkdir -p build-gz
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
names=()
for pair in "$@"; do
  name=${pair%%=*} path=${pair#*=}
  [ -x "$path" ] || { echo "not an executable: $path"; exit 1; }
  strip -o "$stage/$name" "$path"
  names+=("$name")
done
tar -C "$stage" -cf - "${names[@]}" | xz -T1 --lzma2=preset=9e,dict=192MiB > build-gz/binaries.tar.xz
du -sh build-gz
