"""Action rules (PD3xx): the order of a cycle and the settings of each action."""

from __future__ import annotations

from typing import Iterator

from compiler import catalog as cat
from compiler.lint.context import LintContext
from compiler.lint.registry import finding, rule
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity

_HEAD = 'policy "example" version 1\n'
_TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n"

MISSING_ALLOCATE = CodeInfo(
    "PD301", "missing-allocate", Severity.WARNING, "the action list has no `allocate`",
    why="`allocate` is the action that places tasks on nodes; without it no ordinary job ever starts "
        "(backfill only places tasks that request nothing). Volcano runs such a configuration, and so does "
        "the scheduler: a warning, not an error.",
    fix="Add `allocate` to the action list, after `enqueue`.",
    bad=_HEAD + "actions [enqueue, backfill]  # expect: PD301\n" + _TIERS,
    good=_HEAD + "actions [enqueue, allocate, backfill]\n" + _TIERS,
)


@rule(MISSING_ALLOCATE, whole_policy=True)
def missing_allocate(ctx: LintContext) -> Iterator[Diagnostic]:
    node = ctx.actions_node
    if node is not None and not any(name.value == "allocate" for name in node.names):
        yield finding(MISSING_ALLOCATE, "the action list has no `allocate`: no task would ever be placed",
                      node.span, "add `allocate`, e.g. `actions [enqueue, allocate, backfill]`")


ACTION_ORDER = CodeInfo(
    "PD302", "action-order", Severity.ERROR, "actions out of the order a cycle needs",
    why="Actions run in the order listed. Each builds on the one before: jobs must be admitted (enqueue) "
        "before they are placed (allocate), and evictions (preempt, reclaim) and backfill come after "
        "placement. Out of order, work admitted in a cycle waits for the next one.",
    fix="List the actions in the order " + ", ".join(cat.CANONICAL_ACTION_ORDER) + " (leaving out any).",
    bad=_HEAD + "actions [allocate, enqueue]  # expect: PD302\n" + _TIERS,
    good=_HEAD + "actions [enqueue, allocate]\n" + _TIERS,
)


@rule(ACTION_ORDER)
def action_order(ctx: LintContext) -> Iterator[Diagnostic]:
    for node in ctx.action_lists:
        latest: str | None = None
        seen: set[str] = set()
        for name in node.names:
            if name.value not in cat.CANONICAL_ACTION_ORDER or name.value in seen:
                continue  # unknown names are PD101, repeats PD303
            seen.add(name.value)
            rank = cat.CANONICAL_ACTION_ORDER.index(name.value)
            if latest is not None and rank < cat.CANONICAL_ACTION_ORDER.index(latest):
                listed = {n.value for n in node.names}
                order = [a for a in cat.CANONICAL_ACTION_ORDER if a in listed]
                yield finding(ACTION_ORDER, f"`{name.value}` runs after `{latest}`, but must run before it",
                              name.span, "use the order: " + ", ".join(order))
            else:
                latest = name.value


DUPLICATE_ACTION = CodeInfo(
    "PD303", "duplicate-action", Severity.ERROR, "an action listed twice",
    why="Running an action twice per cycle doubles its cost and, for preempt and reclaim, evicts twice; "
        "it is almost always a merge mistake.",
    fix="Remove the repeated action.",
    bad=_HEAD + "actions [enqueue, allocate, allocate]  # expect: PD303\n" + _TIERS,
    good=_HEAD + "actions [enqueue, allocate]\n" + _TIERS,
)


@rule(DUPLICATE_ACTION, structural=True)
def duplicate_action(ctx: LintContext) -> Iterator[Diagnostic]:
    for node in ctx.action_lists:
        seen: set[str] = set()
        for name in node.names:
            if name.value in seen:
                yield finding(DUPLICATE_ACTION, f"action `{name.value}` is listed twice", name.span,
                              "remove the repeat")
            seen.add(name.value)


NO_VICTIM_PLUGIN = CodeInfo(
    "PD304", "eviction-without-victim-plugin", Severity.ERROR,
    "preempt, reclaim or shuffle with no plugin that picks victims",
    why="Preempt asks plugins with a `preemptable` extension point (reclaim those with `reclaimable`, shuffle "
        "those with `victim`) which tasks may be evicted; with none enabled the answer is always \"none\" and "
        "the action never does anything.",
    fix="Add a plugin that picks victims (priority, gang, conformance, drf for preempt; gang, conformance, "
        "drf, proportion, capacity for reclaim; tdm, rescheduling for shuffle), or drop the action.",
    bad=_HEAD + "actions [enqueue, allocate, preempt]  # expect: PD304\n"
        "tier {\n  plugin predicates\n  plugin proportion\n}\n",
    good=_HEAD + "actions [enqueue, allocate, preempt]\n"
         "tier {\n  plugin priority\n  plugin predicates\n  plugin proportion\n}\n",
)


@rule(NO_VICTIM_PLUGIN, whole_policy=True)
def eviction_without_victim_plugin(ctx: LintContext) -> Iterator[Diagnostic]:
    for action in ctx.actions:
        point = cat.VICTIM_POINT.get(cat.ACTIONS[action].evicts_as or action)
        if point is not None and not ctx.enabled_at(point):
            able = sorted(name for name, spec in cat.PLUGINS.items() if point in spec.points)
            yield finding(NO_VICTIM_PLUGIN,
                          f"`{action}` is on, but no enabled plugin picks its victims (`{point}`)",
                          ctx.action_span(action), "add one of: " + ", ".join(able))


GANG_WITHOUT_ENQUEUE = CodeInfo(
    "PD305", "gang-without-enqueue", Severity.WARNING, "the gang plugin without the enqueue action",
    why="Without `enqueue`, jobs are allocated without first being admitted as a whole, so gangs that "
        "cannot all fit still hold part of the cluster while they wait.",
    fix="Add `enqueue` before `allocate`.",
    bad=_HEAD + "actions [allocate, backfill]  # expect: PD305\n" + _TIERS,
    good=_HEAD + "actions [enqueue, allocate, backfill]\n" + _TIERS,
)


@rule(GANG_WITHOUT_ENQUEUE, whole_policy=True)
def gang_without_enqueue(ctx: LintContext) -> Iterator[Diagnostic]:
    node = ctx.actions_node
    if node is None or ctx.plugin_named("gang") is None:
        return
    if "enqueue" not in ctx.actions and "allocate" in ctx.actions:
        yield finding(GANG_WITHOUT_ENQUEUE, "the gang plugin is on but `enqueue` is not: gangs are not "
                      "admitted as a whole before they take resources", node.span, "add `enqueue` before `allocate`")


UNUSED_ACTION_CONFIG = CodeInfo(
    "PD306", "unused-action-config", Severity.WARNING, "settings for an action that is not in the action list",
    why="An `action NAME { ... }` block only matters when the action runs; otherwise its settings are "
        "dropped from the plan without a word.",
    fix="Add the action to the action list, or remove the block.",
    bad=_HEAD + "actions [enqueue, allocate]\n" + _TIERS + "action preempt {  # expect: PD306\n"
        "  topology_aware = true\n}\n",
    good=_HEAD + "actions [enqueue, allocate, preempt]\n" + _TIERS + "action preempt {\n  topology_aware = true\n}\n",
)


@rule(UNUSED_ACTION_CONFIG, whole_policy=True)
def unused_action_config(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.actions_node is None:
        return
    for config in ctx.action_configs:
        name = config.name.value
        if name in cat.ACTIONS and name not in ctx.actions:
            yield finding(UNUSED_ACTION_CONFIG, f"`action {name}` is configured, but `{name}` is not in the "
                          "action list", config.name.span, f"add `{name}` to the action list, or remove this block")


MULTIPLE_ACTIONS = CodeInfo(
    "PD307", "multiple-action-lists", Severity.ERROR, "more than one `actions` declaration",
    why="Only the last `actions` list takes effect; an earlier one (often in an included file) is "
        "silently replaced.",
    fix="Keep one `actions` declaration.",
    bad=_HEAD + "actions [enqueue, allocate]\n" + _TIERS + "actions [enqueue, allocate, backfill]  # expect: PD307\n",
    good=_HEAD + "actions [enqueue, allocate, backfill]\n" + _TIERS,
)


@rule(MULTIPLE_ACTIONS, structural=True)
def multiple_action_lists(ctx: LintContext) -> Iterator[Diagnostic]:
    first = ctx.action_lists[0] if ctx.action_lists else None
    for node in ctx.action_lists[1:]:
        yield finding(MULTIPLE_ACTIONS, "a second `actions` declaration replaces the first", node.span,
                      "keep one `actions` declaration", [f"first declared at {first.span}"])


DUPLICATE_ACTION_CONFIG = CodeInfo(
    "PD308", "duplicate-action-config", Severity.WARNING, "two settings blocks for one action",
    why="Two `action NAME` blocks are merged, later settings winning; split settings are easy to miss "
        "when reading either block.",
    fix="Merge the blocks into one.",
    bad=_HEAD + "actions [enqueue, allocate]\n" + _TIERS + "action enqueue {\n  overcommit_factor = 1.5\n}\n"
        "action enqueue {  # expect: PD308\n  overcommit_factor = 2.0\n}\n",
    good=_HEAD + "actions [enqueue, allocate]\n" + _TIERS + "action enqueue {\n  overcommit_factor = 2.0\n}\n",
)


@rule(DUPLICATE_ACTION_CONFIG)
def duplicate_action_config(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[str, object] = {}
    for config in ctx.action_configs:
        name = config.name.value
        if name in first:
            yield finding(DUPLICATE_ACTION_CONFIG, f"`action {name}` is configured twice", config.name.span,
                          "merge the two blocks", [f"first block at {first[name]}"])
        else:
            first[name] = config.name.span


CANDIDATE_RANGE = CodeInfo(
    "PD309", "candidate-nodes-range", Severity.ERROR,
    "preempt's fewest candidate nodes is above its most candidate nodes",
    why="Preempt searches between `min_candidate_nodes_absolute` and `max_candidate_nodes_absolute` nodes "
        "for victims; a minimum above the maximum leaves no valid search size.",
    fix="Make `min_candidate_nodes_absolute` at most `max_candidate_nodes_absolute`.",
    bad=_HEAD + "actions [enqueue, allocate, preempt]\n" + _TIERS + "action preempt {\n"
        "  min_candidate_nodes_absolute = 50  # expect: PD309\n  max_candidate_nodes_absolute = 10\n}\n",
    good=_HEAD + "actions [enqueue, allocate, preempt]\n" + _TIERS + "action preempt {\n"
         "  min_candidate_nodes_absolute = 5\n  max_candidate_nodes_absolute = 10\n}\n",
)


@rule(CANDIDATE_RANGE, structural=True)
def candidate_nodes_range(ctx: LintContext) -> Iterator[Diagnostic]:
    low_name, high_name = "min_candidate_nodes_absolute", "max_candidate_nodes_absolute"
    written = ctx.ir.get("action_arguments", {}).get("preempt", {})
    if low_name not in written and high_name not in written:
        return
    defaults = {a.name: a.default for a in cat.ACTIONS["preempt"].arguments}
    low = written.get(low_name, defaults.get(low_name))
    high = written.get(high_name, defaults.get(high_name))
    if low is None or high is None or low <= high:
        return
    key = low_name if low_name in written else high_name
    yield finding(CANDIDATE_RANGE, f"`{low_name}` ({low}) is above `{high_name}` ({high})",
                  ctx.span(("action_arguments", "preempt", key)), f"make `{low_name}` at most {high}")


GANG_AND_LEGACY_EVICTION = CodeInfo(
    "PD310", "gang-eviction-with-legacy", Severity.ERROR,
    "a gang-aware eviction action beside the action it replaces",
    why="`gang_preempt` replaces `preempt` and `gang_reclaim` replaces `reclaim` (Volcano's gangpreempt and "
        "gangreclaim, which Volcano's design forbids beside the legacy actions): both in one cycle would pick "
        "victims twice by two rules, the second evicting around the first's reservations, and a gang the first "
        "keeps at its minimum the second would evict whole.",
    fix="Keep one of the two: `gang_preempt` or `preempt`, `gang_reclaim` or `reclaim`.",
    bad=_HEAD + "actions [enqueue, allocate, preempt, gang_preempt]  # expect: PD310\n" + _TIERS,
    good=_HEAD + "actions [enqueue, allocate, gang_preempt]\n" + _TIERS,
)


@rule(GANG_AND_LEGACY_EVICTION)
def gang_eviction_with_legacy(ctx: LintContext) -> Iterator[Diagnostic]:
    for node in ctx.action_lists:
        listed = {name.value for name in node.names}
        for name in node.names:
            spec = cat.ACTIONS.get(name.value)
            if spec is not None and spec.evicts_as in listed:
                yield finding(GANG_AND_LEGACY_EVICTION, f"`{name.value}` replaces `{spec.evicts_as}`: they cannot run "
                              "in one cycle", name.span, f"keep either `{name.value}` or `{spec.evicts_as}`")
