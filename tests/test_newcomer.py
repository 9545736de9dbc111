"""A newcomer's first steps, on a plain install: no extras, a fresh virtual environment.

The checkout's files (tracked, and new ones git does not ignore: what a clone
of this work would hold) are copied aside and ``pip install``-ed into a new
virtual environment with no extra. Then, from a folder outside the checkout,
as the README walks a newcomer: ``openrl-place --help``, a scenario of their
own, and the README's turn-taking worker against ``openrl-place timeslicer
--local``. Marked ``install`` (``make test`` runs it, ``make test-fast`` does
not): it reaches the package index for click, PyYAML, attrs and the build's
setuptools.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.test_readme import blocks, run_shell

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["compare", "controller", "explain", "simulate", "snapshot", "timeslicer"]
SCENARIO = """\
nodes:
  - {name: l4, devices: 2, deviceMemory: 24Gi, hostMemory: 94Gi, maxWorkersPerClaim: 2}
events:
  - arrive: {name: a, role: trainer, memory: 10Gi}
  - arrive: {name: b, role: trainer, memory: 10Gi}
  - arrive: {name: c, role: sampler, memory: 10Gi}
  - expect: {worker: c, sharesWith: a}
"""


def _copy_checkout(to: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a deleted but still tracked file is skipped
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding the plain install."""
    base = tmp_path_factory.mktemp("newcomer")
    _copy_checkout(base / "clone")
    venv.create(base / "venv", with_pip=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    installed = subprocess.run(
        [str(base / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", str(base / "clone")],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return base / "venv" / "bin"


def _run(bin_dir: Path, cwd: Path, *argv: str,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(bin_dir), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _env(bin_dir: Path) -> dict[str, str]:
    # The new environment first on PATH; nothing of this checkout's importable.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENRL_"))}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"}


def test_the_install_has_no_extra(plain: Path, tmp_path: Path) -> None:
    for module in ("kubernetes", "prometheus_client", "msgspec", "matplotlib"):
        done = _run(plain, tmp_path, "python", "-c", f"import {module}")
        assert done.returncode != 0, f"{module} is installed: not a plain install"


def test_help_lists_every_command(plain: Path, tmp_path: Path) -> None:
    for argv in (["openrl-place"], ["openrl-place", "--help"]):
        done = _run(plain, tmp_path, *argv)
        assert done.returncode == 0, done.stderr
        listing = done.stdout.split("Commands:", 1)[1]
        assert [line.split()[0] for line in listing.splitlines() if line.strip()] == COMMANDS
    controller = _run(plain, tmp_path, "openrl-place", "controller", "--help")
    assert controller.returncode == 0, controller.stderr
    assert "pip install 'openrl-place[controller]'" in " ".join(controller.stdout.split())


def test_an_own_scenario_replays(plain: Path, tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(SCENARIO)
    done = _run(plain, tmp_path, "openrl-place", "simulate", "mine.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("mine.yaml: 1 node, 4 events")
    assert "shares claim-a on l4 (1 device, 2/2 workers)" in done.stdout


def test_a_worker_takes_turns_against_the_local_agent(plain: Path, tmp_path: Path) -> None:
    """The README's two workers take turns through ``timeslicer --local`` on the plain
    install (no extras): both finish only if the agent started there and served them
    (an agent that stops at once fails the script, its words in the failure)."""
    (_, worker), (_, shell) = [b for b in blocks("Write a worker that takes turns")
                               if b[0] in ("python", "sh")]
    (tmp_path / "worker.py").write_text(worker)
    out = run_shell(shell, tmp_path, _env(plain))
    assert out.count("parked after 200 of 200 steps") == 2, out


def test_the_checkout_is_not_what_runs(plain: Path, tmp_path: Path) -> None:
    done = _run(plain, tmp_path, "python", "-c", "import cli; print(cli.__file__)")
    assert done.returncode == 0 and not done.stdout.startswith(str(ROOT)), done.stdout
