#!/usr/bin/env bash
# The main job: install what is needed, build, and run the local sidecar demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec ./build/cli/shoal demo "$@"
