"""Queue hierarchy rules (PD2xx): names, and capability >= deserved >= guarantee up the tree.

Amounts compare in base units (the IR's), so `4` and `4000m` CPU are the same.
"""

from __future__ import annotations

from typing import Iterator

from compiler import catalog as cat
from compiler.lint.context import LintContext, QueueView, setting
from compiler.lint.registry import finding, rule
from compiler.quantities import format_base_units
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, register_code

_HEAD = 'policy "example" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin proportion\n}\n'
_CAPACITY_HEAD = ('policy "example" version 1\nactions [enqueue, allocate]\n'
                  'tier {\n  plugin predicates\n  plugin capacity { enable_hierarchy = true }\n}\n')


def _amount(resource: str, units: int) -> str:
    return format_base_units(resource, units)


def _value_span(ctx: LintContext, queue: QueueView, key: str, resource: str | None = None):
    path = ("queues", queue.index, key) if resource is None else ("queues", queue.index, key, resource)
    return ctx.span(path, queue.node.name.span)


DUPLICATE_QUEUE = CodeInfo(
    "PD201", "duplicate-queue", Severity.ERROR, "two queues with the same name",
    why="Jobs name their queue; with two queues of one name the scheduler cannot tell which one a job "
        "belongs to, and one queue's settings silently replace the other's.",
    fix="Rename one of the queues, or merge their settings into one block.",
    bad=_HEAD + "queue team-a { weight = 2 }\nqueue team-a { weight = 3 }  # expect: PD201\n",
    good=_HEAD + "queue team-a { weight = 2 }\nqueue team-b { weight = 3 }\n",
)


@rule(DUPLICATE_QUEUE, structural=True)
def duplicate_queue(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[str, QueueView] = {}
    for queue in ctx.queues:
        if queue.name in first:
            earlier = first[queue.name].node.name.span
            yield finding(DUPLICATE_QUEUE, f"queue `{queue.name}` is declared twice", queue.node.name.span,
                          "rename it or merge the two blocks", [f"first declared at {earlier}"])
        else:
            first[queue.name] = queue


CHILD_CAPABILITY = CodeInfo(
    "PD202", "child-capability-above-parent", Severity.ERROR,
    "a child queue's capability is above its parent's",
    why="A child queue takes its resources from its parent, so it can never use more than the parent's "
        "capability; a larger cap promises what cannot be delivered.",
    fix="Lower the child's capability to at most the parent's, or raise the parent's.",
    bad=_CAPACITY_HEAD + "queue ml {\n  capability = { cpu: 100 }\n"
        "  queue training { capability = { cpu: 200 } }  # expect: PD202\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  capability = { cpu: 100 }\n"
         "  queue training { capability = { cpu: 80 } }\n}\n",
)


@rule(CHILD_CAPABILITY)
def child_capability_above_parent(ctx: LintContext) -> Iterator[Diagnostic]:
    for queue in ctx.queues:
        if queue.parent_index is None:
            continue
        parent = ctx.queues[queue.parent_index]
        for resource, amount in queue.resources("capability").items():
            limit = parent.resources("capability").get(resource)
            if limit is not None and amount > limit:
                yield finding(
                    CHILD_CAPABILITY,
                    f"queue `{queue.name}` caps {resource} at {_amount(resource, amount)}, above its parent "
                    f"`{parent.name}`'s capability {_amount(resource, limit)}",
                    _value_span(ctx, queue, "capability", resource),
                    f"lower it to at most {_amount(resource, limit)}",
                )


def _children_sum_rule(info: CodeInfo, child_key: str, parent_key: str):
    """Children's `child_key` amounts, summed per resource, must stay within the parent's `parent_key`."""

    def check(ctx: LintContext) -> Iterator[Diagnostic]:
        for parent in ctx.queues:
            limits = parent.resources(parent_key)
            children = ctx.children(parent)
            for resource, limit in limits.items():
                total = 0
                for child in children:
                    amount = child.resources(child_key).get(resource)
                    if amount is None:
                        continue
                    total += amount
                    if total > limit:
                        yield finding(
                            info,
                            f"the children of `{parent.name}` add up to {child_key} {_amount(resource, total)} "
                            f"{resource}, above its {parent_key} {_amount(resource, limit)}",
                            _value_span(ctx, child, child_key, resource),
                            f"lower the children's {child_key}, or raise `{parent.name}`'s {parent_key}",
                            [f"`{parent.name}`'s {parent_key} is set at {_value_span(ctx, parent, parent_key, resource)}"],
                        )
                        break

    check.__name__ = info.name.replace("-", "_")
    check.__module__ = __name__
    return check


CHILD_GUARANTEE_CAPABILITY = CodeInfo(
    "PD203", "children-guarantee-above-parent-capability", Severity.ERROR,
    "child queues guarantee more in total than their parent's capability",
    why="Guarantees are reserved out of the parent; children cannot be promised more than the parent may "
        "ever hold, so some guarantee could never be honoured.",
    fix="Lower the children's guarantees so they sum to at most the parent's capability.",
    bad=_CAPACITY_HEAD + "queue ml {\n  capability = { \"nvidia.com/gpu\": 8 }\n"
        "  queue training { guarantee = { \"nvidia.com/gpu\": 6 } }\n"
        "  queue serving { guarantee = { \"nvidia.com/gpu\": 4 } }  # expect: PD203\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  capability = { \"nvidia.com/gpu\": 8 }\n"
         "  queue training { guarantee = { \"nvidia.com/gpu\": 4 } }\n"
         "  queue serving { guarantee = { \"nvidia.com/gpu\": 4 } }\n}\n",
)
rule(CHILD_GUARANTEE_CAPABILITY)(_children_sum_rule(CHILD_GUARANTEE_CAPABILITY, "guarantee", "capability"))

CHILD_GUARANTEE_GUARANTEE = CodeInfo(
    "PD204", "children-guarantee-above-parent-guarantee", Severity.ERROR,
    "child queues guarantee more in total than their parent guarantees",
    why="A parent's guarantee is the floor its children's guarantees are carved from; children reserving "
        "more than the parent holds in reserve cannot all be served when the cluster is full.",
    fix="Raise the parent's guarantee to at least the sum of its children's, or lower the children's.",
    bad=_CAPACITY_HEAD + "queue ml {\n  guarantee = { cpu: 10 }\n"
        "  queue training { guarantee = { cpu: 8 } }\n"
        "  queue serving { guarantee = { cpu: 4 } }  # expect: PD204\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  guarantee = { cpu: 12 }\n"
         "  queue training { guarantee = { cpu: 8 } }\n"
         "  queue serving { guarantee = { cpu: 4 } }\n}\n",
)
rule(CHILD_GUARANTEE_GUARANTEE)(_children_sum_rule(CHILD_GUARANTEE_GUARANTEE, "guarantee", "guarantee"))

CHILD_DESERVED = CodeInfo(
    "PD209", "children-deserved-above-parent", Severity.ERROR,
    "child queues deserve more in total than their parent deserves",
    why="The capacity plugin splits a parent's deserved share among its children; shares that sum above "
        "the parent's cannot all be met, and reclaim would chase a share that does not exist.",
    fix="Make the children's deserved amounts sum to at most the parent's deserved.",
    bad=_CAPACITY_HEAD + "queue ml {\n  deserved = { cpu: 10 }\n"
        "  queue training { deserved = { cpu: 6 } }\n"
        "  queue serving { deserved = { cpu: 6 } }  # expect: PD209\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  deserved = { cpu: 12 }\n"
         "  queue training { deserved = { cpu: 6 } }\n"
         "  queue serving { deserved = { cpu: 6 } }\n}\n",
)
rule(CHILD_DESERVED)(_children_sum_rule(CHILD_DESERVED, "deserved", "deserved"))


def _own_bound_rule(info: CodeInfo, low_key: str, high_key: str, relation: str, hint: str,
                    point_at: str | None = None):
    """Within one queue, `low_key` must not exceed `high_key` on any resource both set.

    The finding points at `point_at` (default `low_key`): the value the fix changes."""

    def check(ctx: LintContext) -> Iterator[Diagnostic]:
        for queue in ctx.queues:
            highs = queue.resources(high_key)
            for resource, amount in queue.resources(low_key).items():
                high = highs.get(resource)
                if high is not None and amount > high:
                    yield finding(
                        info,
                        f"queue `{queue.name}`'s {low_key} {_amount(resource, amount)} {resource} is above "
                        f"its {high_key} {_amount(resource, high)}{relation}",
                        _value_span(ctx, queue, point_at or low_key, resource), hint,
                    )

    check.__name__ = info.name.replace("-", "_")
    check.__module__ = __name__
    return check


GUARANTEE_ABOVE_CAPABILITY = CodeInfo(
    "PD205", "guarantee-above-capability", Severity.ERROR, "a queue guarantees more than its own capability",
    why="The guarantee is reserved for the queue, the capability is the most it may use: reserving more "
        "than it may ever use locks resources away from every other queue for nothing.",
    fix="Lower the guarantee to at most the capability.",
    bad=_HEAD + "queue batch {\n  capability = { cpu: 10 }\n  guarantee = { cpu: 20 }  # expect: PD205\n}\n",
    good=_HEAD + "queue batch {\n  capability = { cpu: 20 }\n  guarantee = { cpu: 10 }\n}\n",
)
rule(GUARANTEE_ABOVE_CAPABILITY)(_own_bound_rule(
    GUARANTEE_ABOVE_CAPABILITY, "guarantee", "capability", "", "lower the guarantee to at most the capability"))

DESERVED_ABOVE_CAPABILITY = CodeInfo(
    "PD206", "deserved-above-capability", Severity.ERROR, "a queue deserves more than its own capability",
    why="A queue is capped at its capability, so a deserved share above it can never be reached and reclaim "
        "keeps evicting other queues' tasks on its behalf.",
    fix="Lower deserved to at most the capability.",
    bad=_CAPACITY_HEAD + "queue batch {\n  capability = { memory: 64Gi }\n"
        "  deserved = { memory: 128Gi }  # expect: PD206\n}\n",
    good=_CAPACITY_HEAD + "queue batch {\n  capability = { memory: 128Gi }\n  deserved = { memory: 64Gi }\n}\n",
)
rule(DESERVED_ABOVE_CAPABILITY)(_own_bound_rule(
    DESERVED_ABOVE_CAPABILITY, "deserved", "capability", "", "lower deserved to at most the capability"))

DESERVED_BELOW_GUARANTEE = CodeInfo(
    "PD210", "deserved-below-guarantee", Severity.WARNING, "a queue deserves less than it is guaranteed",
    why="A queue's deserved share is raised to its guarantee anyway, so the lower deserved value is never "
        "used and misleads the reader.",
    fix="Set deserved to at least the guarantee, or drop it.",
    bad=_CAPACITY_HEAD + "queue batch {\n  deserved = { cpu: 4 }  # expect: PD210\n  guarantee = { cpu: 8 }\n}\n",
    good=_CAPACITY_HEAD + "queue batch {\n  deserved = { cpu: 8 }\n  guarantee = { cpu: 4 }\n}\n",
)
rule(DESERVED_BELOW_GUARANTEE)(_own_bound_rule(
    DESERVED_BELOW_GUARANTEE, "guarantee", "deserved", ", so deserved is raised to the guarantee",
    "set deserved to at least the guarantee, or remove it", point_at="deserved"))


BORROW_LIMIT_WITHOUT_BORROW = CodeInfo(
    "PD207", "borrow-limit-without-borrow", Severity.WARNING, "`borrow_limit` on a queue that may not borrow",
    why="`borrow = false` forbids borrowing, so a borrow limit has nothing to limit.",
    fix="Remove `borrow_limit`, or allow borrowing with `borrow = true`.",
    bad=_HEAD + "queue batch {\n  borrow = false\n  borrow_limit = { cpu: 8 }  # expect: PD207\n}\n",
    good=_HEAD + "queue batch {\n  borrow = true\n  borrow_limit = { cpu: 8 }\n}\n",
)


@rule(BORROW_LIMIT_WITHOUT_BORROW)
def borrow_limit_without_borrow(ctx: LintContext) -> Iterator[Diagnostic]:
    for queue in ctx.queues:
        limit = setting(queue.node.settings, "borrow_limit")
        if queue.values.get("borrow") is False and limit is not None:
            yield finding(BORROW_LIMIT_WITHOUT_BORROW,
                          f"queue `{queue.name}` sets `borrow_limit` but `borrow = false`", limit.key.span,
                          "remove `borrow_limit`, or set `borrow = true`")


NESTED_ROOT = CodeInfo(
    "PD208", "nested-root-queue", Severity.ERROR, "a queue named `root` inside another queue",
    why="`root` is the top of the queue tree that every other queue hangs from; a nested `root` would make "
        "the tree a cycle.",
    fix="Rename the nested queue; declare `root` only at the top level, if at all.",
    bad=_CAPACITY_HEAD + "queue ml {\n  queue root { weight = 2 }  # expect: PD208\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  queue research { weight = 2 }\n}\n",
)


@rule(NESTED_ROOT, structural=True)
def nested_root_queue(ctx: LintContext) -> Iterator[Diagnostic]:
    for queue in ctx.queues:
        if queue.nested and queue.name == cat.ROOT_QUEUE:
            yield finding(NESTED_ROOT, "`root` is the top of the queue tree and cannot be nested",
                          queue.node.name.span, "rename this queue")


SHARE_PLUGIN_MISSING = CodeInfo(
    "PD211", "queues-without-share-plugin", Severity.WARNING,
    "queues are declared but neither `proportion` nor `capacity` is on",
    why="Weights, capabilities and guarantees are enforced by the proportion or capacity plugin; without "
        "one, every queue setting is ignored.",
    fix="Add `plugin proportion` (weights) or `plugin capacity` (explicit deserved) to a tier.",
    bad='policy "example" version 1\nactions [enqueue, allocate]\ntier {\n  plugin gang\n  plugin predicates\n}\n'
        "queue batch { weight = 2 }  # expect: PD211\n",
    good='policy "example" version 1\nactions [enqueue, allocate]\n'
         'tier {\n  plugin gang\n  plugin predicates\n  plugin proportion\n}\n'
         "queue batch { weight = 2 }\n",
)
SHARE_PLUGINS = ("proportion", "capacity")


@rule(SHARE_PLUGIN_MISSING, whole_policy=True)
def queues_without_share_plugin(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.queues and not any(ctx.plugin_named(name) for name in SHARE_PLUGINS):
        queue = ctx.queues[0]
        yield finding(SHARE_PLUGIN_MISSING,
                      "queues are declared but no `proportion` or `capacity` plugin enforces them",
                      queue.node.name.span, "add `plugin proportion` to a tier")


DESERVED_WITHOUT_CAPACITY = CodeInfo(
    "PD212", "deserved-without-capacity", Severity.WARNING, "`deserved` set while the capacity plugin is off",
    why="Only the capacity plugin reads an explicit deserved share; proportion computes deserved from the "
        "weights and ignores the setting.",
    fix="Use `plugin capacity` instead of `proportion`, or remove `deserved` and tune `weight`.",
    bad=_HEAD + "queue batch {\n  deserved = { cpu: 8 }  # expect: PD212\n}\n",
    good=_CAPACITY_HEAD + "queue batch {\n  deserved = { cpu: 8 }\n}\n",
)


@rule(DESERVED_WITHOUT_CAPACITY, whole_policy=True)
def deserved_without_capacity(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.plugin_named("capacity"):
        return
    for queue in ctx.queues:
        if setting(queue.node.settings, "deserved") is not None:
            yield finding(DESERVED_WITHOUT_CAPACITY,
                          f"queue `{queue.name}` sets `deserved`, which only the capacity plugin reads",
                          setting(queue.node.settings, "deserved").key.span,
                          "use `plugin capacity`, or remove `deserved`")


HIERARCHY_UNSUPPORTED = CodeInfo(
    "PD213", "nested-queues-flat-in-volcano", Severity.INFO,
    "nested queues under a plugin Volcano runs flat",
    why="policydsl applies a queue tree whatever shares it out: proportion fills each parent's share down to "
        "its children by weight, and capacity caps each child by its parent's room (runtime/README.md). "
        "Volcano does not: its proportion has no tree, and its capacity ignores `spec.parent` unless "
        "`enableHierarchy` is set. The policy means what it says here; exported to Volcano "
        "(`export-volcano --queues`), the nested queues would be shared as flat siblings.",
    fix="Nothing, if the policy only runs on policydsl. For Volcano to apply the same tree, set "
        "`enable_hierarchy = true` on capacity, or use capacity with hierarchy instead of proportion "
        "(each queue then needs `deserved`).",
    bad=_HEAD + "queue ml {\n  queue training { weight = 2 }  # expect: PD213\n}\n",
    good=_CAPACITY_HEAD + "queue ml {\n  deserved = { cpu: 8 }\n  queue training { deserved = { cpu: 4 } }\n}\n",
)


@rule(HIERARCHY_UNSUPPORTED, whole_policy=True)
def nested_queues_flat_in_volcano(ctx: LintContext) -> Iterator[Diagnostic]:
    capacity = ctx.plugin_named("capacity")
    if capacity is not None and capacity.plan.enabled("hierarchy"):
        return      # Volcano's capacity with enableHierarchy applies the same tree
    sharing = "capacity" if capacity is not None else "proportion" if ctx.plugin_named("proportion") else None
    if sharing is None:
        return      # no plugin shares queues at all: PD212 says so
    hint = ("set `enable_hierarchy = true` on `plugin capacity` for Volcano to apply the same tree"
            if sharing == "capacity" else
            "nothing to change for policydsl; on Volcano only capacity with `enable_hierarchy = true` has a tree")
    for queue in ctx.queues:
        parent = ctx.queues[queue.parent_index] if queue.parent_index is not None else None
        if queue.nested and parent is not None and parent.name != cat.ROOT_QUEUE:
            yield finding(HIERARCHY_UNSUPPORTED,
                          f"queue `{queue.name}` is nested in `{parent.name}`: policydsl shares it down the tree, "
                          f"but Volcano's {sharing}{'' if sharing == 'proportion' else ' without enableHierarchy'} "
                          f"would treat it as a flat sibling", queue.node.name.span, hint)
            return  # one report: it concerns the whole tree, not one queue


CLOSED_DEFAULT = CodeInfo(
    "PD214", "closed-default-queue", Severity.WARNING, "the `default` queue is closed",
    why="Jobs that name no queue go to `default`; closing it means such jobs stay pending forever.",
    fix="Keep `default` open, or make sure every job names a queue.",
    bad=_HEAD + "queue default {\n  state = closed  # expect: PD214\n}\n",
    good=_HEAD + "queue default {\n  state = open\n}\n",
)


@rule(CLOSED_DEFAULT)
def closed_default_queue(ctx: LintContext) -> Iterator[Diagnostic]:
    for queue in ctx.queues:
        if queue.name == cat.DEFAULT_QUEUE and queue.values.get("state") == "closed":
            yield finding(CLOSED_DEFAULT, "the `default` queue is closed: jobs that name no queue never start",
                          _value_span(ctx, queue, "state"), "keep it open, or set a queue on every job")


NODE_GROUPS_WITHOUT_PLUGIN = CodeInfo(
    "PD216", "node-groups-without-nodegroup", Severity.ERROR,
    "a queue names node groups while the nodegroup plugin is not enabled",
    why="Only the nodegroup plugin keeps a queue's pods in (or out of) its node groups; without it the "
        "setting would be accepted and do nothing, and the queue's pods would land on any node.",
    fix="Add `plugin nodegroup` to a tier, or remove the node group settings.",
    bad=_HEAD + 'queue batch {\n  node_groups = ["cpu-pool"]  # expect: PD216\n}\n',
    good=('policy "example" version 1\nactions [enqueue, allocate]\n'
          'tier {\n  plugin predicates\n  plugin proportion\n  plugin nodegroup\n}\n'
          'queue batch {\n  node_groups = ["cpu-pool"]\n}\n'),
)
NODE_GROUP_SETTINGS = ("node_groups", "preferred_node_groups", "excluded_node_groups", "avoided_node_groups")


@rule(NODE_GROUPS_WITHOUT_PLUGIN, whole_policy=True)
def node_groups_without_plugin(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.plugin_named("nodegroup"):
        return
    for queue in ctx.queues:
        for key in NODE_GROUP_SETTINGS:
            found = setting(queue.node.settings, key)
            if found is not None:
                yield finding(NODE_GROUPS_WITHOUT_PLUGIN,
                              f"queue `{queue.name}` sets `{key}`, which only the nodegroup plugin reads",
                              found.key.span, "add `plugin nodegroup`, or remove the setting")


# Judged against a cluster, which lint does not have: `policydsl simulate` (and `policydsl test`,
# which simulates) reports it for the cluster it runs on, the connector logs it with an Event on
# the Queue and the policydsl_queue_unmet_promise gauge. Registered here, with the queue codes.
PROMISE_BEYOND_CLUSTER = register_code(CodeInfo(
    "PD215", "promise-beyond-cluster", Severity.WARNING,
    "queue guarantees (or deserved shares) adding up to more than the cluster has",
    why="A guarantee is taken off every other queue's room whether or not the guaranteed queue uses it: "
        "guarantees larger than the cluster (or than their parent's room) leave the other queues nothing "
        "of that resource, so their jobs wait although the nodes are idle, and the promise itself is not kept "
        "either. Reported by `policydsl simulate` for the cluster it simulates, and by the scheduler for "
        "the cluster it runs on.",
    fix="Lower the guarantees (or deserved shares) to what the cluster, or the parent queue, can hold; "
        "the message names each queue's amount and the room there is.",
))


# Volcano's capacity plugin counts a DeviceClass's devices under `deviceclass/<class>` (done:
# runtime.cluster.draquota) and a consumable capacity of them under `<dim>.deviceclass/<class>`
# (capacity.DRAConsumableCapacityEnable), which is not evaluated.
DEVICE_CAPACITY_SEPARATOR = ".deviceclass/"
DEVICE_CAPACITY_QUOTA = CodeInfo(
    "PD217", "device-capacity-quota", Severity.ERROR,
    "a queue sets a quota on a DeviceClass's consumable capacity (`<dim>.deviceclass/<class>`)",
    why="Volcano's capacity plugin can count a dimension of DRA devices' capacity (`memory.deviceclass/<class>`) "
        "against a queue; policydsl counts devices (`deviceclass/<class>`) but not their capacity, so the quota "
        "would be accepted and bound nothing.",
    fix="Bound the queue by the class's device count, `deviceclass/<class>`, instead.",
    bad=_CAPACITY_HEAD + 'queue vgpu {\n  capability = { "cores.deviceclass/vgpu": 800 }  # expect: PD217\n}\n',
    good=_CAPACITY_HEAD + 'queue vgpu {\n  capability = { "deviceclass/vgpu": 8 }\n}\n',
)


@rule(DEVICE_CAPACITY_QUOTA)
def device_capacity_quota(ctx: LintContext) -> Iterator[Diagnostic]:
    for queue in ctx.queues:
        for key in ("capability", "deserved", "guarantee", "borrow_limit"):
            for resource in queue.resources(key):
                head, sep, tail = resource.partition(DEVICE_CAPACITY_SEPARATOR)
                if sep and head and tail:
                    yield finding(DEVICE_CAPACITY_QUOTA,
                                  f"queue `{queue.name}` sets {key} `{resource}`: a DeviceClass's consumable "
                                  f"capacity, which is not counted", _value_span(ctx, queue, key, resource),
                                  f"bound the device count instead: `deviceclass/{tail}`")
