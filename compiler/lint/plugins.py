"""Plugin rules (PD4xx): conflicts, repeats, weights that switch a scorer off, dead plugins."""

from __future__ import annotations

from typing import Iterator

from compiler import catalog as cat
from compiler.lint.context import LintContext, PluginView
from compiler.lint.registry import finding, rule
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity

_HEAD = 'policy "example" version 1\nactions [enqueue, allocate]\n'

# Extension points that only one action consults: a plugin answering nothing else is idle
# unless that action runs.
ACTION_OF_POINT: dict[str, str] = {
    "job_enqueued": "enqueue",
    "preemptive": "reclaim",
    **{point: action for action, point in cat.VICTIM_POINT.items()},
}

# deviceshare's device modes: each claims the same cards, so at most one may be on.
DEVICE_MODES = ("gpu_sharing", "gpu_number", "vgpu")

CONFLICTING_PLUGINS = CodeInfo(
    "PD401", "conflicting-plugins", Severity.WARNING, "two plugins that do one job in two ways",
    why="Some plugins do the same job in incompatible ways: proportion and capacity both compute every "
        "queue's share, and the scheduler would have two answers (the tier rules combine them: the smaller "
        "allocation wins, the first tier orders). Volcano runs such a configuration, and so does the scheduler: "
        "a warning, not an error.",
    fix="Keep one of the two plugins.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin proportion\n  plugin capacity  # expect: PD401\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin capacity\n}\n",
)


@rule(CONFLICTING_PLUGINS)
def conflicting_plugins(ctx: LintContext) -> Iterator[Diagnostic]:
    earlier: dict[str, PluginView] = {}
    for plugin in ctx.known_plugins():
        for other in plugin.spec.conflicts:
            if other in earlier:
                yield finding(CONFLICTING_PLUGINS, f"plugin `{plugin.name}` cannot be combined with `{other}`",
                              plugin.node.name.span, f"keep either `{plugin.name}` or `{other}`",
                              [f"`{other}` is at {earlier[other].node.name.span}"])
        earlier.setdefault(plugin.name, plugin)


DRF_HIERARCHY_PROPORTION = CodeInfo(
    "PD402", "drf-hierarchy-with-proportion", Severity.ERROR,
    "drf with hierarchy enabled in the same tier as proportion",
    why="Hierarchical drf shares resources down the queue tree itself; proportion in the same tier would "
        "order and cap the same queues by another rule. Volcano refuses this combination.",
    fix="Turn off `enable_hierarchy` on drf, or move proportion to another tier (or use capacity).",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin proportion\n"
        "  plugin drf { enable_hierarchy = true }  # expect: PD402\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin proportion\n  plugin drf\n}\n",
)


@rule(DRF_HIERARCHY_PROPORTION)
def drf_hierarchy_with_proportion(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        if plugin.name != "drf" or not plugin.plan.enabled("hierarchy"):
            continue
        same_tier = [p for p in ctx.known_plugins() if p.tier_index == plugin.tier_index and p.name == "proportion"]
        if same_tier:
            yield finding(DRF_HIERARCHY_PROPORTION,
                          "drf has `enable_hierarchy = true` in the same tier as proportion",
                          ctx.span((*plugin.path, "flags", "hierarchy"), plugin.node.name.span),
                          "turn off drf's hierarchy, or move proportion to another tier",
                          [f"proportion is at {same_tier[0].node.name.span}"])


DUPLICATE_PLUGIN = CodeInfo(
    "PD403", "duplicate-plugin", Severity.ERROR, "a plugin listed twice",
    why="A plugin runs once per extension point per cycle; a second entry with other settings leaves it "
        "unclear which settings apply.",
    fix="Keep one entry and merge its settings.",
    bad=_HEAD + "tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin gang  # expect: PD403\n}\n",
    good=_HEAD + "tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n}\n",
)


@rule(DUPLICATE_PLUGIN, structural=True)
def duplicate_plugin(ctx: LintContext) -> Iterator[Diagnostic]:
    first: dict[str, PluginView] = {}
    for plugin in ctx.plugins:
        if plugin.name in first:
            yield finding(DUPLICATE_PLUGIN, f"plugin `{plugin.name}` is listed twice", plugin.node.name.span,
                          "keep one entry", [f"first listed at {first[plugin.name].node.name.span}"])
        else:
            first[plugin.name] = plugin


CONFLICTING_DEVICE_MODES = CodeInfo(
    "PD404", "conflicting-device-modes", Severity.ERROR, "deviceshare with more than one device mode on",
    why="`gpu_sharing`, `gpu_number` and `vgpu` each manage the same cards by their own accounting; with "
        "two on, a card could be handed out twice.",
    fix="Turn on only one of gpu_sharing, gpu_number and vgpu.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin deviceshare {\n    gpu_sharing = true\n"
        "    gpu_number = true  # expect: PD404\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin deviceshare {\n    gpu_sharing = true\n  }\n}\n",
)


@rule(CONFLICTING_DEVICE_MODES, structural=True)
def conflicting_device_modes(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        on = [mode for mode in DEVICE_MODES if plugin.explicit_arguments.get(mode) is True]
        if plugin.name != "deviceshare" or len(on) < 2:
            continue
        for mode in on[1:]:
            yield finding(CONFLICTING_DEVICE_MODES, f"deviceshare turns on both `{on[0]}` and `{mode}`",
                          ctx.span((*plugin.path, "arguments", mode), plugin.node.name.span),
                          "turn on only one device mode")


ZERO_WEIGHT = CodeInfo(
    "PD405", "zero-plugin-weight", Severity.WARNING, "a scoring plugin with weight 0",
    why="A plugin's weight multiplies its node score; at 0 the plugin still runs every cycle but never "
        "changes where a task goes (Volcano's `binpack.weight: 0` turns binpack off).",
    fix="Give the plugin a positive weight, or remove it.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin binpack weight 0  # expect: PD405\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin binpack weight 5\n}\n",
)


@rule(ZERO_WEIGHT)
def zero_plugin_weight(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        if plugin.node.weight is not None and plugin.spec.scores and plugin.plan.weight == 0:
            yield finding(ZERO_WEIGHT, f"plugin `{plugin.name}` has weight 0: it adds nothing to node scores",
                          plugin.node.weight.span, "give it a positive weight, or remove the plugin")


ZERO_SCORERS = CodeInfo(
    "PD406", "all-scorer-weights-zero", Severity.WARNING,
    "every per-resource or per-scorer weight of a scoring plugin is 0",
    why="binpack and nodeorder add up weighted scorers; with every weight at 0 the sum is always 0 and the "
        "plugin has no effect.",
    fix="Give at least one scorer a positive weight, or remove the plugin.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin binpack {  # expect: PD406\n"
        "    cpu = 0\n    memory = 0\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin binpack {\n    cpu = 0\n    memory = 2\n  }\n}\n",
)


# Resource maps that are no scorer weights: resource-strategy-fit's proportional ratios.
NOT_SCORER_WEIGHTS = frozenset({"proportional_cpu", "proportional_memory"})


def _scorer_weights(plugin: PluginView) -> list[float] | None:
    """The plugin's scorer weights (numbers and resource-weight maps), or None if it has none."""
    if plugin.name == "resource-strategy-fit":
        # Its per-resource weights of 0 or less count 1 (Volcano): it scores 0 only when its own
        # weight and sra_weight are both 0.
        own = plugin.plan.weight if plugin.plan.weight is not None else plugin.spec.default_weight
        return [float(own or 0), float(plugin.plan.arguments.get("sra_weight") or 0)]
    weights: list[float] = []
    for arg in plugin.spec.arguments:
        if arg.name in NOT_SCORER_WEIGHTS:
            continue
        value = plugin.plan.arguments.get(arg.name)
        if arg.kind == cat.NUMBER and isinstance(value, (int, float)):
            weights.append(value)
        elif arg.kind == cat.RESOURCE_WEIGHTS and isinstance(value, dict):
            weights.extend(v for v in value.values() if isinstance(v, (int, float)))
    return weights or None


@rule(ZERO_SCORERS)
def all_scorer_weights_zero(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        if not plugin.spec.scores or not plugin.explicit_arguments:
            continue
        weights = _scorer_weights(plugin)
        if weights is not None and all(w == 0 for w in weights):
            yield finding(ZERO_SCORERS, f"every scorer weight of `{plugin.name}` is 0: it scores every node 0",
                          plugin.node.name.span, "give at least one scorer a positive weight")


EMPTY_TIER = CodeInfo(
    "PD407", "empty-tier", Severity.WARNING, "a tier with no plugins",
    why="An empty tier does nothing; it is usually left over from moving plugins around.",
    fix="Remove the tier or add plugins to it.",
    bad=_HEAD + "tier {\n  plugin predicates\n}\ntier \"scoring\" { }  # expect: PD407\n",
    good=_HEAD + "tier {\n  plugin predicates\n}\ntier \"scoring\" {\n  plugin binpack\n}\n",
)


@rule(EMPTY_TIER)
def empty_tier(ctx: LintContext) -> Iterator[Diagnostic]:
    for tier in ctx.tiers:
        if not tier.plugins:
            label = f" `{tier.label.value}`" if tier.label else ""
            yield finding(EMPTY_TIER, f"tier{label} has no plugins", tier.span, "remove it, or add plugins")


MISSING_PREDICATES = CodeInfo(
    "PD408", "missing-predicates", Severity.WARNING, "`allocate` runs without the predicates plugin",
    why="The predicates plugin filters out nodes a task does not fit: too little free CPU or memory, "
        "taints, node selectors. Without it tasks may be placed on nodes that then reject them.",
    fix="Add `plugin predicates` to a tier.",
    bad='policy "example" version 1\nactions [enqueue, allocate]  # expect: PD408\n'
        "tier {\n  plugin gang\n  plugin proportion\n}\n",
    good='policy "example" version 1\nactions [enqueue, allocate]\n'
         "tier {\n  plugin gang\n  plugin predicates\n  plugin proportion\n}\n",
)


@rule(MISSING_PREDICATES, whole_policy=True)
def missing_predicates(ctx: LintContext) -> Iterator[Diagnostic]:
    if "allocate" not in ctx.actions:
        return
    predicates = ctx.plugin_named("predicates")
    if predicates is None or not predicates.plan.enabled("predicate"):
        yield finding(MISSING_PREDICATES, "`allocate` runs, but the predicates plugin is not on: node fit is "
                      "not checked", ctx.action_span("allocate"), "add `plugin predicates` to a tier")


SWITCHED_OFF = CodeInfo(
    "PD409", "plugin-switched-off", Severity.WARNING, "a plugin with every extension point turned off",
    why="`enable_*` flags turn single extension points off; with all of them off the plugin never answers "
        "and only costs time.",
    fix="Remove the plugin, or turn on the extension point you meant to keep.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin conformance {  # expect: PD409\n"
        "    enable_preemptable = false\n    enable_reclaimable = false\n  }\n}\n",
    good='policy "example" version 1\nactions [enqueue, allocate, reclaim]\n'
         "tier {\n  plugin predicates\n  plugin proportion\n  plugin conformance {\n"
         "    enable_preemptable = false\n  }\n}\n",
)


def _live_points(plugin: PluginView) -> list[str]:
    """Extension points where the plugin answers (points without a flag are always live)."""
    flags = {f.name for f in cat.FLAGS}
    return sorted(p for p in plugin.spec.points if p not in flags or plugin.plan.enabled(p))


@rule(SWITCHED_OFF)
def plugin_switched_off(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        if not _live_points(plugin):
            yield finding(SWITCHED_OFF, f"every extension point of `{plugin.name}` is turned off",
                          plugin.node.name.span, "remove the plugin, or turn one point back on")


IDLE_PLUGIN = CodeInfo(
    "PD410", "plugin-without-action", Severity.WARNING, "a plugin that only serves actions the policy does not run",
    why="Some plugins only answer questions one action asks: overcommit admits jobs for `enqueue`, "
        "conformance protects pods from `preempt` and `reclaim`. Without those actions they never run.",
    fix="Add the action the plugin serves, or remove the plugin.",
    bad='policy "example" version 1\nactions [allocate]\n'
        "tier {\n  plugin predicates\n  plugin overcommit  # expect: PD410\n}\n",
    good='policy "example" version 1\nactions [enqueue, allocate]\n'
         "tier {\n  plugin predicates\n  plugin overcommit\n}\n",
)


@rule(IDLE_PLUGIN, whole_policy=True)
def plugin_without_action(ctx: LintContext) -> Iterator[Diagnostic]:
    if ctx.actions_node is None:
        return
    for plugin in ctx.known_plugins():
        live = _live_points(plugin)
        if live and all(ACTION_OF_POINT.get(point) not in (None, *cat.consulting(ctx.actions)) for point in live):
            needed = sorted({ACTION_OF_POINT[p] for p in live})
            yield finding(IDLE_PLUGIN, f"plugin `{plugin.name}` only serves " + ", ".join(f"`{a}`" for a in needed)
                          + ", which the policy does not run", plugin.node.name.span,
                          "add the action, or remove the plugin")


REDUNDANT_DEFAULT = CodeInfo(
    "PD411", "redundant-default", Severity.INFO, "a plugin or action setting restates its default",
    why="Writing a default out adds noise, and hides which settings were deliberately changed.",
    fix="Remove the setting (or keep it, if spelling it out documents a decision).",
    bad=_HEAD + "tier {\n  plugin predicates {\n    taint_toleration = true  # expect: PD411\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin binpack {\n    cpu = 2\n  }\n}\n",
)


@rule(REDUNDANT_DEFAULT)
def redundant_default(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        for written in plugin.node.settings:
            key = written.key.value
            flag = cat.FLAGS_BY_SETTING.get(key)
            arg = plugin.spec.argument(key)
            if flag is not None and flag.name in plugin.spec.points:
                value, default = plugin.plan.flags.get(flag.name), flag.default
            elif arg is not None and key in plugin.explicit_arguments:
                value, default = plugin.explicit_arguments[key], arg.default
            else:
                continue
            if default is not None and value == default and type(value) is type(default):
                yield finding(REDUNDANT_DEFAULT, f"`{key} = {_show(value)}` is already the default of "
                              f"`{plugin.name}`", written.key.span, "remove it")
    for config in ctx.action_configs:
        spec = cat.ACTIONS.get(config.name.value)
        written_args = ctx.ir.get("action_arguments", {}).get(config.name.value, {})
        for written in (config.settings if spec else ()):
            arg = next((a for a in spec.arguments if a.name == written.key.value), None)
            value = written_args.get(written.key.value)
            if arg is not None and arg.default is not None and value == arg.default \
                    and type(value) is type(arg.default):
                yield finding(REDUNDANT_DEFAULT, f"`{arg.name} = {_show(value)}` is already the default of "
                              f"`action {config.name.value}`", written.key.span, "remove it")


def _show(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# predicates' switches of rules a pod declares in its own spec (node affinity, tolerations,
# inter-pod affinity, topology spread, host ports): off, the pods' rules are not enforced.
POD_RULE_SWITCHES = {
    "node_affinity": "nodeSelector and required node affinity",
    "taint_toleration": "taints (pods are placed on nodes whose taints they do not tolerate)",
    "pod_affinity": "podAffinity and podAntiAffinity",
    "pod_topology_spread": "topologySpreadConstraints",
    "node_ports": "hostPort",
    "volume_zone": "volumes' zones (a pod lands where its bound volume cannot attach)",
    "node_volume_limits": "CSI attach limits (a node takes more volumes than its driver can attach)",
}

POD_RULE_OFF = CodeInfo(
    "PD412", "pod-rule-switched-off", Severity.WARNING, "a predicate switched off that pods can still ask for",
    why="A pod's spec declares its own placement rules (node affinity, tolerations, inter-pod affinity, topology "
        "spread, host ports). With the predicate off the scheduler places such pods as if the rule were not there: "
        "replicas that must not share a node do, two pods take one host port and the kubelet rejects one.",
    fix="Leave the predicate on; if it must be off, keep pods that use the rule off this scheduler, and disable "
        "the warning where the policy is linted (`# policydsl: disable=PD412`).",
    bad=_HEAD + "tier {\n  plugin predicates {\n    pod_affinity = false  # expect: PD412\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n}\n",
)


@rule(POD_RULE_OFF)
def pod_rule_switched_off(ctx: LintContext) -> Iterator[Diagnostic]:
    plugin = ctx.plugin_named("predicates")
    if plugin is None:
        return
    for written in plugin.node.settings:
        key = written.key.value
        if key in POD_RULE_SWITCHES and plugin.explicit_arguments.get(key) is False:
            yield finding(POD_RULE_OFF, f"`{key} = false`: pods' {POD_RULE_SWITCHES[key]} will be ignored",
                          written.key.span, "leave it on, or keep pods that use it off this scheduler")


ARGUMENT_NOT_EVALUATED = CodeInfo(
    "PD413", "argument-not-evaluated", Severity.ERROR, "a plugin argument turned on whose behaviour is not evaluated yet",
    why="Volcano has the argument and schedules differently with it; policydsl does not evaluate it yet, and "
        "accepting it would schedule otherwise than it asks (predicates' `dynamic_resources = false` would have "
        "Volcano place pods without their ResourceClaims' devices; policydsl always allocates them).",
    fix="Leave the argument at its default (remove it).",
    bad=_HEAD + "tier {\n  plugin predicates {\n"
        "    dynamic_resources = false  # expect: PD413\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n}\n",
)


@rule(ARGUMENT_NOT_EVALUATED)
def argument_not_evaluated(ctx: LintContext) -> Iterator[Diagnostic]:
    for plugin in ctx.known_plugins():
        for written in plugin.node.settings:
            arg = plugin.spec.argument(written.key.value)
            if arg is None or not arg.not_evaluated or written.key.value not in plugin.explicit_arguments:
                continue
            value = plugin.explicit_arguments[written.key.value]
            if value == arg.default:
                continue
            yield finding(ARGUMENT_NOT_EVALUATED,
                          f"{plugin.name}'s `{written.key.value} = {_show(value)}` is refused: "
                          f"{arg.not_evaluated}", written.key.span, "remove it (leave it at its default)")


USAGE_BLIND = CodeInfo(
    "PD425", "usage-without-metrics", Severity.WARNING, "the usage plugin with no metrics source to read node load from",
    why="The usage plugin filters and scores nodes by their CPU and memory load, read from the metrics source "
        "its metrics_type and metrics_address name (Volcano's `metrics` section). Without one it reads no load: "
        "every node passes its filter and scores 0, as in Volcano, so the plugin does nothing.",
    fix="Set metrics_type (prometheus or elasticsearch, with metrics_address; or prometheus_adaptor, read "
        "through the API server), or remove the plugin.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin usage  # expect: PD425\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin usage {\n    metrics_type = prometheus\n"
         "    metrics_address = \"http://prometheus:9090\"\n  }\n}\n",
)


@rule(USAGE_BLIND)
def usage_without_metrics(ctx: LintContext) -> Iterator[Diagnostic]:
    plugin = ctx.plugin_named("usage")
    if plugin is None:
        return
    needed = ("metrics_type",) if plugin.explicit_arguments.get("metrics_type") == "prometheus_adaptor" else (
        "metrics_type", "metrics_address")      # prometheus_adaptor reads through the API server
    missing = [a for a in needed if not plugin.explicit_arguments.get(a)]
    if missing:
        yield finding(USAGE_BLIND, "plugin usage reads no node load without " + " and ".join(f"`{m}`" for m in missing)
                      + ": every node passes its filter and scores 0", plugin.node.name.span,
                      "set metrics_type and metrics_address (Volcano's `metrics` section)")


EXTENDER_NOWHERE = CodeInfo(
    "PD426", "extender-without-url", Severity.ERROR, "the extender plugin with no `url_prefix`",
    why="Every question the extender plugin asks is a POST to url_prefix/verb; without a url_prefix there is "
        "nowhere to ask, and every call fails (Volcano would post to `/verb`).",
    fix="Set url_prefix to the extender's base URL, such as \"http://127.0.0.1:8713\".",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin extender {  # expect: PD426\n"
        "    predicate_verb = \"predicate\"\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin extender {\n    url_prefix = \"http://127.0.0.1:8713\"\n"
         "    predicate_verb = \"predicate\"\n  }\n}\n",
)


@rule(EXTENDER_NOWHERE)
def extender_without_url(ctx: LintContext) -> Iterator[Diagnostic]:
    plugin = ctx.plugin_named("extender")
    if plugin is not None and not plugin.explicit_arguments.get("url_prefix"):
        yield finding(EXTENDER_NOWHERE, "plugin extender has no `url_prefix`: it has nowhere to ask",
                      plugin.node.name.span, "set url_prefix to the extender's base URL")


SHUFFLE_IDLE = CodeInfo(
    "PD427", "shuffle-evicts-nothing", Severity.WARNING,
    "tdm's zones without the shuffle action, or rescheduling without lowNodeUtilization",
    why="tdm empties a revocable zone whose window has closed, and rescheduling moves pods off overused nodes, "
        "only through the shuffle action: without it the pods tdm let onto revocable nodes stay there after "
        "the window. rescheduling's offlineOnly and lowPriorityFirst only narrow and order lowNodeUtilization's "
        "victims: without it the plugin evicts nothing (Volcano ignores the names alike).",
    fix="Add `shuffle` to the actions (tdm), or lowNodeUtilization to rescheduling's strategies.",
    bad='policy "example" version 1\nactions [enqueue, allocate, shuffle]\n'
        'tier {\n  plugin predicates\n  plugin rescheduling {  # expect: PD427\n'
        '    strategies = ["offlineOnly"]\n  }\n}\n',
    good='policy "example" version 1\nactions [enqueue, allocate, shuffle]\n'
         'tier {\n  plugin predicates\n  plugin rescheduling {\n'
         '    strategies = ["offlineOnly", "lowNodeUtilization"]\n  }\n}\n',
)


@rule(SHUFFLE_IDLE)
def shuffle_evicts_nothing(ctx: LintContext) -> Iterator[Diagnostic]:
    tdm = ctx.plugin_named("tdm")
    if tdm is not None and tdm.explicit_arguments.get("revocable_zones") and "shuffle" not in ctx.actions:
        yield finding(SHUFFLE_IDLE, "tdm never empties a revocable zone whose window has closed without the shuffle "
                      "action: its pods stay on the revocable nodes", tdm.node.name.span,
                      "add `shuffle` to the actions")
    rescheduling = ctx.plugin_named("rescheduling")
    strategies = rescheduling.explicit_arguments.get("strategies") if rescheduling is not None else None
    if rescheduling is not None and strategies is not None and "lowNodeUtilization" not in strategies:
        yield finding(SHUFFLE_IDLE, "rescheduling evicts nothing without lowNodeUtilization (its strategies: "
                      + (", ".join(strategies) or "none") + "; offlineOnly and lowPriorityFirst only narrow and "
                      "order its victims)",
                      rescheduling.node.name.span, "add lowNodeUtilization to `strategies`")


PROPORTIONAL_IDLE = CodeInfo(
    "PD428", "proportional-idle", Severity.WARNING,
    "resource-strategy-fit's proportional ratios without `proportional = true`, or the switch without ratios",
    why="The proportional policy keeps CPU and memory for each resource named in `proportional_cpu` / "
        "`proportional_memory`, and only while `proportional = true` (Volcano's proportional.enable): ratios "
        "without the switch keep nothing, and the switch without ratios names no resource to keep room for.",
    fix="Set `proportional = true` next to the ratios, or name the scarce resources in `proportional_cpu`.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin resource-strategy-fit {\n"
        "    proportional_cpu = { \"nvidia.com/gpu\": 8 }  # expect: PD428\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin resource-strategy-fit {\n    proportional = true\n"
         "    proportional_cpu = { \"nvidia.com/gpu\": 8 }\n  }\n}\n",
)


EXCLUSIVE_RULES_IDLE = CodeInfo(
    "PD429", "exclusive-rules-idle", Severity.WARNING,
    "deviceshare's `gpu_exclusive_rules` without `vgpu = true`",
    why="GPU exclusive rules keep pods matching them off each other's HAMi vGPU cards (Volcano's "
        "deviceshare.GPUExclusiveRules); without `vgpu = true` no vGPU card is placed, so the rules do nothing.",
    fix="Set `vgpu = true` next to the rules, or drop the rules.",
    bad=_HEAD + "tier {\n  plugin predicates\n  plugin deviceshare {\n"
        "    gpu_exclusive_rules = [{ app: \"training\" }]  # expect: PD429\n  }\n}\n",
    good=_HEAD + "tier {\n  plugin predicates\n  plugin deviceshare {\n    vgpu = true\n"
         "    gpu_exclusive_rules = [{ app: \"training\" }]\n  }\n}\n",
)


@rule(EXCLUSIVE_RULES_IDLE)
def exclusive_rules_idle(ctx: LintContext) -> Iterator[Diagnostic]:
    plugin = ctx.plugin_named("deviceshare")
    if plugin is None or not plugin.explicit_arguments.get("gpu_exclusive_rules") \
            or plugin.explicit_arguments.get("vgpu"):
        return
    setting = next(w for w in plugin.node.settings if w.key.value == "gpu_exclusive_rules")
    yield finding(EXCLUSIVE_RULES_IDLE, "`gpu_exclusive_rules` keeps nothing apart without `vgpu = true`",
                  setting.key.span, "add `vgpu = true`")


@rule(PROPORTIONAL_IDLE)
def proportional_idle(ctx: LintContext) -> Iterator[Diagnostic]:
    plugin = ctx.plugin_named("resource-strategy-fit")
    if plugin is None:
        return
    args = plugin.explicit_arguments
    ratios = [w for w in plugin.node.settings if w.key.value in ("proportional_cpu", "proportional_memory")
              and args.get(w.key.value)]
    switch = [w for w in plugin.node.settings if w.key.value == "proportional"]
    if ratios and not args.get("proportional"):
        yield finding(PROPORTIONAL_IDLE, f"`{ratios[0].key.value}` keeps nothing without `proportional = true`",
                      ratios[0].key.span, "add `proportional = true`")
    elif switch and args.get("proportional") and not ratios:
        yield finding(PROPORTIONAL_IDLE, "`proportional = true` names no resource to keep CPU and memory for",
                      switch[0].key.span, "name the scarce resources in `proportional_cpu` / `proportional_memory`")
