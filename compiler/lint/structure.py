"""Rules on how the text is put together (PD54x): repeated settings, map keys and includes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from compiler.lint.context import LintContext
from compiler.lint.registry import finding, rule
from policydsl import nodes as n
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, Span

_HEAD = ('policy "example" version 1\nactions [enqueue, allocate]\n'
         "tier {\n  plugin predicates\n  plugin proportion\n}\n")

DUPLICATE_SETTING = CodeInfo(
    "PD540", "duplicate-setting", Severity.ERROR, "a setting given twice in one block",
    why="The last value wins and the first is silently ignored; a reader who sees the first believes it "
        "applies.",
    fix="Remove one of the two settings.",
    bad=_HEAD + "queue batch {\n  weight = 2\n  weight = 4  # expect: PD540\n}\n",
    good=_HEAD + "queue batch {\n  weight = 4\n}\n",
)


def _blocks(ctx: LintContext) -> Iterator[tuple[str, tuple[n.Setting, ...]]]:
    """Every settings block with a name for messages."""
    for plugin in ctx.plugins:
        yield f"plugin `{plugin.name}`", plugin.node.settings
    for config in ctx.action_configs:
        yield f"action `{config.name.value}`", config.settings
    for queue in ctx.queues:
        yield f"queue `{queue.name}`", queue.node.settings
    for device in ctx.devices:
        yield f"device `{device.resource}`", device.node.settings


@rule(DUPLICATE_SETTING, structural=True)
def duplicate_setting(ctx: LintContext) -> Iterator[Diagnostic]:
    for owner, settings in _blocks(ctx):
        first: dict[str, Span] = {}
        for written in settings:
            key = written.key.value
            if key in first:
                yield finding(DUPLICATE_SETTING, f"`{key}` is set twice in {owner}; the last value wins",
                              written.key.span, "remove one of them", [f"first set at {first[key]}"])
            else:
                first[key] = written.key.span


DUPLICATE_KEY = CodeInfo(
    "PD541", "duplicate-map-key", Severity.ERROR, "a key given twice in one map",
    why="In `{ cpu: 4, cpu: 8 }` the last value wins; the first is silently ignored.",
    fix="Remove one of the two entries.",
    bad=_HEAD + "queue batch {\n  capability = { cpu: 4, memory: 8Gi, cpu: 8 }  # expect: PD541\n}\n",
    good=_HEAD + "queue batch {\n  capability = { cpu: 8, memory: 8Gi }\n}\n",
)


def _values(value: n.Value) -> Iterator[n.Value]:
    yield value
    if isinstance(value, n.ListValue):
        for item in value.items:
            yield from _values(item)
    elif isinstance(value, n.MapValue):
        for entry in value.entries:
            yield from _values(entry.value)


@rule(DUPLICATE_KEY, structural=True)
def duplicate_map_key(ctx: LintContext) -> Iterator[Diagnostic]:
    roots = [c.value for c in ctx.constants]
    roots += [s.value for _, settings in _blocks(ctx) for s in settings]
    for root in roots:
        for value in _values(root):
            if not isinstance(value, n.MapValue):
                continue
            first: dict[str, Span] = {}
            for entry in value.entries:
                if entry.key in first:
                    yield finding(DUPLICATE_KEY, f"`{entry.key}` appears twice in this map; the last value wins",
                                  entry.key_span, "remove one of them", [f"first at {first[entry.key]}"])
                else:
                    first[entry.key] = entry.key_span


DUPLICATE_INCLUDE = CodeInfo(
    "PD542", "duplicate-include", Severity.WARNING, "a file included more than once",
    why="A file is loaded once however often it is included, so a repeated include does nothing and "
        "suggests the include structure is not what its author thinks.",
    fix="Remove the repeated include.",
    bad='policy "example" version 1\ninclude "common.policy"\ninclude "common.policy"  # expect: PD542\n'
        "actions [enqueue, allocate]\n",
    good='policy "example" version 1\ninclude "common.policy"\nactions [enqueue, allocate]\n',
)


@rule(DUPLICATE_INCLUDE)
def duplicate_include(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[Path, Span] = {}
    for policy in ctx.loaded.files:
        for include in policy.of_type(n.Include):
            target = (Path(policy.path).parent / include.path.value).resolve()
            if target in first:
                yield finding(DUPLICATE_INCLUDE, f"`{include.path.value}` is already included",
                              include.path.span, "remove this include", [f"first included at {first[target]}"])
            else:
                first[target] = include.path.span
