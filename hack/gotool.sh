#!/usr/bin/env bash
# Builds an operator tool from its Go module into hack/bin/ and prints its path:
#
#   hack/gotool.sh helm|kustomize|promtool
#
# The three share one module, hack/tools: their requirements agree (one client-go,
# gRPC, protobuf, ... for all), so a cold build compiles those once. It stays apart
# from the control plane's module (hack/kube), whose Kubernetes is a release older.
# A build is skipped while the binary's stamp -- a hash of the Go version, the
# package, the tags and flags, go.mod and go.sum -- matches: the first build takes
# minutes, every later one is a hash. Progress goes to stderr, the path alone to
# stdout, so callers can write `HELM=$(hack/gotool.sh helm)`.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_DIR=$HACK/bin

die() { echo "gotool: $*" >&2; exit 1; }
log() { echo "gotool: $*" >&2; }

[[ $# == 1 ]] || die "usage: $0 helm|kustomize|promtool"
NAME=$1
case $NAME in
  helm) PKG=helm.sh/helm/v3/cmd/helm ;;
  kustomize) PKG=sigs.k8s.io/kustomize/kustomize/v5 ;;
  promtool) PKG=github.com/prometheus/prometheus/cmd/promtool ;;
  *) die "unknown tool '$NAME' (known: helm, kustomize, promtool)" ;;
esac
SRC=$HACK/tools
OUT=$BIN_DIR/$NAME

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  PATH=/usr/local/go/bin:$PATH
fi
command -v go >/dev/null 2>&1 || die "Go is needed to build $NAME (hack/tools/go.mod asks for $(sed -n 's/^go //p' "$SRC/go.mod"))"

required() { # module -> its version in the tool's go.mod
  sed -n "s|^[[:space:]]*$1 \(v[^ ]*\).*|\1|p" "$SRC/go.mod" | head -1
}

ldflags() {
  # The version strings the projects' own release builds stamp in.
  local flags="-s -w" v kube
  case $NAME in
    helm)
      v=$(required helm.sh/helm/v3)
      kube=$(required k8s.io/client-go) # v0.M.x is Kubernetes 1.M
      flags+=" -X helm.sh/helm/v3/internal/version.version=$v"
      if [[ $kube =~ ^v0\.([0-9]+)\. ]]; then
        for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
          flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=${BASH_REMATCH[1]}"
        done
      fi
      ;;
    kustomize)
      flags+=" -X sigs.k8s.io/kustomize/api/provenance.version=$(required "$PKG")"
      ;;
    promtool)
      v=$(required github.com/prometheus/prometheus)
      # Module v0.MMMP.x is Prometheus 3.MM.x (v0.316.0 -> 3.16.0).
      if [[ $v =~ ^v0\.3([0-9]{2})\.([0-9]+) ]]; then
        v=3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}
      fi
      flags+=" -X github.com/prometheus/common/version.Version=$v"
      ;;
  esac
  echo "$flags"
}

tags() {
  # promtool's rule checks and unit tests need no service discovery: leaving the
  # cloud SDKs (AWS, Azure, GCE, OpenStack, ...) out halves its build.
  [[ $NAME == promtool ]] && echo remove_all_sd
  return 0
}

stamp() {
  (cd "$SRC" && { go version; echo "$PKG"; ldflags; tags; cat go.mod go.sum; } | sha256sum | cut -d' ' -f1)
}

mkdir -p "$BIN_DIR"
# One build of a tool at a time: a second caller (the tests' early start, a parallel
# run) waits here for the first and then finds its stamp current.
exec 9>"$BIN_DIR/.$NAME.lock"
flock 9
want=$(stamp)
if [[ -x $OUT && -f $OUT.stamp && $(cat "$OUT.stamp") == "$want" ]]; then
  echo "$OUT"
  exit 0
fi
log "building $OUT from hack/tools ($PKG); a cold build takes minutes on 2 cores"
t0=$SECONDS
(cd "$SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
  go build -buildvcs=false -trimpath -tags="$(tags)" -ldflags="$(ldflags)" -o "$OUT.tmp.$$" "$PKG")
mv -f "$OUT.tmp.$$" "$OUT"
echo "$want" >"$OUT.stamp"
log "built $NAME in $((SECONDS - t0))s"
echo "$OUT"
