"""The Pod Security Standards, held by the scheduler itself: a template's pod, control by control.

Rules:

* The scheduler creates worker pods with its own rights, and the namespace's
  Pod Security labels may be missing (a namespace made by hand or by GitOps has
  none). So every template is held to a level here, whatever the namespace
  says: ``baseline`` by default, ``restricted`` when the operator asks.
* The levels are data: ``CONTROLS`` lists each control once, with the level
  that introduces it, the name an operator allows it by (``--template-allow
  TEMPLATE=NAME``) and a finder that yields every offending field. A level
  holds its own controls and those of every lower level.
* Baseline: host namespaces, privileged containers, capabilities added beyond
  the runtime's default set, hostPath volumes, host ports, AppArmor other than
  the runtime's default or a node-local profile (annotations and fields), an
  SELinux type outside the container types or any SELinux user or role, a
  ``/proc`` mount other than the default (unless the pod has its own user
  namespace, ``hostUsers: false``), seccomp ``Unconfined``, sysctls
  outside the namespaced safe set, Windows host-process containers.
* Restricted adds: volume types beyond the ones that only project API data or
  claimed storage, privilege escalation left possible, running as root (no
  ``runAsNonRoot`` or ``runAsUser: 0``), no seccomp profile, capabilities not
  dropped to nothing (only ``NET_BIND_SERVICE`` added back), and a ``/proc``
  mount other than the default even in a user namespace.
* Every container kind is checked: ``initContainers``, ``containers`` and
  ``ephemeralContainers``. Values are matched as admission matches them
  (capability names exactly as written).
* Answers are values: the first refusal ``(field, message)``, or None. The
  message says what is wrong and how to fix it; the caller adds how an
  operator allows it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import attrs

__all__ = [
    "BASELINE_CAPABILITIES", "CONTROLS", "LEVELS", "SAFE_SYSCTLS", "Control", "violations",
]

Obj = dict[str, Any]
Finding = tuple[str, str]  # (field below the source, what is wrong and the fix)

LEVELS = ("baseline", "restricted")
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
# What container runtimes grant a container that asks for nothing, and so what baseline
# lets a container add back after dropping them.
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
# Sysctls namespaced to the pod and isolated from the node's other pods (the latest
# baseline's list; older API servers admit a prefix of it).
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
})
SELINUX_TYPES = frozenset({"container_t", "container_init_t", "container_kvm_t",
                           "container_engine_t"})
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})
# Volumes that carry API data, scratch space or storage the cluster's admin set up.
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                "persistentVolumeClaim", "projected", "secret"})


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@attrs.frozen
class Pod:
    """A template's pod, read defensively (a malformed part reads as absent)."""

    metadata: Obj
    spec: Obj

    @property
    def context(self) -> Obj:
        return _dict(self.spec.get("securityContext"))

    def containers(self) -> Iterator[tuple[str, Obj, Obj]]:
        """``(field, container, its securityContext)`` for every container of every kind."""
        for group in CONTAINER_GROUPS:
            for container in _list(self.spec.get(group)):
                if isinstance(container, dict):
                    yield (f"spec.{group}[{container.get('name', '?')}]", container,
                           _dict(container.get("securityContext")))

    def contexts(self) -> Iterator[tuple[str, Obj]]:
        """The pod's securityContext, then each container's, with their fields."""
        yield "spec.securityContext", self.context
        for where, _container, context in self.containers():
            yield f"{where}.securityContext", context


@attrs.frozen
class Control:
    """One control: who introduces it, how an operator allows it, what breaks it."""

    name: str
    level: str
    find: Callable[[Pod], Iterator[Finding]]


# ------------------------------------------------------------------ baseline


def _host_namespaces(pod: Pod, field: str) -> Iterator[Finding]:
    if pod.spec.get(field):
        yield f"spec.{field}", "shares the node's namespace with the worker; remove it"


def _privileged(pod: Pod) -> Iterator[Finding]:
    for where, _c, context in pod.containers():
        if context.get("privileged"):
            yield (f"{where}.securityContext.privileged",
                   "a privileged container owns the node; remove it")


def _added(context: Obj) -> list[str]:
    return [str(c) for c in _list(_dict(context.get("capabilities")).get("add"))]


def _capabilities(pod: Pod) -> Iterator[Finding]:
    for where, _c, context in pod.containers():
        extra = sorted(set(_added(context)) - BASELINE_CAPABILITIES)
        if extra:
            yield (f"{where}.securityContext.capabilities.add",
                   f"adds {', '.join(extra)} beyond the runtime's defaults; remove them"
                   + _spelling(extra))


def _spelling(names: list[str]) -> str:
    # Admission matches names as written, so a default one spelt otherwise is refused too.
    if any(n.upper().removeprefix("CAP_") in BASELINE_CAPABILITIES for n in names):
        return " (capability names are written in upper case without CAP_, e.g. CHOWN)"
    return ""


def _host_path(pod: Pod) -> Iterator[Finding]:
    for volume in _list(pod.spec.get("volumes")):
        if isinstance(volume, dict) and volume.get("hostPath"):
            yield (f"spec.volumes[{volume.get('name', '?')}].hostPath",
                   "mounts the node's filesystem; use another volume type")


def _host_ports(pod: Pod) -> Iterator[Finding]:
    for where, container, _context in pod.containers():
        for i, port in enumerate(_list(container.get("ports"))):
            if isinstance(port, dict) and port.get("hostPort"):
                yield (f"{where}.ports[{port.get('name') or i}].hostPort",
                       f"binds port {port['hostPort']} on the node's own addresses; "
                       "remove hostPort (a Service reaches the pod)")


def _app_armor(pod: Pod) -> Iterator[Finding]:
    for key, value in sorted(_dict(pod.metadata.get("annotations")).items()):
        if str(key).startswith(APPARMOR_ANNOTATION) and not (
                value == "runtime/default" or str(value).startswith("localhost/")):
            yield (f"metadata.annotations[{key}]",
                   f"AppArmor {value!r} lifts the container's confinement; use "
                   "runtime/default or localhost/PROFILE")
    for where, context in pod.contexts():
        kind = _dict(context.get("appArmorProfile")).get("type")
        if kind is not None and kind not in APPARMOR_TYPES:
            yield (f"{where}.appArmorProfile.type",
                   f"AppArmor {kind!r} lifts the confinement; use RuntimeDefault or Localhost")


def _se_linux(pod: Pod) -> Iterator[Finding]:
    for where, context in pod.contexts():
        options = _dict(context.get("seLinuxOptions"))
        kind = options.get("type")
        if kind and kind not in SELINUX_TYPES:
            yield (f"{where}.seLinuxOptions.type",
                   f"SELinux type {kind!r} is not a container type; use one of "
                   f"{', '.join(sorted(SELINUX_TYPES))} or leave it unset")
        for part in ("user", "role"):
            if options.get(part):
                yield (f"{where}.seLinuxOptions.{part}",
                       f"an SELinux {part} changes who the container is to the node's "
                       "policy; leave it unset")


def _proc_mount(pod: Pod, *, strict: bool) -> Iterator[Finding]:
    # In its own user namespace (hostUsers: false) an unmasked /proc is the pod's, not the
    # node's: baseline lets it be; restricted does not.
    if pod.spec.get("hostUsers") is False and not strict:
        return
    for where, _c, context in pod.containers():
        mount = context.get("procMount")
        if mount is not None and mount != "Default":
            yield (f"{where}.securityContext.procMount",
                   f"/proc mount {mount!r} unmasks the node's /proc; use Default"
                   + ("" if strict else " (or hostUsers: false)"))


def _seccomp_type(context: Obj) -> Any:
    return _dict(context.get("seccompProfile")).get("type")


def _seccomp(pod: Pod) -> Iterator[Finding]:
    for where, context in pod.contexts():
        if _seccomp_type(context) == "Unconfined":
            yield (f"{where}.seccompProfile.type",
                   "Unconfined lets the container make every system call; use "
                   "RuntimeDefault or Localhost")


def _sysctls(pod: Pod) -> Iterator[Finding]:
    for sysctl in _list(pod.context.get("sysctls")):
        name = _dict(sysctl).get("name")
        if name not in SAFE_SYSCTLS:
            yield (f"spec.securityContext.sysctls[{name}]",
                   "is not namespaced to the pod: it tunes the node for every pod; "
                   f"remove it (safe ones: {', '.join(sorted(SAFE_SYSCTLS))})")


def _host_process(pod: Pod) -> Iterator[Finding]:
    for where, context in pod.contexts():
        if _dict(context.get("windowsOptions")).get("hostProcess"):
            yield (f"{where}.windowsOptions.hostProcess",
                   "a Windows host-process container runs as the node; remove it")


# ---------------------------------------------------------------- restricted


def _volume_types(pod: Pod) -> Iterator[Finding]:
    for volume in _list(pod.spec.get("volumes")):
        if not isinstance(volume, dict):
            continue
        kinds = sorted(set(volume) - {"name"} - RESTRICTED_VOLUMES)
        if kinds and "hostPath" not in kinds:  # hostPath has its own control
            yield (f"spec.volumes[{volume.get('name', '?')}].{kinds[0]}",
                   f"a {kinds[0]} volume is not one restricted allows; use one of "
                   f"{', '.join(sorted(RESTRICTED_VOLUMES))}")


def _escalation(pod: Pod) -> Iterator[Finding]:
    for where, _c, context in pod.containers():
        if context.get("allowPrivilegeEscalation") is not False:
            yield (f"{where}.securityContext.allowPrivilegeEscalation",
                   "a setuid binary could gain privileges; set it to false")


def _non_root(pod: Pod) -> Iterator[Finding]:
    pod_says = pod.context.get("runAsNonRoot")
    for where, _c, context in pod.containers():
        says = context.get("runAsNonRoot")
        if says is False or (says is None and pod_says is not True):
            yield (f"{where}.securityContext.runAsNonRoot",
                   "the container may run as root; set runAsNonRoot: true (pod or container)")
    if pod_says is False:
        yield "spec.securityContext.runAsNonRoot", "lets containers run as root; set it true"


def _root_user(pod: Pod) -> Iterator[Finding]:
    for where, context in pod.contexts():
        if context.get("runAsUser") == 0:
            yield f"{where}.runAsUser", "runs as root (user 0); use a non-zero user"


def _seccomp_required(pod: Pod) -> Iterator[Finding]:
    pod_set = _seccomp_type(pod.context) in SECCOMP_TYPES
    for where, _c, context in pod.containers():
        kind = _seccomp_type(context)
        if kind is None and not pod_set:
            yield (f"{where}.securityContext.seccompProfile.type",
                   "no seccomp profile; set RuntimeDefault or Localhost (pod or container)")
        elif kind is not None and kind not in SECCOMP_TYPES and kind != "Unconfined":
            yield (f"{where}.securityContext.seccompProfile.type",
                   f"seccomp {kind!r} is not a profile; use RuntimeDefault or Localhost")


def _capabilities_dropped(pod: Pod) -> Iterator[Finding]:
    for where, _c, context in pod.containers():
        capabilities = _dict(context.get("capabilities"))
        if "ALL" not in _list(capabilities.get("drop")):
            yield (f"{where}.securityContext.capabilities.drop",
                   "keeps the runtime's default capabilities; drop ALL")
        extra = sorted(set(_added(context)) - RESTRICTED_CAPABILITIES)
        if extra:
            yield (f"{where}.securityContext.capabilities.add",
                   f"adds {', '.join(extra)}; restricted adds back only NET_BIND_SERVICE")


def _host(field: str) -> Callable[[Pod], Iterator[Finding]]:
    def find(pod: Pod) -> Iterator[Finding]:
        return _host_namespaces(pod, field)
    return find


# In the order templates are checked: the first finding is the one reported.
CONTROLS: tuple[Control, ...] = (
    # First: a host-process pod must also be on the host network, so it names its cause.
    Control("hostProcess", "baseline", _host_process),
    *(Control(field, "baseline", _host(field)) for field in HOST_NAMESPACES),
    Control("privileged", "baseline", _privileged),
    Control("capabilities", "baseline", _capabilities),
    Control("hostPath", "baseline", _host_path),
    Control("hostPorts", "baseline", _host_ports),
    Control("appArmor", "baseline", _app_armor),
    Control("seLinux", "baseline", _se_linux),
    Control("procMount", "baseline", functools.partial(_proc_mount, strict=False)),
    Control("seccomp", "baseline", _seccomp),
    Control("sysctls", "baseline", _sysctls),
    Control("volumeTypes", "restricted", _volume_types),
    Control("allowPrivilegeEscalation", "restricted", _escalation),
    Control("runAsNonRoot", "restricted", _non_root),
    Control("runAsUser", "restricted", _root_user),
    Control("seccomp", "restricted", _seccomp_required),
    Control("capabilities", "restricted", _capabilities_dropped),
    Control("procMount", "restricted", functools.partial(_proc_mount, strict=True)),
)


def violations(metadata: Obj, spec: Obj, level: str,
               allowed: frozenset[str]) -> Iterator[tuple[Control, Finding]]:
    """Every finding of ``level``'s controls the operator has not ``allowed``, in order."""
    if level not in LEVELS:
        raise ValueError(f"pod security level {level!r} is not one of {', '.join(LEVELS)}")
    rank = LEVELS.index(level)
    pod = Pod(_dict(metadata), _dict(spec))
    for control in CONTROLS:
        if LEVELS.index(control.level) <= rank and control.name not in allowed:
            for finding in control.find(pod):
                yield control, finding
