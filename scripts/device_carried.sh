#!/usr/bin/env bash
# On the device: unpack build-gz/binaries.tar.xz (scripts/carry_pack.sh) to build-dev/NAME, then
# run the given command, e.g. scripts/device_carried.sh 'build-dev/kbit_a bench --model glm47 --m 1'.
# Only 8 files come back from $OUT: have the command tar its results into one.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-dev "${OUT:-/tmp/kbit-out}"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
for f in build-gz/*.tar.xz; do
  [ -e "$f" ] || continue
  if command -v xz > /dev/null; then xz -dc "$f" | tar -C build-dev -xf -
  else python3 -c "import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])" "$f" build-dev; fi
done
chmod +x build-dev/* 2> /dev/null
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "${OUT:-/tmp/kbit-out}/device.txt"
bash -c "$*"
