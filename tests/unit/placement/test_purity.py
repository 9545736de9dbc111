"""The core must stay importable anywhere: standard library only."""

import subprocess
import sys


def test_importing_placement_loads_no_third_party_module() -> None:
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import placement\n"
        "stdlib = sys.stdlib_module_names\n"
        "loaded = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(m for m in loaded if m not in stdlib and m != 'placement'))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_comes_from_package_metadata() -> None:
    from importlib.metadata import version

    import placement

    assert placement.__version__ == version("openrl-place")
