#!/usr/bin/env bash
# A real Kubernetes control plane as plain local processes, for smoke and e2e
# tests: etcd, kube-apiserver, kube-scheduler and kube-controller-manager built
# from Kubernetes' own Go modules (hack/kube, one multi-call binary), plus the
# simulated GPU nodes of hack/fakenodes. Everything listens on 127.0.0.1 only;
# state, certificates, logs and the admin kubeconfig live under .cluster/.
#
#   hack/cluster.sh up [--nodes N] [--profile gpu80|devbox] [--driver NAME] [--labels k=v,...]
#   hack/cluster.sh down | status | build | kubectl ARGS... | env
#
# See hack/README.md for ports, environment variables and figures.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
SRC=$ROOT/hack/kube
BIN_DIR=$ROOT/hack/bin
# KUBE_VERSION=1.34 (any minor under hack/kube/versions/) builds the same
# sources against that release's modules into hack/bin/kube-1.34 and runs it;
# unset, hack/kube's own go.mod (the newest release) and hack/bin/kube.
KUBE_VERSION=${KUBE_VERSION:-}
MODFILE=$SRC/go.mod
KUBE=$BIN_DIR/kube
if [[ -n $KUBE_VERSION ]]; then
  MODFILE=$SRC/versions/$KUBE_VERSION/go.mod
  KUBE=$BIN_DIR/kube-$KUBE_VERSION
fi
PY=${PYTHON:-$ROOT/.venv/bin/python}

PKI=$CLUSTER_DIR/pki
RUN=$CLUSTER_DIR/run
LOGS=$CLUSTER_DIR/logs
DATA=$CLUSTER_DIR/etcd
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig

# Start order; stopped in reverse.
COMPONENTS=(etcd apiserver controller-manager scheduler fakenodes)

log() { printf '[cluster] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
abort_up() { stop_all; }
# shellcheck source=hack/lib/procs.sh
source "$ROOT/hack/lib/procs.sh"

load_ports() {
  # From the environment, unless a cluster is running: then the ports it was
  # started with (recorded in run/ports) win, so down/status find it.
  CL_APISERVER_PORT=${KUBE_APISERVER_PORT:-6443}
  CL_ETCD_PORT=${ETCD_CLIENT_PORT:-2379}
  CL_ETCD_PEER_PORT=${ETCD_PEER_PORT:-2380}
  CL_SCHEDULER_PORT=${KUBE_SCHEDULER_PORT:-10259}
  CL_KCM_PORT=${KUBE_CONTROLLER_MANAGER_PORT:-10257}
  if [[ -f $RUN/ports ]]; then
    # shellcheck disable=SC1091
    source "$RUN/ports"
  fi
  PORTS=("$CL_ETCD_PORT" "$CL_ETCD_PEER_PORT" "$CL_APISERVER_PORT" "$CL_KCM_PORT" "$CL_SCHEDULER_PORT")
}

# ---------------------------------------------------------------- build

ldflags() {
  # Stamp the release into the version packages, as Kubernetes' own build does.
  local version pkg flags="-s -w"
  version=$(kubernetes_version)
  if [[ $version =~ ^v([0-9]+)\.([0-9]+)\. ]]; then
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=${BASH_REMATCH[1]}"
      flags+=" -X $pkg.gitMinor=${BASH_REMATCH[2]} -X $pkg.gitTreeState=clean"
    done
  fi
  echo "$flags"
}

kubernetes_version() { sed -n 's/^\tk8s.io\/kubernetes \(v[0-9][^ ]*\)$/\1/p' "$MODFILE"; }

source_stamp() {
  (cd "$SRC" && { go version; ldflags; cat "$MODFILE" "${MODFILE%.mod}.sum" ./*.go; } | sha256sum | cut -d' ' -f1)
}

build() {
  # Lanes of a parallel test run (each its own CLUSTER_DIR) and the early build
  # tests/conftest.py starts share hack/bin: one build at a time, the others
  # then find it current. The descriptor is the subshell's, so nothing `up`
  # starts later holds the lock.
  mkdir -p "$BIN_DIR"
  (
    flock 8
    build_locked
  ) 8>"$BIN_DIR/.kube.build.lock"
}

build_locked() {
  [[ -f $MODFILE ]] || die "KUBE_VERSION=$KUBE_VERSION: no $MODFILE (known: $(cd "$SRC/versions" && echo *))"
  ensure_go "the control plane (go.mod asks for $(sed -n 's/^go //p' "$MODFILE"))"
  local stamp
  stamp=$(source_stamp)
  if [[ -x $KUBE && -f $KUBE.stamp && $(cat "$KUBE.stamp") == "$stamp" ]]; then
    return 0
  fi
  mkdir -p "$BIN_DIR"
  log "building $KUBE from hack/kube (kubernetes $(kubernetes_version));" \
    "a cold build (empty Go caches) takes 8-16 minutes on 2 cores"
  local t0=$SECONDS
  (cd "$SRC" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    go build -buildvcs=false -trimpath -modfile="$MODFILE" -ldflags="$(ldflags)" -o "$KUBE.tmp" .)
  mv -f "$KUBE.tmp" "$KUBE"
  echo "$stamp" >"$KUBE.stamp"
  [[ -n $KUBE_VERSION ]] || ln -sf kube "$BIN_DIR/kubectl"
  log "built in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- PKI

kubeconfig() { # file user-cert-name
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$CL_APISERVER_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$PKI/$2.crt")
    client-key-data: $($b64 <"$PKI/$2.key")
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
  chmod 600 "$1"
}

ensure_pki() {
  if [[ ! -f $PKI/complete-v2 ]]; then
    log "generating certificates in $PKI"
    rm -rf "$PKI"
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    cat >"$PKI/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
x509_extensions = ca
prompt = no
[dn]
CN = openrl-place-local-ca
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
EOF
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -config "$PKI/ca.cnf" -key "$PKI/ca.key" -days 3650 -sha256 -out "$PKI/ca.crt"
    sign apiserver "/CN=kube-apiserver" serverAuth \
      "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" "$PKI/ca"
    sign admin "/O=system:masters/CN=kubernetes-admin" clientAuth "" "$PKI/ca"
    sign controller-manager "/CN=system:kube-controller-manager" clientAuth "" "$PKI/ca"
    sign scheduler "/CN=system:kube-scheduler" clientAuth "" "$PKI/ca"
    # The aggregation layer's front proxy: gives the components' delegated
    # authentication a request-header CA to load (else they log errors).
    sed 's/openrl-place-local-ca/openrl-place-front-proxy-ca/' "$PKI/ca.cnf" >"$PKI/front-proxy-ca.cnf"
    openssl genrsa -out "$PKI/front-proxy-ca.key" 2048 2>/dev/null
    openssl req -x509 -new -config "$PKI/front-proxy-ca.cnf" -key "$PKI/front-proxy-ca.key" \
      -days 3650 -sha256 -out "$PKI/front-proxy-ca.crt"
    sign front-proxy-client "/CN=front-proxy-client" clientAuth "" "$PKI/front-proxy-ca"
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    touch "$PKI/complete-v2"
  fi
  # How the API server authenticates to a real kubelet (hack/node.sh) for
  # logs, exec and port-forward; added later than the rest, hence outside the
  # stamp above.
  if [[ ! -f $PKI/kubelet-client.crt ]]; then
    sign kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth "" "$PKI/ca"
  fi
  # Kubeconfigs carry the API server port: rewrite them on every start.
  kubeconfig "$ADMIN_KUBECONFIG" admin
  kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" scheduler
}

# ---------------------------------------------------------------- processes

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

api_get() { # path
  curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$CL_APISERVER_PORT$1"
}

readyz() { [[ $(api_get /readyz) == ok ]]; }
healthz() { [[ $(curl -skf --max-time 5 "https://127.0.0.1:$1/healthz") == ok ]]; }
etcd_healthy() { curl -sf --max-time 5 "http://127.0.0.1:$CL_ETCD_PORT/health" | grep -q '"health":"true"'; }
fakenodes_ready() { [[ -s $RUN/fakenodes.ready ]]; }
default_sa() { api_get /api/v1/namespaces/default/serviceaccounts/default; }

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null || return 1; done
  # A cluster of another KUBE_VERSION is not the one asked for (one started
  # before versions were recorded ran hack/kube's own).
  local running
  running=$(cat "$RUN/version" 2>/dev/null || MODFILE=$SRC/go.mod kubernetes_version)
  [[ $running == "$(kubernetes_version)" ]] || return 1
  readyz
}

stop_all() {
  # Everything that talks to etcd first, all at once; then etcd.
  stop_group 10 fakenodes scheduler controller-manager apiserver
  stop_group 10 etcd
  local deadline=$((SECONDS + 10)) p busy
  while :; do
    busy=()
    for p in "${PORTS[@]}"; do port_open "$p" && busy+=("$p"); done
    ((${#busy[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      log "warning: ports still listening after stop: ${busy[*]}"
      break
    fi
    sleep 0.2
  done
  rm -rf "$DATA" "$RUN"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  while (($#)); do
    case $1 in
      --nodes) export FAKE_GPU_NODES=$2; shift 2 ;;
      --profile) export FAKE_GPU_PROFILE=$2; shift 2 ;;
      --driver) export FAKE_GPU_DRIVER=$2; shift 2 ;;
      --labels) export FAKE_GPU_NODE_LABELS=$2; shift 2 ;;
      *) die "unknown option for up: $1" ;;
    esac
  done
  local t0=$SECONDS
  mkdir -p "$CLUSTER_DIR"
  exec 9>"$CLUSTER_DIR/.lock"
  flock 9
  load_ports
  if all_running; then
    log "already running"
    echo "KUBECONFIG=$ADMIN_KUBECONFIG"
    return 0
  fi
  stop_all # whatever is left of a partial or crashed cluster
  load_ports

  build
  if [[ ! -x $PY ]]; then
    log "no $PY: running make setup"
    make -C "$ROOT" setup >&2
  fi
  local p
  for p in "${PORTS[@]}"; do
    port_open "$p" && die "port 127.0.0.1:$p is already in use by another process (see KUBE_APISERVER_PORT etc. in hack/README.md)"
  done

  mkdir -p "$RUN" "$LOGS"
  kubernetes_version >"$RUN/version"
  declare -p CL_APISERVER_PORT CL_ETCD_PORT CL_ETCD_PEER_PORT CL_SCHEDULER_PORT CL_KCM_PORT |
    sed 's/^declare -- //' >"$RUN/ports"
  ensure_pki
  local c
  for c in "${COMPONENTS[@]}"; do : >"$LOGS/$c.log"; done
  # Whatever ends this function early (an error, a signal) stops what it started.
  trap 'log "up did not finish: stopping what it started"; stop_all' EXIT

  launch etcd "$KUBE etcd" "$KUBE" etcd \
    --name=local \
    --data-dir="$DATA" \
    --listen-client-urls="http://127.0.0.1:$CL_ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$CL_ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$CL_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$CL_ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$CL_ETCD_PEER_PORT" \
    --initial-cluster-state=new \
    --unsafe-no-fsync \
    --log-level=warn
  wait_until etcd 30 "etcd health" etcd_healthy

  launch apiserver "$KUBE apiserver" "$KUBE" apiserver \
    --etcd-servers="http://127.0.0.1:$CL_ETCD_PORT" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$CL_APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --kubelet-client-certificate="$PKI/kubelet-client.crt" \
    --kubelet-client-key="$PKI/kubelet-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC \
    --service-cluster-ip-range=10.96.0.0/16 \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    --profiling=false \
    --v=1
  wait_until apiserver 90 "kube-apiserver /readyz" readyz

  launch controller-manager "$KUBE controller-manager" "$KUBE" controller-manager \
    --kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$CL_KCM_PORT" \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" \
    --cluster-signing-key-file="$PKI/ca.key" \
    --use-service-account-credentials=true \
    --leader-elect=false \
    --profiling=false \
    --v=1
  launch scheduler "$KUBE scheduler" "$KUBE" scheduler \
    --kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="$CL_SCHEDULER_PORT" \
    --leader-elect=false \
    --profiling=false \
    --v=1
  launch fakenodes "-m hack.fakenodes.fakenodes --kubeconfig=$ADMIN_KUBECONFIG" \
    env "PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -u -m hack.fakenodes.fakenodes \
    --kubeconfig="$ADMIN_KUBECONFIG" \
    --ready-file="$RUN/fakenodes.ready"

  wait_until controller-manager 60 "kube-controller-manager /healthz" healthz "$CL_KCM_PORT"
  wait_until scheduler 60 "kube-scheduler /healthz" healthz "$CL_SCHEDULER_PORT"
  wait_until fakenodes 60 "fake GPU nodes to register" fakenodes_ready
  wait_until controller-manager 60 "the default ServiceAccount (serviceaccount controller)" default_sa

  trap - EXIT
  log "up in $((SECONDS - t0))s: kubernetes $(kubernetes_version), nodes $(cat "$RUN/fakenodes.ready")"
  log "kubectl: hack/cluster.sh kubectl get nodes   (or hack/bin/kubectl --kubeconfig $ADMIN_KUBECONFIG)"
  echo "KUBECONFIG=$ADMIN_KUBECONFIG"
}

cmd_down() {
  mkdir -p "$CLUSTER_DIR"
  exec 9>"$CLUSTER_DIR/.lock"
  flock 9
  load_ports
  stop_all
  log "down"
}

cmd_status() {
  load_ports
  local rc=0
  status_rows 20 "${COMPONENTS[@]}" || rc=3
  printf '%-20s rss %s MiB, pss %s MiB\n' total $((TOTAL_RSS / 1024)) $((TOTAL_PSS / 1024))
  if readyz; then
    echo "apiserver            ready at https://127.0.0.1:$CL_APISERVER_PORT"
    echo "KUBECONFIG=$ADMIN_KUBECONFIG"
  else
    echo "apiserver            not ready"
    rc=3
  fi
  return $rc
}

main() {
  local cmd=${1:-}
  shift || true
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    build) build ;;
    kubectl)
      [[ -x $KUBE ]] || build
      exec "$KUBE" kubectl --kubeconfig="$ADMIN_KUBECONFIG" "$@"
      ;;
    env) echo "export KUBECONFIG=$ADMIN_KUBECONFIG" ;;
    *)
      echo "usage: $0 up [--nodes N] [--profile gpu80|devbox] [--driver NAME] [--labels k=v,...] | down | status | build | kubectl ARGS... | env" >&2
      exit 2
      ;;
  esac
}

main "$@"
