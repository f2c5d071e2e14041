"""Constant rules (PD53x): every `const` defined once and used."""

from __future__ import annotations

from typing import Iterator

from compiler.lint.context import LintContext
from compiler.lint.registry import finding, rule
from policydsl import nodes as n
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity

_HEAD = ('policy "example" version 1\nactions [enqueue, allocate]\n'
         "tier {\n  plugin predicates\n  plugin proportion\n}\n")

UNUSED_CONSTANT = CodeInfo(
    "PD530", "unused-constant", Severity.WARNING, "a constant that nothing uses",
    why="An unused constant is dead text; often a setting was meant to use it and has a literal "
        "(or another constant) instead.",
    fix="Use the constant where it was meant, or remove it.",
    bad=_HEAD + "const BIG = 64Gi  # expect: PD530\nqueue batch {\n  capability = { memory: 32Gi }\n}\n",
    good=_HEAD + "const BIG = 64Gi\nqueue batch {\n  capability = { memory: BIG }\n}\n",
)


@rule(UNUSED_CONSTANT, whole_policy=True)
def unused_constant(ctx: LintContext) -> Iterator[Diagnostic]:
    # Only the last definition of a name is live (duplicates are PD531), so judge that one.
    for name, const in ctx.lowered.constants.items():
        if name not in ctx.lowered.used_constants:
            yield finding(UNUSED_CONSTANT, f"constant `{name}` is never used", const.name.span,
                          "use it, or remove it")


DUPLICATE_CONSTANT = CodeInfo(
    "PD531", "duplicate-constant", Severity.ERROR, "a constant defined twice",
    why="Every use takes the last definition, wherever the use is written; the first definition is "
        "silently dead, and what a use means depends on reading the whole policy and its includes.",
    fix="Rename one of the constants, or remove one definition.",
    bad=_HEAD + "const SLICE = 10Gi\nconst SLICE = 20Gi  # expect: PD531\n"
        "queue batch {\n  capability = { memory: SLICE }\n}\n",
    good=_HEAD + "const SLICE = 20Gi\nqueue batch {\n  capability = { memory: SLICE }\n}\n",
)


@rule(DUPLICATE_CONSTANT, structural=True)
def duplicate_constant(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[str, n.Const] = {}
    for const in ctx.constants:
        name = const.name.value
        if name in first:
            yield finding(DUPLICATE_CONSTANT, f"constant `{name}` is defined twice", const.name.span,
                          "rename or remove one definition", [f"first defined at {first[name].name.span}"])
        else:
            first[name] = const
