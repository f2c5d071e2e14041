"""The fixes `policydsl lint --fix` can be certain of, read off the diagnostics: a misspelled name
whose hint is a single "did you mean `X`?", and unit suffixes whose meaning is not in doubt
(`512MiB` -> `512Mi`, `4gi` -> `4Gi`; `64GB` stays a finding: G or Gi is the author's call).
Each fix replaces exactly the text the diagnostic points at, so a fix never touches what the
author did not get wrong; formatting is the formatter's job (`lint --fix` runs it after)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from policydsl.diagnostics import Diagnostic

_DID_YOU_MEAN = re.compile(r"^did you mean `([^`]+)`\?$")
_BACKTICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Edit:
    """Replace the text of one line from `column` up to `end_column` (1-based, end exclusive)."""

    line: int
    column: int
    end_column: int
    replacement: str
    title: str


def edit_for(diag: Diagnostic, lines: list[str]) -> Edit | None:
    """The certain fix of one diagnostic, or None."""
    span = diag.span
    if span is None or span.line != span.end_line or not 1 <= span.line <= len(lines) or diag.hint is None:
        return None
    text = lines[span.line - 1][span.column - 1:span.end_column - 1]
    if not text:
        return None
    suggested = _DID_YOU_MEAN.match(diag.hint)
    if suggested:
        wrong, right = text, suggested.group(1)
        quoted = len(text) >= 2 and text[0] == text[-1] == '"'
        if quoted:
            wrong = text[1:-1]
        if f"`{wrong}`" not in diag.message or wrong == right:
            return None          # the span is not the name the message is about
        replacement = f'"{right}"' if quoted else right
        return Edit(span.line, span.column, span.end_column, replacement, f"`{wrong}` -> `{right}`")
    if diag.code == "PD010" and diag.message.endswith("is not a quantity"):
        unit = None
        if diag.hint.endswith(", without the B") and re.fullmatch(r"[KMGTPE]iB", text, re.I):
            unit = text[0].upper() + "i"
        elif diag.hint.endswith("suffixes are case-sensitive") and re.fullmatch(r"[kmgtpe]i", text, re.I):
            unit = text[0].upper() + "i"
        if unit is not None and unit != text:
            return Edit(span.line, span.column, span.end_column, unit, f"`{text}` -> `{unit}`")
    return None


def apply(text: str, edits: list[Edit]) -> tuple[str, list[Edit]]:
    """`text` with the edits that do not overlap an earlier one applied; and those applied."""
    lines = text.split("\n")
    applied: list[Edit] = []
    taken: dict[int, list[tuple[int, int]]] = {}
    for edit in sorted(edits, key=lambda e: (e.line, e.column)):
        spans = taken.setdefault(edit.line, [])
        if any(edit.column < end and start < edit.end_column for start, end in spans):
            continue
        spans.append((edit.column, edit.end_column))
        applied.append(edit)
    for edit in sorted(applied, key=lambda e: (e.line, -e.column)):
        line = lines[edit.line - 1]
        lines[edit.line - 1] = line[:edit.column - 1] + edit.replacement + line[edit.end_column - 1:]
    return "\n".join(lines), applied
