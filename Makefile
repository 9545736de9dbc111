# Every set-up step lives here so a fresh clone needs nothing installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

FIDELITY_SCENARIOS ?= 20
FIDELITY_SEED      ?= 1
FIDELITY_FLAGS     ?=

# hack/node.sh: one real node (containerd, runc, kubelet, a DRA plugin) beside the fake ones.
.PHONY: node-up node-down node-status image node-bench
.PHONY: versions fidelity setup browser demo early-builds test test-fast test-random lint tools bench bench-cache bench-timeslicer burst cluster-up cluster-down cluster-status smoke stress chaos privilege fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[controller,dev,report]'
	touch $(STAMP)

setup: $(STAMP)

## Replay the bundled dev-box scenario through the placement decision.
demo: setup
	$(BIN)/openrl-place simulate examples/devbox.yaml

## Debian's Chromium for the browser test of the report pages, where apt-get can install it
## (elsewhere that test says it has no browser and skips).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "chromium could not be installed: the browser test will skip"; \
	  else echo "no chromium and no apt-get as root: the browser test will skip"; fi; }

## The autoscaling e2e tests run on Karpenter (hack/karpenter.sh), built from its Go module as the
## session starts (a cold build takes 7-20 minutes on 2 cores, in the background, from
## hack/early.sh). OPENRL_E2E_KARPENTER_BUILD=0 leaves it unbuilt: the modules then skip, saying so.
OPENRL_E2E_KARPENTER_BUILD ?= 1
## The team quota e2e tests run on Kueue (hack/kueue.sh), built the same way (about 3 minutes
## cold); OPENRL_E2E_KUEUE_BUILD=0 leaves it unbuilt and those tests skip.
OPENRL_E2E_KUEUE_BUILD ?= 1

## The suite runs in LANES processes at once (pytest-xdist): each lane with its own local
## control plane, the real node's modules in one lane (tests/lanes.py, docs/testing.md).
## LANES=0 runs it in one process, as before (and is what a run on a KUBECONFIG of your
## own wants: the lanes would share that cluster).
LANES ?= 4
LANE_ARGS = $(if $(filter 0,$(LANES)),,-n $(LANES) --no-loadscope-reorder)
# When this make started: `make test` ends with its wall time, set-up and lint included.
STARTED := $(shell date +%s)
wall = echo "make $(1): $$(( ($$(date +%s) - $(STARTED)) / 60 )) min $$(( ($$(date +%s) - $(STARTED)) % 60 )) s wall, set-up and lint included"

## The e2e tier's slow builds (the control plane, the real node's parts and images, Helm,
## kustomize, promtool, Karpenter) started in the background before set-up and lint.
early-builds:
	@OPENRL_E2E_KARPENTER_BUILD=$(OPENRL_E2E_KARPENTER_BUILD) \
	  OPENRL_E2E_KUEUE_BUILD=$(OPENRL_E2E_KUEUE_BUILD) hack/early.sh

## Lint and type-check, then every test (the e2e tests bring up the local control plane).
test: early-builds lint browser
	@rc=0; OPENRL_E2E_KARPENTER_BUILD=$(OPENRL_E2E_KARPENTER_BUILD) \
	  OPENRL_E2E_KUEUE_BUILD=$(OPENRL_E2E_KUEUE_BUILD) GOTOOL_EARLY=started \
	  $(BIN)/pytest --durations=40 $(LANE_ARGS) || rc=$$?; \
	  $(call wall,test); exit $$rc

## The fast tier with hypothesis exploring: new examples every run, failures remembered in
## ~/.cache/openrl-place/hypothesis (make test plays the same examples each time).
test-random: setup
	HYPOTHESIS_PROFILE=random $(BIN)/pytest -m "not e2e and not tools and not install"

## Lint and the tests that need no control plane and build nothing (no Go tools): the
## tiers are in docs/testing.md.
test-fast: lint
	$(BIN)/pytest -m "not e2e and not tools and not install"

## Helm, kustomize and promtool from their Go modules into hack/bin/ (skipped while current);
## the chart and monitoring tests build them on first use too.
tools:
	hack/gotool.sh helm >/dev/null
	hack/gotool.sh kustomize >/dev/null
	hack/gotool.sh promtool >/dev/null

## ruff (complexity included: no function above 20, pyproject.toml) and mypy --strict.
lint: setup
	$(BIN)/ruff check placement cli controller timeslicer hack tests bench
	$(BIN)/mypy --strict placement cli controller timeslicer hack

bench: setup bench-cache
	$(BIN)/python bench/simulate_bench.py
	$(BIN)/python bench/hostile_bench.py
	$(BIN)/python bench/report_bench.py

## The controller at 500, 10,000, 50,000 and 100,000 workers (no cluster): the start-up
## list's CPU, resident memory per cached worker, CPU per decision (bench/cache_bench.py;
## CACHE_BENCH_ARGS="--compare DIR" measures another checkout beside it).
bench-cache: setup
	$(BIN)/python bench/cache_bench.py $(CACHE_BENCH_ARGS)

## The time-slicer agent in --local mode: release -> next grant p50/p99 and CPU per switch
## over 8 groups of 32 members; then the GPU benchmark (says it was skipped without a GPU).
bench-timeslicer: setup
	$(BIN)/python bench/timeslicer_bench.py
	$(BIN)/python bench/gpu_bench.py

## A burst on the local control plane: the pipeline (the controller as its own process)
## and kube-scheduler alone on equivalent claims and pods, in one run. NODES fake nodes
## (8 devices each) when the cluster is started here; WORKERS one-device workers.
NODES   ?= 25
WORKERS ?= 200
burst: setup
	FAKE_GPU_NODES=$(NODES) hack/cluster.sh up
	KUBECONFIG=$(CURDIR)/.cluster/admin.kubeconfig $(BIN)/python -m hack.burst --baseline \
	  --subprocess --maxw 1 --workers $(WORKERS) --timeout 1800

cluster-up: setup
	hack/cluster.sh up

cluster-down:
	hack/cluster.sh down

cluster-status:
	hack/cluster.sh status

## A real node on the local control plane (brought up if needed): containerd, runc,
## CNI, kubelet and the DRA test driver's plugin with 8 x 80Gi devices. See hack/README.md.
node-up: setup
	@hack/cluster.sh status >/dev/null 2>&1 || hack/cluster.sh up >/dev/null
	hack/node.sh up

node-down:
	hack/node.sh down

node-status:
	hack/node.sh status

## The scheduler image from the Dockerfile, built here with no registry (mmdebstrap +
## buildah) and imported into the real node's containerd when it runs.
image:
	hack/node.sh image

## The shipped Deployment on the real node (manifests/overlays/node), then worker create ->
## container Running through it vs a plain claim + pod, and the ratio.
node-bench: node-up image
	KUBECONFIG=$(CURDIR)/.cluster/admin.kubeconfig hack/node.sh deploy
	KUBECONFIG=$(CURDIR)/.cluster/admin.kubeconfig hack/bin/kube kubectl -n openrl rollout status deployment/open-rl-scheduler --timeout=300s
	KUBECONFIG=$(CURDIR)/.cluster/admin.kubeconfig $(BIN)/python bench/node_bench.py

smoke: setup
	hack/smoke.sh

## Smoke, stress and the real-node e2e on the control planes of Kubernetes 1.34, 1.35 and
## 1.36, built from their Go modules (nice), one at a time under the e2e lock; a summary of
## what passed, failed and was skipped where. VERSIONS="1.35" picks. Not part of `make test`.
versions: setup
	hack/versions.sh

stress: setup
	hack/stress.sh

## Churn under injected faults with every invariant checked on every change; ends with
## "chaos: PASS|FAIL". CHAOS_ROUNDS, CHAOS_SEED, CHAOS_WORKERS scale it.
chaos: setup
	hack/chaos.sh

# $(1) as the local control plane's admin; a control plane this run had to start is
# stopped after it (as chaos, smoke and stress do), one already up is left running.
on_local_cluster = started=0; \
	if ! hack/cluster.sh status >/dev/null 2>&1; then \
	  hack/cluster.sh up && started=1 || exit 1; \
	fi; \
	KUBECONFIG=$(CURDIR)/.cluster/admin.kubeconfig $(1); rc=$$?; \
	if [ $$started = 1 ]; then hack/cluster.sh down >/dev/null; fi; exit $$rc

## Each identity's rights with ServiceAccount tokens (gateway, scheduler, admission) and the
## planted-template escalation, as a table; ends with "privilege: PASS|FAIL".
privilege: setup
	@$(call on_local_cluster,$(BIN)/python -m hack.privilege)

## Seeded hostile OpenRLWorkers through the API server: tried / refused / answered / stuck;
## ends with "fuzz: PASS|FAIL". FUZZ_COUNT (3000 here) and FUZZ_SEED scale and vary it.
FUZZ_COUNT ?= 3000
fuzz: setup
	@$(call on_local_cluster,$(BIN)/python -m hack.fuzz --count $(FUZZ_COUNT))

## Play generated scenarios on the local control plane (or $$KUBECONFIG) and compare every
## step with simulate; ends with "fidelity: A/N scenarios, S/T steps agree".
## FIDELITY_FLAGS=--moves: scenarios with moves (rebalanceAfter, movable workers).
fidelity: setup
	@if [ -n "$$KUBECONFIG" ]; then $(FIDELITY); else $(call on_local_cluster,$(FIDELITY)); fi
FIDELITY = $(BIN)/python -m hack.replay --keep-going --generate $(FIDELITY_SCENARIOS) \
	--seed $(FIDELITY_SEED) $(FIDELITY_FLAGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
