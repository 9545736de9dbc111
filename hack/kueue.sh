#!/usr/bin/env bash
# Kueue (quotas and admission for queued Workloads) beside the local control plane
# (hack/cluster.sh): built from its Go module (hack/kueue), run as a process next
# to the cluster's with the configuration of hack/kueue/config.yaml, which names
# OpenRLWorker as an external framework (Kueue admits its Workloads; whoever
# creates them runs the pods). The groundwork for team quotas.
#
#   hack/kueue.sh build | up | down | status | check
#
# check: a scratch namespace with the example queues of hack/kueue/example.yaml
# (quota 160Gi of openrl.io/accelerator-memory), two Workloads of 100Gi each: the
# first admitted, the second held with Kueue's reason, admitted once the first is
# gone. Prints what it saw; exits non-zero when that is not what happened.
#
# Running it outside a cluster, it is told (config.yaml, filled in by up):
#   - no internal certificate management: the harness signs the webhook's serving
#     certificate with a CA of its own (.cluster/pki/kueue) and registers Kueue's
#     webhooks by URL on 127.0.0.1 with that CA (left on, Kueue waits for a Secret
#     in kueue-system and names its certificate for an in-cluster Service);
#   - no leader election (one process; left on, it exits wanting a namespace,
#     having no in-cluster one) and no on-demand visibility API server (an
#     aggregated API; left on, it exits, its certificates absent from /visibility).
# With its certificate management off, Kueue reads the metrics server's
# certificate from a fixed path under /etc; up gives the process a mount namespace
# of its own in which /etc is an overlay carrying that path (a bind of the
# harness's certificate), so nothing is written outside the checkout.
#
# Environment: KUEUE_WEBHOOK_PORT (19443), KUEUE_METRICS_PORT (18082),
# KUEUE_HEALTH_PORT (18083), KUEUE_GOTOOLCHAIN (auto: the machine's Go unless the
# module asks for a newer one). Log: .cluster/logs/kueue.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
SRC=$ROOT/hack/kueue
BIN_DIR=$ROOT/hack/bin
BIN=$BIN_DIR/kueue
RUN=$CLUSTER_DIR/run
LOGS=$CLUSTER_DIR/logs
PKI=$CLUSTER_DIR/pki/kueue # sign() (hack/lib/procs.sh) writes here
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
PY=${PYTHON:-$ROOT/.venv/bin/python}
KUBECTL=$BIN_DIR/kubectl
WEBHOOK_PORT=${KUEUE_WEBHOOK_PORT:-19443}
METRICS_PORT=${KUEUE_METRICS_PORT:-18082}
HEALTH_PORT=${KUEUE_HEALTH_PORT:-18083}
TOOLCHAIN=${KUEUE_GOTOOLCHAIN:-auto}
PKG=sigs.k8s.io/kueue/cmd/kueue
# The names up registers, so down and the next up find them.
WEBHOOK_NAME=openrl-kueue

log() { printf '[kueue] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
abort_up() {
  stop_group 10 kueue
  unregister_webhooks
}
# shellcheck source=hack/lib/procs.sh
source "$ROOT/hack/lib/procs.sh"

kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# ---------------------------------------------------------------- build

version() { sed -n 's|^[[:space:]]*sigs.k8s.io/kueue \(v[^ ]*\).*|\1|p' "$SRC/go.mod" | head -1; }

ldflags() { # the version Kueue's own release build stamps in (it logs it at start)
  local v=sigs.k8s.io/kueue/pkg/version
  # No commit: the module proxy serves the tag's sources, not its history.
  echo "-s -w -X $v.GitVersion=$(version) -X $v.GitCommit=unknown"
}

stamp() { { cat "$SRC/go.mod" "$SRC/go.sum"; echo "$TOOLCHAIN $PKG $(ldflags)"; } | sha256sum | cut -d' ' -f1; }

build() {
  mkdir -p "$BIN_DIR"
  # One build at a time; the lock's descriptor is the subshell's alone, so the
  # manager that up starts never holds it.
  (
    flock 9
    build_locked
  ) 9>"$BIN_DIR/.kueue.build.lock"
}

build_locked() {
  if [[ -x $BIN && -f $BIN.stamp && $(cat "$BIN.stamp") == "$(stamp)" ]]; then
    return 0
  fi
  ensure_go "Kueue (its module asks for $(sed -n 's/^go //p' "$SRC/go.mod"))"
  log "building $BIN from hack/kueue (sigs.k8s.io/kueue $(version)) with $(GOTOOLCHAIN=$TOOLCHAIN go env GOVERSION);" \
    "a cold build takes about 3 minutes on 2 cores"
  local t0=$SECONDS
  (cd "$SRC" && GOTOOLCHAIN=$TOOLCHAIN GOFLAGS=-mod=readonly \
    nice go build -buildvcs=false -trimpath -ldflags "$(ldflags)" -o "$BIN.tmp" "$PKG")
  mv -f "$BIN.tmp" "$BIN"
  stamp >"$BIN.stamp"
  log "built in $((SECONDS - t0))s"
}

module_dir() { (cd "$SRC" && GOTOOLCHAIN=$TOOLCHAIN GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/kueue); }

# ---------------------------------------------------------------- up

ensure_certs() { # a CA of the harness's own, and the serving certificate it signs
  if [[ ! -f $PKI/complete ]]; then
    rm -rf "$PKI"
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=openrl-place-kueue-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$PKI/ca.crt"
    # tls.{crt,key}: the names Kueue looks for, both in its webhook certDir and at
    # the metrics path; one certificate serves both, on 127.0.0.1 only.
    sign tls "/CN=kueue-webhook" serverAuth "IP:127.0.0.1,DNS:localhost" "$PKI/ca"
    touch "$PKI/complete"
  fi
}

write_config() { # config.yaml with this run's ports and certificate directory
  sed -e "s|@WEBHOOK_PORT@|$WEBHOOK_PORT|; s|@METRICS_PORT@|$METRICS_PORT|" \
    -e "s|@HEALTH_PORT@|$HEALTH_PORT|; s|@CERT_DIR@|$PKI|" "$SRC/config.yaml" >"$RUN/kueue-config.yaml"
}

register_webhooks() {
  "$PY" "$SRC/webhooks.py" "$(module_dir)/config/components/webhook/manifests.yaml" \
    "https://127.0.0.1:$WEBHOOK_PORT" "$PKI/ca.crt" "$WEBHOOK_NAME" | kc apply -f - >&2
}

unregister_webhooks() {
  [[ -s $ADMIN_KUBECONFIG ]] || return 0
  kc delete mutatingwebhookconfiguration "$WEBHOOK_NAME" --ignore-not-found >&2 || true
  kc delete validatingwebhookconfiguration "$WEBHOOK_NAME" --ignore-not-found >&2 || true
}

ready() {
  curl -sf --max-time 2 "http://127.0.0.1:$HEALTH_PORT/readyz" >/dev/null &&
    curl -s --max-time 2 -o /dev/null --cacert "$PKI/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/"
}

cmd_up() {
  [[ -s $ADMIN_KUBECONFIG ]] || die "no local cluster: run hack/cluster.sh up first"
  command -v unshare >/dev/null || die "unshare (util-linux) is needed to give Kueue its metrics certificate path"
  mkdir -p "$RUN" "$LOGS"
  if pid_of kueue >/dev/null; then
    log "already running"
    return 0
  fi
  build
  local crd
  crd=$(module_dir)/config/components/crd/bases
  # Server-side: the CRDs are too large for the last-applied annotation.
  kc apply --server-side --force-conflicts -f "$crd" >&2
  kc wait --for=condition=Established --timeout=60s -f "$crd" >&2
  ensure_certs
  write_config
  trap abort_up EXIT
  register_webhooks
  mkdir -p "$RUN/kueue-etc"
  local ns=(--mount --propagation private)
  ((EUID == 0)) || ns+=(--map-root-user)
  # In the new mount namespace: a tmpfs holds the overlay's upper layer, /etc
  # becomes the overlay, and the fixed metrics path a bind of the harness's PKI.
  # The exec keeps the pid, so pid_of finds the manager by its command line.
  # shellcheck disable=SC2016
  launch kueue "$BIN --config=$RUN/kueue-config.yaml" \
    env KUBECONFIG="$ADMIN_KUBECONFIG" unshare "${ns[@]}" sh -euc '
      d=$1 pki=$2; shift 2
      mount -t tmpfs -o size=1m,mode=700 kueue-etc "$d"
      mkdir "$d/upper" "$d/work"
      mount -t overlay overlay -o "lowerdir=/etc,upperdir=$d/upper,workdir=$d/work" /etc
      mkdir -p /etc/kueue/metrics/certs
      mount --bind "$pki" /etc/kueue/metrics/certs
      exec "$@"' kueue-ns "$RUN/kueue-etc" "$PKI" \
    "$BIN" --config="$RUN/kueue-config.yaml" --zap-log-level=info
  wait_until kueue 120 "readyz and the webhook on 127.0.0.1:$WEBHOOK_PORT" ready
  trap - EXIT
  log "up: $(version), webhooks at https://127.0.0.1:$WEBHOOK_PORT; log $LOGS/kueue.log"
}

cmd_down() {
  # The webhooks first: with failurePolicy Fail they would refuse every Kueue
  # object while nothing answers them.
  unregister_webhooks
  stop_group 10 kueue
  rmdir "$RUN/kueue-etc" 2>/dev/null || true
}

# ---------------------------------------------------------------- check

conditions() { # namespace workload: one line per condition
  kc get workload -n "$1" "$2" -o jsonpath='{range .status.conditions[*]}    {.type}={.status} {.reason}: {.message}{"\n"}{end}'
}

condition() { # namespace workload type: its status, or nothing
  kc get workload -n "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status}"
}

wait_condition() { # namespace workload type status seconds
  local deadline=$((SECONDS + $5))
  until [[ $(condition "$1" "$2" "$3") == "$4" ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

workload() { # name [cpu]: a Workload of one pod asking 100Gi of accelerator memory (and cpu)
  local cpu=${2:+
                  cpu: \"$2\"}
  cat <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: $1
spec:
  queueName: kueue-check-team
  podSets:
    - name: main
      count: 1
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: worker
              image: registry.invalid/worker
              resources:
                requests:
                  openrl.io/accelerator-memory: 100Gi$cpu
EOF
}

CHECK_NS=
check_cleanup() {
  [[ -n $CHECK_NS ]] || return 0
  kc delete namespace "$CHECK_NS" --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  # The example's cluster-scoped objects, renamed for the check (example- ->
  # kueue-check-); Kueue's finalizers go once the namespace's Workloads have.
  kc delete clusterqueue kueue-check-team --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  kc delete resourceflavor kueue-check-flavor --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
}

cmd_check() {
  [[ -s $ADMIN_KUBECONFIG ]] || die "no local cluster: run hack/cluster.sh up first"
  pid_of kueue >/dev/null && ready || die "Kueue is not running: run $0 up first"
  CHECK_NS=kueue-check-$$
  trap check_cleanup EXIT
  kc create namespace "$CHECK_NS" >/dev/null
  sed 's/example-/kueue-check-/g' "$SRC/example.yaml" | kc apply -n "$CHECK_NS" -f -
  kc wait --for=condition=Active --timeout=60s clusterqueue/kueue-check-team >/dev/null ||
    die "ClusterQueue kueue-check-team not Active"
  local fail=0
  echo "== first Workload (100Gi of 160Gi)"
  workload first | kc apply -n "$CHECK_NS" -f -
  wait_condition "$CHECK_NS" first Admitted True 60 || fail=1
  conditions "$CHECK_NS" first
  echo "== second Workload (100Gi more)"
  workload second | kc apply -n "$CHECK_NS" -f -
  # Kueue says why it holds one as QuotaReserved=False.
  wait_condition "$CHECK_NS" second QuotaReserved False 60 || fail=1
  sleep 2 # a later try that would wrongly admit it
  [[ $(condition "$CHECK_NS" second Admitted) != True ]] || fail=1
  conditions "$CHECK_NS" second
  echo "== ClusterQueue usage"
  kc get clusterqueue kueue-check-team -o jsonpath='{range .status.flavorsUsage[*]}    {.name}: {range .resources[*]}{.name}={.total} {end}{"\n"}{end}'
  ((fail == 0)) || { echo "FAIL: expected the first admitted and the second held"; exit 1; }
  echo "== first deleted"
  kc delete workload -n "$CHECK_NS" first --timeout=60s
  wait_condition "$CHECK_NS" second Admitted True 60 || fail=1
  conditions "$CHECK_NS" second
  ((fail == 0)) || { echo "FAIL: the second was not admitted once the first was gone"; exit 1; }
  # What a pod with the usual requests meets: the queue covers accelerator memory
  # only, and Kueue admits nothing asking for a resource its queue does not cover.
  echo "== a third Workload asking cpu too (not covered by the queue)"
  kc delete workload -n "$CHECK_NS" second --timeout=60s
  workload third 1 | kc apply -n "$CHECK_NS" -f -
  if wait_condition "$CHECK_NS" third QuotaReserved False 60; then
    conditions "$CHECK_NS" third
  else
    conditions "$CHECK_NS" third
    echo "FAIL: a Workload asking an uncovered resource was not held"
    exit 1
  fi
  echo "OK: quota admitted one, held the other with Kueue's reason, admitted it when freed;" \
    "an uncovered resource is held"
}

case ${1:-} in
  build) build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) pid_of kueue >/dev/null && ready && echo running || { echo stopped; exit 1; } ;;
  check) cmd_check ;;
  *)
    echo "usage: $0 build | up | down | status | check" >&2
    exit 2
    ;;
esac
