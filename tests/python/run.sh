#!/usr/bin/env bash
# The Python client as a user gets it: `pip install ./clients/python` offline (no index, the
# build backend from Debian's python3-setuptools and python3-wheel) into a directory of its own,
# then its tests against real sidecars, importing the installed package.
#   tests/python/run.sh PYTHON SIDECAR
set -euo pipefail
cd "$(dirname "$0")/../.."
python="$1"
export SHOAL_SIDECAR_BIN="$2"
target="$(mktemp -d)"
trap 'rm -rf "$target"' EXIT
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$target" \
  ./clients/python
test -f "$target/shoal_client/__init__.py" || { echo "run.sh: the package was not installed" >&2; exit 1; }
cd "$target"  # nothing of the source tree on the path
SHOAL_PY_INSTALLED=1 PYTHONPATH="$target" "$python" -m unittest discover -v \
  -s "$OLDPWD/clients/python/tests" -t "$OLDPWD/clients/python/tests"
