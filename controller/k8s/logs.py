"""Structured logs: one line per event, keyed by worker, claim and node.

Rules: callers pass their keys as ``extra={"fields": {...}}`` (``kv(...)``
builds it); ``json`` output is one object per line for log pipelines,
``text`` is ``time level message key=value ...`` for people.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any


def kv(**fields: Any) -> dict[str, Any]:
    return {"fields": {k: v for k, v in fields.items() if v not in (None, "")}}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return dict(getattr(record, "fields", None) or {})


def _when(record: logging.LogRecord) -> str:
    return dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _when(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{k}={_quote(v)}" for k, v in _fields(record).items())
        line = f"{_when(record)} {record.levelname:<7} {record.getMessage()}"
        if pairs:
            line += " " + pairs
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or '"' in text or not text) else text


def configure(fmt: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The HTTP client logs every retry at WARNING; our own messages say what failed.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
