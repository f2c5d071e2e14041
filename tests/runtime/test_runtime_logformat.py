"""Log lines cannot be forged: a newline or other control character in a string from a cluster
object (a PodGroup's spec.queue, a Queue's spec.parent, a name, a reason) stays inside its record
in the text format and in JSON (runtime/service/logformat.py)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from runtime.service.logformat import configure, escape

FORGED = "team-a\n2026-12-01 00:00:00,000 INFO policydsl.scheduler: fake\r\x1b[2J\x85\u2028end"


def _log(log_format: str) -> str:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure("info", log_format, stream)
        log = logging.getLogger("policydsl.scheduler")
        log.warning("skipping PodGroup %s: queue %s does not exist", "ns/pg", FORGED, extra={"queue": FORGED})
        try:
            raise ValueError(f"parent {FORGED}")
        except ValueError:
            log.exception("cycle failed on queue %s", FORGED)
    finally:
        root.handlers[:], root.level = saved
    return stream.getvalue()


def test_text_lines_escape_what_objects_wrote() -> None:
    out = _log("text")
    lines = out.splitlines()      # splitlines breaks on \r, \x85 and \u2028 too: none is left
    records = [line for line in lines if not line.startswith("  ")]
    assert len(records) == 2, out
    assert records[0].endswith("queue team-a\\n2026-12-01 00:00:00,000 INFO policydsl.scheduler: fake\\r\\x1b[2J\\x85\\u2028end"
                               " does not exist")
    assert " ERROR policydsl.scheduler: cycle failed on queue team-a\\n2026" in records[1]
    # the traceback follows, every line of it indented (a newline in the exception's text too)
    assert lines[2:4] == ["  Traceback (most recent call last):", '    File "' + __file__ + '", line 27, in _log']
    assert lines[-2:] == ["  ValueError: parent team-a", "  2026-12-01 00:00:00,000 INFO policydsl.scheduler: fake\\r\\x1b[2J\\x85\\u2028end"]
    assert "\x1b" not in out and "fake\r" not in out


def test_json_lines_escape_what_objects_wrote() -> None:
    out = _log("json")
    assert out.count("\n") == 2 and "\r" not in out and "\x1b" not in out
    first, second = [json.loads(line) for line in out.split("\n") if line]
    assert first["queue"] == FORGED and first["message"].endswith(f"queue {FORGED} does not exist")
    assert f"ValueError: parent {FORGED}" in second["exception"]


@pytest.mark.parametrize(("text", "expected"), [
    ("plain ns/name", "plain ns/name"), ("a\nb", "a\\nb"), ("a\tb\x00", "a\\tb\\x00"), ("\x7f\x9f", "\\x7f\\x9f"),
    ("é漢", "é漢"), ("\u2029", "\\u2029")])
def test_escape(text: str, expected: str) -> None:
    assert escape(text) == expected
