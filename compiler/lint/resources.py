"""Resource-name and unit rules (PD52x) over every resource map and device rule."""

from __future__ import annotations

from typing import Iterator

from compiler import catalog as cat
from compiler.lint.context import LintContext
from compiler.lint.registry import finding, rule
from policydsl import nodes as n
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, Span, did_you_mean

_HEAD = 'policy "example" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin proportion\n}\n'

# Resources measured in bytes: a bare number is bytes, which is almost never what was meant.
_BYTE_RESOURCES = ("memory", "ephemeral-storage")
_SMALLEST_PLAUSIBLE_BYTES = 2**20


def _deref(ctx: LintContext, value: n.Value, seen: tuple[str, ...] = ()) -> n.Value:
    while isinstance(value, n.ConstRef) and value.name in ctx.lowered.constants and value.name not in seen:
        seen = (*seen, value.name)
        value = ctx.lowered.constants[value.name].value
    return value


def _resource_maps(ctx: LintContext) -> Iterator[tuple[n.MapValue, str]]:
    """Every written resource map and its kind: queue resource settings and plugin resource weights."""
    queue_maps = {a.name for a in cat.QUEUE_SETTINGS if a.kind == cat.RESOURCES}
    for queue in ctx.queues:
        for written in queue.node.settings:
            if written.key.value in queue_maps:
                value = _deref(ctx, written.value)
                if isinstance(value, n.MapValue):
                    yield value, cat.RESOURCES
    for plugin in ctx.known_plugins():
        for written in plugin.node.settings:
            arg = plugin.spec.argument(written.key.value)
            if arg is not None and arg.kind in (cat.RESOURCES, cat.RESOURCE_WEIGHTS):
                value = _deref(ctx, written.value)
                if isinstance(value, n.MapValue):
                    yield value, arg.kind


UNKNOWN_RESOURCE = CodeInfo(
    "PD520", "unknown-resource", Severity.WARNING, "a resource name Kubernetes does not define",
    why="Resource names are matched exactly against what nodes report: `cpu`, `memory`, "
        "`ephemeral-storage`, `pods`, `hugepages-*` and `vendor.domain/name` extended resources. Any other "
        "name matches nothing, so a limit on it limits nothing.",
    fix="Use a standard resource name or a fully qualified extended resource such as \"nvidia.com/gpu\".",
    bad=_HEAD + "queue batch {\n  capability = { cpu: 8, gpu: 2 }  # expect: PD520\n}\n",
    good=_HEAD + "queue batch {\n  capability = { cpu: 8, \"nvidia.com/gpu\": 2 }\n}\n",
)
_SUGGESTIONS = (*cat.STANDARD_RESOURCES, *cat.WELL_KNOWN_DEVICE_RESOURCES)


def _hint(name: str) -> str:
    # `gpu` most likely means a vendor's `*/gpu`, not `cpu`, which a spelling match would offer.
    vendors = [r for r in cat.WELL_KNOWN_DEVICE_RESOURCES if r.rpartition("/")[2].lower() == name.lower()]
    if vendors:
        return "did you mean " + " or ".join(f'"{r}"' for r in vendors) + "?"
    return did_you_mean(name, _SUGGESTIONS) or 'extended resources are named like "vendor.com/name"'


@rule(UNKNOWN_RESOURCE)
def unknown_resource(ctx: LintContext) -> Iterator[Diagnostic]:
    reported: set[Span] = set()

    def check(name: str, span: Span) -> Iterator[Diagnostic]:
        if not cat.is_known_resource(name) and span not in reported:
            reported.add(span)
            yield finding(UNKNOWN_RESOURCE, f"`{name}` is not a Kubernetes resource name", span, _hint(name))

    for resource_map, _ in _resource_maps(ctx):
        for entry in resource_map.entries:
            yield from check(entry.key, entry.key_span)
    for device in ctx.devices:
        yield from check(device.resource, device.node.resource.span)


MEMORY_WITHOUT_UNIT = CodeInfo(
    "PD521", "memory-without-unit", Severity.WARNING, "a memory amount written as a small bare number",
    why="A bare number for memory counts bytes: `memory: 64` is 64 bytes, not 64Gi. No real limit is that "
        "small, so the unit was almost certainly forgotten.",
    fix="Add the unit: 64Gi, 512Mi.",
    bad=_HEAD + "queue batch {\n  capability = { memory: 64 }  # expect: PD521\n}\n",
    good=_HEAD + "queue batch {\n  capability = { memory: 64Gi }\n}\n",
)


def _bare_bytes(value: n.Value) -> bool:
    return isinstance(value, (n.Integer, n.Float)) and 0 < value.value < _SMALLEST_PLAUSIBLE_BYTES


@rule(MEMORY_WITHOUT_UNIT)
def memory_without_unit(ctx: LintContext) -> Iterator[Diagnostic]:
    reported: set[Span] = set()

    def check(label: str, value: n.Value) -> Iterator[Diagnostic]:
        value = _deref(ctx, value)
        if _bare_bytes(value) and value.span not in reported:
            reported.add(value.span)
            yield finding(MEMORY_WITHOUT_UNIT, f"{label} `{value.value}` is {value.value} bytes",
                          value.span, f"did you mean {value.value}Gi or {value.value}Mi?")

    for resource_map, kind in _resource_maps(ctx):
        for entry in resource_map.entries:
            if kind == cat.RESOURCES and entry.key in _BYTE_RESOURCES:
                yield from check(entry.key, entry.value)
    byte_settings = {a.name for a in cat.DEVICE_SETTINGS if a.kind == cat.QUANTITY and a.resource == "memory"}
    for device in ctx.devices:
        for written in device.node.settings:
            if written.key.value in byte_settings:
                yield from check(written.key.value, written.value)
