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

from tests.unit.controller.reconcile.test_pod_security import CASES, REFUSED, Case, answer


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


def _admission(env: Env, pod: dict[str, Any], name: str) -> str:
    body = {**pod, "metadata": {**pod.get("metadata", {}), "name": name}}
    try:
        env.core.create_namespaced_pod(env.namespace, body, dry_run="All")
    except client.ApiException as e:
        return "refused" if "PodSecurity" in (e.body or "") else f"invalid ({e.status})"
    return "allowed"


def _enforce(env: Env, level: str) -> None:
    """Label the namespace, then wait until admission reads the label (it reads a cache)."""
    env.core.patch_namespace(env.namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "latest"}}})
    root = next(c for c in CASES if c.control == "runAsUser").pod("refused")
    want = "refused" if level == "restricted" else "allowed"
    env.cluster.wait_for(lambda: _admission(env, root, "probe") == want, timeout=30,
                         what=f"admission to enforce {level}")


def test_admission_never_refuses_what_the_scheduler_allows(orw: Env) -> None:  # noqa: F811
    baseline = _scheduler_refuses(orw, "baseline", [c for c in REFUSED if c.level == "baseline"])
    restricted = _scheduler_refuses(orw, "restricted", REFUSED)
    assert orw.core.list_namespaced_pod(orw.namespace).items == []
    assert not orw.claims()
    for reasons in (baseline, restricted):
        for reason in reasons.values():
            assert reason.startswith("TemplateError: ") and "--template-allow" in reason

    forms = [(case, form) for case in CASES
             for form in (("refused", "allowed") if case.refused else ("allowed",))]
    answers: dict[tuple[str, str, str], tuple[str, str]] = {}
    for level in ("baseline", "restricted"):
        _enforce(orw, level)
        for case, form in forms:
            pod = case.pod(form)
            ours = "allowed" if answer(pod, level) is None else "refused"
            answers[case.name, form, level] = (
                ours, _admission(orw, pod, f"{_slug(case)}-{form[0]}"))
    widths = (26, 42, 9, 11, 14, 11, 0)
    print("\n" + "".join(f"{h:<{w}}" for h, w in zip(
        ("control", "case", "form", "baseline:", "", "restricted:", ""), widths, strict=True)))
    print("".join(f"{h:<{w}}" for h, w in zip(
        ("", "", "", "scheduler", "admission", "scheduler", "admission"), widths, strict=True)))
    for case, form in forms:
        cells = (case.control, case.name, form, *answers[case.name, form, "baseline"],
                 *answers[case.name, form, "restricted"])
        print("".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True)))
    for level, reasons in (("baseline", baseline), ("restricted", restricted)):
        for name, reason in reasons.items():
            print(f"no labels, {level}: {name}: {reason.split(': ', 3)[-1][:110]}")
    assert orw.core.list_namespaced_pod(orw.namespace).items == []
    disagreements = [key for key, (ours, theirs) in answers.items()
                     if ours == "allowed" and theirs != "allowed"]
    assert not disagreements, disagreements
