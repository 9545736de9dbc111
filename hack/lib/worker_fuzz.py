"""Seeded hostile OpenRLWorker objects, for hack/fuzz.py.

Each case is an ordinary worker with one to three hostile changes, and says
which fields it changed, so a refusal can be checked for naming one of them.
The same seed gives the same cases. The changes, by field:

* ``metadata.name``: at and past the 253-character limit, with dots and
  63-character segments, upper case, Unicode, control characters.
* ``spec.ownerId`` / ``spec.modelId``: Unicode (combining marks, right-to-left,
  emoji, astral planes), control characters and NUL, at and past 1024.
* ``spec.memory``: at and past the edges -- ``1e400``, ``0.5``, ``1Ei``,
  ``999999999999Ti``, one byte, zero, negatives, integers past 64 bits,
  milli-units, spaces, 64 characters of digits.
* ``spec.container``: thousands of env entries, odd env names, values and args
  holding NUL, duplicate names, a placement-owned variable, empty or Unicode
  images, thousands of args, fields the schema does not have.
* ``spec.podTemplate`` / ``spec.role`` / ``spec.estimatorVersion``: missing
  or odd templates, unknown roles, long versions.

Pure: no cluster, no I/O.
"""

from __future__ import annotations

import dataclasses
import random
import string
from collections.abc import Callable, Iterator
from typing import Any

Body = dict[str, Any]

UNICODE = ["ünïcødé", "\u202eevil\u202c", "e\u0301\u0301\u0301", "模型", "🦙" * 20,
           "\U0001d54f\U0001d55a", "\u200b", "a\u00a0b", "\ufeffbom"]
CONTROL = ["\x00", "\x01", "\x1b[31m", "\r\n", "\t", "\x7f", "a\x00b", "\u0085", "\x08" * 5]
MEMORY = ["1e400", "0.5", "1Ei", "999999999999Ti", "1", "0", "-1Gi", "1e-3", "1m", "0.000001",
          ".5", "+10Gi", "1E3", "8e1", "1.5Gi", "10Gi ", " 10Gi", "10GiB", "1" * 64, "9" * 65,
          "79Gi", "80Gi", "81Gi", "640Gi", "641Gi", "1Ti", "0x10", "NaN", "Inf", "",
          2 ** 63 - 1, 2 ** 63, 2 ** 64 + 1, 10 ** 30, 1, 0, -5, 10 << 30]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    body: Body
    fields: tuple[str, ...]  # the fields this case made hostile, e.g. ("spec.memory",)
    what: tuple[str, ...]  # short descriptions, for the report


def _text(rng: random.Random, length: int) -> str:
    pool = UNICODE + CONTROL + [rng.choice(string.printable) for _ in range(4)]
    out = "".join(rng.choice(pool) for _ in range(max(1, length // 4)))
    return out[:length] if length else out


def _dns_name(rng: random.Random, length: int) -> str:
    segments, left = [], length
    while left > 0:
        size = min(left, rng.choice((1, 5, 63, 63)))
        segments.append("".join(rng.choice(string.ascii_lowercase + string.digits)
                                for _ in range(size)))
        left -= size + 1
    name = ".".join(segments)[:length]
    return name.strip(".-") or "a"


Mutation = Callable[[random.Random, Body, str], tuple[str, str]]


def m_name(rng: random.Random, body: Body, tag: str) -> tuple[str, str]:
    choice = rng.randrange(6)
    if choice == 0:
        name = _dns_name(rng, 253 - len(tag) - 1) + "-" + tag
        name = name[-253:].lstrip(".-") if len(name) > 253 else name
        what = "name of 253 characters"
    elif choice == 1:
        name = tag + "-" + "a" * (254 - len(tag) - 1)
        what = "name of 254 characters"
    elif choice == 2:
        name = f"{tag}-" + ".".join(["b" * 63] * 3)
        what = "name with 63-character segments"
    elif choice == 3:
        name = f"{tag}-UPPER"
        what = "upper-case name"
    elif choice == 4:
        name = f"{tag}-{rng.choice(UNICODE)}"
        what = "Unicode name"
    else:
        name = f"{tag}-{rng.choice(CONTROL)}"
        what = "control characters in the name"
    body["metadata"]["name"] = name
    return "metadata.name", what


def m_identity(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    field = rng.choice(("ownerId", "modelId"))
    length = rng.choice((1, 7, 100, 1023, 1024, 1025, 4096))
    text = _text(rng, length)
    if rng.random() < 0.3:
        text = ("x" * length) if length else ""
    body["spec"][field] = text
    size = "over" if len(text) > 1024 else "within"
    return f"spec.{field}", f"{field}: Unicode/control characters, {size} 1024"


def m_memory(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    value = rng.choice(MEMORY)
    body["spec"]["memory"] = value
    return "spec.memory", f"memory {value!r}"[:60]


def m_env(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    container = body["spec"].setdefault("container", {})
    choice = rng.randrange(6)
    if choice == 0:
        count = rng.choice((1000, 3000, 5000))
        container["env"] = [{"name": f"V{i}", "value": str(i)} for i in range(count)]
        what = f"{count} env entries"
    elif choice == 1:
        container["env"] = [{"name": rng.choice(["A B", "1X", "é", "a=b", "-", "."]),
                             "value": "v"}]
        what = "odd env name"
    elif choice == 2:
        container["env"] = [{"name": "NUL", "value": "a\x00b" + _text(rng, 20)}]
        what = "env value with NUL"
    elif choice == 3:
        container["env"] = [{"name": "DUP", "value": "1"}, {"name": "DUP", "value": "2"}]
        what = "duplicate env names"
    elif choice == 4:
        container["env"] = [{"name": "OPEN_RL_TIME_SLICE_GROUP", "value": "mine"}]
        what = "placement-owned env var"
    else:
        container["env"] = [{"name": "S", "valueFrom": {"secretKeyRef": {
            "name": "anything", "key": "k"}}}]
        what = "env from a Secret"
    return "spec.container.env", what


def m_args(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    container = body["spec"].setdefault("container", {})
    choice = rng.randrange(5)
    if choice == 0:
        container["args"] = ["--x=\x00", "\x00"]
        what = "args holding NUL"
    elif choice == 1:
        container["args"] = [f"--a{i}" for i in range(rng.choice((1000, 4000)))]
        what = f"{len(container['args'])} args"
    elif choice == 2:
        container["command"] = []
        what = "empty command"
    elif choice == 3:
        container["args"] = [_text(rng, 100_000)]
        what = "one 100k-character arg"
    else:
        container["command"] = [rng.choice(UNICODE), rng.choice(CONTROL)]
        what = "Unicode and control characters in the command"
    return "spec.container.args", what


def m_image(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    container = body["spec"].setdefault("container", {})
    choice = rng.randrange(4)
    if choice == 0:
        container["image"] = ""
        what = "empty image"
    elif choice == 1:
        container["image"] = rng.choice(UNICODE) + ":" + rng.choice(CONTROL)
        what = "Unicode image"
    elif choice == 2:
        container["securityContext"] = {"privileged": True}
        what = "a securityContext in the overlay"
    else:
        container["image"] = "registry.example/" + "i" * 5000
        what = "5000-character image"
    return "spec.container.image", what


def m_other(rng: random.Random, body: Body, _tag: str) -> tuple[str, str]:
    choice = rng.randrange(6)
    spec = body["spec"]
    if choice == 0:
        spec["role"] = rng.choice(["admin", "Trainer", "", "trainer\x00"])
        return "spec.role", f"role {spec['role']!r}"
    if choice == 1:
        spec["podTemplate"] = {"name": rng.choice(["missing", "模板", "a" * 253, "x\x00"])}
        return "spec.podTemplate", "odd or missing template"
    if choice == 2:
        spec["podTemplate"] = {"name": "openrl-template-trainer", "key": rng.choice(
            ["nope.yaml", "", "k" * 254])}
        return "spec.podTemplate", "odd template key"
    if choice == 3:
        spec["estimatorVersion"] = "v" * rng.choice((256, 257))
        return "spec.estimatorVersion", "estimator version at 256/257"
    if choice == 4:
        spec["unknownField"] = {"a": 1}
        return "spec", "a field the schema does not have"
    del spec[rng.choice(["role", "modelId", "memory"])]
    return "spec", "a required field missing"


MUTATIONS: tuple[Mutation, ...] = (m_name, m_identity, m_memory, m_memory, m_env, m_args,
                                   m_image, m_other)


def generate(seed: int, count: int, *, plain_share: float = 0.2) -> Iterator[Case]:
    """``count`` cases; about ``plain_share`` of them unchanged workers (placed as usual)."""
    rng = random.Random(seed)
    for i in range(count):
        tag = f"fz{seed}-{i}"
        body: Body = {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
                      "metadata": {"name": tag},
                      "spec": {"role": rng.choice(["trainer", "sampler"]), "modelId": "m",
                               "memory": rng.choice(["10Gi", "40Gi", "80Gi"])}}
        fields: list[str] = []
        what: list[str] = []
        if rng.random() >= plain_share:
            for mutation in rng.sample(MUTATIONS, rng.choice((1, 1, 2, 3))):
                field, description = mutation(rng, body, tag)
                fields.append(field)
                what.append(description)
        yield Case(body["metadata"]["name"], body, tuple(fields), tuple(what))
