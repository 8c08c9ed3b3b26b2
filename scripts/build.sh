#!/usr/bin/env bash
# Configures and builds Shoal into build/ (Release: -O2, no debug info; set
# SHOAL_BUILD_TYPE=RelWithDebInfo for a debuggable build). Installs missing Debian packages first.
# SHOAL_BUILD_TESTS=OFF configures without the tests (the demo and the image: the tests' build
# needs Prometheus' promtool, which install-deps.sh --observe adds). Arguments are ninja targets.
set -euo pipefail
cd "$(dirname "$0")/.."
tests="${SHOAL_BUILD_TESTS:-ON}"
if [ "$tests" = "OFF" ]; then
  ./scripts/install-deps.sh
else
  ./scripts/install-deps.sh --observe
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${SHOAL_BUILD_TYPE:-Release}" \
  -DSHOAL_BUILD_TESTS="$tests" >/dev/null
ninja -C build "$@"
