#!/usr/bin/env bash
# Pack binaries built on the CPU machine (sm_90a, cudart static) for a device call, so that the
# call spends no device time on builds: scripts/carry_pack.sh NAME=PATH... writes
# build-gz/NAME.xz (~4 MB for a 57 MB kbit). Then call the device with carry ["build-gz"] and
# a command that starts with scripts/device_carried.sh. The device's copy of the tree plus
# the carried paths must stay under 64 MiB: four binaries fit beside today's tree.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-gz && mkdir -p build-gz
for pair in "$@"; do
  name=${pair%%=*} path=${pair#*=}
  [ -x "$path" ] || { echo "not an executable: $path"; exit 1; }
  xz -9e -T2 -c "$path" > "build-gz/$name.xz" &
done
wait
du -sh build-gz
