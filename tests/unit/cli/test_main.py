"""The front door on a plain install: the listing and every --help work without the extras.

The extras are blocked the way a plain install lacks them: each module set to
``None`` in ``sys.modules`` before anything is imported, so importing it fails
as if it were not installed. The CLI then runs as the console script does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli.kubectl import plugin
from cli.main import Commands, main
from cli.options import EXIT_OUT_OF_MEMORY
from tests.unit.cli.conftest import Run, devbox

TWO = ("arrive: {name: a, role: trainer, memory: 10Gi}",
       "arrive: {name: b, role: trainer, memory: 10Gi}")

# What the extras bring: controller (the Kubernetes client, metrics, the cache's records,
# CEL) and report (matplotlib).
EXTRAS = ("kubernetes", "prometheus_client", "msgspec", "cel", "common_expression_language",
          "matplotlib")


def plain(entry: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``entry``'s ``main`` run with ``argv`` in a fresh interpreter without the extras."""
    probe = (f"import sys\nfor m in {EXTRAS!r}: sys.modules[m] = None\n"
             f"sys.argv = ['prog', *{list(argv)!r}]\nfrom {entry} import main\nmain()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=60)


def listed(help_text: str) -> list[str]:
    commands = help_text.split("Commands:", 1)[1]
    return [line.split()[0] for line in commands.splitlines()
            if line.startswith("  ") and not line.startswith("   ")]


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"]])
def test_the_listing_works_without_any_extra(argv: list[str]) -> None:
    done = plain("cli.main", *argv)
    assert done.returncode == 0, done.stderr
    assert listed(done.stdout) == ["compare", "controller", "explain", "simulate", "snapshot",
                                   "timeslicer"]
    assert "Traceback" not in done.stderr


def test_the_kubectl_plugin_lists_its_commands_without_any_extra() -> None:
    done = plain("cli.kubectl", "--help")
    assert done.returncode == 0, done.stderr
    assert listed(done.stdout) == ["explain", "snapshot"]


@pytest.mark.parametrize("command", ["compare", "controller", "explain", "simulate",
                                     "snapshot", "timeslicer"])
def test_every_command_answers_help_without_any_extra(command: str) -> None:
    done = plain("cli.main", command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: prog {command}")
    if command in Commands.extra:
        extra = Commands.extra_name.get(command, command)
        # Unless the command no longer needs the extra, its help says what to install.
        said = " ".join(done.stdout.split())
        if "needs the" in said:
            assert f"pip install 'openrl-place[{extra}]'" in said
            assert f"pip install '.[{extra}]'" in said


def test_running_a_command_without_its_extra_says_which_and_how() -> None:
    done = plain("cli.main", "snapshot", "-o", "json")
    assert done.returncode == 2
    assert "openrl-place snapshot needs the controller extra (kubernetes" in done.stderr
    assert "pip install 'openrl-place[controller]'" in done.stderr
    assert "(in a clone of the repository: pip install '.[controller]')" in done.stderr
    assert "Traceback" not in done.stderr


def test_listing_imports_no_lazy_command() -> None:
    probe = ("import sys\nfrom click.testing import CliRunner\nfrom cli.main import main\n"
             "CliRunner().invoke(main, ['--help'])\n"
             "print(sorted(m for m in ('cli.compare', 'cli.snapshot', 'cli.explain', "
             "'cli.timeslicer', 'controller.main', 'kubernetes') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("group", [main, plugin], ids=["openrl-place", "kubectl-openrl"])
def test_each_summary_is_the_commands_own_short_help(group: Commands) -> None:
    # With the extras installed (the test environment has them) every command loads.
    context = click.Context(group)
    for name in group.lazy:
        command = group.get_command(context, name)
        assert command is not None
        own = command.get_short_help_str(1000).replace("``", "")
        assert group.summaries[name] == own, name


# ------------------------------------------------------------- what simulate refuses or warns


def test_a_report_name_with_another_suffix_is_refused(run: Run, tmp_path: Path) -> None:
    picture = tmp_path / "day.png"
    result = run(devbox(*TWO), "--report", str(picture))
    assert result.exit_code == 2
    assert "day.png: the name must end in .html, .htm or .svg" in result.stderr
    assert not picture.exists()


def test_a_memory_without_a_unit_is_warned_about(run: Run) -> None:
    result = run(devbox("arrive: {name: a, role: trainer, memory: 10}"))
    assert result.exit_code == 0
    assert ("warning: " in result.stderr and "events[0].arrive.memory is under 1Mi: a size "
            "without a unit is bytes" in result.stderr)
    assert "warning" not in run(devbox(*TWO)).stderr


def test_many_small_memories_are_warned_about_once_each_up_to_three(run: Run) -> None:
    arrivals = [f"arrive: {{name: w{i}, role: trainer, memory: 512Ki}}" for i in range(5)]
    warnings = [line for line in run(devbox(*arrivals)).stderr.splitlines()
                if line.startswith("warning")]
    assert len(warnings) == 3 and warnings[-1].endswith("(and 2 more)")


def test_a_tab_in_yaml_is_named_with_its_line_and_column(run: Run) -> None:
    result = run("nodes:\n  - name: a\n  \tdevices: 1\n")
    assert result.exit_code == 2
    assert "line 3, column 3: not valid YAML: a tab character" in result.stderr


def test_running_out_of_memory_is_one_line_and_status_3(tmp_path: Path) -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to size the memory limit")
    scenario = tmp_path / "big.yaml"
    scenario.write_text(devbox(*(f"arrive: {{name: w{i}, role: trainer, memory: 10Gi}}"
                                 for i in range(40_000))))
    # Everything imported first, then at most 100 MiB more: YAML needs far more for 2 MB.
    probe = (
        "import resource, sys\n"
        "import cli.document, cli.main\n"
        "cli.document._strict_loader()\n"
        "vm = [l for l in open('/proc/self/status') if l.startswith('VmSize')][0]\n"
        "limit = int(vm.split()[1]) * 1024 + 100 * 2**20\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))\n"
        f"sys.argv = ['openrl-place', 'simulate', {str(scenario)!r}]\n"
        "cli.main.main()\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == EXIT_OUT_OF_MEMORY == 3
    assert done.stderr.startswith(f"{scenario}: out of memory")
    assert len(done.stderr.splitlines()) == 1


def test_one_node_is_one_node(run: Run) -> None:
    result = run("nodes: [{name: a, devices: 1, deviceMemory: 1Gi}]\nevents: []\n")
    assert "scenario.yaml: 1 node, 0 events" in result.stdout


def test_no_command_module_imports_the_entry_point() -> None:
    # The entry point loads commands lazily; one importing it back would make a circle.
    import ast

    folder = Path(__file__).resolve().parents[3] / "cli"
    importers = sorted(path.name for path in folder.glob("*.py")
                       for node in ast.walk(ast.parse(path.read_text()))
                       if isinstance(node, ast.ImportFrom) and node.module == "cli.main")
    assert importers == ["kubectl.py"]  # the plugin is an entry point of its own
