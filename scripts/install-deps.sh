#!/usr/bin/env bash
# Installs the Debian 12 packages that Shoal's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, so it costs a second on a prepared machine.
#
#   scripts/install-deps.sh           what the build, the tests and the demo need
#   scripts/install-deps.sh --peers   also the peers of `shoal bench peers` (Redis Streams and
#                                     NATS JetStream: servers and C clients); opt-in, so the main
#                                     demo does not pay for them
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl python3
  libcpprest-dev libboost-system-dev libssl-dev zlib1g-dev
  libyaml-cpp-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libsimdjson-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)
peer_packages=(redis-server nats-server libhiredis-dev libnats-dev)

for arg in "$@"; do
  case "$arg" in
    --peers) packages+=("${peer_packages[@]}") ;;
    -h | --help)
      sed -n '2,8p' "$0"
      exit 0
      ;;
    *)
      echo "usage: $0 [--peers]" >&2
      exit 2
      ;;
  esac
done

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
