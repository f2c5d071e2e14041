"""Inline suppressions, as comments in the policy:

    queue a { weight = 2 }   # policydsl: disable=PD201,PD305
    # policydsl: disable-next-line=duplicate-queue
    # policydsl: disable-file=PD530 -- constants shared with the staging policy

Codes or rule names, separated by commas; text after `--` is a reason and is ignored. Each
comment covers diagnostics in its own file: `disable` its own line, `disable-next-line` the
line below, `disable-file` the whole file. A misspelt directive, a code that does not exist,
or one that names a compile error (which no comment can hide) is reported as PD014.

    # policydsl: fragment -- included by team-*.policy

marks the file a fragment (see FRAGMENT_MARK): linted on its own, the rules that need a whole
policy are left out, as for a file another file includes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiler.lint.config import LintConfig, check_code
from compiler.lint.registry import RULES
from policydsl import nodes as n
from policydsl.diagnostics import BAD_SUPPRESSION, Diagnostic, Span, make
from policydsl.loader import LoadedPolicy

_DIRECTIVE = re.compile(r"#\s*policydsl:\s*(?P<kind>disable-next-line|disable-file|disable)\s*=(?P<codes>.*)")
_CODE = re.compile(r"[^,\s]+")
_ANY_DIRECTIVE = re.compile(r"#\s*policydsl:\s*(?P<word>[^=\s]*)")
# A file meant only to be included, linted alone (pre-commit, an editor) without its includer.
FRAGMENT_MARK = re.compile(r"#\s*policydsl:\s*fragment\s*(?:--.*)?$")

# Diagnostics a fragment (an included file linted on its own) cannot judge: its includer
# supplies the constants it uses and the action list.
FRAGMENT_EXEMPT = frozenset({"PD107", "PD110"})


@dataclass(frozen=True)
class Suppression:
    path: str
    line: int | None        # None: the whole file
    codes: frozenset[str]

    def covers(self, diag: Diagnostic) -> bool:
        if diag.span is None or diag.span.path != self.path or diag.code not in self.codes:
            return False
        return self.line is None or diag.span.line == self.line


def parse_suppressions(policy: n.Policy) -> tuple[list[Suppression], list[Diagnostic]]:
    """The suppressions a file's comments declare, and PD014 warnings for codes that are not valid."""
    found: list[Suppression] = []
    problems: list[Diagnostic] = []
    for comment in policy.comments:
        match = _DIRECTIVE.match(comment.text)
        if match is None and FRAGMENT_MARK.match(comment.text.rstrip()):
            continue
        if match is None:
            attempt = _ANY_DIRECTIVE.match(comment.text)
            if attempt is not None:  # a misspelt directive would otherwise suppress nothing, silently
                problems.append(make(BAD_SUPPRESSION, f"unknown directive `{attempt.group('word')}`",
                                     comment.span, "use disable=, disable-next-line=, disable-file= or "
                                                   "`# policydsl: fragment`"))
            continue
        listing = match.group("codes").split("--", 1)[0]
        codes: set[str] = set()
        reported = len(problems)
        for token in _CODE.finditer(listing):
            code, problem = check_code(token.group())
            if problem:
                column = comment.span.column + match.start("codes") + token.start()
                span = Span(comment.span.path, comment.span.line, column, comment.span.line,
                            column + len(token.group()))
                problems.append(make(BAD_SUPPRESSION, f"in suppression comment: {problem}", span))
            else:
                codes.add(code)
        if not codes and len(problems) == reported:
            problems.append(make(BAD_SUPPRESSION, "suppression names no code", comment.span,
                                 "write e.g. `# policydsl: disable=PD201`"))
        kind = match.group("kind")
        line = {"disable": comment.span.line, "disable-next-line": comment.span.line + 1,
                "disable-file": None}[kind]
        found.append(Suppression(comment.span.path, line, frozenset(codes)))
    return found, problems


def apply_suppressions(loaded: LoadedPolicy | None, diagnostics: list[Diagnostic],
                       config: LintConfig | None = None) -> list[Diagnostic]:
    """Drop diagnostics the configuration or an inline comment disables; add PD014 for bad comments."""
    config = config or LintConfig()
    suppressions: list[Suppression] = []
    candidates = list(diagnostics)
    for policy in (loaded.files if loaded is not None else ()):
        found, problems = parse_suppressions(policy)
        suppressions.extend(found)
        candidates.extend(problems)
    kept = []
    for diag in candidates:
        if not config.enabled(diag.code):
            continue
        if config.fragment and (diag.code in FRAGMENT_EXEMPT or
                                (diag.code in RULES and RULES[diag.code].whole_policy)):
            continue
        if any(s.covers(diag) for s in suppressions):
            continue
        kept.append(config.regrade(diag))
    return kept
