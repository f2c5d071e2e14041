"""The Plan: the validated, normalized policy the runtime executes.

Frozen dataclasses built from the validated IR. Every default is filled in, so what runs is
exactly what `policydsl compile` prints. `revision` is a content hash of that JSON: the same
policy text in any layout gets the same revision.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from compiler import catalog as cat


@dataclass(frozen=True)
class PluginPlan:
    name: str
    weight: float | None
    flags: Mapping[str, bool]
    arguments: Mapping[str, Any]

    def enabled(self, point: str) -> bool:
        """Whether this plugin answers at an extension point: it implements it and it is on."""
        if point not in cat.PLUGINS[self.name].points:
            return False
        return self.flags.get(point, True)


@dataclass(frozen=True)
class TierPlan:
    label: str | None
    plugins: tuple[PluginPlan, ...]


@dataclass(frozen=True)
class QueuePlan:
    name: str
    parent: str | None
    weight: int = 1
    capability: Mapping[str, int] | None = None
    guarantee: Mapping[str, int] | None = None
    deserved: Mapping[str, int] | None = None
    priority: int = 0
    reclaimable: bool = True
    borrow: bool = True
    borrow_limit: Mapping[str, int] | None = None
    state: str = "open"
    declared: bool = True   # False for the implicit `default` queue
    dequeue: str = "traverse"
    # The nodegroup plugin's groups (a Queue's spec.affinity): required, preferred, and the
    # anti-affinity's required (excluded) and preferred (avoided).
    node_groups: tuple[str, ...] = ()
    preferred_node_groups: tuple[str, ...] = ()
    excluded_node_groups: tuple[str, ...] = ()
    avoided_node_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class DevicePlan:
    resource: str
    sharing: str = "whole"
    card_memory: int | None = None
    slice: int | None = None
    compute_percent: float | None = None
    max_tasks_per_card: int | None = None
    topology: str = "none"
    models: tuple[str, ...] = ()
    model_label: str = "nvidia.com/gpu.product"
    memory_resource: str | None = None
    cores_resource: str | None = None
    policy: str = "binpack"


@dataclass(frozen=True)
class Plan:
    name: str
    version: int
    actions: tuple[str, ...]
    action_arguments: Mapping[str, Mapping[str, Any]]
    tiers: tuple[TierPlan, ...]
    queues: tuple[QueuePlan, ...]
    devices: tuple[DevicePlan, ...]
    revision: str = field(default="", compare=False)

    # --- queries the runtime uses -----------------------------------------------------------
    def plugin(self, name: str) -> PluginPlan | None:
        for tier in self.tiers:
            for plugin in tier.plugins:
                if plugin.name == name:
                    return plugin
        return None

    def has_plugin(self, name: str) -> bool:
        return self.plugin(name) is not None

    def tiers_at(self, point: str) -> list[list[PluginPlan]]:
        """Per tier, the plugins enabled at `point` (empty tiers dropped)."""
        out = []
        for tier in self.tiers:
            enabled = [p for p in tier.plugins if p.enabled(point)]
            if enabled:
                out.append(enabled)
        return out

    def queue(self, name: str) -> QueuePlan | None:
        return next((q for q in self.queues if q.name == name), None)

    def device(self, resource: str) -> DevicePlan | None:
        return next((d for d in self.devices if d.resource == resource), None)

    # --- serialization ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("revision")
        return _plain(data)

    def to_json(self) -> str:
        body = self.to_dict()
        body["revision"] = self.revision
        return json.dumps(body, sort_keys=True, indent=2) + "\n"


def _plain(value):
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def revision_of(data: dict) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def build_plan(document: dict) -> Plan:
    """Plan from a validated, normalized IR document."""
    tiers = tuple(
        TierPlan(t["label"], tuple(PluginPlan(p["name"], p["weight"], dict(p["flags"]), dict(p["arguments"]))
                                   for p in t["plugins"]))
        for t in document["tiers"]
    )
    queues = [QueuePlan(**{k: tuple(v) if isinstance(v, list) else v for k, v in q.items()}) for q in document["queues"]]
    if not any(q.name == cat.DEFAULT_QUEUE for q in queues):
        queues.append(QueuePlan(cat.DEFAULT_QUEUE, cat.ROOT_QUEUE, declared=False))
    devices = tuple(DevicePlan(**{**d, "models": tuple(d["models"])}) for d in document["devices"])
    plan = Plan(
        name=document["name"],
        version=document["version"],
        actions=tuple(document["actions"]),
        action_arguments={k: dict(v) for k, v in sorted(document["action_arguments"].items())
                          if k in document["actions"]},
        tiers=tiers,
        queues=tuple(queues),
        devices=devices,
    )
    return Plan(**{**plan.__dict__, "revision": revision_of(plan.to_dict())})


def plan_from_json(text: str) -> Plan:
    """Rebuild a Plan from `policydsl compile` output (the runtime may load plans directly)."""
    data = json.loads(text)
    data.pop("revision", None)
    return build_plan(data)
