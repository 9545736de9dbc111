#!/usr/bin/env bash
# One real node beside the fake ones of hack/cluster.sh: containerd (built
# from its own Go module, hack/containerd), Debian's runc, a CNI plugin whose
# pods reach nothing (hack/node/openrl-veth), the kubelet and a DRA kubelet
# plugin (both in hack/kube's multi-call binary) publishing 8 x 80Gi devices
# under gpu.example.com, the fake nodes' shape -- or, with NODE_PROFILE=nvidia,
# NVIDIA's driver's shape (hack/node/nvidia.yaml). All state lives under .node/
# of this checkout; `down` removes it and everything it held (processes,
# mounts, cgroups, pod network namespaces, CDI files) and keeps only
# .node/cache (built images).
#
#   hack/node.sh up | down | status | check | build | prebuild | image | deploy | restart COMPONENT | ctr ARGS...
#
# The cluster is $KUBECONFIG if set, else this checkout's .cluster/ (whatever
# port it was started on); the node's certificates are signed with that
# cluster's CA, so it must be a hack/cluster.sh cluster. See hack/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_DIR=${NODE_DIR:-$ROOT/.node}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
BIN_DIR=$ROOT/hack/bin
# The kubelet and the plugin of the control plane's release (KUBE_VERSION, as
# hack/cluster.sh takes it): a kubelet newer than its API server is unsupported.
KUBE=$BIN_DIR/kube${KUBE_VERSION:+-$KUBE_VERSION}
CTRD_SRC=$ROOT/hack/containerd
NODE_NAME=${NODE_NAME:-localhost}
PROFILE=${NODE_PROFILE:-default}
DRIVER=${NODE_GPU_DRIVER:-gpu.example.com}
SLICES_FILE=
if [[ $PROFILE == nvidia ]]; then
  DRIVER=gpu.nvidia.com
  SLICES_FILE=${NODE_SLICES_FILE:-$ROOT/hack/node/nvidia.yaml}
fi
DEVICES=${NODE_GPU_COUNT:-8}
DEVICE_MEMORY=${NODE_GPU_MEMORY:-80Gi}
PRODUCT=${NODE_GPU_PRODUCT:-Example GPU 80GB}
PAUSE_IMAGE=localhost/pause:3.10
IMAGE=${NODE_IMAGE:-localhost/openrl-place:dev}
KUBELET_PORT=${NODE_KUBELET_PORT:-10250}
KUBELET_HEALTHZ_PORT=${NODE_KUBELET_HEALTHZ_PORT:-10248}

RUN=$NODE_DIR/run
LOGS=$NODE_DIR/logs
PKI=$NODE_DIR/pki
CACHE=$NODE_DIR/cache
CTRD=$NODE_DIR/containerd
SOCK=$CTRD/containerd.sock
KUBELET_DIR=$NODE_DIR/kubelet
CDI_DIR=$NODE_DIR/cdi
CNI_DIR=$NODE_DIR/cni
# One cgroup per checkout, in every v1 hierarchy: the kubelet's cgroupRoot.
CGROUP_NAME=openrl-node-$(printf '%s' "$ROOT" | sha1sum | cut -c1-8)

COMPONENTS=(containerd kubelet draplugin)

log() { printf '[node] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
abort_up() { teardown; }
FAIL_TAIL=30
STOP_QUIET=1
# shellcheck source=hack/lib/procs.sh
source "$ROOT/hack/lib/procs.sh"

# ---------------------------------------------------------------- can this machine run a node?

# Prints why not and fails; quiet and true when it can.
cannot_run() {
  [[ $(uname -s) == Linux ]] || { echo "not Linux"; return 0; }
  [[ $(id -u) == 0 ]] || { echo "not root (the kubelet and runc need root)"; return 0; }
  [[ -d /sys/fs/cgroup ]] || { echo "no /sys/fs/cgroup"; return 0; }
  command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null ||
    { echo "unshare, nsenter and ip (util-linux, iproute2) are needed"; return 0; }
  unshare -n ip link add v0 type veth peer name v1 2>/dev/null ||
    { echo "cannot create a veth pair in a new network namespace (pods need one)"; return 0; }
  return 1
}

cmd_check() {
  local why
  if why=$(cannot_run); then
    echo "this machine cannot run a node: $why"
    return 4
  fi
  echo "this machine can run a node"
}

# ---------------------------------------------------------------- build and install

apt_install() { # command-or-path package...
  local probe=$1
  shift
  if [[ $probe == /* ]]; then [[ -e $probe ]] && return 0; else command -v "$probe" >/dev/null && return 0; fi
  command -v apt-get >/dev/null || die "$probe is missing and there is no apt-get to install $*"
  log "installing Debian's $* (for $probe)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null ||
      die "apt-get install $* failed"
  fi
}

stamp_ok() { [[ -f $1.stamp && $(cat "$1.stamp") == "$2" ]]; }

build_containerd() {
  local stamp
  stamp=$(cd "$CTRD_SRC" && { go version; cat go.mod go.sum; } | sha256sum | cut -d' ' -f1)
  if [[ -x $BIN_DIR/containerd && -x $BIN_DIR/ctr && -x $BIN_DIR/containerd-shim-runc-v2 ]] &&
    stamp_ok "$BIN_DIR/containerd" "$stamp"; then
    return 0
  fi
  log "building containerd (hack/containerd, $(sed -n 's/^\tgithub.com\/containerd\/containerd\/v2 \(v[^ ]*\).*/\1/p' "$CTRD_SRC/go.mod")); about a minute with warm Go caches"
  local t0=$SECONDS
  mkdir -p "$BIN_DIR"
  (
    cd "$CTRD_SRC"
    export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
    local flags=(-buildvcs=false -trimpath -ldflags=-s\ -w)
    go build "${flags[@]}" -tags 'no_btrfs urfave_cli_no_docs' -o "$BIN_DIR/containerd" \
      github.com/containerd/containerd/v2/cmd/containerd
    go build "${flags[@]}" -tags urfave_cli_no_docs -o "$BIN_DIR/ctr" github.com/containerd/containerd/v2/cmd/ctr
    CGO_ENABLED=0 go build "${flags[@]}" -o "$BIN_DIR/containerd-shim-runc-v2" \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
  )
  echo "$stamp" >"$BIN_DIR/containerd.stamp"
  log "containerd built in $((SECONDS - t0))s"
}

# The sandbox ("pause") image from Kubernetes' own pause.c, static, packed
# with umoci: no registry is reachable here.
build_pause() {
  local src stamp out=$CACHE/pause.tar
  src=$(cd "$ROOT/hack/kube" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  [[ -f $src ]] || die "no $src"
  stamp=$( { cat "$src"; gcc --version | head -1; umoci --version; echo "$PAUSE_IMAGE"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $out ]] && stamp_ok "$out" "$stamp"; then return 0; fi
  log "building $PAUSE_IMAGE from $src"
  local work
  work=$(mktemp -d)
  gcc -Os -static -DVERSION=3.10 -o "$work/pause" "$src"
  strip "$work/pause"
  (
    cd "$work"
    umoci init --layout layout
    umoci new --image layout:3.10
    umoci unpack --uid-map 0:0:1 --gid-map 0:0:1 --image layout:3.10 bundle >/dev/null 2>&1 ||
      umoci unpack --image layout:3.10 bundle >/dev/null
    install -m 0755 pause bundle/rootfs/pause
    umoci repack --image layout:3.10 bundle
    umoci config --image layout:3.10 --config.entrypoint /pause --config.user 65535:65535 \
      --os linux --architecture amd64
    umoci gc --layout layout
    tar -C layout -cf "$out.tmp" .
  )
  rm -rf "$work"
  mv -f "$out.tmp" "$out"
  echo "$stamp" >"$out.stamp"
}

# Builds hold a lock of their own: `prebuild` may be building in the
# background (the tests start it early) when `up` or `image` needs the same
# outputs; they wait for it and then find them current.
build_locked() { # function...
  mkdir -p "$CACHE"
  exec 7>"$CACHE/.build.lock"
  flock 7
  "$@"
  exec 7>&-
}

build_apt() {
  apt_install runc runc
  apt_install /usr/lib/cni/host-local containernetworking-plugins
  apt_install umoci umoci
  apt_install gcc gcc
}

node_parts() {
  build_containerd
  build_pause
}

cmd_build() {
  ensure_go "the node's components"
  build_apt
  "$ROOT/hack/cluster.sh" build
  build_locked node_parts
}

# What `up` and `image` build, except the control plane's binary (whoever
# starts the cluster builds that): run early and in the background, it
# overlaps the minutes of a cold build with tests that wait on the cluster.
cmd_prebuild() {
  ensure_go "the node's components"
  build_apt
  apt_install buildah buildah
  apt_install mmdebstrap mmdebstrap
  local t0=$SECONDS
  build_locked node_parts
  build_locked build_image
  log "prebuilt in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- the cluster

cluster_kubeconfig() {
  if [[ -n ${KUBECONFIG:-} ]]; then echo "$KUBECONFIG"; else echo "$CLUSTER_DIR/admin.kubeconfig"; fi
}

kc() { "$KUBE" kubectl --kubeconfig="$(cluster_kubeconfig)" "$@"; }

# The API server URL from the cluster's kubeconfig: whatever port it uses.
api_server() {
  local kubeconfig
  kubeconfig=$(cluster_kubeconfig)
  [[ -f $kubeconfig ]] || die "no cluster: $kubeconfig is missing (run hack/cluster.sh up first)"
  kc config view --minify -o jsonpath='{.clusters[0].cluster.server}'
}

# ---------------------------------------------------------------- certificates

ensure_pki() {
  local ca=$CLUSTER_DIR/pki stamp
  [[ -f $ca/ca.key ]] || die "the node's certificates are signed with the cluster's CA, and $ca/ca.key is missing: the node needs a hack/cluster.sh cluster"
  stamp=$( { sha256sum <"$ca/ca.crt"; echo "$NODE_NAME"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $PKI/stamp && $(cat "$PKI/stamp") == "$stamp" ]]; then return 0; fi
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  cp "$ca/ca.crt" "$PKI/ca.crt"
  # The node's identity (the Node authorizer scopes it to this node), used by
  # the kubelet and the DRA plugin alike, and the kubelet's serving cert.
  sign node "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth "" "$CLUSTER_DIR/pki/ca"
  sign kubelet "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1" "$CLUSTER_DIR/pki/ca"
  echo "$stamp" >"$PKI/stamp"
}

node_kubeconfig() {
  local server=$1 b64='base64 -w0'
  cat >"$NODE_DIR/node.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $server
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: node
  user:
    client-certificate-data: $($b64 <"$PKI/node.crt")
    client-key-data: $($b64 <"$PKI/node.key")
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
EOF
  chmod 600 "$NODE_DIR/node.kubeconfig"
}

# ---------------------------------------------------------------- configuration

write_configs() {
  mkdir -p "$CTRD/root" "$CTRD/state" "$CDI_DIR" "$CNI_DIR/bin" "$CNI_DIR/net.d" "$CNI_DIR/ipam" \
    "$KUBELET_DIR" "$NODE_DIR/pod-logs"
  # CNI: our plugin plus Debian's host-local for the addresses.
  install -m 0755 "$ROOT/hack/node/openrl-veth" "$CNI_DIR/bin/openrl-veth"
  ln -sf /usr/lib/cni/host-local "$CNI_DIR/bin/host-local"
  ln -sf /usr/lib/cni/loopback "$CNI_DIR/bin/loopback"
  cat >"$CNI_DIR/net.d/10-openrl.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "openrl-isolated",
  "plugins": [
    {
      "type": "openrl-veth",
      "ipam": {
        "type": "host-local",
        "dataDir": "$CNI_DIR/ipam",
        "ranges": [[{"subnet": "10.244.0.0/16"}]]
      }
    }
  ]
}
EOF
  cat >"$CTRD/config.toml" <<EOF
# Written by hack/node.sh up; every path under $NODE_DIR.
version = 3
root = "$CTRD/root"
state = "$CTRD/state"

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "$CTRD/opt"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  # Images come from 'ctr images import' only: never garbage-collected into a
  # pull nobody can serve.
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins.'io.containerd.cri.v1.runtime']
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = ["$CDI_DIR"]
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$CNI_DIR/bin"]
    conf_dir = "$CNI_DIR/net.d"
    max_conf_num = 1
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$CTRD/runc"
        SystemdCgroup = false
EOF
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
# Written by hack/node.sh up.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$SOCK
# This machine: cgroup v1, no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_NAME
# Off the host firewall; no swap or kernel checks on a shared machine.
makeIPTablesUtilChains: false
failSwapOn: false
protectKernelDefaults: false
podLogsDir: $NODE_DIR/pod-logs
resolvConf: ""
serializeImagePulls: false
# Images are imported, never pulled: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%"
  imagefs.available: "0%"
  nodefs.inodesFree: "0%"
localStorageCapacityIsolation: true
maxPods: 110
nodeStatusReportFrequency: 10s
EOF
}

# ---------------------------------------------------------------- cgroups, mounts, processes

cgroup_dirs() { # every v1 hierarchy's (and the unified one's) copy of our cgroup
  local d
  for d in /sys/fs/cgroup/*/; do
    [[ -f ${d}cgroup.procs ]] || continue
    echo "${d}$CGROUP_NAME"
  done
}

ensure_cgroups() {
  local d
  for d in $(cgroup_dirs); do mkdir -p "$d"; done
}

remove_cgroups() {
  local d sub pid
  for d in $(cgroup_dirs); do
    [[ -d $d ]] || continue
    # Anything still inside (a container that outlived its shim) is ours: kill it.
    while read -r sub; do
      while read -r pid; do [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true; done <"$sub/cgroup.procs"
    done < <(find "$d" -depth -type d)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [[ -d $d ]] || break
      sleep 0.2
    done
    [[ -d $d ]] && log "warning: could not remove cgroup $d"
  done
  return 0
}

unmount_all() { # every mount at or under $NODE_DIR, deepest first
  local m
  for _ in 1 2 3; do
    mapfile -t mounts < <(awk -v p="$NODE_DIR/" '{ if (index($5 "/", p) == 1) print $5 }' /proc/self/mountinfo | sort -r)
    ((${#mounts[@]})) || return 0
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
  mapfile -t mounts < <(awk -v p="$NODE_DIR/" '{ if (index($5 "/", p) == 1) print $5 }' /proc/self/mountinfo)
  ((${#mounts[@]} == 0)) || log "warning: still mounted: ${mounts[*]}"
}

# The runc shims of our containerd (they outlive it by design), found by the
# socket address they were started with.
shim_pids() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $SOCK " && echo "${p#/proc/}"
  done
  return 0
}

# (ctr repeats containerd's cgroup v1 deprecation notice on every call.)
ctr() { "$BIN_DIR/ctr" --address "$SOCK" -n k8s.io "$@" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2); }
containerd_up() { ctr version; }
node_ready() {
  [[ $(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
slice_published() {
  [[ -n $(kc get resourceslices --field-selector "spec.nodeName=$NODE_NAME,spec.driver=$DRIVER" -o name) ]]
}
# The plugin writes this file once the kubelet has registered it.
plugin_registered() { [[ -s $RUN/draplugin.ready ]]; }
kubelet_healthy() { [[ $(curl -sf --max-time 3 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz") == ok ]]; }

import_image() { # tar name
  local tar=$1 name=$2
  if ctr images ls -q 2>/dev/null | grep -xF "$name" >/dev/null; then return 0; fi
  ctr images import --base-name "${name%:*}" --digests=false "$tar" >/dev/null ||
    fail_up containerd "importing $tar as $name failed"
  ctr images ls -q 2>/dev/null | grep -xF "$name" >/dev/null || fail_up containerd "$tar imported but $name is not listed"
}

start_containerd() {
  : >>"$LOGS/containerd.log"
  launch containerd "$BIN_DIR/containerd --config $CTRD/config.toml" \
    env PATH="$BIN_DIR:$PATH" "$BIN_DIR/containerd" --config "$CTRD/config.toml" --log-level ${NODE_CONTAINERD_LOG_LEVEL:-warn}
  wait_until containerd 30 "containerd's socket" containerd_up
}

start_kubelet() {
  launch kubelet "$KUBE kubelet --config=$NODE_DIR/kubelet.yaml" "$KUBE" kubelet \
    --config="$NODE_DIR/kubelet.yaml" \
    --kubeconfig="$NODE_DIR/node.kubeconfig" \
    --root-dir="$KUBELET_DIR" \
    --cert-dir="$PKI" \
    --hostname-override="$NODE_NAME" \
    --node-labels="openrl.io/real-node=true" \
    --v=1
  wait_until kubelet 60 "the kubelet's /healthz" kubelet_healthy
}

# What of the profile's slices this API server would drop on its own: device
# taints and shared counters are beta, on by default, from Kubernetes 1.36;
# alpha and off before. NODE_PROFILE_DROP overrides (empty: drop nothing).
profile_drop() {
  if [[ -n ${NODE_PROFILE_DROP+set} ]]; then
    echo "$NODE_PROFILE_DROP"
    return 0
  fi
  local minor
  minor=$(kc version -o json 2>/dev/null | sed -n '/"serverVersion"/,/}/s/.*"minor": *"\([0-9]*\).*/\1/p')
  [[ -n $minor ]] || die "cannot read the API server's version"
  if ((minor < 36)); then echo taints,counters; fi
}

start_draplugin() {
  rm -f "$RUN/draplugin.ready"
  local shape=()
  if [[ -n $SLICES_FILE ]]; then
    [[ -f $SLICES_FILE ]] || die "no $SLICES_FILE (NODE_SLICES_FILE)"
    local drop
    drop=$(profile_drop)
    shape=(--slices-file="$SLICES_FILE" --drop="$drop")
    [[ -z $drop ]] || log "profile $PROFILE: not publishing $drop (alpha and off on this API server)"
  else
    shape=(--devices="$DEVICES" --memory="$DEVICE_MEMORY" --product="$PRODUCT")
  fi
  # For the tests and status: what this node publishes.
  echo "profile=$PROFILE driver=$DRIVER drop=${drop:-}" >"$RUN/profile"
  launch draplugin "$KUBE draplugin --kubeconfig=$NODE_DIR/node.kubeconfig" "$KUBE" draplugin \
    --kubeconfig="$NODE_DIR/node.kubeconfig" \
    --node-name="$NODE_NAME" \
    --driver="$DRIVER" \
    "${shape[@]}" \
    --kubelet-dir="$KUBELET_DIR" \
    --cdi-dir="$CDI_DIR" \
    --ready-file="$RUN/draplugin.ready" \
    --v=2
}

# ---------------------------------------------------------------- commands

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null || return 1; done
  # A node of another profile is not the one asked for (one started before
  # profiles were recorded is the default).
  local running
  running=$(sed -n 's/^profile=\([^ ]*\).*/\1/p' "$RUN/profile" 2>/dev/null || true)
  [[ ${running:-default} == "$PROFILE" ]] || return 1
  node_ready
}

cmd_up() {
  local t0=$SECONDS why
  if why=$(cannot_run); then die "this machine cannot run a node: $why"; fi
  mkdir -p "$NODE_DIR"
  exec 8>"$NODE_DIR/.lock"
  flock 8
  if [[ -d $RUN ]] && all_running 2>/dev/null; then
    log "already running"
    return 0
  fi
  teardown quiet # whatever is left of a partial or crashed node
  cmd_build
  local server
  server=$(api_server)
  mkdir -p "$RUN" "$LOGS"
  local c
  for c in "${COMPONENTS[@]}"; do : >"$LOGS/$c.log"; done
  trap 'log "up did not finish: stopping what it started"; teardown' EXIT
  ensure_pki
  node_kubeconfig "$server"
  write_configs
  ensure_cgroups

  start_containerd
  import_image "$CACHE/pause.tar" "$PAUSE_IMAGE"
  if [[ -f $CACHE/image.tar ]]; then import_image "$CACHE/image.tar" "$(cat "$CACHE/image.name")"; fi
  start_kubelet
  wait_until kubelet 60 "node $NODE_NAME Ready" node_ready
  start_draplugin
  wait_until draplugin 60 "the plugin's registration with the kubelet" plugin_registered
  wait_until draplugin 60 "the ResourceSlice of $DRIVER on $NODE_NAME" slice_published
  if [[ -n $SLICES_FILE ]]; then
    # The profile's own DeviceClasses, as its driver would install them.
    device_classes "$SLICES_FILE" | kc apply -f - >/dev/null
  else
    # The driver's DeviceClass, as the fake nodes create it (one exists if they run).
    kc get deviceclass "$DRIVER" >/dev/null 2>&1 || kc create -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: $DRIVER
spec:
  selectors:
  - cel:
      expression: device.driver == "$DRIVER"
EOF
  fi
  trap - EXIT
  local shape="$DEVICES x $DEVICE_MEMORY devices"
  [[ -z $SLICES_FILE ]] || shape="the $PROFILE profile's slices ($(basename "$SLICES_FILE"))"
  log "up in $((SECONDS - t0))s: node $NODE_NAME Ready, $shape of $DRIVER published"
}

device_classes() { # file: its DeviceClass documents, as one YAML stream
  awk 'BEGIN { RS = "\n---\n" } /(^|\n)kind: DeviceClass\n/ { printf "---\n%s\n", $0 }' "$1"
}

# Everything that runs on the node goes first, through the kubelet (so each
# claim is unprepared by the driver); then the processes; then whatever the
# runtime left behind.
teardown() {
  local quiet=${1:-} kubeconfig pods pid
  kubeconfig=$(cluster_kubeconfig)
  if pid_of kubelet >/dev/null && pid_of draplugin >/dev/null && [[ -f $kubeconfig ]]; then
    # Cordoned first: a controller's replacement pod must not land here meanwhile.
    kc cordon "$NODE_NAME" >/dev/null 2>&1 || true
    pods=$(kc get pods -A --field-selector "spec.nodeName=$NODE_NAME" -o name 2>/dev/null | wc -l || echo 0)
    if ((pods > 0)); then
      log "deleting the $pods pods on $NODE_NAME (the kubelet stops them, the driver unprepares their claims)"
      kc get pods -A --field-selector "spec.nodeName=$NODE_NAME" \
        -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' 2>/dev/null |
        while read -r ns name; do
          kc delete pod -n "$ns" "$name" --wait=false --grace-period=5 >/dev/null 2>&1 || true
        done
      local deadline=$((SECONDS + 60))
      while ((SECONDS < deadline)); do
        [[ -z $(kc get pods -A --field-selector "spec.nodeName=$NODE_NAME" -o name 2>/dev/null) ]] && break
        sleep 0.5
      done
    fi
  fi
  stop_group 15 draplugin
  stop_group 15 kubelet
  if pid_of containerd >/dev/null; then
    # Whatever the kubelet did not stop (it was gone, or timed out).
    local id
    for id in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
    sleep 0.3
    for id in $(ctr tasks ls -q 2>/dev/null); do ctr tasks delete -f "$id" >/dev/null 2>&1 || true; done
  fi
  stop_group 15 containerd
  for pid in $(shim_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  remove_cgroups
  unmount_all
  # The shims' sockets live in a directory containerd does not let us move:
  # remove it (and its parents) when nothing is left in it.
  rmdir /run/containerd/s /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd 2>/dev/null || true
  # State goes; built images (.node/cache) and the last run's logs stay.
  if [[ -d $NODE_DIR ]]; then
    find "$NODE_DIR" -mindepth 1 -maxdepth 1 ! -name cache ! -name logs ! -name .lock \
      -exec rm -rf {} + 2>/dev/null || true
  fi
  if [[ -f $kubeconfig && -x $KUBE ]]; then
    kc delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  [[ -n $quiet ]] || log "down"
}

cmd_down() {
  mkdir -p "$NODE_DIR"
  exec 8>"$NODE_DIR/.lock"
  flock 8
  teardown
}

cmd_status() {
  local pid rc=0 rss pss
  status_rows 12 "${COMPONENTS[@]}" || rc=3
  local shims=0
  for pid in $(shim_pids); do
    shims=$((shims + 1))
    read -r rss pss < <(memory_kb "$pid")
    TOTAL_RSS=$((TOTAL_RSS + rss)) TOTAL_PSS=$((TOTAL_PSS + pss))
  done
  printf '%-12s %s running\n' shims "$shims"
  printf '%-12s rss %s MiB, pss %s MiB (components and shims)\n' total $((TOTAL_RSS / 1024)) $((TOTAL_PSS / 1024))
  if [[ -x $KUBE ]] && node_ready 2>/dev/null; then
    echo "node         $NODE_NAME Ready"
  else
    echo "node         $NODE_NAME not Ready"
    rc=3
  fi
  printf '%-12s %s\n' "cdi files" "$(find "$CDI_DIR" -name '*.json' 2>/dev/null | wc -l)"
  return $rc
}

# make image: the scheduler image from the repository's Dockerfile, with no
# registry: a Debian base made with mmdebstrap, imported into buildah, then
# `buildah bud`; saved to .node/cache and imported into the node's containerd.
cmd_image() {
  apt_install buildah buildah
  apt_install mmdebstrap mmdebstrap
  build_locked build_image
  echo "$IMAGE" >"$CACHE/image.name"
  if pid_of containerd >/dev/null; then
    ctr images rm "$IMAGE" >/dev/null 2>&1 || true
    ctr images import --base-name "${IMAGE%:*}" --digests=false "$CACHE/image.tar" >/dev/null
    log "imported $IMAGE into the node's containerd"
  else
    log "the node is not running: hack/node.sh up imports $IMAGE"
  fi
}

build_image() {
  # buildah's images and containers under .node/cache too, not the host's store.
  buildah() { command buildah --root "$CACHE/buildah/root" --runroot "$CACHE/buildah/run" "$@"; }
  local base=localhost/openrl-python:3.11 stamp
  stamp=$( { mmdebstrap --version; echo bookworm python3 python3-venv; } | sha256sum | cut -d' ' -f1)
  if ! { buildah images -q "$base" >/dev/null 2>&1 && stamp_ok "$CACHE/base" "$stamp"; }; then
    log "making the Python base image $base with mmdebstrap (Debian bookworm)"
    # A venv on PATH: Debian's pip refuses to install into the system Python.
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,passwd \
      --customize-hook='chroot "$1" python3 -m venv /opt/venv' \
      --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
      bookworm "$CACHE/base.tar" ||
      die "mmdebstrap failed"
    local c
    c=$(buildah from scratch)
    buildah add "$c" "$CACHE/base.tar" / >/dev/null
    buildah config --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LANG=C.UTF-8 "$c"
    buildah commit --quiet "$c" "$base" >/dev/null
    buildah rm "$c" >/dev/null
    rm -f "$CACHE/base.tar"
    echo "$stamp" >"$CACHE/base.stamp"
  fi
  local src
  src=$(cd "$ROOT" && git ls-files -s Dockerfile pyproject.toml README.md placement cli controller timeslicer | sha256sum | cut -d' ' -f1)
  stamp=$( { echo "$src"; buildah images -q "$base"; echo "$IMAGE"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $CACHE/image.tar ]] && stamp_ok "$CACHE/image.tar" "$stamp" && [[ -z $(cd "$ROOT" && git status --porcelain -- Dockerfile pyproject.toml placement cli controller timeslicer) ]]; then
    log "image $IMAGE is up to date"
  else
    log "building $IMAGE from the Dockerfile"
    # The host's certificate authorities for the build's pip only (a
    # proxy's CA may be among them); nothing of the host stays in the image.
    local ca=/etc/ssl/certs/ca-certificates.crt args=()
    if [[ -f $ca ]]; then
      printf '[global]\ncert = /run/openrl-build-ca.crt\n' >"$CACHE/build-pip.conf"
      args+=(-v "$ca:/run/openrl-build-ca.crt:ro" -v "$CACHE/build-pip.conf:/etc/pip.conf:ro")
    fi
    # No --layers: buildah 1.28 reused a cached COPY of changed sources.
    (cd "$ROOT" && buildah bud --quiet --network host "${args[@]}" \
      --build-arg "PYTHON_IMAGE=$base" -t "$IMAGE" -f Dockerfile .) >/dev/null
    rm -f "$CACHE/image.tar"
    buildah push --quiet "$IMAGE" "oci-archive:$CACHE/image.tar.tmp:${IMAGE##*:}" >/dev/null
    mv -f "$CACHE/image.tar.tmp" "$CACHE/image.tar"
    buildah rmi --prune >/dev/null 2>&1 || true
    echo "$IMAGE" >"$CACHE/image.name"
    echo "$stamp" >"$CACHE/image.tar.stamp"
  fi
}

# The shipped manifests through manifests/overlays/node, with the API server
# port this cluster uses and the profile's DeviceClass (the driver's name).
cmd_deploy() {
  local server port
  server=$(api_server)
  port=${server##*:}
  port=${port%%/*}
  kc kustomize "$ROOT/manifests/overlays/node" |
    sed -e "/name: KUBERNETES_SERVICE_PORT\$/{n;s/value: .*/value: \"$port\"/}" \
      -e "/name: OPEN_RL_DEVICE_CLASS\$/{n;s/value: .*/value: $DRIVER/}" |
    kc apply -f -
}

# Restart one component in place, as a crash or an upgrade would: the pods
# and their containers stay as they are.
cmd_restart() {
  local name=${1:-}
  case $name in
    kubelet | draplugin | containerd) ;;
    *) die "restart what? kubelet | draplugin | containerd" ;;
  esac
  exec 8>"$NODE_DIR/.lock"
  flock 8
  pid_of "$name" >/dev/null || die "$name is not running"
  # A restart that fails leaves the rest running (no teardown) for a look.
  abort_up() { :; }
  stop_group 15 "$name"
  case $name in
    containerd) start_containerd ;;
    kubelet)
      start_kubelet
      wait_until kubelet 60 "node $NODE_NAME Ready" node_ready
      ;;
    draplugin)
      start_draplugin
      wait_until draplugin 60 "the plugin's registration with the kubelet" plugin_registered
      ;;
  esac
  log "restarted $name"
}

main() {
  case $PROFILE in
    default | nvidia) ;;
    *) die "NODE_PROFILE=$PROFILE: default or nvidia" ;;
  esac
  local cmd=${1:-}
  shift || true
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    check) cmd_check ;;
    build) cmd_build ;;
    prebuild) cmd_prebuild ;;
    image) cmd_image ;;
    deploy) cmd_deploy ;;
    restart) cmd_restart "$@" ;;
    ctr) ctr "$@" ;;
    *)
      echo "usage: $0 up | down | status | check | build | prebuild | image | deploy | restart kubelet|draplugin|containerd | ctr ARGS..." >&2
      exit 2
      ;;
  esac
}

main "$@"
