#!/usr/bin/env bash
# Karpenter as the node autoscaler of the local control plane (hack/cluster.sh):
# built from its Go module (hack/karpenter, the KWOK cloud provider with GPU
# instance types whose devices it knows), run as a process beside the cluster's,
# with the NodePool of hack/karpenter/nodepool.yaml and a hack/fakenodes process
# that adopts the nodes it adds (publishing their ResourceSlices at once).
#
#   hack/karpenter.sh build | up | down | status
#
# Environment: KARPENTER_DRIVER (the DRA driver and DeviceClass of the pool's
# devices; gpu-autoscaled.example.com, so the cluster's fixed fake nodes, of
# gpu.example.com, never count), KARPENTER_METRICS_PORT (18080) and
# KARPENTER_HEALTH_PORT (18081). Logs: .cluster/logs/karpenter.log and
# .cluster/logs/fakenodes-adopt.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
SRC=$ROOT/hack/karpenter
BIN_DIR=$ROOT/hack/bin
BIN=$BIN_DIR/karpenter
RUN=$CLUSTER_DIR/run
LOGS=$CLUSTER_DIR/logs
PKI=$CLUSTER_DIR/pki
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
PY=${PYTHON:-$ROOT/.venv/bin/python}
KUBECTL=$BIN_DIR/kubectl
DRIVER=${KARPENTER_DRIVER:-gpu-autoscaled.example.com}
# The module asks for a newer Go than the machine's; the proxy serves it.
TOOLCHAIN=${KARPENTER_GOTOOLCHAIN:-go1.26.11}

log() { printf '[karpenter] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
abort_up() { stop_group 10 karpenter fakenodes-adopt; }
# shellcheck source=hack/lib/procs.sh
source "$ROOT/hack/lib/procs.sh"

stamp() { cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -d' ' -f1; }

build() {
  mkdir -p "$BIN_DIR"
  # One build at a time: the test session may start one early while a test asks for it.
  # The lock's descriptor is the subshell's alone, so nothing `up` starts inherits it.
  (
    flock 9
    build_locked
  ) 9>"$BIN_DIR/.karpenter.build.lock"
}

build_locked() {
  if [[ -x $BIN && -f $BIN.stamp && $(cat "$BIN.stamp") == "$(stamp)" ]]; then
    return 0
  fi
  ensure_go "Karpenter (its module asks for $(sed -n 's/^go //p' "$SRC/go.mod"))"
  mkdir -p "$BIN_DIR"
  log "building $BIN from hack/karpenter (sigs.k8s.io/karpenter); a cold build takes" \
    "10-20 minutes on 2 cores"
  local t0=$SECONDS
  (cd "$SRC" && GOTOOLCHAIN=$TOOLCHAIN GOFLAGS=-mod=readonly \
    nice go build -buildvcs=false -trimpath -o "$BIN.tmp" .)
  mv -f "$BIN.tmp" "$BIN"
  stamp >"$BIN.stamp"
  log "built in $((SECONDS - t0))s"
}

crds() { # the module's CRDs: NodePool, NodeClaim, NodeOverlay, KWOKNodeClass
  local dir
  dir=$(cd "$SRC" && GOTOOLCHAIN=$TOOLCHAIN GOFLAGS=-mod=readonly \
    go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
  echo "$dir/pkg/apis/crds" "$dir/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml"
}

ready() { curl -sf --max-time 2 "http://127.0.0.1:${KARPENTER_HEALTH_PORT:-18081}/readyz" >/dev/null; }

cmd_up() {
  [[ -s $ADMIN_KUBECONFIG ]] || die "no local cluster: run hack/cluster.sh up first"
  mkdir -p "$RUN" "$LOGS"
  if pid_of karpenter >/dev/null && pid_of fakenodes-adopt >/dev/null; then
    log "already running"
    return 0
  fi
  build
  local c
  for c in $(crds); do "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" apply -f "$c" >&2; done
  "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" wait --for=condition=Established \
    --timeout=60s crd/nodepools.karpenter.sh crd/nodeclaims.karpenter.sh \
    crd/kwoknodeclasses.karpenter.kwok.sh >&2
  "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" apply -f "$SRC/nodepool.yaml" >&2
  trap abort_up EXIT
  launch fakenodes-adopt "-m hack.fakenodes.adopt" \
    env "PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -u -m hack.fakenodes.adopt \
    --adopt openrl.io/autoscaled=true --driver "$DRIVER" --kubeconfig="$ADMIN_KUBECONFIG"
  launch karpenter "$BIN" env KUBECONFIG="$ADMIN_KUBECONFIG" \
    SYSTEM_NAMESPACE=kube-system DISABLE_LEADER_ELECTION=true \
    METRICS_PORT="${KARPENTER_METRICS_PORT:-18080}" \
    HEALTH_PROBE_PORT="${KARPENTER_HEALTH_PORT:-18081}" \
    INSTANCE_TYPES_FILE_PATH="$SRC/instance_types.json" OPENRL_KARPENTER_DRIVER="$DRIVER" \
    BATCH_IDLE_DURATION=2s BATCH_MAX_DURATION=10s \
    "$BIN" --ignore-dra-requests=false
  local i
  for ((i = 0; i < 120; i++)); do
    ready && break
    pid_of karpenter >/dev/null || { tail -40 "$LOGS/karpenter.log" >&2; die "karpenter exited"; }
    sleep 1
  done
  ready || { tail -40 "$LOGS/karpenter.log" >&2; die "karpenter not ready after 120s"; }
  trap - EXIT
  log "up: NodePool gpu (gpu-8x80gi), driver $DRIVER; log $LOGS/karpenter.log"
}

cmd_down() {
  # Nodes it added go with it: their NodeClaims first (Karpenter's finalizers), then
  # whatever is left, so the next run starts from zero.
  if [[ -s $ADMIN_KUBECONFIG ]] && pid_of karpenter >/dev/null; then
    "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" delete nodepool gpu --ignore-not-found \
      --wait=false >&2 || true
    "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" delete nodeclaims --all --timeout=60s >&2 || true
  fi
  stop_group 10 karpenter fakenodes-adopt
  if [[ -s $ADMIN_KUBECONFIG ]]; then
    local node
    for node in $("$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" get nodes \
      -l openrl.io/autoscaled=true -o name 2>/dev/null); do
      # Karpenter's termination finalizer has nobody left to remove it.
      "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" patch "$node" --type=merge \
        -p '{"metadata":{"finalizers":null}}' >&2 || true
      "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" delete "$node" --ignore-not-found \
        --wait=false >&2 || true
    done
  fi
}

case ${1:-} in
  build) build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) pid_of karpenter && ready && echo running || { echo stopped; exit 1; } ;;
  *)
    echo "usage: $0 build | up | down | status" >&2
    exit 2
    ;;
esac
