"""Why a pod or PodGroup waits: run one cycle on a copy of the cluster and report what the
engine decided for it, from its structured Reasons (runtime.cluster.decisions.Reason).

Causes are grouped the way an operator asks: which predicate failed on how many nodes, a
queue over its capability or share, a gang short by N, device memory fragmented, a job not
admitted by enqueue. A pod that would be bound is told where.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.plan import Plan
from compiler.quantities import readable_base_units
from policydsl.diagnostics import closest
from runtime.cluster import decisions as d
from runtime.engine.actions import registry as action_registry
from runtime.engine.cycle import collect, open_session
from runtime.cluster.model import ClusterState, group_key_of
from runtime.cluster.topology import room_by_hypernode, span_of
from runtime.engine.session import Options

# Headline per reason kind; node causes about cards get their own.
HEADLINES = {
    d.NODES: "no node fits",
    d.QUEUE: "queue limit",
    d.GANG: "gang incomplete",
    d.DEVICE: "device",
    d.ENQUEUE: "not admitted by enqueue",
    d.MEMBERS: "gang short of pods",
    d.JOB: "job problem",
    d.PREEMPTION: "preempted",
    d.RECLAIM: "reclaimed",
}
DEVICE_CAUSES = ("device memory fragmented", "insufficient idle", "too few", "of model", "card holds")


class UnknownTarget(LookupError):
    def __init__(self, target: str, suggestion: str | None):
        self.target = target
        self.suggestion = suggestion
        hint = f"; did you mean {suggestion}?" if suggestion else ""
        super().__init__(f"no pod or PodGroup `{target}` in the snapshot{hint}")


@dataclass(frozen=True)
class Cause:
    kind: str                        # a Reason kind, or "device" for card causes on nodes
    message: str
    pods: int                        # how many of the target's pods it holds back
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "pods": self.pods, "details": _plain(self.details)}


@dataclass(frozen=True)
class Explanation:
    target: str
    kind: str                        # pod | podgroup
    status: str                      # running | bound | pipelined | waiting | finished | evicting | not-scheduled
    summary: str
    node: str | None = None
    devices: dict[str, list[int]] = field(default_factory=dict)
    causes: tuple[Cause, ...] = ()
    queue: str | None = None
    phase: str | None = None
    condition: str | None = None
    # A PodGroup asking for network topology: what it asks, where its pods run (its span) and, while
    # it waits, the free room of the HyperNodes it may use, tier by tier (topology_lines).
    topology: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "status": self.status, "summary": self.summary,
                "node": self.node, "devices": self.devices, "queue": self.queue, "phase": self.phase,
                "condition": self.condition, "causes": [c.to_dict() for c in self.causes],
                "topology": list(self.topology)}

    def lines(self) -> list[str]:
        out = [self.summary]
        if self.condition:
            out.append(f"  condition: {self.condition}")
        if self.topology:
            out.append("  network topology:")
            out.extend(f"    {line}" for line in self.topology)
        if self.causes:
            out.append("  why:")
        for cause in self.causes:
            who = f" ({cause.pods} pod{'s' if cause.pods != 1 else ''})" if self.kind == "podgroup" else ""
            out.append(f"  - {HEADLINES.get(cause.kind, cause.kind)}: {cause.message}{who}")
            counts = cause.details.get("counts") if cause.kind == d.NODES else None
            for message, count in sorted((counts or {}).items(), key=lambda kv: (-kv[1], kv[0])):
                out.append(f"      {count} node{'s' if count != 1 else ''}: {message}")
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def names_by_namespace(state: ClusterState) -> dict[str, list[str]]:
    """The names of the snapshot's pods and PodGroups by namespace, one pass over it: what a
    miss of resolve_target may suggest (a served view builds it once per cycle)."""
    names: dict[str, dict[str, None]] = {}
    for key in itertools.chain(state.pods, state.podgroups):
        namespace, _, name = key.partition("/")
        names.setdefault(namespace, {})[name] = None
    return {namespace: list(found) for namespace, found in names.items()}


def resolve_target(state: ClusterState, target: str,
                   names: Callable[[], Mapping[str, Sequence[str]]] | None = None) -> tuple[str, str]:
    """("pod" | "podgroup", key) for `ns/name` (a bare name means namespace default).

    A miss suggests a name of the same namespace only (the asker may see no other), compared
    with a bounded number of them (policydsl.diagnostics.Suggester): what it costs does not
    grow with the cluster. `names` gives names_by_namespace(state), built once by a caller that
    resolves often, asked only on a miss; without it the namespace's names are picked out of
    the snapshot."""
    key = target if "/" in target else f"default/{target}"
    if key in state.pods:
        return "pod", key
    if key in state.podgroups:
        return "podgroup", key
    namespace, _, name = key.partition("/")
    if names is not None:
        candidates: Sequence[str] = names().get(namespace, ())
    else:
        prefix = namespace + "/"
        candidates = [k[len(prefix):] for k in itertools.chain(state.pods, state.podgroups) if k.startswith(prefix)]
    match = closest(name, candidates)
    raise UnknownTarget(target, f"{namespace}/{match}" if match is not None else None)


def run_one_cycle(plan: Plan, state: ClusterState, options: Options) -> d.Decisions:
    working = copy.deepcopy(state)
    ssn = open_session(plan, working, options)
    actions = action_registry()
    for name in plan.actions:
        actions[name](ssn)
    decisions = collect(ssn)
    ssn.close()
    return decisions


def explain(plan: Plan, state: ClusterState, target: str, options: Options | None = None) -> Explanation:
    """Raises UnknownTarget, and ObjectError when a PodGroup names an unknown queue."""
    options = options or Options()
    kind, key = resolve_target(state, target)
    decisions = run_one_cycle(plan, state, options)
    if kind == "pod":
        return explain_pod(state, key, decisions, options)
    return explain_group(state, key, decisions, options)


def _queue_and_phase(state: ClusterState, group_key: str, decisions: d.Decisions) -> tuple[str, str | None, str | None]:
    group = state.podgroups.get(group_key)
    status = next((s for s in decisions.podgroups if s.name == group_key), None)
    phase = status.phase if status is not None else (group.phase if group is not None else None)
    condition = None
    if status is not None and status.conditions:
        c = status.conditions[0]
        condition = f"{c.type}: {c.message}"
    return (group.queue if group is not None else "default"), phase, condition


def _causes(reason_lists: list[tuple[d.Reason, ...]]) -> tuple[Cause, ...]:
    """Reasons of several pods, merged by message, each with how many pods it applies to.
    Card causes inside a node reason are listed again as device causes."""
    merged: dict[tuple[str, str], list] = {}
    for reasons in reason_lists:
        seen: set[tuple[str, str]] = set()
        for reason in reasons:
            entries = [(reason.kind, reason.message, dict(reason.details))]
            if reason.kind == d.NODES:
                for message, count in (reason.details.get("counts") or {}).items():
                    if any(marker in message for marker in DEVICE_CAUSES):
                        entries.append((d.DEVICE, f"{message} on {count} node{'s' if count != 1 else ''}",
                                        {"nodes": count}))
            for kind, message, details in entries:
                ident = (kind, message)
                if ident in seen:
                    continue
                seen.add(ident)
                slot = merged.setdefault(ident, [0, details])
                slot[0] += 1
    return tuple(Cause(kind, message, count, details) for (kind, message), (count, details) in merged.items())


def explain_pod(state: ClusterState, key: str, decisions: d.Decisions, options: Options) -> Explanation:
    pod = state.pods[key]
    group_key = group_key_of(pod)
    queue, phase, condition = _queue_and_phase(state, group_key, decisions)
    queue = state.queue_name_of(pod)      # a pod without a group: its queue annotation's
    job = f"PodGroup {group_key}" if pod.group else "no PodGroup"
    where = f"{job}, queue {queue}"
    common = {"target": key, "kind": "pod", "queue": queue, "phase": phase}
    if pod.scheduler_name != options.scheduler_name:
        return Explanation(status="not-scheduled", summary=f"{key} has schedulerName {pod.scheduler_name}; this "
                           f"scheduler is {options.scheduler_name}, so it never considers the pod", **common)
    if pod.terminal:
        return Explanation(status="finished", summary=f"{key} has finished ({pod.phase})", node=pod.node_name,
                           **common)
    if pod.node_name:
        if pod.releasing:
            return Explanation(status="evicting", summary=f"{key} is leaving node {pod.node_name} (being evicted)",
                               node=pod.node_name, **common)
        return Explanation(status="running", summary=f"{key} is already running on node {pod.node_name}",
                           node=pod.node_name, **common)
    binding = decisions.binding_of(key)
    if binding is not None:
        devices = {r: list(c) for r, c in sorted(binding.devices.items())}
        cards = "".join(f", {r} cards {','.join(map(str, c))}" for r, c in devices.items())
        return Explanation(status="bound", summary=f"{key} would be bound to node {binding.node}{cards} "
                           f"this cycle ({where})", node=binding.node, devices=devices, **common)
    if key in decisions.pipelined:
        node = decisions.pipelined[key]
        return Explanation(status="pipelined", summary=f"{key} would run on node {node} once the pods being "
                           f"evicted there leave ({where})", node=node, **common)
    causes = _causes([decisions.reasons_for(key)])
    if pod.group:
        where += f", PodGroup phase {phase or '-'}"
    return Explanation(status="waiting", summary=f"{key} waits ({where})",
                       causes=causes, condition=condition, **common)


def explain_group(state: ClusterState, key: str, decisions: d.Decisions, options: Options) -> Explanation:
    group = state.podgroups[key]
    queue, phase, condition = _queue_and_phase(state, key, decisions)
    # By name: the causes are listed in the order their first pod shows them, the same whatever
    # order the cluster was listed in (live and offline explain agree).
    pods = sorted((p for p in state.pods.values() if p.group and group_key_of(p) == key
                   and p.scheduler_name == options.scheduler_name), key=lambda p: p.key)
    running = sum(1 for p in pods if p.node_name and not p.terminal and not p.releasing)
    done = sum(1 for p in pods if p.terminal)
    bound = [p.key for p in pods if decisions.binding_of(p.key) is not None]
    waiting = [p.key for p in pods if not p.node_name and not p.terminal and decisions.binding_of(p.key) is None]
    parts = [f"{len(pods)} pod{'s' if len(pods) != 1 else ''}"]
    for count, word in ((running, "running"), (len(bound), "would be bound"), (len(waiting), "wait"),
                        (done, "finished")):
        if count:
            parts.append(f"{count} {word}")
    summary = (f"PodGroup {key} (queue {queue}, minMember {group.min_member}): phase {phase or '-'} after one "
               f"cycle; {', '.join(parts)}")
    if not pods:
        summary += " (no pod names it: a job controller has not created them)"
    status = "waiting" if waiting or not pods else ("bound" if bound else "running")
    causes = _causes([decisions.reasons_for(p) for p in waiting])
    nodes = sorted({decisions.binding_of(p).node for p in bound})
    topology = topology_lines(state, group, pods, decisions, waiting) if group.network_topology is not None \
        and state.has_hypernodes else ()
    return Explanation(target=key, kind="podgroup", status=status, summary=summary, node=", ".join(nodes) or None,
                       causes=causes, queue=queue, phase=phase, condition=condition, topology=topology)


ROOMS_SAID = 5      # HyperNodes listed per tier in explain, the roomiest first


def topology_lines(state: ClusterState, group, pods: Sequence, decisions: d.Decisions,
                   waiting: Sequence[str]) -> tuple[str, ...]:
    """What a PodGroup asks of the network topology, where its pods run (the lowest-tier HyperNode
    holding them all) and, while pods wait, the free room (allocatable less placed pods' requests,
    schedulable nodes) of the HyperNodes of each tier it may use, for the resources its waiting pods ask."""
    request = group.network_topology
    topology = state.topology()
    limit = request.highest_tier
    if request.highest_tier_name:
        named = sorted({hn.tier for hn in topology.hypernodes.values() if hn.tier_name == request.highest_tier_name})
        limit = named[0] if named else None
    asked = f"{request.mode} mode, " + (f"tier <= {request.highest_tier}" if request.highest_tier is not None else
                                        f"tier named {request.highest_tier_name}" if request.highest_tier_name
                                        else "any tier")
    source = f"; HyperNodes derived from node labels ({topology.derived_from})" if topology.derived_from else ""
    out = [f"asks: {asked}{source}"]
    out.extend(f"problem: {p}" for p in topology.blocking)
    where = {decisions.binding_of(p.key).node if decisions.binding_of(p.key) is not None else p.node_name
             for p in pods if (p.node_name and not p.terminal) or decisions.binding_of(p.key) is not None}
    if where:
        span = span_of(topology, where)
        out.append(f"runs within: {span.text(topology)}")
    if not waiting:
        return tuple(out)
    need: dict[str, int] = {}
    for key in waiting:
        for resource, amount in state.pods[key].requests.items():
            need[resource] = need.get(resource, 0) + amount
    shown = [r for r in need if r != "pods" and need[r] > 0]
    shown.sort(key=lambda r: (r in ("cpu", "memory"), r))       # devices first: they bind most often
    if not shown:
        return tuple(out)
    out.append("waiting pods ask: " + ", ".join(f"{readable_base_units(r, need[r])} {r}" for r in shown))
    free = {name: dict(n.allocatable) for name, n in state.nodes.items() if not n.unschedulable}
    for pod in state.placed_pods():
        room = free.get(pod.node_name)
        if room is not None:
            for resource, amount in pod.requests.items():
                if resource in room:
                    room[resource] -= amount
    rooms = room_by_hypernode(topology, free)
    first = shown[0]
    for tier in topology.tiers:
        if limit is not None and request.mode == "hard" and tier > limit:
            break
        names = sorted(topology.by_tier[tier], key=lambda n: (-rooms[n].get(first, 0), n))
        said = ", ".join(f"{n}{_labels_of(topology, n)} " + " ".join(
            f"{readable_base_units(r, max(0, rooms[n].get(r, 0)))} {r}" for r in shown) for n in names[:ROOMS_SAID])
        more = f", ... {len(names) - ROOMS_SAID} more" if len(names) > ROOMS_SAID else ""
        out.append(f"free in tier {tier} ({len(names)} HyperNode{'s' if len(names) != 1 else ''}): {said}{more}")
    return tuple(out)


def _labels_of(topology, name: str) -> str:
    text = topology.hypernodes[name].label_text
    return f" ({text})" if text else ""
