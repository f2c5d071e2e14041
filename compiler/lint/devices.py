"""Device-sharing rules (PD50x): memory slices that fit the card, settings that apply."""

from __future__ import annotations

from typing import Iterator

from compiler.lint.context import DeviceView, LintContext, setting
from compiler.lint.registry import finding, rule
from compiler.quantities import format_base_units
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity

_HEAD = ('policy "example" version 1\nactions [enqueue, allocate]\n'
         "tier {\n  plugin predicates\n  plugin deviceshare { gpu_sharing = true }\n}\n")

# Settings that only mean something when cards are shared by memory.
SHARED_ONLY = ("slice", "compute_percent", "max_tasks_per_card", "memory_resource", "cores_resource")


def _memory(units: int) -> str:
    return format_base_units("memory", units)


def _span(ctx: LintContext, device: DeviceView, key: str):
    return ctx.span(("devices", device.index, key), device.node.resource.span)


def _shared(device: DeviceView) -> bool:
    return device.values.get("sharing") == "memory"


def _slices(device: DeviceView) -> int | None:
    card, piece = device.values.get("card_memory"), device.values.get("slice")
    if not _shared(device) or not card or not piece or piece > card:
        return None
    return card // piece


SLICE_REMAINDER = CodeInfo(
    "PD501", "slice-not-dividing-card", Severity.WARNING, "a memory slice that does not divide the card's memory",
    why="A shared card is cut into whole slices; what is left over after the last slice is never handed "
        "to any task.",
    fix="Choose a slice that divides `card_memory` (for 80Gi: 10Gi, 20Gi, 40Gi ...).",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n'
        "  slice = 30Gi  # expect: PD501\n}\n",
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 20Gi\n}\n',
)


@rule(SLICE_REMAINDER)
def slice_not_dividing_card(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        card, piece = device.values.get("card_memory"), device.values.get("slice")
        if _slices(device) is not None and card % piece:
            yield finding(SLICE_REMAINDER,
                          f"slice {_memory(piece)} does not divide card_memory {_memory(card)}: "
                          f"{_memory(card % piece)} of every card is never used",
                          _span(ctx, device, "slice"), "use a slice that divides the card's memory")


SLICE_TOO_BIG = CodeInfo(
    "PD502", "slice-above-card-memory", Severity.ERROR, "a memory slice larger than the card",
    why="A slice must fit on one card; a larger one can never be placed, so no shared request is served.",
    fix="Make the slice at most `card_memory`.",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 40Gi\n'
        "  slice = 80Gi  # expect: PD502\n}\n",
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 40Gi\n}\n',
)


@rule(SLICE_TOO_BIG, structural=True)
def slice_above_card_memory(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        card, piece = device.values.get("card_memory"), device.values.get("slice")
        if _shared(device) and card and piece and piece > card:
            yield finding(SLICE_TOO_BIG, f"slice {_memory(piece)} is larger than card_memory {_memory(card)}",
                          _span(ctx, device, "slice"), f"make the slice at most {_memory(card)}")


SHARING_INCOMPLETE = CodeInfo(
    "PD503", "memory-sharing-incomplete", Severity.ERROR,
    "`sharing = memory` without `slice`",
    why="To share a card by memory the scheduler must know what unit it is cut into; without it no slice can be "
        "counted. A card's memory is `card_memory` where set, else what the node says (the block's memory "
        "resource in its allocatable, GPU Feature Discovery's nvidia.com/gpu.memory label); a node that says "
        "neither hosts no share, and pods name it in their reason.",
    fix="Set `slice` (and `card_memory` when the nodes do not say how much memory a card has).",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory  # expect: PD503\n  card_memory = 80Gi\n}\n',
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 10Gi\n}\n',
)


@rule(SHARING_INCOMPLETE, structural=True)
def memory_sharing_incomplete(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        if not _shared(device):
            continue
        missing = [key for key in ("slice",) if setting(device.node.settings, key) is None]
        if missing:
            yield finding(SHARING_INCOMPLETE,
                          f"device `{device.resource}` shares cards by memory but sets no "
                          + " or ".join(f"`{k}`" for k in missing),
                          _span(ctx, device, "sharing"), "set " + " and ".join(f"`{k}`" for k in missing))


SHARED_SETTING_UNUSED = CodeInfo(
    "PD504", "sharing-setting-on-whole-cards", Severity.WARNING,
    "a memory-sharing setting on a device that hands out whole cards",
    why="Slices, compute percent, tasks per card and the shared resources only apply with "
        "`sharing = memory`; on whole cards they are ignored.",
    fix="Set `sharing = memory`, or remove the setting.",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = whole\n  slice = 10Gi  # expect: PD504\n}\n',
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 10Gi\n}\n',
)


@rule(SHARED_SETTING_UNUSED)
def sharing_setting_on_whole_cards(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        if _shared(device) or "sharing" not in device.values and setting(device.node.settings, "sharing"):
            continue  # shared, or a `sharing` value that did not lower (reported elsewhere)
        for key in SHARED_ONLY:
            written = setting(device.node.settings, key)
            if written is not None:
                yield finding(SHARED_SETTING_UNUSED, f"`{key}` only applies with `sharing = memory`; "
                              f"device `{device.resource}` hands out whole cards", written.key.span,
                              "set `sharing = memory`, or remove it")


DUPLICATE_DEVICE = CodeInfo(
    "PD505", "duplicate-device", Severity.ERROR, "two device rules for one resource",
    why="A resource is placed by one device rule; with two, one silently wins.",
    fix="Merge the two `device` blocks.",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  topology = nvlink\n}\n'
        'device "nvidia.com/gpu" {  # expect: PD505\n  policy = spread\n}\n',
    good=_HEAD + 'device "nvidia.com/gpu" {\n  topology = nvlink\n  policy = spread\n}\n',
)


@rule(DUPLICATE_DEVICE, structural=True)
def duplicate_device(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[str, DeviceView] = {}
    for device in ctx.devices:
        if device.resource in first:
            yield finding(DUPLICATE_DEVICE, f"a second device rule for `{device.resource}`",
                          device.node.resource.span, "merge the two blocks",
                          [f"first rule at {first[device.resource].node.resource.span}"])
        else:
            first[device.resource] = device


DEVICE_WITHOUT_PLUGIN = CodeInfo(
    "PD506", "device-without-deviceshare", Severity.WARNING, "device rules while the deviceshare plugin is off",
    why="Device rules are applied by the deviceshare plugin; without it cards are counted as plain extended "
        "resources and the rules are ignored.",
    fix="Add `plugin deviceshare` to a tier.",
    bad='policy "example" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n}\n'
        'device "nvidia.com/gpu" {  # expect: PD506\n  topology = nvlink\n}\n',
    good=_HEAD + 'device "nvidia.com/gpu" {\n  topology = nvlink\n}\n',
)


@rule(DEVICE_WITHOUT_PLUGIN, whole_policy=True)
def device_without_deviceshare(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.devices and ctx.plugin_named("deviceshare") is None:
        yield finding(DEVICE_WITHOUT_PLUGIN, "device rules are declared but the deviceshare plugin is not on",
                      ctx.devices[0].node.resource.span, "add `plugin deviceshare` to a tier")


COMPUTE_OVERCOMMIT = CodeInfo(
    "PD507", "compute-overcommitted", Severity.WARNING, "the slices of a card are granted more than 100% compute",
    why="Each slice is promised `compute_percent` of the card; when all slices are in use the promises "
        "add up to more than the card has, and every task runs slower than configured.",
    fix="Lower `compute_percent` to at most 100 divided by the number of slices, or use bigger slices.",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 10Gi\n'
        "  compute_percent = 25%  # expect: PD507\n}\n",
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 10Gi\n'
         "  compute_percent = 12.5%\n}\n",
)


@rule(COMPUTE_OVERCOMMIT)
def compute_overcommitted(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        slices, percent = _slices(device), device.values.get("compute_percent")
        if slices and percent is not None and slices * percent > 100:
            yield finding(COMPUTE_OVERCOMMIT, f"{slices} slices × {percent:g}% = {slices * percent:g}% of a card's "
                          "compute", _span(ctx, device, "compute_percent"),
                          f"use at most {100 / slices:g}% per slice")


TASKS_ABOVE_SLICES = CodeInfo(
    "PD508", "max-tasks-above-slices", Severity.WARNING, "`max_tasks_per_card` above the number of slices",
    why="Every task takes at least one slice, so a card never holds more tasks than it has slices; a higher "
        "limit is never reached and suggests a miscounted slice size.",
    fix="Set `max_tasks_per_card` to at most card_memory / slice, or make slices smaller.",
    bad=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 20Gi\n'
        "  max_tasks_per_card = 8  # expect: PD508\n}\n",
    good=_HEAD + 'device "nvidia.com/gpu" {\n  sharing = memory\n  card_memory = 80Gi\n  slice = 20Gi\n'
         "  max_tasks_per_card = 4\n}\n",
)


@rule(TASKS_ABOVE_SLICES)
def max_tasks_above_slices(ctx: LintContext) -> Iterator[Diagnostic]:
    for device in ctx.devices:
        slices, most = _slices(device), device.values.get("max_tasks_per_card")
        if slices and most is not None and most > slices:
            yield finding(TASKS_ABOVE_SLICES, f"`max_tasks_per_card = {most}`, but a card has only {slices} slices",
                          _span(ctx, device, "max_tasks_per_card"), f"set it to at most {slices}")
