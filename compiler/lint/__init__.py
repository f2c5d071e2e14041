"""Semantic lint: rules over the AST, the lowered IR and the normalized document.

`check` runs every enabled rule of the registry (`compiler.lint.registry.RULES`);
`apply_suppressions` then drops what the configuration or inline comments disable. The rules
live one module per family; importing this package registers them all.
"""

from __future__ import annotations

from compiler.lint import actions, constants, devices, plugins, queues, resources, structure  # noqa: F401  (registers)
from compiler.lint.config import ConfigError, LintConfig, find_config, load_config, parse_config
from compiler.lint.context import LintContext
from compiler.lint.registry import RULES, Rule
from compiler.lint.suppression import apply_suppressions
from compiler.lower import Lowered
from policydsl.diagnostics import Diagnostic
from policydsl.loader import LoadedPolicy


def check(loaded: LoadedPolicy, lowered: Lowered | None, document: dict | None,
          config: LintConfig | None = None) -> list[Diagnostic]:
    """Findings of every enabled rule, re-graded by the configuration, in rule order."""
    config = config or LintConfig()
    if lowered is None or lowered.ir is None:
        return []
    context = LintContext(loaded, lowered, document)
    found: list[Diagnostic] = []
    for code, rule in RULES.items():
        if not config.enabled(code) or (config.fragment and rule.whole_policy):
            continue
        found.extend(config.regrade(diag) for diag in rule.check(context))
    return found


__all__ = ["check", "apply_suppressions", "LintConfig", "ConfigError", "load_config", "parse_config",
           "find_config", "RULES", "Rule", "LintContext"]
