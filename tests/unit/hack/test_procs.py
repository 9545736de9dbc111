"""hack/lib/procs.sh: the process supervision both local-cluster scripts share.

Stories of one component started and stopped, run through bash with the
library sourced, each in its own temporary RUN and LOGS directory.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROCS = ROOT / "hack" / "lib" / "procs.sh"


def bash(tmp_path: Path, script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    prelude = f"""
        set -euo pipefail
        RUN={tmp_path}/run LOGS={tmp_path}/logs PKI={tmp_path}/pki
        mkdir -p "$RUN" "$LOGS" "$PKI"
        log() {{ printf '[test] %s\\n' "$*" >&2; }}
        die() {{ log "error: $*"; exit 1; }}
        abort_up() {{ echo aborted; }}
        source {PROCS}
    """
    # From a file: with bash -c the script's text would be the shell's
    # command line, and a marker in it would match before any exec.
    path = tmp_path / "story.sh"
    path.write_text(textwrap.dedent(prelude) + textwrap.dedent(script))
    return subprocess.run(
        ["bash", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "LC_ALL": "C"},
    )


def test_a_component_that_is_slow_to_exec_is_not_taken_for_exited(tmp_path: Path) -> None:
    # The log is a FIFO nobody reads for a second: the forked shell blocks
    # opening it, before it can exec. A check right after launch must see the
    # component, not this script's own command line.
    proc = bash(
        tmp_path,
        """
        mkfifo "$LOGS/slow.log"
        ( sleep 1; exec cat "$LOGS/slow.log" >/dev/null 2>&1 ) &
        launch slow "sleep 30" sleep 30
        pid_of slow >/dev/null && echo "running"
        STOP_QUIET=1 stop_group 5 slow
        pid_of slow >/dev/null || echo "stopped"
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["running", "stopped"]


def test_a_component_that_dies_at_once_is_reported_with_its_log(tmp_path: Path) -> None:
    proc = bash(
        tmp_path,
        """
        launch broken "no-such-program-here" no-such-program-here --flag
        wait_until broken 10 "its readiness" false
        echo "not reached"
        """,
    )
    assert proc.returncode == 1
    assert "not reached" not in proc.stdout
    assert "aborted" in proc.stdout
    assert "broken exited while waiting for its readiness" in proc.stderr
    assert "no-such-program-here" in proc.stderr  # the tail of its log


def test_a_recorded_pid_reused_by_another_process_is_not_ours(tmp_path: Path) -> None:
    proc = bash(
        tmp_path,
        """
        sleep 30 & other=$!
        echo "$other" >"$RUN/ghost.pid"
        echo "some-component --its-flag" >"$RUN/ghost.cmd"
        pid_of ghost || echo "not ours"
        STOP_QUIET=1 stop_group 5 ghost
        kill -0 "$other" && echo "left alone"
        kill "$other"
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["not", "ours", "left", "alone"]


def test_one_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    proc = bash(
        tmp_path,
        """
        launch stubborn "while :; do sleep 0.1" bash -c 'trap "" TERM; while :; do sleep 0.1; done'
        pid=$(pid_of stubborn)
        stop_group 1 stubborn
        sleep 0.3
        exited "$pid" && echo "gone"
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["gone"]
    assert "ignored SIGTERM for 1s; killing it" in proc.stderr


@pytest.mark.parametrize("rows", [["a"], ["a", "b"]])
def test_status_rows_sum_what_runs_and_fail_on_what_does_not(tmp_path: Path,
                                                             rows: list[str]) -> None:
    script = "".join(f'launch {r} "sleep 3{i}" sleep 3{i}\n' for i, r in enumerate(rows))
    script += 'status_rows 8 "$@" missing || echo "rc=$?"; echo "total=$((TOTAL_RSS > 0))"\n'
    script += "STOP_QUIET=1 stop_group 5 " + " ".join(rows) + "\n"
    proc = bash(tmp_path, script.replace('"$@"', " ".join(rows)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[: len(rows) + 1]] == [*rows, "missing"]
    assert all("running (pid" in line for line in lines[: len(rows)])
    assert "stopped" in lines[len(rows)]
    assert lines[-2:] == ["rc=3", "total=1"]
