"""The soak's invariant checker: what must hold on the cluster, judged from the API server alone.

It shares no code with the engine (nothing from runtime/ or compiler/ is imported, nor from
tests/placement_checker.py): its input is the objects as the API server returns them, plain
dicts, and it computes every figure again from the raw JSON, the way the kubelet and Volcano
define it. So a bug in the engine's reading of a pod, a node or a queue is not repeated here.

The harness calls `saw_pod` for every version of every pod its watch delivers (and for the
deletion), and `check` after every step with a `World`: the nodes, pods, PodGroups, Queues and
namespaces listed at that moment. The invariants (INVARIANTS):

- `node-capacity`: per node, the requests of its pods that are not finished (terminating ones
  included: they still run) stay within allocatable, for every resource and the pod count.
- `gpu-card-memory`: per card of a node (volcano.sh/gpu-number cards sharing volcano.sh/gpu-memory
  evenly), the gpu-memory of the pods the card is recorded for (annotation volcano.sh/gpu-index)
  stays within the card's share; a GPU pod bound without a valid card record is a violation too.
- `gang-min-member`: a PodGroup with at least minMember live pods has either none or at least
  minMember of them bound, except for at most `gang_grace_s` (binds of one gang land over a
  cycle or so).
- `queue-capability`: per Queue, the requests of its bound, unfinished, not terminating pods
  on nodes that exist (Volcano's "allocated": a releasing pod no longer counts; a pod left on a
  deleted node runs nowhere, and the scheduler counts it in no queue) stay within
  spec.capability.
- `node-match`: a pod is bound to a node that exists, that it matches (nodeSelector, required
  node affinity) and tolerates (NoSchedule and NoExecute taints, cordon), judged when the bind
  is seen.
- `bound-once`: a pod's nodeName never changes once set.
- `fit-bound-in-time`: a pending pod that fits (conservatively, see `_fits`) for longer than
  `fit_deadline_s` is a violation.

The world changes under the scheduler: a node is tainted, cordoned or cut while a cycle that
decided on its old state is binding. A bind that breaks a node or queue rule is excused when the
node or queue tightened less than `race_grace_s` before the bind was seen (the same race exists
with kube-scheduler; the kubelet's admission is the backstop there); a node or queue that is over
only because it tightened under pods bound before is not the scheduler's doing, so `node-capacity`
and `queue-capability` flag only a state that a bind made after the tightening (plus the grace)
is part of.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

INVARIANTS = ("node-capacity", "gpu-card-memory", "gang-min-member", "queue-capability", "node-match",
              "bound-once", "fit-bound-in-time")

GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_INDEX = "volcano.sh/gpu-index"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
FILTERING_EFFECTS = ("NoSchedule", "NoExecute")
PODS = "pods"
SLOWEST = 10  # the report names this many of the slowest binds
# Resources the contention test sums over the cluster: the ones queues share in the soak.
CLUSTER_RESOURCES = ("cpu", "memory", "volcano.sh/gpu-memory")

Resources = dict[str, Decimal]


@dataclass(frozen=True)
class Limits:
    scheduler_name: str
    race_grace_s: float = 5.0
    gang_grace_s: float = 10.0
    fit_deadline_s: float = 30.0


@dataclass(frozen=True)
class Violation:
    invariant: str
    subject: str  # the pod, node, queue or PodGroup, "namespace/name" for namespaced ones
    at: float  # time.time() when found
    detail: str
    example: Mapping[str, Any] = field(default_factory=dict)  # the objects involved, trimmed

    def __str__(self) -> str:
        return f"{self.invariant}: {self.subject}: {self.detail}"


@dataclass(frozen=True)
class World:
    """One look at the API server: every object the checks read, listed at `now`."""

    now: float
    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]]
    podgroups: Sequence[Mapping[str, Any]]
    queues: Sequence[Mapping[str, Any]]
    namespaces: Sequence[Mapping[str, Any]]
    leader: str = ""  # the scheduler Lease's holderIdentity: a change pauses the fit clocks


# ------------------------------------------------------------------ requests, as the kubelet counts


def quantity(value: Any) -> Decimal:
    return Decimal(parse_quantity(value))


def _resource_list(raw: Mapping[str, Any] | None) -> Resources:
    return {str(name): quantity(value) for name, value in (raw or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    requests = _resource_list(resources.get("requests"))
    # The API server defaults a missing request to the limit; objects written around it (a
    # fixture) may not have been through that.
    for name, value in _resource_list(resources.get("limits")).items():
        requests.setdefault(name, value)
    return requests


def _add(total: Resources, more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What a pod takes from its node: the larger of the containers' sum and the peak of the init
    phase (each init container runs alone, beside the sidecars started before it), sidecars
    (init containers with restartPolicy Always) added to the containers since they keep running,
    plus the pod's overhead; and one of the node's pods."""
    spec = pod.get("spec") or {}
    running: Resources = {}
    for container in spec.get("containers") or []:
        _add(running, _container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            moment = dict(sidecars)
        else:
            moment = dict(sidecars)
            _add(moment, requests)
        for name, value in moment.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), value)
    _add(running, sidecars)
    total = dict(running)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), value)
    _add(total, _resource_list(spec.get("overhead")))
    total[PODS] = total.get(PODS, Decimal(0)) + 1
    return total


# ------------------------------------------------------------------ reading objects


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _group_of(pod: Mapping[str, Any]) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    for name in GROUP_ANNOTATIONS:
        if annotations.get(name):
            return f"{pod['metadata']['namespace']}/{annotations[name]}"
    return None


def _created(obj: Mapping[str, Any]) -> float | None:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return None
    return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _allocatable(node: Mapping[str, Any]) -> Resources:
    return _resource_list((node.get("status") or {}).get("allocatable"))


def _filtering_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in FILTERING_EFFECTS]
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    return taints


def _label_requirement(labels: Mapping[str, str], key: str, op: str, values: Sequence[str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _node_term(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty nodeSelectorTerm matches no node
    for expr in exprs:
        if not _label_requirement(labels, expr["key"], expr["operator"], [str(v) for v in expr.get("values") or ()]):
            return False
    for expr in fields:
        if expr.get("key") != "metadata.name" or not _label_requirement(
                {"metadata.name": node["metadata"]["name"]}, "metadata.name", expr.get("operator", ""),
                [str(v) for v in expr.get("values") or ()]):
            return False
    return True


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        if (tol.get("operator") or "Equal") == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key and key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def node_mismatches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """Why `pod` may not run on `node`: node selector, required node affinity, taints, cordon."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    found = []
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            found.append(f"nodeSelector {k}={v} (node has {labels.get(k)!r})")
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not any(_node_term(t, node) for t in required.get("nodeSelectorTerms") or []):
        found.append("no required nodeSelectorTerm matches")
    for taint in _filtering_taints(node):
        if not tolerates(spec.get("tolerations") or [], taint):
            found.append(f"taint {taint.get('key')}={taint.get('value') or ''}:{taint.get('effect')} not tolerated")
    return found


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False  # a null selector in an affinity term matches nothing
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(_label_requirement(labels, e["key"], e["operator"], [str(v) for v in e.get("values") or ()])
               for e in selector.get("matchExpressions") or [])


def _anti_affinity_terms(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    anti = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    return list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _host_ports(pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    ports = set()
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.add((port.get("protocol") or "TCP", int(port["hostPort"])))
    return ports


def _gpu_cards(pod: Mapping[str, Any]) -> list[int] | None:
    """The cards the scheduler recorded for the pod, or None when there is no valid record."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX)
    if raw is None:
        return None
    try:
        return [int(part) for part in str(raw).split(",") if part != ""]
    except ValueError:
        return None


def _gpu_need(requests: Mapping[str, Decimal]) -> tuple[int, Decimal]:
    """(cards, MiB per card) a pod asks for by volcano.sh/gpu-memory; (0, 0) when none."""
    memory = requests.get(GPU_MEMORY, Decimal(0))
    if memory <= 0:
        return 0, Decimal(0)
    return int(requests.get(GPU_NUMBER, Decimal(0))) or 1, memory


def _card_memory(node: Mapping[str, Any]) -> tuple[int, Decimal]:
    allocatable = _allocatable(node)
    cards = int(allocatable.get(GPU_NUMBER, Decimal(0)))
    if cards <= 0:
        return 0, Decimal(0)
    return cards, allocatable.get(GPU_MEMORY, Decimal(0)) / cards


def _trim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as an example in the report: metadata without managedFields, spec, status phase."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    out: dict[str, Any] = {"kind": obj.get("kind"), "metadata": meta}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    status = obj.get("status") or {}
    if status:
        out["status"] = {k: status[k] for k in ("phase", "allocatable", "state") if k in status}
    return out


def _brief(pod: Mapping[str, Any], requests: Mapping[str, Decimal], bound_at: float) -> str:
    """One line per pod in an example: where it is, what it asks, when the watch saw it bound."""
    asks = ",".join(f"{r}={_fmt(v)}" for r, v in sorted(requests.items()) if r != PODS)
    phase = (pod.get("status") or {}).get("phase")
    gone = " terminating" if _terminating(pod) else ""
    return f"{key_of(pod)} on {(pod.get('spec') or {}).get('nodeName')} {phase}{gone} [{asks}] bound at {bound_at:.1f}"


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f") if value == value.to_integral() else format(value, "f")


# ------------------------------------------------------------------ the checker


@dataclass
class _PodRecord:
    first_seen: float
    node: str = ""
    bound_at: float = 0.0
    judged: bool = False  # node-match evaluated
    seen_pending: bool = False


class Checker:
    """Stateful: keeps what it saw of each pod and node between checks (bind times, tightenings,
    how long a gang has been short, since when a pod has fitted)."""

    def __init__(self, limits: Limits, started: float) -> None:
        self.limits = limits
        self.started = started
        self.checks: Counter[str] = Counter()  # invariant -> evaluations
        self.violations: list[Violation] = []
        self.latencies: list[float] = []  # creation (first seen) -> bound, seconds
        self.slowest: list[tuple[float, str]] = []  # a heap of the SLOWEST longest (latency, pod)
        self.fit_evaluations = 0  # pending pods judged as fitting at some check (the rule is not vacuous)
        self.uncontended_steps = 0  # checks at which the cluster was not contended (the rule could apply)
        self._lock = threading.Lock()
        self._pods: dict[str, _PodRecord] = {}  # uid ->
        self._pending_violations: list[Violation] = []
        self._nodes: dict[str, Mapping[str, Any]] = {}  # name -> last seen
        self._node_tightened: dict[str, float] = {}
        self._node_gone: dict[str, float] = {}
        self._queues: dict[str, Mapping[str, Any]] = {}
        self._queue_tightened: dict[str, float] = {}
        self._short_since: dict[str, float] = {}  # gang -> since when 0 < bound < minMember
        self._reported_gangs: set[str] = set()
        self._lost_member: set[str] = set()  # gangs that lost a bound member (deleted, evicted)
        self._fit_since: dict[str, float] = {}  # uid -> since when it fits
        self._reported_fits: set[str] = set()
        self._open: set[tuple[str, str]] = set()  # (invariant, subject) violated at the last check
        self._leader = ""
        self._paused_until = started  # fit clocks start no earlier than this

    # --- the watch ------------------------------------------------------------------------------
    def saw_pod(self, pod: Mapping[str, Any], now: float, deleted: bool = False) -> None:
        """Every version of a pod the harness's watch (or a relist) delivers, in order."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or key_of(pod))
        node = (pod.get("spec") or {}).get("nodeName") or ""
        with self._lock:
            record = self._pods.get(uid)
            if record is None:
                record = self._pods[uid] = _PodRecord(first_seen=now)
                if node:  # first seen bound (it predates us, or a relist after an outage)
                    created = _created(pod)
                    record.first_seen = created if created is not None else now
            if node and not record.node:
                record.node, record.bound_at = node, now
                if record.first_seen < self.started:
                    record.judged, record.bound_at = True, -math.inf  # bound before we looked: no bind to judge
                if created_after(record, self.started) and (pod.get("spec") or {}).get("schedulerName") == \
                        self.limits.scheduler_name:
                    latency = max(0.0, now - record.first_seen)
                    self.latencies.append(latency)
                    heapq.heappush(self.slowest, (latency, key_of(pod)))
                    if len(self.slowest) > SLOWEST:
                        heapq.heappop(self.slowest)
            elif node and node != record.node:
                self._pending_violations.append(Violation(
                    "bound-once", key_of(pod), now, f"nodeName changed from {record.node} to {node}",
                    {"pod": _trim(pod)}))
                record.node = node
            if (deleted or _terminating(pod)) and record.node and not _finished(pod):
                group = _group_of(pod)
                if group:
                    self._lost_member.add(group)
            if deleted:  # a new pod of that name has a new uid: nothing more to know of this one
                self._fit_since.pop(uid, None)
                self._pods.pop(uid, None)

    # --- a check ------------------------------------------------------------------------------------
    def check(self, world: World) -> list[Violation]:
        """Every invariant over `world`; the violations found now (also kept in `violations`)."""
        with self._lock:
            found = list(self._pending_violations)
            self._pending_violations.clear()
            self.checks["bound-once"] += len(world.pods)
            self._see_nodes(world)
            self._see_queues(world)
            if world.leader != self._leader:
                self._leader = world.leader
                self.pause(world.now)
            terminating_ns = {n["metadata"]["name"] for n in world.namespaces if _terminating(n)}
            nodes = {n["metadata"]["name"]: n for n in world.nodes}
            live = [p for p in world.pods if not _finished(p)]
            requests = {key_of(p): pod_requests(p) for p in world.pods}
            on_node: dict[str, list[Mapping[str, Any]]] = {}
            for pod in live:
                node = (pod.get("spec") or {}).get("nodeName")
                if node:
                    on_node.setdefault(node, []).append(pod)
            found += self._check_node_match(world, nodes)
            found += self._check_capacity(world, nodes, on_node, requests)
            found += self._check_cards(world, nodes, on_node, requests)
            found += self._check_gangs(world, terminating_ns)
            queue_of = self._queue_of(world)
            found += self._check_queues(world, live, requests, queue_of)
            found += self._check_fits(world, nodes, on_node, requests, queue_of, terminating_ns)
            self.violations += found
            return found

    def pause(self, now: float) -> None:
        """Nothing could bind until `now` (API server unreachable, leader changing): fit clocks restart."""
        self._paused_until = max(self._paused_until, now)
        self._fit_since.clear()

    # --- tightenings -------------------------------------------------------------------------------
    def _see_nodes(self, world: World) -> None:
        current = {n["metadata"]["name"]: n for n in world.nodes}
        for name, node in current.items():
            before = self._nodes.get(name)
            self._node_gone.pop(name, None)
            if before is not None and _tighter(before, node):
                self._node_tightened[name] = world.now
        for name in self._nodes.keys() - current.keys():
            self._node_gone[name] = world.now
        self._nodes = current

    def _see_queues(self, world: World) -> None:
        current = {q["metadata"]["name"]: q for q in world.queues}
        for name, queue in current.items():
            before = self._queues.get(name)
            old = _resource_list(((before or {}).get("spec") or {}).get("capability"))
            new = _resource_list((queue.get("spec") or {}).get("capability"))
            if before is not None and any(r not in old or v < old[r] for r, v in new.items()):
                self._queue_tightened[name] = world.now
        self._queues = current

    def _bound_at(self, pod: Mapping[str, Any]) -> float:
        record = self._pods.get(str(pod["metadata"].get("uid") or key_of(pod)))
        if record is None or not record.node:
            return -math.inf  # not seen bound by the watch yet: treat as old
        return record.bound_at if record.bound_at >= self.started else -math.inf

    # --- the invariants ----------------------------------------------------------------------------
    def _check_node_match(self, world: World, nodes: Mapping[str, Mapping[str, Any]]) -> list[Violation]:
        found = []
        grace = self.limits.race_grace_s
        for pod in world.pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name:
                continue
            record = self._pods.get(str(pod["metadata"].get("uid") or key_of(pod)))
            if record is None or record.judged:
                continue
            record.judged = True
            self.checks["node-match"] += 1
            node = nodes.get(node_name)
            if node is None:
                gone = self._node_gone.get(node_name, self.started)
                if record.bound_at > gone + grace:
                    found.append(Violation("node-match", key_of(pod), world.now,
                                           f"bound to node {node_name}, which does not exist", {"pod": _trim(pod)}))
                continue
            if record.bound_at <= self._node_tightened.get(node_name, -math.inf) + grace:
                continue  # decided on the node as it was a moment ago
            reasons = node_mismatches(pod, node)
            if reasons:
                found.append(Violation("node-match", key_of(pod), world.now,
                                       f"bound to {node_name}: " + "; ".join(reasons),
                                       {"pod": _trim(pod), "node": _trim(node)}))
        return found

    def _check_capacity(self, world: World, nodes: Mapping[str, Mapping[str, Any]],
                        on_node: Mapping[str, list[Mapping[str, Any]]],
                        requests: Mapping[str, Resources]) -> list[Violation]:
        found = []
        for name, node in nodes.items():
            self.checks["node-capacity"] += 1
            pods = on_node.get(name, [])
            used: Resources = {}
            for pod in pods:
                _add(used, requests[key_of(pod)])
            allocatable = _allocatable(node)
            cutoff = self._node_tightened.get(name, -math.inf) + self.limits.race_grace_s
            for resource, amount in sorted(used.items()):
                limit = allocatable.get(resource, Decimal(0))
                if amount <= limit:
                    continue
                fresh = [p for p in pods if requests[key_of(p)].get(resource, 0) > 0 and self._bound_at(p) > cutoff]
                if fresh and self._opens("node-capacity", f"{name}/{resource}"):
                    found.append(Violation(
                        "node-capacity", name, world.now,
                        f"{resource}: pods request {_fmt(amount)}, allocatable {_fmt(limit)} "
                        f"({len(pods)} pods; bound since: {', '.join(key_of(p) for p in fresh[:5])})",
                        {"node": _trim(node), "pods": [_trim(p) for p in fresh[:3]],
                         "all": [_brief(p, requests[key_of(p)], self._bound_at(p) - self.started) for p in pods]}))
                elif not fresh:
                    self._open.discard(("node-capacity", f"{name}/{resource}"))
            for resource in allocatable:
                if used.get(resource, Decimal(0)) <= allocatable[resource]:
                    self._open.discard(("node-capacity", f"{name}/{resource}"))
        return found

    def _opens(self, invariant: str, subject: str) -> bool:
        """Whether a violation of `invariant` on `subject` starts now (one report per episode, not
        one per step while it lasts)."""
        if (invariant, subject) in self._open:
            return False
        self._open.add((invariant, subject))
        return True

    def _check_cards(self, world: World, nodes: Mapping[str, Mapping[str, Any]],
                     on_node: Mapping[str, list[Mapping[str, Any]]],
                     requests: Mapping[str, Resources]) -> list[Violation]:
        found = []
        for name, node in nodes.items():
            cards, per_card = _card_memory(node)
            gpu_pods = [p for p in on_node.get(name, []) if _gpu_need(requests[key_of(p)])[0]]
            if not gpu_pods and not cards:
                continue
            self.checks["gpu-card-memory"] += 1
            used: dict[int, Decimal] = {}
            holders: dict[int, list[str]] = {}
            for pod in gpu_pods:
                count, memory = _gpu_need(requests[key_of(pod)])
                chosen = _gpu_cards(pod)
                if chosen is None or len(chosen) != count or len(set(chosen)) != count or \
                        any(not 0 <= c < cards for c in chosen):
                    if self._bound_at(pod) > self._node_tightened.get(name, -math.inf) + self.limits.race_grace_s:
                        found.append(Violation(
                            "gpu-card-memory", key_of(pod), world.now,
                            f"bound to {name} ({cards} cards) asking {count} card(s) with card record "
                            f"{((pod.get('metadata') or {}).get('annotations') or {}).get(GPU_INDEX)!r}",
                            {"pod": _trim(pod), "node": _trim(node)}))
                    continue
                for card in chosen:
                    used[card] = used.get(card, Decimal(0)) + memory
                    holders.setdefault(card, []).append(key_of(pod))
            for card, amount in sorted(used.items()):
                if amount <= per_card:
                    self._open.discard(("gpu-card-memory", f"{name}/card{card}"))
                elif self._opens("gpu-card-memory", f"{name}/card{card}"):
                    found.append(Violation(
                        "gpu-card-memory", f"{name}/card{card}", world.now,
                        f"pods {', '.join(holders[card])} take {_fmt(amount)} MiB of a {_fmt(per_card)} MiB card",
                        {"node": _trim(node),
                         "pods": [_trim(p) for p in gpu_pods if key_of(p) in holders[card]][:4]}))
        return found

    def _check_gangs(self, world: World, terminating_ns: set[str]) -> list[Violation]:
        found = []
        members: dict[str, list[Mapping[str, Any]]] = {}
        for pod in world.pods:
            group = _group_of(pod)
            if group:
                members.setdefault(group, []).append(pod)
        seen = set()
        for pg in world.podgroups:
            key = key_of(pg)
            seen.add(key)
            minimum = int((pg.get("spec") or {}).get("minMember") or 0)
            if minimum <= 1 or _terminating(pg) or pg["metadata"]["namespace"] in terminating_ns:
                self._short_since.pop(key, None)
                continue
            live = [p for p in members.get(key, []) if not _terminating(p)]
            if len(live) < minimum or key in self._lost_member:
                self._short_since.pop(key, None)  # not whole: its job controller's turn, not ours
                continue
            self.checks["gang-min-member"] += 1
            bound = [p for p in live if (p.get("spec") or {}).get("nodeName")]
            if 0 < len(bound) < minimum:
                since = self._short_since.setdefault(key, world.now)
                if world.now - since > self.limits.gang_grace_s and key not in self._reported_gangs:
                    self._reported_gangs.add(key)
                    found.append(Violation(
                        "gang-min-member", key, world.now,
                        f"{len(bound)}/{minimum} bound for {world.now - since:.1f}s "
                        f"({', '.join(sorted(key_of(p) for p in bound))})",
                        {"podgroup": _trim(pg), "pods": [_trim(p) for p in live[:minimum]]}))
            else:
                self._short_since.pop(key, None)
        for key in list(self._short_since):
            if key not in seen:
                del self._short_since[key]
        return found

    def _queue_of(self, world: World) -> dict[str, str]:
        groups = {key_of(pg): (pg.get("spec") or {}).get("queue") or DEFAULT_QUEUE for pg in world.podgroups}
        out = {}
        for pod in world.pods:
            group = _group_of(pod)
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            if group and group in groups:
                out[key_of(pod)] = groups[group]
            else:
                out[key_of(pod)] = annotations.get(QUEUE_ANNOTATION) or DEFAULT_QUEUE
        return out

    def _queue_usage(self, world: World, requests: Mapping[str, Resources],
                     queue_of: Mapping[str, str]) -> tuple[dict[str, Resources], dict[str, list[Mapping[str, Any]]]]:
        usage: dict[str, Resources] = {}
        members: dict[str, list[Mapping[str, Any]]] = {}
        existing = {node["metadata"]["name"] for node in world.nodes}
        for pod in world.pods:
            if (pod.get("spec") or {}).get("nodeName") in existing and not _finished(pod) and not _terminating(pod):
                queue = queue_of[key_of(pod)]
                _add(usage.setdefault(queue, {}), requests[key_of(pod)])
                members.setdefault(queue, []).append(pod)
        return usage, members

    def _check_queues(self, world: World, live: Sequence[Mapping[str, Any]], requests: Mapping[str, Resources],
                      queue_of: Mapping[str, str]) -> list[Violation]:
        found = []
        usage, members = self._queue_usage(world, requests, queue_of)
        for queue in world.queues:
            name = queue["metadata"]["name"]
            capability = _resource_list((queue.get("spec") or {}).get("capability"))
            if not capability:
                continue
            self.checks["queue-capability"] += 1
            cutoff = self._queue_tightened.get(name, -math.inf) + self.limits.race_grace_s
            for resource, cap in sorted(capability.items()):
                amount = usage.get(name, {}).get(resource, Decimal(0))
                if amount <= cap:
                    self._open.discard(("queue-capability", f"{name}/{resource}"))
                    continue
                fresh = [p for p in members.get(name, []) if requests[key_of(p)].get(resource, 0) > 0
                         and self._bound_at(p) > cutoff]
                if fresh and self._opens("queue-capability", f"{name}/{resource}"):
                    found.append(Violation(
                        "queue-capability", name, world.now,
                        f"{resource}: allocated {_fmt(amount)} above capability {_fmt(cap)} "
                        f"(bound since: {', '.join(key_of(p) for p in fresh[:5])})",
                        {"queue": _trim(queue), "pods": [_trim(p) for p in fresh[:3]],
                         "all": [_brief(p, requests[key_of(p)], self._bound_at(p) - self.started)
                                 for p in members[name]]}))
        return found

    def _check_fits(self, world: World, nodes: Mapping[str, Mapping[str, Any]],
                    on_node: Mapping[str, list[Mapping[str, Any]]], requests: Mapping[str, Resources],
                    queue_of: Mapping[str, str], terminating_ns: set[str]) -> list[Violation]:
        found = []
        pending = [p for p in world.pods if not (p.get("spec") or {}).get("nodeName") and not _finished(p)
                   and not _terminating(p) and (p.get("spec") or {}).get("schedulerName") == self.limits.scheduler_name
                   and p["metadata"]["namespace"] not in terminating_ns]
        context = _FitContext.build(world, nodes, on_node, requests, pending, self._queue_usage(world, requests,
                                                                                                queue_of)[0])
        if not context.contended:
            self.uncontended_steps += 1
        alive = set()
        for pod in pending:
            uid = str(pod["metadata"].get("uid") or key_of(pod))
            alive.add(uid)
            self.checks["fit-bound-in-time"] += 1
            if not context.fits(pod, queue_of[key_of(pod)]):
                self._fit_since.pop(uid, None)
                continue
            self.fit_evaluations += 1
            since = self._fit_since.setdefault(uid, max(world.now, self._paused_until))
            if world.now - since > self.limits.fit_deadline_s and uid not in self._reported_fits:
                self._reported_fits.add(uid)
                found.append(Violation(
                    "fit-bound-in-time", key_of(pod), world.now,
                    f"pending for {world.now - since:.1f}s while it fits on {', '.join(context.nodes_for(pod)[:3])} "
                    f"(queue {queue_of[key_of(pod)]})", {"pod": _trim(pod)}))
        for uid in list(self._fit_since):
            if uid not in alive:
                del self._fit_since[uid]
        return found


def created_after(record: _PodRecord, started: float) -> bool:
    return record.first_seen >= started


def _tighter(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether a node's new version may reject a pod its old one accepted."""
    old_taints = {(t.get("key"), t.get("value"), t.get("effect")) for t in _filtering_taints(before)}
    new_taints = {(t.get("key"), t.get("value"), t.get("effect")) for t in _filtering_taints(after)}
    if new_taints - old_taints:
        return True
    if ((before.get("metadata") or {}).get("labels") or {}) != ((after.get("metadata") or {}).get("labels") or {}):
        return True
    old, new = _allocatable(before), _allocatable(after)
    return any(new.get(r, Decimal(0)) < v for r, v in old.items()) or _ready(before) and not _ready(after)


@dataclass(frozen=True)
class _FitContext:
    """What `fits` needs, computed once per check."""

    nodes: Mapping[str, Mapping[str, Any]]
    on_node: Mapping[str, list[Mapping[str, Any]]]
    requests: Mapping[str, Resources]
    free: dict[str, Resources]
    card_free: dict[str, list[Decimal]]
    contended: set[str]  # resources the pending demand (and unmet guarantees) exceeds the cluster's room in
    queues: Mapping[str, Mapping[str, Any]]
    queue_usage: Mapping[str, Resources]
    repelling: list[tuple[str, str, Mapping[str, Any] | None]]  # placed pods' anti-affinity: key, value, selector

    @classmethod
    def build(cls, world: World, nodes: Mapping[str, Mapping[str, Any]],
              on_node: Mapping[str, list[Mapping[str, Any]]], requests: Mapping[str, Resources],
              pending: Iterable[Mapping[str, Any]], queue_usage: Mapping[str, Resources]) -> _FitContext:
        free: dict[str, Resources] = {}
        card_free: dict[str, list[Decimal]] = {}
        total_free: Resources = {r: Decimal(0) for r in CLUSTER_RESOURCES}
        for name, node in nodes.items():
            room = _allocatable(node)
            for pod in on_node.get(name, []):
                for r, v in requests[key_of(pod)].items():
                    room[r] = room.get(r, Decimal(0)) - v
            free[name] = room
            cards, per_card = _card_memory(node)
            slots = [per_card] * cards
            for pod in on_node.get(name, []):
                count, memory = _gpu_need(requests[key_of(pod)])
                chosen = _gpu_cards(pod) if count else []
                if count and (chosen is None or any(not 0 <= c < cards for c in chosen)):
                    slots = []  # a card record we cannot read: judge no card free
                    break
                for c in chosen or []:
                    slots[c] -= memory
            card_free[name] = slots
            if _schedulable(node):
                for r in CLUSTER_RESOURCES:
                    total_free[r] += max(Decimal(0), room.get(r, Decimal(0)))
        demand: Resources = {r: Decimal(0) for r in CLUSTER_RESOURCES}
        for pod in pending:
            _add(demand, {r: requests[key_of(pod)].get(r, Decimal(0)) for r in CLUSTER_RESOURCES})
        queues = {q["metadata"]["name"]: q for q in world.queues}
        unmet: dict[str, Resources] = {}
        for name, queue in queues.items():
            guarantee = _resource_list(((queue.get("spec") or {}).get("guarantee") or {}).get("resource"))
            used = queue_usage.get(name, {})
            unmet[name] = {r: max(Decimal(0), v - used.get(r, Decimal(0))) for r, v in guarantee.items()}
        contended = set()
        for r in CLUSTER_RESOURCES:
            reserved = sum((u.get(r, Decimal(0)) for u in unmet.values()), Decimal(0))
            if demand[r] + reserved > total_free[r]:
                contended.add(r)
        repelling = []
        for name, pods in on_node.items():
            node_labels = (nodes.get(name, {}).get("metadata") or {}).get("labels") or {}
            for pod in pods:
                for term in _anti_affinity_terms(pod):
                    key = term.get("topologyKey") or ""
                    if key in node_labels:
                        repelling.append((key, node_labels[key], term.get("labelSelector")))
        return cls(nodes, on_node, requests, free, card_free, contended, queues, queue_usage, repelling)

    def fits(self, pod: Mapping[str, Any], queue: str) -> bool:
        """Conservatively: true only where no policy rule of the soak could hold the pod back: the
        cluster is not contended (all pending demand plus unmet guarantees fit its free room, so
        no queue is over its fair share), the pod has no rule this test does not model
        (inter-pod affinity, topology spread, a gang), its queue is open and under capability,
        and some schedulable node matches it with room (and a card) for it."""
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        if spec.get("schedulingGates") or spec.get("topologySpreadConstraints") or affinity.get("podAffinity") \
                or affinity.get("podAntiAffinity") or _group_of(pod):
            return False
        if self.contended:
            return False
        need = self.requests[key_of(pod)]
        queue_object = self.queues.get(queue)
        if queue_object is None or (queue_object.get("status") or {}).get("state", "Open") != "Open":
            return False
        capability = _resource_list((queue_object.get("spec") or {}).get("capability"))
        used = self.queue_usage.get(queue, {})
        if any(used.get(r, Decimal(0)) + need.get(r, Decimal(0)) > cap for r, cap in capability.items()):
            return False
        return bool(self.nodes_for(pod))

    def nodes_for(self, pod: Mapping[str, Any]) -> list[str]:
        need = self.requests[key_of(pod)]
        count, memory = _gpu_need(need)
        ports = _host_ports(pod)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        out = []
        for name, node in sorted(self.nodes.items()):
            if not _schedulable(node) or node_mismatches(pod, node):
                continue
            room = self.free[name]
            if any(v > room.get(r, Decimal(0)) for r, v in need.items() if v > 0):
                continue
            if count and sum(1 for slot in self.card_free[name] if slot >= memory) < count:
                continue
            if ports and any(ports & _host_ports(p) for p in self.on_node.get(name, [])):
                continue
            # A placed pod's required anti-affinity may forbid this one in its topology domain
            # (whatever the term's namespaces: judging too many nodes unfit only makes the pod
            # fit less often).
            node_labels = (node.get("metadata") or {}).get("labels") or {}
            if any(node_labels.get(topology_key) == domain and _selector_matches(selector, labels)
                   for topology_key, domain, selector in self.repelling):
                continue
            out.append(name)
        return out


def _schedulable(node: Mapping[str, Any]) -> bool:
    return not (node.get("spec") or {}).get("unschedulable") and _ready(node)
