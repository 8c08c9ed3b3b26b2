# The Shoal image: shoal-operator, shoal-sidecar and the shoal CLI in /usr/local/bin. One image for
# the three, because the operator's pods run `shoal-sidecar` and their preStop hook runs
# `shoal wait-drained` (docs/kubernetes.md), and the Helm chart (helm/shoal) runs the operator.
#
#   docker build -t shoal:dev .
#
# The build stage installs what the build needs with the script the README uses and builds with
# scripts/build.sh (Release); the run stage gets only the shared libraries the binaries load
# (scripts/install-deps.sh --runtime) and runs as a numeric non-root user, so that Kubernetes can
# check runAsNonRoot.

FROM debian:12 AS build
WORKDIR /src
# The dependencies first: this layer is rebuilt only when the script changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# build.sh passes its arguments to ninja: the three binaries, not the tests and benchmarks.
RUN SHOAL_BUILD_TYPE=Release SHOAL_BUILD_TESTS=OFF ./scripts/build.sh shoal shoal-sidecar shoal-operator

FROM debian:12-slim AS run
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh
COPY --from=build /src/build/cli/shoal /usr/local/bin/shoal
COPY --from=build /src/build/sidecar/shoal-sidecar /usr/local/bin/shoal-sidecar
COPY --from=build /src/build/operator/reconciler/shoal-operator /usr/local/bin/shoal-operator
# The Python client and its examples (the quickstart's consumer runs examples/consume.py).
COPY clients/python/shoal_client /opt/shoal/python/shoal_client
COPY clients/python/examples /opt/shoal/python/examples
# Fail the build, not the pod, when --runtime lacks a library.
RUN set -e; for b in shoal shoal-sidecar shoal-operator; do \
      if ldd "/usr/local/bin/$b" | grep 'not found'; then \
        echo "$b: a shared library is missing from install-deps.sh --runtime" >&2; exit 1; \
      fi; \
      "/usr/local/bin/$b" --help >/dev/null; \
    done
# 65532: the "nonroot" uid of distroless images; no passwd entry is needed.
USER 65532:65532
WORKDIR /tmp
CMD ["shoal-operator"]
