# Supervising local processes, shared by hack/cluster.sh and hack/node.sh
# (sourced, not run).
#
# Each component runs in its own session (setsid), so a terminal's or a test
# runner's signals to its process group do not reach it. Its pid goes to
# $RUN/NAME.pid and a marker (a piece of its command line) to $RUN/NAME.cmd:
# a pid only counts as the component while /proc/PID/cmdline still holds the
# marker, which guards against pid reuse after a crash or a reboot.
#
# The sourcing script sets RUN, LOGS and PKI, and defines:
#   log        print one line to stderr with the script's prefix
#   die        log an error and exit
#   abort_up   stop whatever a failed `up` started (fail_up calls it)
# and may set FAIL_TAIL (lines of a component's log shown when up fails; 40).

ensure_go() { # what-it-builds
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    PATH=/usr/local/go/bin:$PATH
  fi
  command -v go >/dev/null 2>&1 || die "Go is needed to build $1"
}

pid_of() { # name: prints the recorded pid if that process is alive and still ours
  local f=$RUN/$1.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(cat "$RUN/$1.cmd" 2>/dev/null || echo '#none#')" || return 1
  echo "$pid"
}

exited() { # pid: gone, or a zombie not yet reaped
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [[ -z $state || $state == Z ]]
}

launch() { # name marker command...
  local name=$1 marker=$2 pid i
  shift 2
  # The lock descriptors of both scripts (7, 8 and 9) stay with the script: a
  # long-lived child holding one would block the next build, up or down.
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 7>&- 8>&- 9>&- &
  pid=$!
  echo "$pid" >"$RUN/$name.pid"
  echo "$marker" >"$RUN/$name.cmd"
  # Until the forked shell has exec'd, /proc/PID/cmdline is still this
  # script's and pid_of would call a component that is starting "exited"
  # (on a loaded machine that window is long enough to be hit). Wait for the
  # exec, or for the process to be gone, which the caller then reports.
  for ((i = 0; i < 200; i++)); do
    pid_of "$name" >/dev/null && return 0
    exited "$pid" && return 0
    sleep 0.05
  done
}

stop_group() { # seconds name...: SIGTERM together, SIGKILL what is left after that long
  local wait=$1 name pid i alive
  shift
  local -A pids=()
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      pids[$name]=$pid
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for ((i = 0; i < wait * 10; i++)); do
    alive=0
    for pid in "${pids[@]}"; do exited "$pid" || alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for name in "${!pids[@]}"; do
    pid=${pids[$name]}
    if ! exited "$pid"; then
      log "$name (pid $pid) ignored SIGTERM for ${wait}s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    [[ -z ${STOP_QUIET:-} ]] && log "stopped $name (pid $pid)"
  done
  for name in "$@"; do rm -f "$RUN/$name.pid" "$RUN/$name.cmd"; done
}

fail_up() { # component message
  log "error: $2"
  if [[ -f $LOGS/$1.log ]]; then
    log "last lines of $LOGS/$1.log:"
    tail -n "${FAIL_TAIL:-40}" "$LOGS/$1.log" >&2
  fi
  trap - EXIT
  abort_up
  exit 1
}

wait_until() { # component timeout-seconds description command...
  local name=$1 timeout=$2 what=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    # Asked twice: while a process execs (a launcher's chain of env, unshare, sh and the
    # binary), its /proc cmdline can read empty for a moment, and it would look gone.
    pid_of "$name" >/dev/null || { sleep 0.5 && pid_of "$name" >/dev/null; } ||
      fail_up "$name" "$name exited while waiting for $what"
    ((SECONDS < deadline)) || fail_up "$name" "timed out after ${timeout}s waiting for $what"
    sleep 0.2
  done
}

# One line per component (name, pid, RSS and PSS in MiB; PSS splits the pages
# processes share, such as the one binary's text). Adds to TOTAL_RSS and
# TOTAL_PSS (kB); fails if any is stopped.
status_rows() { # width name...
  local width=$1 c pid rss pss rc=0
  shift
  for c in "$@"; do
    if pid=$(pid_of "$c"); then
      read -r rss pss < <(memory_kb "$pid")
      TOTAL_RSS=$((TOTAL_RSS + rss)) TOTAL_PSS=$((TOTAL_PSS + pss))
      printf "%-${width}s running (pid %s, rss %s MiB, pss %s MiB)\n" "$c" "$pid" $((rss / 1024)) $((pss / 1024))
    else
      printf "%-${width}s stopped\n" "$c"
      rc=3
    fi
  done
  return $rc
}
TOTAL_RSS=0
TOTAL_PSS=0

memory_kb() { # pid: "RSS PSS" in kB
  awk '/^Rss:/{r=$2} /^Pss:/{p=$2} END{print r+0, p+0}' "/proc/$1/smaps_rollup" 2>/dev/null || echo "0 0"
}

sign() { # name subject extendedKeyUsage subjectAltName ca-prefix: $PKI/name.{key,crt}, signed by ca-prefix.{crt,key}
  local name=$1 subj=$2 eku=$3 san=$4 ca=$5
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$PKI/$name.ext"
  # The serial file beside the certificate, never beside a CA another script owns.
  openssl x509 -req -in "$PKI/$name.csr" -CA "$ca.crt" -CAkey "$ca.key" \
    -CAcreateserial -CAserial "$PKI/ca.srl" -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
