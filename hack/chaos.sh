#!/usr/bin/env bash
# Chaos: churn workers while faults are injected, with the invariants checked
# on every watch event and by a periodic full read (hack/chaos.py does it all
# once the cluster, the manifests and the nodes are set up here).
#
#   CHAOS_ROUNDS (8)   rounds; each injects one fault from the menu
#   CHAOS_SEED         random by default; printed, so a run can be repeated
#   CHAOS_WORKERS      live workers each round (default: 3 per seat, at most 200)
#   CHAOS_SETTLE (180) seconds a round may take to converge (past the
#                      controller's wedge grace, its slowest heal)
#   CHAOS_FAULTS       keep only the faults whose names hold one of these
#                      comma-separated words (e.g. "node lost,node NotReady")
#   CHAOS_SPARE_NODES (2)  fake nodes the run plays itself, for the node faults
#   CHAOS_MOVE_BOUND (150) seconds a lost node's worker may take to be placed
#                      again (or wait naming the node)
#   CHAOS_SELF_TEST=1  plant each kind of violation as admin instead, and
#                      check the checker catches every one
# Plus the environment of hack/lib/common.sh (MAXW, OPENRL_NODES, ...). The
# scheduler runs as local processes with its ServiceAccount's token.
RUN_NAME=chaos
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
prepare
export GPUS=$GPUS_FOUND
service_account_kubeconfig "$OPENRL_STATE_DIR/scheduler.kubeconfig"
kc -n "$NS" delete lease "${OPEN_RL_LEASE_NAME:-$SA}" --ignore-not-found >/dev/null
"${BOOKS[@]}" preflight >&2 || die "preflight failed"
export CHAOS_SA_KUBECONFIG=$OPENRL_STATE_DIR/scheduler.kubeconfig
export CLUSTER_RUN_DIR=${CLUSTER_DIR:-$ROOT/.cluster}/run
rc=0
run_books_chaos() {
  "${HACKPY[@]}" -m hack.chaos &
  BOOKS_PID=$!
  wait "$BOOKS_PID" || rc=$?
  BOOKS_PID=
}
run_books_chaos
rm -f "$CHAOS_SA_KUBECONFIG"
if [[ $rc != 0 ]]; then
  TEARDOWN_TIMEOUT=60 "${BOOKS[@]}" force-clean >&2 || true
fi
[[ $OPENRL_LABEL_NODES == 1 ]] && "${BOOKS[@]}" unlabel >&2
FINISHED=1
stop_cluster
exit "$rc"
