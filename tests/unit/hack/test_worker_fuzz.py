"""The fuzz generator: seeded, and it reaches every edge it promises."""

from __future__ import annotations

import functools
import json
from typing import Any

from hack.lib import worker_fuzz as fuzz


@functools.cache
def cases() -> list[Any]:
    return list(fuzz.generate(1, 1500))


def test_the_same_seed_gives_the_same_workers() -> None:
    one = [json.dumps(c.body, sort_keys=True) for c in fuzz.generate(7, 100)]
    two = [json.dumps(c.body, sort_keys=True) for c in fuzz.generate(7, 100)]
    assert one == two
    assert one != [json.dumps(c.body, sort_keys=True) for c in fuzz.generate(8, 100)]


def test_the_edges_are_reached() -> None:
    names = [c.body["metadata"]["name"] for c in cases()]
    assert len(set(names)) == len(names)  # every case its own object
    assert 253 in {len(n) for n in names} and 254 in {len(n) for n in names}
    memories = {str(c.body["spec"].get("memory")) for c in cases()}
    assert {"1e400", "0.5", "1Ei", "999999999999Ti"} <= memories
    envs = [len(c.body["spec"].get("container", {}).get("env", [])) for c in cases()]
    assert max(envs) >= 3000
    args = [a for c in cases() for a in c.body["spec"].get("container", {}).get("args", [])]
    assert any("\x00" in a for a in args)
    owners = [c.body["spec"].get("ownerId", "") for c in cases()]
    assert any(any(ord(ch) < 32 for ch in o) for o in owners)
    assert any(any(ord(ch) > 0xFFFF for ch in o) for o in owners + names)
    assert 0.1 < sum(1 for c in cases() if not c.fields) / len(cases()) < 0.3
    assert all(len(c.fields) == len(c.what) for c in cases())


def test_a_body_stays_under_the_api_servers_limits() -> None:
    biggest = max(len(json.dumps(c.body)) for c in cases())
    assert biggest < 1_000_000  # etcd takes 1.5 MB: a refusal must be the schema's


def test_every_row_of_every_table_changes_the_field_it_names() -> None:
    import copy
    import random

    plain = {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
             "metadata": {"name": "fz-row"},
             "spec": {"role": "trainer", "modelId": "m", "memory": "10Gi"}}
    for mutation in fuzz.MUTATIONS:
        for field, change in mutation:
            body = copy.deepcopy(plain)
            what = change(random.Random(3), body, "fz-row")
            assert what and body != plain, (field, what)
            # The change is under the field it names (two levels down at most: the
            # args row that empties the command names spec.container.args).
            path = field.split(".")[:2]
            assert dig(body, path) != dig(plain, path), (field, what)


def dig(body: Any, path: list[str]) -> Any:
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body
