"""Any document at all: the reader runs it, or refuses it in one line. Nothing else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from tests.strategies import near_valid_documents, scenario_documents


def _as_yaml(document: object) -> str | None:
    try:
        return yaml.safe_dump(document, allow_unicode=True)
    except (yaml.YAMLError, UnicodeError, ValueError):
        return None  # a lone surrogate has no YAML spelling: the JSON run covers it


def _check(text: str, suffix: str, output: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"scenario{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        result = CliRunner().invoke(main, ["simulate", str(path), "--output", output])
    if result.exit_code in (0, 1):  # ran; 1 = an expectation did not hold
        # A run may warn (a size under 1Mi, say): one line each, naming the file.
        for line in result.stderr.splitlines():
            assert line.startswith(f"warning: {path}: "), result.stderr[:2000]
        return
    assert result.exit_code == 2, (result.exit_code, result.exception, text[:500])
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[:2000]
    assert lines[0].startswith(str(path) + ": ")
    assert lines[0].isprintable() and len(lines[0]) <= 1000, lines[0][:2000]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=st.one_of(scenario_documents(), near_valid_documents()),
       output=st.sampled_from(["table", "json"]), suffix=st.sampled_from([".json", ".txt"]))
def test_any_json_document_runs_or_is_refused_in_one_line(document: object, output: str,
                                                          suffix: str) -> None:
    _check(json.dumps(document), suffix, output)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=st.one_of(scenario_documents(), near_valid_documents()),
       output=st.sampled_from(["table", "json"]))
def test_any_yaml_document_runs_or_is_refused_in_one_line(document: object,
                                                          output: str) -> None:
    text = _as_yaml(document)
    if text is not None:
        _check(text, ".yaml", output)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=st.sampled_from(list("{}[]:,-&*<!|>'\"\n #0123456789aZ.e\\")),
                    max_size=60),
       output=st.sampled_from(["table", "json"]))
def test_any_text_runs_or_is_refused_in_one_line(text: str, output: str) -> None:
    _check(text, ".yaml", output)
