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

Each of those is a table (``MUTATIONS``): rows of the field a refusal should
name and the change, one row drawn per use; a case draws one to three tables.

Pure: no cluster, no I/O.
"""

from __future__ import annotations

import dataclasses
import random
import string
from collections.abc import Callable, Iterator
from typing import Any

from hack.lib.names import API_VERSION, KIND, template_name

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


# A change: makes ``body`` hostile in one way, drawing from ``rng`` (and maybe using the
# case's tag), and says how. A mutation is a table of (the field a refusal should name,
# change) rows; one row is drawn per use (a one-row table draws nothing).
Change = Callable[[random.Random, Body, str], str]
Mutation = tuple[tuple[str, Change], ...]


def _set(*path: str, to: Callable[[random.Random, str], Any],
         what: str | Callable[[Any], str]) -> Change:
    """The change that sets ``body[path...]`` (making the dicts on the way) to ``to(rng, tag)``."""
    *parents, key = path

    def change(rng: random.Random, body: Body, tag: str) -> str:
        target = body
        for parent in parents:
            target = target.setdefault(parent, {})
        target[key] = value = to(rng, tag)
        return what(value) if callable(what) else what

    return change


def _name_253(rng: random.Random, tag: str) -> str:
    name = _dns_name(rng, 253 - len(tag) - 1) + "-" + tag
    return name[-253:].lstrip(".-") if len(name) > 253 else name


def _identity(field: str) -> Change:
    def change(rng: random.Random, body: Body, _tag: str) -> str:
        length = rng.choice((1, 7, 100, 1023, 1024, 1025, 4096))
        text = _text(rng, length)
        if rng.random() < 0.3:
            text = ("x" * length) if length else ""
        body["spec"][field] = text
        size = "over" if len(text) > 1024 else "within"
        return f"{field}: Unicode/control characters, {size} 1024"

    return change


def _drop_required(rng: random.Random, body: Body, _tag: str) -> str:
    del body["spec"][rng.choice(["role", "modelId", "memory"])]
    return "a required field missing"


def _rows(field: str, *changes: Change) -> Mutation:
    return tuple((field, change) for change in changes)


NAME = ("metadata", "name")
ENV = ("spec", "container", "env")
ARGS = ("spec", "container", "args")
COMMAND = ("spec", "container", "command")
IMAGE = ("spec", "container", "image")

M_NAME = _rows(
    "metadata.name",
    _set(*NAME, to=_name_253, what="name of 253 characters"),
    _set(*NAME, to=lambda _r, tag: tag + "-" + "a" * (254 - len(tag) - 1),
         what="name of 254 characters"),
    _set(*NAME, to=lambda _r, tag: f"{tag}-" + ".".join(["b" * 63] * 3),
         what="name with 63-character segments"),
    _set(*NAME, to=lambda _r, tag: f"{tag}-UPPER", what="upper-case name"),
    _set(*NAME, to=lambda r, tag: f"{tag}-{r.choice(UNICODE)}", what="Unicode name"),
    _set(*NAME, to=lambda r, tag: f"{tag}-{r.choice(CONTROL)}",
         what="control characters in the name"),
)
M_IDENTITY = (("spec.ownerId", _identity("ownerId")), ("spec.modelId", _identity("modelId")))
M_MEMORY = _rows("spec.memory", _set("spec", "memory", to=lambda r, _t: r.choice(MEMORY),
                                     what=lambda v: f"memory {v!r}"[:60]))
M_ENV = _rows(
    "spec.container.env",
    _set(*ENV, to=lambda r, _t: [{"name": f"V{i}", "value": str(i)}
                                 for i in range(r.choice((1000, 3000, 5000)))],
         what=lambda env: f"{len(env)} env entries"),
    _set(*ENV, to=lambda r, _t: [{"name": r.choice(["A B", "1X", "é", "a=b", "-", "."]),
                                  "value": "v"}], what="odd env name"),
    _set(*ENV, to=lambda r, _t: [{"name": "NUL", "value": "a\x00b" + _text(r, 20)}],
         what="env value with NUL"),
    _set(*ENV, to=lambda _r, _t: [{"name": "DUP", "value": "1"}, {"name": "DUP", "value": "2"}],
         what="duplicate env names"),
    _set(*ENV, to=lambda _r, _t: [{"name": "OPEN_RL_TIME_SLICE_GROUP", "value": "mine"}],
         what="placement-owned env var"),
    _set(*ENV, to=lambda _r, _t: [{"name": "S", "valueFrom": {"secretKeyRef": {
        "name": "anything", "key": "k"}}}], what="env from a Secret"),
)
M_ARGS = _rows(
    "spec.container.args",
    _set(*ARGS, to=lambda _r, _t: ["--x=\x00", "\x00"], what="args holding NUL"),
    _set(*ARGS, to=lambda r, _t: [f"--a{i}" for i in range(r.choice((1000, 4000)))],
         what=lambda args: f"{len(args)} args"),
    _set(*COMMAND, to=lambda _r, _t: [], what="empty command"),
    _set(*ARGS, to=lambda r, _t: [_text(r, 100_000)], what="one 100k-character arg"),
    _set(*COMMAND, to=lambda r, _t: [r.choice(UNICODE), r.choice(CONTROL)],
         what="Unicode and control characters in the command"),
)
M_IMAGE = _rows(
    "spec.container.image",
    _set(*IMAGE, to=lambda _r, _t: "", what="empty image"),
    _set(*IMAGE, to=lambda r, _t: r.choice(UNICODE) + ":" + r.choice(CONTROL),
         what="Unicode image"),
    _set("spec", "container", "securityContext", to=lambda _r, _t: {"privileged": True},
         what="a securityContext in the overlay"),
    _set(*IMAGE, to=lambda _r, _t: "registry.example/" + "i" * 5000,
         what="5000-character image"),
)
M_OTHER: Mutation = (
    ("spec.role", _set("spec", "role", to=lambda r, _t: r.choice(
        ["admin", "Trainer", "", "trainer\x00"]), what=lambda v: f"role {v!r}")),
    ("spec.podTemplate", _set("spec", "podTemplate", to=lambda r, _t: {"name": r.choice(
        ["missing", "模板", "a" * 253, "x\x00"])}, what="odd or missing template")),
    ("spec.podTemplate", _set("spec", "podTemplate", to=lambda r, _t: {
        "name": template_name("trainer"), "key": r.choice(["nope.yaml", "", "k" * 254])},
        what="odd template key")),
    ("spec.estimatorVersion", _set("spec", "estimatorVersion",
                                   to=lambda r, _t: "v" * r.choice((256, 257)),
                                   what="estimator version at 256/257")),
    ("spec", _set("spec", "unknownField", to=lambda _r, _t: {"a": 1},
                  what="a field the schema does not have")),
    ("spec", _drop_required),
)

# Memory twice: its edges are the most numerous.
MUTATIONS: tuple[Mutation, ...] = (M_NAME, M_IDENTITY, M_MEMORY, M_MEMORY, M_ENV, M_ARGS,
                                   M_IMAGE, M_OTHER)


def mutate(mutation: Mutation, rng: random.Random, body: Body, tag: str) -> tuple[str, str]:
    """One row of ``mutation`` applied to ``body``: (the field it changed, how)."""
    field, change = mutation[rng.randrange(len(mutation))] if len(mutation) > 1 else mutation[0]
    return field, change(rng, body, tag)


def generate(seed: int, count: int, *, plain_share: float = 0.2) -> Iterator[Case]:
    """``count`` cases; about ``plain_share`` of them unchanged workers (placed as usual)."""
    rng = random.Random(seed)
    for i in range(count):
        tag = f"fz{seed}-{i}"
        body: Body = {"apiVersion": API_VERSION, "kind": KIND,
                      "metadata": {"name": tag},
                      "spec": {"role": rng.choice(["trainer", "sampler"]), "modelId": "m",
                               "memory": rng.choice(["10Gi", "40Gi", "80Gi"])}}
        fields: list[str] = []
        what: list[str] = []
        if rng.random() >= plain_share:
            for mutation in rng.sample(MUTATIONS, rng.choice((1, 1, 2, 3))):
                field, description = mutate(mutation, rng, body, tag)
                fields.append(field)
                what.append(description)
        yield Case(body["metadata"]["name"], body, tuple(fields), tuple(what))
