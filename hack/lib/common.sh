# Shared by hack/smoke.sh and hack/stress.sh (sourced, not run).
#
# Brings a cluster and the scheduler up for a run and takes them down after:
#
#   begin             in order: a state directory; the local control plane
#                     (hack/cluster.sh up) or KUBECONFIG; kubectl apply the
#                     overlay; read the scheduler's settings from it; pick the
#                     nodes, check their hardware, label them (restored at
#                     exit); start openrl-place controller as a local process
#                     authenticated as the open-rl-scheduler ServiceAccount
#                     (TokenRequest); clear an aborted run's workers
#   finish            stop the scheduler, restore labels, print the verdict
#
# Environment (all optional):
#   OPENRL_EXTERNAL=1        use the cluster KUBECONFIG points at instead of the
#                            local control plane
#   OPENRL_CONTROLLER=local  run the scheduler here as its ServiceAccount (default),
#                    =cluster  use the open-rl-scheduler Deployment already running
#   OPENRL_OVERLAY           kustomize directory to apply (manifests/overlays/smoke;
#                            it scales the in-cluster Deployment to zero)
#   OPENRL_APPLY=0|1         apply the overlay (default 1 with a local scheduler)
#   OPENRL_NODES=a,b         nodes to run on; default: the nodes matching
#   OPENRL_NODE_SELECTOR     (fake-gpu-node=true locally, openrl.io/enabled=true
#                            on an external cluster)
#   OPENRL_LABEL_NODES=0|1   set openrl.io/enabled and max-workers-per-claim on
#                            them for the run, restoring the old values (default 1)
#   OPENRL_DEVICE_CLASS      DeviceClass claims ask for (default: the overlay's)
#   OPENRL_DEVICE_DRIVER     DRA driver publishing the slices (default: the class)
#   MAXW                     openrl.io/max-workers-per-claim for the run (2)
#   GPUS                     devices the selected nodes must publish (default:
#                            whatever they publish, 8 on the local cluster)
#   MEMORY, ROLE, OWNER      what each worker asks for (50Gi, trainer, none)
#   OPENRL_KEEP_CLUSTER=1    leave a local control plane this run started running
#   SETTLE_TIMEOUT           seconds to wait for the fleet to settle (300)
#   TEARDOWN_TIMEOUT         seconds to wait for an empty fleet (180)
#   KUBECTL                  kubectl to use (default hack/bin/kubectl, else PATH)
#   OPENRL_TOKEN_DURATION    lifetime of the scheduler's token (3h)
#   CONTROLLER_READY_TIMEOUT seconds for the scheduler's /readyz (60)
#   stress only: WORKERS (24), ROUNDS (5), STRESS_SEED (random; printed)
#
# One run per cluster at a time: a run counts every claim on the nodes it
# enables, so anything else placing workers there (another run, the e2e suite)
# makes its books wrong. For a private local cluster, give hack/cluster.sh its
# own CLUSTER_DIR and ports (KUBE_APISERVER_PORT, ETCD_CLIENT_PORT, ... see
# hack/README.md); these scripts follow CLUSTER_DIR.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
# The Python parts are modules of the hack package, run from the checkout.
HACKPY=(env "PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY")
BOOKS=("${HACKPY[@]}" -m hack.lib.books)
NS=openrl
SA=open-rl-scheduler

OPENRL_EXTERNAL=${OPENRL_EXTERNAL:-0}
OPENRL_CONTROLLER=${OPENRL_CONTROLLER:-local}
OPENRL_OVERLAY=${OPENRL_OVERLAY:-$ROOT/manifests/overlays/smoke}
OPENRL_LABEL_NODES=${OPENRL_LABEL_NODES:-1}
export MAXW=${MAXW:-2}
export OPENRL_NAMESPACE=$NS

CONTROLLER_PID=
CONTROLLER_LOG=
BOOKS_PID=
CONTROLLER_PORT=
STARTED_CLUSTER=0
RUN_NAME=${RUN_NAME:-run}
FINISHED=0

log() { printf '[%s] %s\n' "$RUN_NAME" "$*" >&2; }
die() {
  log "error: $*"
  exit 2
}

kc() { "$KUBECTL" "$@"; }

setup_state() {
  OPENRL_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/openrl-$RUN_NAME.XXXXXX")
  export OPENRL_STATE_DIR
  log "run files (scheduler log, kubeconfig, rendered manifests): $OPENRL_STATE_DIR"
}

setup_cluster() {
  [[ -x $PY ]] || die "no $PY; run make setup"
  if [[ $OPENRL_EXTERNAL == 1 ]]; then
    [[ -n ${KUBECONFIG:-} ]] || die "OPENRL_EXTERNAL=1 needs KUBECONFIG"
  else
    if ! "$ROOT/hack/cluster.sh" status >/dev/null 2>&1; then
      STARTED_CLUSTER=1
      log "starting the local control plane (hack/cluster.sh up; the first build takes a while)"
    fi
    "$ROOT/hack/cluster.sh" up >/dev/null || die "hack/cluster.sh up failed"
    export KUBECONFIG=${CLUSTER_DIR:-$ROOT/.cluster}/admin.kubeconfig
  fi
  if [[ -z ${KUBECTL:-} ]]; then
    if [[ -x $ROOT/hack/bin/kubectl ]]; then
      KUBECTL=$ROOT/hack/bin/kubectl
    else
      KUBECTL=$(command -v kubectl) || die "no kubectl (hack/cluster.sh build makes hack/bin/kubectl)"
    fi
  fi
  log "cluster $(kc config view --minify -o jsonpath='{.clusters[0].cluster.server}') via $KUBECTL"
}

apply_manifests() {
  local apply=${OPENRL_APPLY:-}
  [[ -n $apply ]] || { [[ $OPENRL_CONTROLLER == local ]] && apply=1 || apply=0; }
  kc kustomize "$OPENRL_OVERLAY" >"$OPENRL_STATE_DIR/rendered.yaml" ||
    die "kustomize $OPENRL_OVERLAY failed"
  if [[ $apply == 1 ]]; then
    log "applying ${OPENRL_OVERLAY#"$ROOT"/}"
    kc apply -f "$OPENRL_STATE_DIR/rendered.yaml" >"$OPENRL_STATE_DIR/apply.log" ||
      { cat "$OPENRL_STATE_DIR/apply.log" >&2; die "kubectl apply failed"; }
  fi
  kc wait --for=condition=Established --timeout=60s crd/openrlworkers.openrl.io >/dev/null ||
    die "CRD openrlworkers.openrl.io is not established"
}

choose_nodes() {
  if [[ -z ${OPENRL_NODES:-} ]]; then
    local sel=${OPENRL_NODE_SELECTOR:-}
    [[ -n $sel ]] || { [[ $OPENRL_EXTERNAL == 1 ]] && sel=openrl.io/enabled=true || sel=fake-gpu-node=true; }
    OPENRL_NODES=$(kc get nodes -l "$sel" -o jsonpath='{.items[*].metadata.name}' | tr ' ' ',')
    [[ -n $OPENRL_NODES ]] || die "no nodes match $sel (set OPENRL_NODES or OPENRL_NODE_SELECTOR)"
  fi
  export OPENRL_NODES
}

label_nodes() {
  if [[ $OPENRL_LABEL_NODES == 1 ]]; then
    "${BOOKS[@]}" label >&2 || die "labelling nodes failed"
  fi
}

controller_config() {
  # The scheduler's settings are the overlay Deployment's env and args.
  local assignments
  assignments=$("${BOOKS[@]}" controller-env "$OPENRL_STATE_DIR/rendered.yaml") ||
    die "cannot read the scheduler settings from the overlay"
  eval "$assignments"
  [[ -n ${OPENRL_DEVICE_CLASS:-} ]] && export OPEN_RL_DEVICE_CLASS=$OPENRL_DEVICE_CLASS
  [[ -n ${OPENRL_DEVICE_DRIVER:-} ]] && export OPEN_RL_DEVICE_DRIVER=$OPENRL_DEVICE_DRIVER
  export OPENRL_DRIVER=${OPEN_RL_DEVICE_DRIVER:-${OPEN_RL_DEVICE_CLASS:-gpu.example.com}}
}

service_account_kubeconfig() { # file
  local token server ca insecure
  token=$(kc create token "$SA" -n "$NS" --duration="${OPENRL_TOKEN_DURATION:-3h}") ||
    die "TokenRequest for serviceaccount $NS/$SA failed"
  server=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kc config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  insecure=$(kc config view --minify -o jsonpath='{.clusters[0].cluster.insecure-skip-tls-verify}')
  (
    umask 077
    {
      echo "apiVersion: v1"
      echo "kind: Config"
      echo "clusters:"
      echo "- name: cluster"
      echo "  cluster:"
      echo "    server: $server"
      if [[ -n $ca ]]; then
        echo "    certificate-authority-data: $ca"
      elif [[ $insecure == true ]]; then
        echo "    insecure-skip-tls-verify: true"
      fi
      echo "users:"
      echo "- name: $SA"
      echo "  user:"
      echo "    token: $token"
      echo "contexts:"
      echo "- name: $SA"
      echo "  context: {cluster: cluster, user: $SA, namespace: $NS}"
      echo "current-context: $SA"
    } >"$1"
  )
}

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_controller() {
  if [[ $OPENRL_CONTROLLER == cluster ]]; then
    kc -n "$NS" rollout status deployment/$SA --timeout=120s >&2 ||
      die "deployment $NS/$SA is not available (OPENRL_CONTROLLER=cluster)"
    log "using the in-cluster scheduler (deployment $NS/$SA)"
    return 0
  fi
  [[ $OPENRL_CONTROLLER == local ]] || die "OPENRL_CONTROLLER must be local or cluster"
  local kubeconfig=$OPENRL_STATE_DIR/scheduler.kubeconfig port bin=$ROOT/.venv/bin/openrl-place
  [[ -x $bin ]] || die "no $bin; run make setup"
  service_account_kubeconfig "$kubeconfig"
  # A Lease left by a killed earlier run would stall leader election until
  # it expires; the run owns this namespace, so clear it.
  kc -n "$NS" delete lease "${OPEN_RL_LEASE_NAME:-$SA}" --ignore-not-found >/dev/null
  port=$(free_port)
  CONTROLLER_LOG=$OPENRL_STATE_DIR/controller.log
  log "starting openrl-place controller as serviceaccount $NS/$SA (log: $CONTROLLER_LOG)"
  KUBECONFIG=$kubeconfig "$bin" controller --kubeconfig="$kubeconfig" \
    "${CONTROLLER_ARGS[@]}" --http-address="127.0.0.1:$port" >"$CONTROLLER_LOG" 2>&1 &
  CONTROLLER_PID=$!
  CONTROLLER_PORT=$port
  local deadline=$((SECONDS + ${CONTROLLER_READY_TIMEOUT:-60}))
  until curl -sf --max-time 2 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    if ! kill -0 "$CONTROLLER_PID" 2>/dev/null; then
      tail -n 30 "$CONTROLLER_LOG" >&2
      CONTROLLER_PID=
      die "the scheduler exited during start-up"
    fi
    if ((SECONDS > deadline)); then
      tail -n 30 "$CONTROLLER_LOG" >&2
      die "the scheduler was not ready within ${CONTROLLER_READY_TIMEOUT:-60}s"
    fi
    sleep 0.5
  done
  log "scheduler ready (pid $CONTROLLER_PID, http 127.0.0.1:$port)"
}

stop_controller() {
  [[ -n $CONTROLLER_PID ]] || return 0
  if kill -0 "$CONTROLLER_PID" 2>/dev/null; then
    kill -TERM "$CONTROLLER_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$CONTROLLER_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$CONTROLLER_PID" 2>/dev/null; then
      log "scheduler ignored SIGTERM for 10s; killing it"
      kill -KILL "$CONTROLLER_PID" 2>/dev/null || true
    fi
  fi
  wait "$CONTROLLER_PID" 2>/dev/null || true
  CONTROLLER_PID=
  # The token is good for hours; do not leave it lying in /tmp.
  rm -f "${OPENRL_STATE_DIR:-/nonexistent}/scheduler.kubeconfig"
}

# What the scheduler itself counted (its /metrics), for the record.
scheduler_metrics() {
  [[ -n $CONTROLLER_PORT && -n $CONTROLLER_PID ]] || return 0
  curl -sf --max-time 5 "http://127.0.0.1:$CONTROLLER_PORT/metrics" \
    >"$OPENRL_STATE_DIR/metrics.txt" 2>/dev/null || return 0
  "${BOOKS[@]}" scheduler-metrics "$OPENRL_STATE_DIR/metrics.txt" || true
}

rbac_denials() {
  # The run doubles as the RBAC proof: a request the API server refused the
  # scheduler is counted in its /metrics (code="403") and logged as
  # "403 Forbidden: ... is forbidden: User ...". A refusal the scheduler was
  # later allowed (RBAC warming up after an API server restart) is excused;
  # hack/lib/rbac.py has the rule.
  [[ -n $CONTROLLER_LOG && -f $CONTROLLER_LOG ]] || return 0
  "${HACKPY[@]}" -m hack.lib.rbac "${OPENRL_STATE_DIR:-/nonexistent}/metrics.txt" "$CONTROLLER_LOG"
}

# Run the books in the background and wait for it: a signal to this script
# then interrupts the wait at once (bash defers traps while a foreground
# command runs), and on_exit stops the child.
run_books() {
  "${BOOKS[@]}" "$@" &
  BOOKS_PID=$!
  local rc=0
  wait "$BOOKS_PID" || rc=$?
  BOOKS_PID=
  return "$rc"
}

# EXIT trap: whatever happened, leave the cluster as we found it.
on_exit() {
  local rc=$?
  set +e
  if [[ -n $BOOKS_PID ]]; then
    kill -TERM "$BOOKS_PID" 2>/dev/null
    wait "$BOOKS_PID" 2>/dev/null
    BOOKS_PID=
  fi
  if [[ $FINISHED != 1 ]]; then
    if [[ -n ${OPENRL_STATE_DIR:-} && -n ${KUBECONFIG:-} ]]; then
      if [[ -n $CONTROLLER_PID ]] && kill -0 "$CONTROLLER_PID" 2>/dev/null; then
        log "interrupted: tearing down this run's workers"
        TEARDOWN_TIMEOUT=60 "${BOOKS[@]}" teardown >&2 || "${BOOKS[@]}" force-clean >&2
      else
        "${BOOKS[@]}" force-clean >&2
      fi
    fi
    stop_controller
    [[ $OPENRL_LABEL_NODES == 1 && -n ${OPENRL_STATE_DIR:-} ]] && "${BOOKS[@]}" unlabel >&2
    ((rc == 0)) && rc=1
    stop_cluster
    echo "$RUN_NAME: FAIL (aborted, exit $rc)"
  fi
  exit "$rc"
}

# Leave the machine as we found it: a control plane this run started is
# stopped again, unless OPENRL_KEEP_CLUSTER=1.
stop_cluster() {
  if [[ $STARTED_CLUSTER == 1 && ${OPENRL_KEEP_CLUSTER:-0} != 1 ]]; then
    log "stopping the local control plane this run started (OPENRL_KEEP_CLUSTER=1 keeps it)"
    "$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true
  fi
}

# The last line of a run: PASS, or FAIL with a non-zero exit.
finish() { # books-exit-status summary
  local rc=$1 summary=$2 denials
  scheduler_metrics
  stop_controller
  [[ $OPENRL_LABEL_NODES == 1 ]] && "${BOOKS[@]}" unlabel >&2
  denials=$(rbac_denials)
  if [[ -n $denials ]]; then
    echo "the scheduler's ServiceAccount was refused requests (RBAC too narrow):"
    printf '  %s\n' "$denials"
    ((rc == 0)) && rc=1
  fi
  FINISHED=1
  stop_cluster
  if ((rc == 0)); then
    echo "$RUN_NAME: PASS${summary:+ ($summary)}"
  else
    [[ -n $CONTROLLER_LOG ]] && echo "scheduler log: $CONTROLLER_LOG"
    echo "$RUN_NAME: FAIL"
  fi
  exit "$rc"
}

# Everything but the scheduler: cluster, manifests, settings, labelled nodes.
prepare() {
  set -euo pipefail
  trap on_exit EXIT
  trap 'exit 130' INT TERM
  setup_state
  setup_cluster
  apply_manifests
  controller_config
  choose_nodes
  GPUS_FOUND=$("${BOOKS[@]}" inventory) || die "the selected nodes do not suit this run"
  log "nodes $OPENRL_NODES: $GPUS_FOUND $OPENRL_DRIVER devices"
  label_nodes
}

begin() {
  prepare
  start_controller
  "${BOOKS[@]}" preflight >&2 || die "preflight failed"
}
