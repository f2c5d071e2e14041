"""Output formats for diagnostics of many files: text, JSON, SARIF 2.1.0, GitHub workflow
commands and JUnit XML. Pure functions from `Findings` to a string; the CLI picks one.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from policydsl.diagnostics import CODES, CodeInfo, Diagnostic, Severity, SourceCache, render

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "policydsl"


@dataclass(frozen=True)
class Findings:
    by_file: Mapping[str, Sequence[Diagnostic]]     # every linted file, with the diagnostics in it
    failing: frozenset[Diagnostic] = frozenset()    # those at or above the fail level
    sources: SourceCache | None = None
    tool_version: str = "0"
    quiet: bool = False
    rules: Mapping[str, CodeInfo] = field(default_factory=lambda: CODES)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for diags in self.by_file.values() for d in diags]


class MergedSources(SourceCache):
    """Source lines looked up in the cache of whichever compilation read the file."""

    def __init__(self, caches: Mapping[str, SourceCache]):
        super().__init__()
        self._caches = dict(caches)

    def line(self, path: str, number: int) -> str | None:
        cache = self._caches.get(path)
        return cache.line(path, number) if cache is not None else None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else ("es" if word.endswith("s") else "s"))


def _counts(diagnostics: Sequence[Diagnostic]) -> dict[Severity, int]:
    return {level: sum(1 for d in diagnostics if d.severity == level) for level in Severity}


# --- text ---------------------------------------------------------------------------------

def format_text(findings: Findings) -> str:
    shown = [d for d in findings.diagnostics if not findings.quiet or d in findings.failing]
    blocks = [render(d, findings.sources) for d in shown]
    if findings.quiet:
        return "".join(block + "\n\n" for block in blocks)
    counts = _counts(findings.diagnostics)
    files = len(findings.by_file)
    touched = sum(1 for diags in findings.by_file.values() if diags)
    if not findings.diagnostics:
        summary = f"{_plural(files, 'file')} linted: no problems."
    else:
        parts = [_plural(counts[Severity.ERROR], "error"), _plural(counts[Severity.WARNING], "warning"),
                 _plural(counts[Severity.INFO], "info")]
        parts = [p for p in parts if not p.startswith("0 ")]
        summary = f"Found {', '.join(parts)} in {touched} of {_plural(files, 'file')}."
    return "".join(block + "\n\n" for block in blocks) + summary + "\n"


# --- JSON ---------------------------------------------------------------------------------

def _diagnostic_json(diag: Diagnostic) -> dict:
    span = diag.span
    return {
        "path": span.path if span else None,
        "line": span.line if span else None,
        "column": span.column if span else None,
        "end_line": span.end_line if span else None,
        "end_column": span.end_column if span else None,
        "code": diag.code,
        "name": diag.name,
        "severity": str(diag.severity),
        "message": diag.message,
        "hint": diag.hint,
        "notes": list(diag.notes),
    }


def format_json(findings: Findings) -> str:
    counts = _counts(findings.diagnostics)
    body = {
        "tool": {"name": TOOL_NAME, "version": findings.tool_version},
        "files": list(findings.by_file),
        "summary": {"files": len(findings.by_file), "failing": len(findings.failing),
                    **{str(level): counts[level] for level in Severity}},
        "diagnostics": [_diagnostic_json(d) for d in findings.diagnostics],
    }
    return json.dumps(body, indent=2) + "\n"


# --- SARIF 2.1.0 --------------------------------------------------------------------------

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_]", name))


def _artifact_uri(path: str) -> str:
    """Repository-relative POSIX path when the file is under the working folder, else a file URI."""
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return absolute.as_uri()


def _rule_help(info: CodeInfo) -> tuple[str, str]:
    text = [info.why, f"Fix: {info.fix}" if info.fix else ""]
    markdown = list(text)
    if info.bad:
        markdown += ["Bad:", f"```\n{info.bad.rstrip()}\n```"]
    if info.good:
        markdown += ["Good:", f"```\n{info.good.rstrip()}\n```"]
    return ("\n\n".join(t for t in text if t) or info.summary), ("\n\n".join(m for m in markdown if m) or info.summary)


def _sarif_rule(info: CodeInfo) -> dict:
    help_text, help_markdown = _rule_help(info)
    return {
        "id": info.code,
        "name": _pascal(info.name),
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": info.why or info.summary},
        "help": {"text": help_text, "markdown": help_markdown},
        "defaultConfiguration": {"level": _SARIF_LEVEL[info.severity]},
        "properties": {"tags": [info.name]},
    }


def _sarif_result(diag: Diagnostic, file: str, rule_index: dict[str, int]) -> dict:
    span = diag.span
    region = ({"startLine": span.line, "startColumn": span.column, "endLine": span.end_line,
               "endColumn": span.end_column} if span else {"startLine": 1})
    message = diag.message + (f"\nhint: {diag.hint}" if diag.hint else "")
    result = {
        "ruleId": diag.code,
        "level": _SARIF_LEVEL[diag.severity],
        "message": {"text": message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _artifact_uri(span.path if span else file)},
            "region": region,
        }}],
    }
    if diag.code in rule_index:
        result["ruleIndex"] = rule_index[diag.code]
    return result


def format_sarif(findings: Findings) -> str:
    rules = [findings.rules[code] for code in sorted(findings.rules)]
    rule_index = {info.code: i for i, info in enumerate(rules)}
    results = [_sarif_result(d, file, rule_index) for file, diags in findings.by_file.items() for d in diags]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": TOOL_NAME,
                "version": findings.tool_version,
                "rules": [_sarif_rule(info) for info in rules],
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"


# --- GitHub Actions workflow commands -----------------------------------------------------

_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Findings) -> str:
    lines = []
    for file, diags in findings.by_file.items():
        for diag in diags:
            span = diag.span
            props = {"file": span.path if span else file}
            if span:
                props.update(line=span.line, col=span.column, endLine=span.end_line, endColumn=span.end_column)
            props["title"] = diag.code
            rendered = ",".join(f"{key}={_escape_property(str(value))}" for key, value in props.items())
            message = diag.message + (f"\nhint: {diag.hint}" if diag.hint else "")
            lines.append(f"::{_GITHUB_LEVEL[diag.severity]} {rendered}::{_escape_data(message)}")
    return "".join(line + "\n" for line in lines)


# --- JUnit XML ----------------------------------------------------------------------------

def _one_line(diag: Diagnostic) -> str:
    where = f"{diag.span}: " if diag.span else ""
    return f"{where}{diag.severity}[{diag.code}] {diag.message}"


def format_junit(findings: Findings) -> str:
    """One testcase per file; it fails when the file has findings at or above the fail level."""
    cases = []
    failures = 0
    for file, diags in findings.by_file.items():
        case = ET.Element("testcase", {"classname": "policydsl.lint", "name": file, "file": file})
        failing = [d for d in diags if d in findings.failing]
        if failing:
            failures += 1
            where = "; ".join(f"{d.code} at line {d.span.line}" if d.span else d.code for d in failing)
            failure = ET.SubElement(case, "failure", {"type": failing[0].code,
                                                      "message": f"{_plural(len(failing), 'problem')}: {where}"})
            failure.text = "\n".join(_one_line(d) for d in failing)
        below = [d for d in diags if d not in findings.failing]
        if below:
            ET.SubElement(case, "system-out").text = "\n".join(_one_line(d) for d in below)
        cases.append(case)
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": "policydsl lint", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "policydsl lint", **counts})
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


FORMATS: dict[str, Callable[[Findings], str]] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
    "junit": format_junit,
}

