#!/usr/bin/env bash
# Installs the Debian 12 packages that Shoal's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, so it costs a second on a prepared machine.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl python3
  libcpprest-dev libboost-system-dev libssl-dev zlib1g-dev
  libyaml-cpp-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libsimdjson-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
