"""What the fleet's reading warns about, as values: what each is about, and its one sentence.

Rules:

* Both readings (``reader``, ``cache``) say what they could not read, or
  read and left out, as ``FleetWarning`` values, never raised. Where the two
  readings agree their warnings compare equal, field by field.
* A reader of warnings (the controller's log, the metrics, ``snapshot``,
  ``explain``) picks them by ``kind``, ``node`` and ``claim``, never by
  parsing the text. The text is what a person reads: printed and logged as is.
* Every sentence is rendered here (``warning``), from its kind's row: what it
  is about, then what it says before the detail the reading gives::

    kind            about                  the sentence
    --------------  ---------------------  ----------------------------------------------
    CLASS           the DeviceClass        deviceclass <name>: <problem>; it selects no
                                           device
    POOL            a pool                 pool <name>: generation <g> has <n> of <m>
                                           slices; skipped until complete
    SLICE           a slice                slice <name>: no nodeName; skipped
    DEVICES         a node (per reason)    node <name>: <n> devices left out (<names>):
                                           <reason>
    NODE            a node, read anyway    node <name>: <label or allocatable>: <what is
                                           done instead>
    NODE_LEFT_OUT   a node placement is    node <name>: left out of placement: <why>
                    not told of
    MAKE_WAY        a node narrower than   node <name>: left out of placement: claim <c>
                    a claim on it          holds <n> devices, node <name> has <m>
    CLAIM_LEFT_OUT  a claim placement      claim <name>: left out of placement: <why>
                    refused
    UNREAD          what could not be      <what>: <what is assumed instead>
                    listed

* ``node`` is the node a warning is about ('' when it is about none), ``claim``
  the claim it is about or names ('' when none): a node giving way names both.
* Warnings sort by their text.
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["FleetWarning", "Kind", "warning"]


class Kind(enum.Enum):
    CLASS = "class"
    POOL = "pool"
    SLICE = "slice"
    DEVICES = "devices"
    NODE = "node"
    NODE_LEFT_OUT = "node left out"
    MAKE_WAY = "make way"
    CLAIM_LEFT_OUT = "claim left out"
    UNREAD = "unread"


_LEFT_OUT = "left out of placement: "

# Per kind (the table above): the word naming what it is about ('' for none), and what
# the sentence says before the detail.
_SENTENCE: dict[Kind, tuple[str, str]] = {
    Kind.CLASS: ("deviceclass", ""),
    Kind.POOL: ("pool", ""),
    Kind.SLICE: ("slice", ""),
    Kind.DEVICES: ("node", ""),
    Kind.NODE: ("node", ""),
    Kind.NODE_LEFT_OUT: ("node", _LEFT_OUT),
    Kind.MAKE_WAY: ("node", _LEFT_OUT),
    Kind.CLAIM_LEFT_OUT: ("claim", _LEFT_OUT),
    Kind.UNREAD: ("", ""),
}


@attrs.frozen(order=True)
class FleetWarning:
    """One warning of a reading; build it with ``warning``."""

    text: str
    kind: Kind = attrs.field(order=False)
    node: str = attrs.field(default="", order=False)
    claim: str = attrs.field(default="", order=False)

    def __str__(self) -> str:
        return self.text


def warning(kind: Kind, name: str, detail: str, *, claim: str = "") -> FleetWarning:
    """The warning of that kind about ``name`` (the node, claim, pool...; for ``UNREAD``
    what was not listed), saying ``detail``. ``claim``: the claim a node's warning names."""
    about, says = _SENTENCE[kind]
    return FleetWarning(f"{about} {name}: {says}{detail}" if about else f"{name}: {detail}",
                        kind, name if about == "node" else "",
                        name if about == "claim" else claim)
