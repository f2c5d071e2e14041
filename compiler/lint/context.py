"""What a lint rule looks at: the AST, the lowered IR and the normalized document, lined up.

Rules read values from the lowered IR (base units, constants resolved) so they work even
when schema validation failed and `document` is None; values that did not lower are simply
absent. Each view keeps its AST node, so a finding points at the text it is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from compiler import catalog as cat
from compiler.lower import IRPath, Lowered
from compiler.plan import PluginPlan
from policydsl import nodes as n
from policydsl.diagnostics import Span
from policydsl.loader import LoadedPolicy


@dataclass(frozen=True)
class QueueView:
    index: int                       # position in the IR's queue list (and in `IRPath`s)
    node: n.Queue
    parent_index: int | None         # the enclosing queue (or a declared top-level `root`)
    nested: bool                     # written inside another queue's block
    values: Mapping[str, Any]        # IR settings that lowered cleanly (resource maps in base units)

    @property
    def name(self) -> str:
        return self.node.name.value

    def resources(self, key: str) -> Mapping[str, int]:
        return self.values.get(key) or {}


@dataclass(frozen=True)
class PluginView:
    tier_index: int
    tier: n.Tier
    node: n.Plugin
    path: IRPath | None              # ("tiers", t, "plugins", p); None for an unknown plugin
    plan: PluginPlan | None          # flags filled with catalog defaults, so `enabled` is exact
    explicit_arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def spec(self) -> cat.PluginSpec | None:
        return cat.PLUGINS.get(self.name)


@dataclass(frozen=True)
class DeviceView:
    index: int
    node: n.Device
    values: Mapping[str, Any]

    @property
    def resource(self) -> str:
        return self.node.resource.value


class LintContext:
    """Built once per policy; every rule reads from it."""

    def __init__(self, loaded: LoadedPolicy, lowered: Lowered, document: dict | None):
        self.loaded = loaded
        self.lowered = lowered
        self.document = document
        self.ir: dict = lowered.ir or {}
        items = list(loaded.items())
        self.action_lists: list[n.Actions] = [i for i in items if isinstance(i, n.Actions)]
        self.action_configs: list[n.ActionConfig] = [i for i in items if isinstance(i, n.ActionConfig)]
        self.tiers: list[n.Tier] = [i for i in items if isinstance(i, n.Tier)]
        self.constants: list[n.Const] = [i for i in items if isinstance(i, n.Const)]
        self.queues = self._queues(items)
        # Each queue's children, looked up per queue by rules that sum over them: a scan of every
        # queue per lookup made linting a generated tree of 100,000 queues take hours.
        self._children: dict[int, list[QueueView]] = {}
        for view in self.queues:
            if view.parent_index is not None:
                self._children.setdefault(view.parent_index, []).append(view)
        self.plugins = self._plugins()
        self.devices = [DeviceView(i, node, values) for i, (node, values) in
                        enumerate(zip((x for x in items if isinstance(x, n.Device)), self.ir.get("devices", [])))]

    # --- views ----------------------------------------------------------------------------
    def _queues(self, items: list) -> list[QueueView]:
        top = [i for i in items if isinstance(i, n.Queue)]
        ir_queues = self.ir.get("queues", [])
        declared_root = None
        views: list[QueueView] = []
        index_of: dict[int, int] = {}       # id(node) -> IR index
        for node, parent in n.walk_queues(top):
            index = len(views)
            index_of[id(node)] = index
            if parent is None and node.name.value == cat.ROOT_QUEUE and declared_root is None:
                declared_root = index
            parent_index = index_of[id(parent)] if parent is not None else None
            values = ir_queues[index] if index < len(ir_queues) else {}
            views.append(QueueView(index, node, parent_index, parent is not None, values))
        if declared_root is not None:
            # Top-level queues hang under `root`; when the policy declares it, they are its children.
            views = [
                QueueView(v.index, v.node, declared_root, v.nested, v.values)
                if v.parent_index is None and v.index != declared_root and not v.nested else v
                for v in views
            ]
        return views

    def _plugins(self) -> list[PluginView]:
        views = []
        ir_tiers = self.ir.get("tiers", [])
        # Once validated, the document has every default filled in: read flags and arguments
        # from it. When validation failed, fill the same defaults from the catalog.
        normalized = self.document["tiers"] if self.document is not None else None
        for t, tier in enumerate(self.tiers):
            known = 0
            ir_plugins = ir_tiers[t]["plugins"] if t < len(ir_tiers) else []
            for node in tier.plugins:
                spec = cat.PLUGINS.get(node.name.value)
                if spec is None or known >= len(ir_plugins):
                    views.append(PluginView(t, tier, node, None, None))
                    continue
                lowered = ir_plugins[known]
                path = ("tiers", t, "plugins", known)
                if normalized is not None:
                    full = normalized[t]["plugins"][known]
                    plan = PluginPlan(spec.name, full["weight"], full["flags"], full["arguments"])
                else:
                    plan = _with_defaults(spec, lowered)
                known += 1
                views.append(PluginView(t, tier, node, path, plan, dict(lowered.get("arguments", {}))))
        return views

    # --- queries --------------------------------------------------------------------------
    @property
    def actions(self) -> list[str]:
        """The effective action list (the last `actions` declaration), known names only."""
        return list(self.ir.get("actions", []))

    @property
    def actions_node(self) -> n.Actions | None:
        return self.action_lists[-1] if self.action_lists else None

    def action_span(self, name: str) -> Span | None:
        node = self.actions_node
        if node is None:
            return None
        return next((a.span for a in node.names if a.value == name), node.span)

    def known_plugins(self) -> list[PluginView]:
        return [p for p in self.plugins if p.plan is not None]

    def plugin_named(self, name: str) -> PluginView | None:
        return next((p for p in self.known_plugins() if p.name == name), None)

    def enabled_at(self, point: str) -> list[PluginView]:
        return [p for p in self.known_plugins() if p.plan.enabled(point)]

    def span(self, path: IRPath, fallback: Span | None = None) -> Span | None:
        return self.lowered.spans.get(path, fallback)

    def children(self, queue: QueueView) -> list[QueueView]:
        return list(self._children.get(queue.index, ()))


def _with_defaults(spec: cat.PluginSpec, lowered: dict) -> PluginPlan:
    flags = {f.name: f.default for f in cat.FLAGS if f.name in spec.points}
    flags.update(lowered.get("flags", {}))
    arguments = {a.name: a.default for a in spec.arguments}
    arguments.update(lowered.get("arguments", {}))
    weight = lowered.get("weight")
    if weight is None and spec.scores:
        weight = spec.default_weight
    return PluginPlan(spec.name, weight, flags, arguments)


def setting(settings: tuple[n.Setting, ...], key: str) -> n.Setting | None:
    """The effective (last) setting named `key`, as the compiler applies it."""
    found = None
    for s in settings:
        if s.key.value == key:
            found = s
    return found
