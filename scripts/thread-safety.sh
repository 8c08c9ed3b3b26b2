#!/usr/bin/env bash
# Clang's thread-safety analysis over the sidecar (the broker, storage and HTTP frontends), the
# common library and the operator's reconciler (TopicOperator, its work queue and Event
# recorder, the Kubernetes platform): every translation unit in build/compile_commands.json
# under those folders is compiled with clang++ -fsyntax-only -Wthread-safety
# -Werror=thread-safety, so a member marked GUARDED_BY touched without its lock, or a REQUIRES
# function called without it, fails the suite (shoal/common/thread_annotations.h). Uses the
# flags the main (GCC) build uses.
#
#   scripts/thread-safety.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
db="$build/compile_commands.json"
[[ -f "$db" ]] || { echo "thread-safety: $db not found; build first (cmake -S . -B $build)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "thread-safety: clang++ not found; run scripts/install-deps.sh" >&2; exit 2; }
python3 - "$db" "$PWD" <<'PY' > "$build/thread-safety.cmds"
import json, shlex, sys
db, root = sys.argv[1], sys.argv[2]
for e in json.load(open(db)):
    f = e["file"]
    if not any(f.startswith(f"{root}/{d}/") for d in ("sidecar/src", "common/src", "operator/reconciler/src")):
        continue
    args = shlex.split(e["command"])[1:]
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD", "-Werror") or a == f:
            continue
        out.append(a)
    cmd = ["clang++", "-fsyntax-only", *out, "-Wno-everything", "-Wthread-safety",
           "-Werror=thread-safety", f]
    print(shlex.join(["cd", e["directory"]]) + " && " + shlex.join(cmd))
PY
n=$(wc -l < "$build/thread-safety.cmds")
echo "thread-safety: $n translation units"
xargs -P "$(nproc)" -I{} -d '\n' bash -c '{}' < "$build/thread-safety.cmds"
echo "thread-safety: no violation"
