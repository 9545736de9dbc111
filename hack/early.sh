#!/usr/bin/env bash
# Start the e2e tier's slow builds in the background, detached, and return at once.
# `make test` runs this before its set-up and lint, so the builds overlap those (on a
# cold machine the control plane alone takes about ten minutes, and every e2e lane
# waits for it); a plain pytest session starts the ones its tests need through this too
# (tests/conftest.py). Each build holds a lock of its own in hack/bin (or .node/cache):
# a test that needs one waits for it and then finds it current. The control plane
# builds at full priority (everything waits on it), the rest at a lower one.
#
#   hack/early.sh [cluster|node|gotool|karpenter|kueue ...]     logs: hack/bin/<name>-early.log
#
# With no names: every build, except the control plane where KUBECONFIG names the
# caller's own cluster, Karpenter unless OPENRL_E2E_KARPENTER_BUILD=1, and Kueue
# where OPENRL_E2E_KUEUE_BUILD=0.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
mkdir -p hack/bin

start() { # name niceness command
  setsid nice -n "$2" bash -c "$3" >"hack/bin/$1-early.log" 2>&1 </dev/null &
}

names=("$@")
if ((${#names[@]} == 0)); then
  [[ -n ${KUBECONFIG:-} ]] || names+=(cluster)
  names+=(node gotool)
  [[ ${OPENRL_E2E_KARPENTER_BUILD:-0} != 1 ]] || names+=(karpenter)
  [[ ${OPENRL_E2E_KUEUE_BUILD:-1} == 0 ]] || names+=(kueue)
fi
for name in "${names[@]}"; do
  case $name in
    cluster) start cluster 0 "hack/cluster.sh build" ;;
    node) start node 10 "hack/node.sh check >/dev/null && hack/node.sh prebuild" ;;
    gotool) start gotool 10 "hack/gotool.sh helm >/dev/null && hack/gotool.sh kustomize >/dev/null && hack/gotool.sh promtool >/dev/null" ;;
    karpenter) start karpenter 10 "hack/karpenter.sh build" ;;
    kueue) start kueue 10 "hack/kueue.sh build" ;;
    *) echo "hack/early.sh: unknown build $name (cluster, node, gotool, karpenter, kueue)" >&2; exit 2 ;;
  esac
done
echo "early builds started in the background: ${names[*]} (hack/bin/<name>-early.log)"
