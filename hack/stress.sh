#!/usr/bin/env bash
# Stress: churn workers against a live cluster and check the books each round.
#
# WORKERS=24 against GPUS=8 x MAXW=2 (16 seats) for ROUNDS=5 with MEMORY=50Gi.
# Each round tops the fleet up to WORKERS live workers, waits (bounded by
# SETTLE_TIMEOUT) for it to settle and checks the books:
#   running == min(live, seats); every other worker Pending with a reason;
#   nothing Failed; never more claims than GPUS (checked at every poll);
# prints them, then deletes a random third (STRESS_SEED makes it repeatable).
# A final teardown deletes every worker and must leave no workers, no managed
# claims and no worker pods once the reclaim sweep has run. Reports how long
# each round took to settle, and ends with PASS or FAIL (non-zero exit).
#
# Same environment as hack/smoke.sh (hack/lib/common.sh); GPUS defaults to what
# the selected nodes publish (8 on the local cluster) and must match it.
RUN_NAME=stress
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
export WORKERS=${WORKERS:-24} ROUNDS=${ROUNDS:-5}
begin
rc=0
run_books stress || rc=$?
first=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1fs" % r["settle_seconds"][0])' \
  "$OPENRL_STATE_DIR/stress-result.json" 2>/dev/null || echo "n/a")
finish "$rc" "WORKERS=$WORKERS GPUS=$GPUS_FOUND MAXW=$MAXW ROUNDS=$ROUNDS; first round settled in $first"
