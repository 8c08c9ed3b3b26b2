#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and fuzzes the request parsers
# for SECONDS (default 20) on a copy of tests/fuzz/corpus, so the checked-in seeds stay small.
# Exits non-zero when the fuzzer finds a crash, a sanitizer report or an invariant violation;
# the reproducer is kept in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [seconds]
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds == 0)); then
  echo "usage: $0 [seconds > 0]" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSHOAL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-fuzz --target produce_request_fuzz

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -R tests/fuzz/corpus "$work/corpus"
mkdir -p build-fuzz/artifacts

# Field names and literals of the wire format: without them libFuzzer needs far longer to
# stumble on "producer" or "seq".
cat >"$work/json.dict" <<'DICT'
"{"
"}"
"["
"]"
":"
","
"\""
"\\u0000"
"\\\""
"true"
"false"
"null"
"-1"
"1.5"
"1e400"
"18446744073709551616"
"4294967296"
"\"events\""
"\"key\""
"\"value\""
"\"producer\""
"\"seq\""
"\"group\""
"\"offsets\""
"\"partition\""
"\"offset\""
"\"results\""
"\"duplicate\""
"\"timestamp_ms\""
"\"topic\""
"\"epoch\""
"\"partitions\""
"\"id\""
"\"lo\""
"\"hi\""
"\"state\""
"\"active\""
"\"sealed\""
"\"owner\""
"\"parents\""
"\"end_offset\""
"\"value_b64\""
"SHP1"
"SHC1"
"SHR1"
"\x01\x00\x00\x00"
"\x02\x00"
"\xff\xff"
DICT

echo "fuzz: running produce_request_fuzz for ${seconds}s"
# -timeout: an input that takes over 10 s counts as a failure (a hang), not as progress.
build-fuzz/tests/fuzz/produce_request_fuzz \
  -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
  -dict="$work/json.dict" -artifact_prefix="$root/build-fuzz/artifacts/" \
  "$work/corpus"
echo "fuzz: no crash in ${seconds}s"
