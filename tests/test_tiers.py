"""The test tiers are what they say: the fast tier builds nothing.

``make test-fast`` runs ``-m "not e2e and not tools"``; a test that builds
Helm, kustomize or promtool must carry the ``tools`` marker, and tests/conftest.py
makes an unmarked one fail before anything is built (docs/testing.md).
"""

from __future__ import annotations

import pytest

from tests import tools


def test_an_unmarked_test_asking_for_a_tool_fails_naming_the_marker() -> None:
    with pytest.raises(AssertionError,
                       match=r"builds helm \(hack/gotool\.sh\): mark it @pytest\.mark\.tools"):
        tools.tool("helm")
    with pytest.raises(AssertionError, match=r"mark it @pytest\.mark\.tools"):
        tools.run("promtool", "--version")
