#!/usr/bin/env bash
# Start the e2e tier's slow builds in the background, detached, and return at once:
# `make test` runs this before its set-up and lint, so the builds overlap those (on a
# cold machine the control plane alone takes about ten minutes, and every e2e lane
# waits for it). Each build holds a lock of its own in hack/bin (or .node/cache): a
# test that needs one waits for it and then finds it current. The control plane builds
# at full priority (everything waits on it), the rest at a lower one.
#
#   hack/early.sh     logs: hack/bin/<name>-early.log
#
# OPENRL_E2E_KARPENTER_BUILD=1 adds Karpenter's build (make test sets it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
mkdir -p hack/bin

start() { # name niceness command
  setsid nice -n "$2" bash -c "$3" >"hack/bin/$1-early.log" 2>&1 </dev/null &
}

if [[ -z ${KUBECONFIG:-} ]]; then  # a cluster of the caller's own needs no control plane
  start cluster 0 "hack/cluster.sh build"
fi
start node 10 "hack/node.sh check >/dev/null && hack/node.sh prebuild"
start gotool 10 "hack/gotool.sh helm >/dev/null && hack/gotool.sh kustomize >/dev/null && hack/gotool.sh promtool >/dev/null"
if [[ ${OPENRL_E2E_KARPENTER_BUILD:-0} == 1 ]]; then
  start karpenter 10 "hack/karpenter.sh build"
fi
echo "early builds started in the background (hack/bin/*-early.log)"
