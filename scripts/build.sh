#!/usr/bin/env bash
# Configures and builds Shoal into build/ (Release: -O2, no debug info; set
# SHOAL_BUILD_TYPE=RelWithDebInfo for a debuggable build). Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${SHOAL_BUILD_TYPE:-Release}" >/dev/null
ninja -C build "$@"
