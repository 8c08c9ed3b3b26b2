#!/usr/bin/env bash
# Every test: install what is needed, build everything, run the unit and integration tests
# (ctest), the data-plane contract check, a short fuzz run of the request parsers and a smoke run
# of the ingest benchmark. Exits non-zero on the first failure. The peers of the peer benchmark
# (Redis, NATS) are installed too, so that its smoke test runs against them, and Prometheus,
# promtool and shellcheck for the observability and chart tests, and the real Helm 4 and
# kubectl 1.35 for the Kubernetes tests.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install-deps.sh --peers --observe --kube
./scripts/build.sh

echo "== unit and integration tests (ctest)"
ctest --test-dir build --output-on-failure -j2 --timeout 600

contract=../shared/tools/contract-check
if [ -x "$contract" ] || [ -f "$contract" ]; then
  echo "== data-plane contract check ($contract)"
  bash "$contract" build/sidecar/shoal-sidecar
else
  echo "== data-plane contract check: $contract is not beside this checkout; not run"
fi

echo "== fuzzing the request parsers (${SHOAL_FUZZ_SECONDS:-20} s per target)"
./scripts/fuzz.sh "${SHOAL_FUZZ_SECONDS:-20}"

echo "== ingest benchmark smoke run (speed is not judged here)"
./build/cli/shoal bench ingest --duration 1 --warmup 0.2 --connections 2 --batch 200 --json

echo "== all tests passed in $(( $(date +%s) - start )) s"
