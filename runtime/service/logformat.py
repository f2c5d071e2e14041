"""The scheduler's log lines as text or as JSON (`policydsl run --log-format json`).

Log calls name what they are about as fields, `log.warning("bind of %s refused ...", key,
extra={"pod": key, "node": node})`; text lines keep the message alone (it names them already),
a JSON line carries the fields next to it, so a log pipeline can select by pod, PodGroup or
queue without parsing sentences:

    {"time": "2025-01-01T12:00:00.123Z", "level": "WARNING", "logger": "policydsl.kube",
     "message": "bind of ns/p to n1 refused, ...", "pod": "ns/p", "node": "n1"}

Field names used: pod, podgroup, queue, node, namespace (namespace/name keys where namespaced),
failure, cause, seconds, waiting (outage lines, runtime/kube/outages.py), cycle.

A record is one line in either format, whatever the strings in it. Names, queues, parents and
reasons come from cluster objects anyone with create rights writes; a newline in a PodGroup's
`spec.queue` must not print a well-formed fake line. The text format escapes every control
character and Unicode line separator in the rendered message, `repr`-style (`\\n`, `\\x1b`,
`\\u2028`), and indents a traceback's lines, so a line that starts at column 0 always starts a
record; JSON escapes them already (`json.dumps`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Everything a LogRecord has before `extra` is merged in: what is left over are the fields.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


# C0 and C1 controls (newline, carriage return, ESC for terminal codes, NEL) and the Unicode
# line and paragraph separators: what a terminal, `str.splitlines` or a log shipper may break on.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def escape(text: str) -> str:
    """`text` on one line: each control character and line separator as its `repr` escape."""
    return _UNSAFE.sub(_escape_char, text)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT with the message escaped (`escape`) and a traceback's or stack's lines
    indented by two spaces and escaped, so one record never forges another."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        extra = []
        if record.exc_info:
            extra.append(self.formatException(record.exc_info))
        elif record.exc_text:
            extra.append(record.exc_text)
        if record.stack_info:
            extra.append(self.formatStack(record.stack_info))
        for block in extra:
            line += "".join("\n  " + escape(part) for part in block.rstrip("\n").split("\n"))
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ms), level, logger, message, the record's fields,
    and the traceback as `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = dt.datetime.fromtimestamp(record.created, dt.timezone.utc)
        line: dict[str, object] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def configure(level: str, log_format: str, stream=None) -> None:
    """The root logger's one handler, on stderr: `log_format` one of FORMATS (the CLI checked)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
