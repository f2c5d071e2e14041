"""The registry of lint rules: one `Rule` per code, each a function over a `LintContext`.

Like Ruff's rule table: a rule's code, name, severity and documentation are its `CodeInfo`,
registered into the one code registry (`policydsl.diagnostics.CODES`) so `--explain`, the
docs and SARIF all read the same entry. `RULES` adds what only lint needs: the check and
whether it judges the whole policy (skipped when a file is linted as an included fragment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from policydsl.diagnostics import BAD_SUPPRESSION, CODES, CodeInfo, Diagnostic, Span, register_code

if TYPE_CHECKING:
    from compiler.lint.context import LintContext

Check = Callable[["LintContext"], Iterable[Diagnostic]]


@dataclass(frozen=True)
class Rule:
    info: CodeInfo
    check: Check
    family: str
    # True when the rule needs the complete policy (actions, every constant use, all plugins):
    # an included file linted on its own is a fragment and cannot be judged by it.
    whole_policy: bool = False
    # True when what it finds leaves the plan ambiguous or impossible (two queues of one name:
    # which one is it?). Like a compile error, no comment or configuration hides it.
    structural: bool = False

    @property
    def code(self) -> str:
        return self.info.code


RULES: dict[str, Rule] = {}

# Codes a user may disable or re-grade: the lint rules and the suppression warning. The
# parser's and compiler's codes (PD0xx, PD1xx) mean the policy cannot be compiled; hiding
# them would only hide why no plan comes out.
_ALSO_CONFIGURABLE = (BAD_SUPPRESSION.code,)


def rule(info: CodeInfo, *, whole_policy: bool = False, structural: bool = False) -> Callable[[Check], Check]:
    """Register `info` as a code and the decorated function as the rule that reports it."""

    def register(check: Check) -> Check:
        if info.code in RULES:
            raise ValueError(f"lint rule {info.code} registered twice")
        register_code(info)
        family = check.__module__.rsplit(".", 1)[-1]
        RULES[info.code] = Rule(info, check, family, whole_policy, structural)
        return check

    return register


def is_configurable(code: str) -> bool:
    """Whether a user may disable or re-grade the code: lint rules but the structural ones
    (Ruff does not let a syntax error be ignored either), and the suppression warning."""
    return (code in RULES and not RULES[code].structural) or code in _ALSO_CONFIGURABLE


def resolve_code(text: str) -> str | None:
    """A code (`PD201`, any case) or a rule name (`duplicate-queue`) -> the code, else None."""
    text = text.strip()
    if text.upper() in CODES:
        return text.upper()
    for info in CODES.values():
        if info.name == text:
            return info.code
    return None


def finding(info: CodeInfo, message: str, span: Span | None, hint: str | None = None,
            notes: Iterable[str] = ()) -> Diagnostic:
    return Diagnostic(info.code, info.severity, message, span, hint, tuple(notes))


__all__ = ["RULES", "Rule", "rule", "finding", "is_configurable", "resolve_code"]
