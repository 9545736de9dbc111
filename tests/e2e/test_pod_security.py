"""The scheduler's Pod Security check against the real API server's admission, case by case.

The namespace starts with no Pod Security labels, as one made by hand is:
each template that breaks a control fails its worker before any pod exists,
the scheduler holding baseline, then restricted. Then the namespace is
labelled ``enforce`` at each level and admission is asked about every case's
pod (a server-side dry-run create): it must never refuse a pod the scheduler
allows, or workers would fail late. The table is printed (-rA shows it).
"""

from __future__ import annotations

from typing import Any

import yaml
from controller_fixtures import Env, crd, gpu_nodes, orw  # noqa: F401
from kubernetes import client

from tests.unit.controller.test_pod_security import CASES, REFUSED, Case, answer


def _slug(case: Case) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in case.name.lower())[:40].strip("-")


def _template(env: Env, name: str, pod: dict[str, Any]) -> None:
    env.core.create_namespaced_config_map(env.namespace, {
        "metadata": {"name": name, "labels": {"openrl.io/pod-template": "true"}},
        "data": {"pod.yaml": yaml.safe_dump(pod)}})


def _scheduler_refuses(env: Env, level: str, cases: list[Case]) -> dict[str, str]:
    env.start(template_pod_security=level)
    names = {}
    for case in cases:
        name = f"{level[0]}-{_slug(case)}"
        _template(env, name, case.pod("refused"))
        env.create_worker(name, podTemplate={"name": name})
        names[case.name] = name
    reasons = {case: env.wait_phase(name, "Failed", timeout=60)["reason"]
               for case, name in names.items()}
    env.stop()
    return reasons


def _admission(env: Env, level: str, pod: dict[str, Any], name: str) -> str:
    env.core.patch_namespace(env.namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "latest"}}})
    body = {**pod, "metadata": {**pod.get("metadata", {}), "name": name}}
    try:
        env.core.create_namespaced_pod(env.namespace, body, dry_run="All")
    except client.ApiException as e:
        return "refused" if "PodSecurity" in (e.body or "") else f"invalid ({e.status})"
    return "allowed"


def test_admission_never_refuses_what_the_scheduler_allows(orw: Env) -> None:  # noqa: F811
    baseline = _scheduler_refuses(orw, "baseline", [c for c in REFUSED if c.level == "baseline"])
    restricted = _scheduler_refuses(orw, "restricted", REFUSED)
    assert orw.core.list_namespaced_pod(orw.namespace).items == []
    assert not orw.claims()
    for reasons in (baseline, restricted):
        for reason in reasons.values():
            assert reason.startswith("TemplateError: ") and "--template-allow" in reason

    rows, disagreements = [], []
    for case in CASES:
        for form in ("refused", "allowed") if case.refused else ("allowed",):
            pod = case.pod(form)
            for level in ("baseline", "restricted"):
                ours = "allowed" if answer(pod, level) is None else "refused"
                theirs = _admission(orw, level, pod, f"{_slug(case)}-{form[0]}")
                rows.append((case.control, case.name, form, level, ours, theirs))
                if ours == "allowed" and theirs != "allowed":
                    disagreements.append(rows[-1])
    print(f"\n{'control':<26}{'case':<40}{'form':<9}{'level':<12}{'scheduler':<11}admission")
    for row in rows:
        print("".join(f"{cell:<{width}}" for cell, width in zip(row, (26, 40, 9, 12, 11, 0),
                                                                 strict=True)))
    for level, reasons in (("baseline", baseline), ("restricted", restricted)):
        for name, reason in reasons.items():
            print(f"no labels, {level}: {name}: {reason.split(': ', 3)[-1][:110]}")
    assert not disagreements, disagreements
