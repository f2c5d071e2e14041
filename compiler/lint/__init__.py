"""Semantic lint rules (placeholder entry points; rules live in their own modules)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LintConfig:
    disabled: frozenset[str] = field(default_factory=frozenset)


def check(loaded, lowered, document, config=None) -> list:
    return []


def apply_suppressions(loaded, diagnostics, config=None) -> list:
    return list(diagnostics)
