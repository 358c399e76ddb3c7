# Sourced by setup.sh and sanitize.sh: installs kbit's Debian packages (when missing) and puts nvcc on the PATH.
# Needs the CUDA toolkit (13.x) under /usr/local/cuda or nvcc on the PATH.
packages=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev git)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kbit setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13; do
    if [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; break; fi
  done
fi
command -v nvcc >/dev/null 2>&1 || {
  echo "kbit setup: the CUDA toolkit (nvcc 13.x) was not found; install it under /usr/local/cuda" >&2
  exit 1
}
