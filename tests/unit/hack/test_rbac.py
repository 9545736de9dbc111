"""The smoke and stress runs' RBAC verdict: warm-up refusals excused, missing rules caught."""

from __future__ import annotations

from hack.lib import rbac


def metric(verb: str, resource: str, code: int, n: int) -> str:
    return (f'openrl_place_api_requests_total{{code="{code}",resource="{resource}",'
            f'verb="{verb}"}} {n}.0')


def refused(verb: str, resource: str) -> str:
    return ('{"level": "warning", "msg": "watch failed", "error": "403 Forbidden: nodes is '
            f'forbidden: User \\"system:serviceaccount:openrl:open-rl-scheduler\\" cannot {verb} '
            f'resource \\"{resource}\\" in API group \\"\\" at the cluster scope"}}')


def test_refusals_during_the_warm_up_are_excused() -> None:
    metrics = "\n".join([metric("watch", "nodes", 403, 3), metric("watch", "nodes", 200, 5),
                         metric("list", "resourceslices", 403, 1),
                         metric("list", "resourceslices", 200, 9)])
    log = "\n".join([refused("watch", "nodes"), refused("list", "resourceslices")])
    assert rbac.denials(metrics, log) == []


def test_a_missing_rule_is_caught() -> None:
    metrics = "\n".join([metric("patch", "openrlworkers", 200, 4),
                         metric("patch", "openrlworkers/status", 403, 2)])
    log = refused("patch", "openrlworkers/status")
    problems = rbac.denials(metrics, log)
    assert problems[0] == "patch openrlworkers/status: refused 2 time(s), never allowed"
    assert any("cannot patch" in p for p in problems[1:])


def test_without_metrics_every_refusal_counts() -> None:
    assert len(rbac.denials(None, refused("watch", "nodes"))) == 1
    assert rbac.denials(None, '{"msg": "fine"}') == []
