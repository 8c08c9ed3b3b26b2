#!/usr/bin/env bash
# The main job: install what is needed, build, and run an elastic topic through a flash sale on
# this machine (`shoal up`), ending in a report under reports/. Extra arguments go to shoal up,
# e.g. --compare, --no-load, --duration 120.
set -euo pipefail
cd "$(dirname "$0")/.."
# The programs only; scripts/test.sh builds the tests.
SHOAL_BUILD_TESTS=OFF ./scripts/build.sh shoal shoal-sidecar
exec ./build/cli/shoal up examples/flash-sale.yaml "$@"
