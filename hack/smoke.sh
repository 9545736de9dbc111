#!/usr/bin/env bash
# Smoke: the whole pipeline on a real API server, kube-scheduler and DRA.
#
# Asks for one more worker than the enabled nodes have devices, with
# max-workers-per-claim=2, then checks that every worker reaches Running, that
# the workers hold exactly as many distinct claims as there are devices
# (spread first, share only when nothing is free), and that every claim is
# allocated by the DRA driver and reserved for its workers' pods. Prints the
# books, tears everything down, and ends with PASS or FAIL (non-zero exit).
#
# By default it runs on the local control plane with fake 8 x 80Gi GPUs
# (hack/cluster.sh, brought up if needed) and runs the scheduler as a local
# process with its own ServiceAccount's token, so the RBAC in manifests/ is
# what it gets. Against another cluster:
#
#   OPENRL_EXTERNAL=1 KUBECONFIG=~/.kube/config OPENRL_NODES=gpu-a \
#     OPENRL_DEVICE_CLASS=gpu.nvidia.com MEMORY=10Gi hack/smoke.sh
#
# Settings: hack/lib/common.sh (GPUS, MAXW=2, MEMORY=50Gi, ROLE=trainer, ...).
RUN_NAME=smoke
# shellcheck source=hack/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
begin
rc=0
run_books smoke || rc=$?
finish "$rc" "$((GPUS_FOUND + 1)) workers on $GPUS_FOUND devices"
