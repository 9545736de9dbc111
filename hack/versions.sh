#!/usr/bin/env bash
# make versions: smoke, stress and the real node's e2e tests against the
# control plane of each Kubernetes release we build (hack/kube/versions/<minor>
# and hack/kube's own go.mod, the newest), one release at a time.
#
#   hack/versions.sh                  # VERSIONS="1.34 1.35 1.36"
#   VERSIONS=1.35 hack/versions.sh
#
# Each release's binary is built first (nice, outside the lock: builds need no
# cluster). Then, holding the e2e lock ($OPENRL_E2E_LOCK, /tmp/openrl-e2e.lock)
# for that release only, so other users of the machine's one cluster get it
# between releases: whatever cluster runs is replaced by that release's, the
# steps run, and the cluster is stopped. A step that fails does not stop the
# rest. The summary at the end says, per release and step, PASS/FAIL, how long
# it took, and what was skipped and why, in the tests' own words (the nvidia
# profile's tests say what the node could not publish there). Exit 1 if
# anything failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
VERSIONS=${VERSIONS:-1.34 1.35 1.36}
LOCK=${OPENRL_E2E_LOCK:-/tmp/openrl-e2e.lock}
OUT=${VERSIONS_DIR:-$ROOT/.cluster/versions}
E2E=${VERSIONS_E2E:-tests/e2e/test_node.py tests/e2e/test_node_nvidia.py}
PYTEST=$ROOT/.venv/bin/pytest

log() { printf '[versions] %s\n' "$*" >&2; }

# The minor hack/kube's own go.mod builds (no KUBE_VERSION needed for it).
own=$(sed -n 's/^\tk8s.io\/kubernetes v\([0-9]*\.[0-9]*\)\..*/\1/p' hack/kube/go.mod)
mkdir -p "$OUT"
summary=()
failed=0

kube_version_for() { # minor -> the KUBE_VERSION value, empty for hack/kube's own
  if [[ $1 == "$own" ]]; then
    echo ""
  elif [[ -f hack/kube/versions/$1/go.mod ]]; then
    echo "$1"
  else
    return 1
  fi
}

# One release's steps, run while holding the lock; each step's log in $OUT.
run_release() { # minor kube_version
  local v=$1 kv=$2 t0 rc
  export KUBE_VERSION=$kv
  unset KUBECONFIG
  step() { # name command...: runs it, records PASS/FAIL and its seconds
    local name=$1 t0=$SECONDS rc
    shift
    log "$v: $name"
    "$@" >"$OUT/$v-$name.log" 2>&1
    rc=$?
    echo "$name $rc $((SECONDS - t0))" >>"$OUT/$v.steps"
    return $rc
  }
  : >"$OUT/$v.steps"
  hack/cluster.sh down >/dev/null 2>&1
  if ! step cluster-up hack/cluster.sh up; then
    tail -20 "$OUT/$v-cluster-up.log" >&2
    hack/cluster.sh down >/dev/null 2>&1
    return 1
  fi
  step smoke hack/smoke.sh
  step stress env ROUNDS="${VERSIONS_STRESS_ROUNDS:-3}" hack/stress.sh
  # shellcheck disable=SC2086
  step e2e "$PYTEST" -q -rs -p no:cacheprovider $E2E
  hack/node.sh down >/dev/null 2>&1
  hack/cluster.sh down >/dev/null 2>&1
  return 0
}

for v in $VERSIONS; do
  if ! kv=$(kube_version_for "$v"); then
    summary+=("$v: unknown release (known: $own $(cd hack/kube/versions && echo *))")
    failed=1
    continue
  fi
  t0=$SECONDS
  log "$v: building (KUBE_VERSION=${kv:-unset})"
  if ! KUBE_VERSION=$kv nice hack/cluster.sh build >"$OUT/$v-build.log" 2>&1; then
    summary+=("$v: build FAILED ($(tail -1 "$OUT/$v-build.log"))")
    failed=1
    continue
  fi
  build_s=$((SECONDS - t0))
  export -f run_release log
  export OUT E2E PYTEST
  flock -o "$LOCK" bash -c 'run_release "$0" "$1"' "$v" "$kv"
  line="$v: build ${build_s}s"
  while read -r name rc secs; do
    if [[ $rc == 0 ]]; then line+=", $name PASS ${secs}s"; else line+=", $name FAIL ${secs}s"; failed=1; fi
  done <"$OUT/$v.steps"
  summary+=("$line")
  [[ -s $OUT/$v.steps ]] || { summary+=("  no step ran"); failed=1; }
  # Why things were skipped there, in the tests' and the node's own words.
  if [[ -f $OUT/$v-e2e.log ]]; then
    while read -r skip; do summary+=("  $skip"); done < <(grep '^SKIPPED' "$OUT/$v-e2e.log")
    tally=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$OUT/$v-e2e.log" | tail -1)
    [[ -z $tally ]] || summary+=("  e2e: ${tally//=/}")
  fi
done

echo "versions summary ($(date -u +%Y-%m-%dT%H:%MZ); logs in ${OUT#"$ROOT"/}/):"
printf '%s\n' "${summary[@]}"
exit $failed
