#!/usr/bin/env bash
# Configures and builds Shoal into build/ (RelWithDebInfo). Installs missing Debian packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build "$@"
