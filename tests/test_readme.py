"""The README's examples run as written and print what the README says they print.

Each example is read out of the README itself, so an edit to one is tested as
it stands: the library snippet, the scenario and its table, the turn-taking
worker with the shell lines that run two of them against the local agent.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import placement
from cli.main import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def blocks(heading: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, text) of the README's section ``## heading``."""
    section = README.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.DOTALL)


def run_shell(script: str, cwd: Path, env: dict[str, str], timeout: float = 90) -> str:
    """What ``script`` printed; fails with its stderr if it fails or outlasts ``timeout``
    (everything it started is killed either way: the agent, a worker left waiting)."""
    shell = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        out, err = shell.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        out, err = shell.communicate()
        pytest.fail(f"still running after {timeout} s:\n{out[-1000:]}\n{err[-2000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    assert shell.returncode == 0, f"{out[-1000:]}\n{err[-2000:]}"
    return out


def test_the_library_example_runs_as_written() -> None:
    (_, code), (_, output) = [b for b in blocks("The library") if b[0] in ("python", "text")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})  # its own imports, nothing given
    assert printed.getvalue() == output


def test_the_library_example_uses_only_the_public_names() -> None:
    code = next(text for language, text in blocks("The library") if language == "python")
    imported = {alias.name for node in ast.walk(ast.parse(code))
                if isinstance(node, ast.ImportFrom) and node.module == "placement"
                for alias in node.names}
    assert imported and imported <= set(placement.__all__)


def test_the_scenario_example_prints_the_table_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_, scenario), (_, output) = [b for b in blocks("Model your own cluster")
                                  if b[0] in ("yaml", "text")]
    (tmp_path / "cluster.yaml").write_text(scenario)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["simulate", "cluster.yaml"])
    assert result.exit_code == 0, result.output
    assert result.stdout == output


def test_the_worker_example_takes_turns_through_the_local_agent(tmp_path: Path) -> None:
    (_, worker), (_, shell) = [b for b in blocks("Write a worker that takes turns")
                               if b[0] in ("python", "sh")]
    (tmp_path / "worker.py").write_text(worker)
    # `python` and `openrl-place` are this environment's, as after `make setup`.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    env.pop("OPENRL_TURN_SOCKET", None)
    out = run_shell(shell, tmp_path, env)
    parks = [int(n) for n in re.findall(r"^parked after (\d+) of 200 steps$", out, re.M)]
    # Both workers finish, and at least one was asked to yield before it had finished.
    assert parks.count(200) == 2, out
    assert any(n < 200 for n in parks), out


def test_the_set_up_commands_are_the_ones_ci_runs() -> None:
    (_, commands) = blocks("Try it")[0]
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == [
        "make demo", "make test"]
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")


def test_every_command_and_page_named_exists() -> None:
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"`openrl-place ([a-z]+)", text))
    listed = set(main.list_commands(None))  # type: ignore[arg-type]
    assert named <= listed, named - listed
    pages = set(re.findall(r"`((?:docs|hack|examples)/[\w./-]+)`", text))
    assert pages and all((ROOT / page.rstrip("/")).exists() for page in pages), pages


def test_the_readme_stays_a_front_door() -> None:
    # Detail belongs in docs/ (linked from the README), not in the first page a newcomer reads.
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 275, f"README.md has {lines} lines: move detail to a page under docs/"
