"""An independent checker of pod placements: does every bound pod keep every required rule?

Written for the tests and the benchmark from kube-scheduler's documented behaviour, sharing no
code with the engine (nothing from runtime/ or compiler/ is imported), so that a bug in the
engine's reading of a rule is not repeated here. Its input is plain Kubernetes objects as dicts
(as the API server returns them, or as YAML holds them): Nodes, Pods, Namespaces and, for the
gang rule, Volcano PodGroups. `check()` returns the violations, one `Violation` each.

The rules, for every pod bound to a node and not finished (phase Succeeded or Failed):

- `node`: the pod is bound to a node that exists.
- `bound-once`: the pod was never given a second node (from a recorded history, or the same pod
  listed twice).
- `scheduling-gates`: a pod with `spec.schedulingGates` is not bound.
- `resources`, `pod-count`: per node, the pods' requests stay within allocatable, requests
  computed as the kubelet and kube-scheduler do (see `pod_requests`).
- `node-selector`, `node-affinity`: `spec.nodeSelector` and the required node affinity terms
  (matchExpressions on labels, matchFields on `metadata.name`).
- `taints`, `unschedulable`: NoSchedule and NoExecute taints are tolerated, and a cordoned
  node's implicit `node.kubernetes.io/unschedulable:NoSchedule` too.
- `pod-affinity`, `pod-anti-affinity`: the required inter-pod terms (see `_check_affinity`).
- `topology-spread`: the `DoNotSchedule` constraints (see `_check_spread`).
- `host-ports`: no two pods on a node claim one host port (protocol, port, host IP).
- `gang`: given PodGroups, no group has some but fewer than minMember pods bound.

Every rule is checked on the placement as it stands at the end, where kube-scheduler checks each
pod against the cluster as it was when that pod was placed. For anti-affinity, ports, resources
and the node rules the two agree: a final state that breaks one was reached by a placement that
broke it (or by a pod that changed node, which `bound-once` reports). For the two rules whose
verdict depends on the order of placements the final-state check is defined here:

- required pod affinity: a pod needs, in each term's domain, a pod matching all its terms that
  was there before it; or, when no pod matched them yet and it matches them itself, it may go
  anywhere (the first of its group). So a final placement passes when its pods can be put in an
  order that satisfies this, which `_check_affinity` decides: a group of pods that attract each
  other sits in one domain, or in several only where other matching pods came first, and two
  pods of one such group alone in two zones cannot both have been first. It accepts a placement
  that some order allows, whichever order really happened.
- topology spread: when every matching pod was placed one at a time under the constraint, the skew
  (largest minus smallest count of matching pods over the domains of the eligible nodes) never
  exceeds maxSkew: a pod goes only into a domain holding at most min + maxSkew - 1, which keeps the
  skew within maxSkew, and the minimum never falls. So the final skew is checked, per pod that
  matches its own selector, and the pods in the domains above min + maxSkew are reported. While
  there are fewer domains than minDomains the minimum counts as 0, so then every domain must hold at
  most maxSkew. This is stronger than kube-scheduler where matching pods were placed without the
  constraint (or with a larger maxSkew), or by another scheduler (those raise the skew
  legitimately), and weaker where an out-of-order placement was later evened out, or a pod that
  broke it was deleted since. A pod that does not match its own selector is checked only for the
  domain label, since its placement does not move the counts it was checked against.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# Resources a pod may ask for at pod level (spec.resources); hugepages-* too.
POD_LEVEL_RESOURCES = ("cpu", "memory")
FILTERING_EFFECTS = ("NoSchedule", "NoExecute")
WILDCARD_IP = "0.0.0.0"
# How many pods a violation's detail names before it says "and N more".
NAMED_PODS = 5
# Candidate first pods whose effect is tried before one is picked (the rest wait their turn).
FIRST_POD_TRIALS = 50

RULES = ("node", "bound-once", "scheduling-gates", "resources", "pod-count", "node-selector", "node-affinity",
         "taints", "unschedulable", "pod-affinity", "pod-anti-affinity", "topology-spread", "host-ports", "gang")


@dataclass(frozen=True, order=True)
class Violation:
    """`pod` is the pod that breaks `rule` ("namespace/name"); for a rule that several pods break
    together (a node's resources, a shared host port, a short gang) their names, comma-separated."""

    pod: str
    rule: str
    detail: str

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(self.pod.split(","))

    def __str__(self) -> str:
        return f"{self.pod}: {self.rule}: {self.detail}"


# ------------------------------------------------------------------ quantities and requests

Resources = dict[str, Decimal]


def _quantity(value: Any) -> Decimal:
    return Decimal(parse_quantity(value))


def _resource_list(raw: Mapping[str, Any] | None) -> Resources:
    return {str(name): _quantity(value) for name, value in (raw or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests; per resource, its limit where it requests nothing (as the API
    server defaults a missing request to the limit)."""
    resources = container.get("resources") or {}
    requests = _resource_list(resources.get("requests"))
    for name, value in _resource_list(resources.get("limits")).items():
        requests.setdefault(name, value)
    return requests


def _add(total: Resources, more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def _raise_to(total: Resources, other: Mapping[str, Decimal]) -> None:
    for name, value in other.items():
        if value > total.get(name, Decimal(0)):
            total[name] = value


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def _pod_level(name: str) -> bool:
    return name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What a pod takes from its node, per resource, as the kubelet admits it and kube-scheduler
    fits it: the sum of its containers; an init container runs alone, next to the sidecars
    (init containers with restartPolicy Always) declared before it, and the largest such moment
    counts if it is larger; sidecars keep running, so they add to the containers' sum; pod-level
    `spec.resources` replaces the containers' figure for the resources it names; overhead is added."""
    spec = pod.get("spec") or {}
    containers = [_container_requests(c) for c in spec.get("containers") or []]
    total: Resources = {}
    for requests in containers:
        _add(total, requests)
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if _is_sidecar(container):
            _add(sidecars, requests)
            moment = dict(sidecars)
        else:
            moment = dict(sidecars)
            _add(moment, requests)
        _raise_to(init_peak, moment)
    _add(total, sidecars)
    _raise_to(total, init_peak)
    pod_level = spec.get("resources") or {}
    level_requests = _resource_list(pod_level.get("requests"))
    for name, value in level_requests.items():
        if _pod_level(name):
            total[name] = value
    declared = {name for requests in containers for name in requests}
    declared |= {name for c in spec.get("initContainers") or [] for name in _container_requests(c)}
    for name, value in _resource_list(pod_level.get("limits")).items():
        # A pod-level limit alone stands for the request, unless containers ask for that resource.
        if _pod_level(name) and name not in level_requests and name not in declared:
            total[name] = value
    _add(total, _resource_list(spec.get("overhead")))
    return total


# ------------------------------------------------------------------ selectors

Requirement = tuple[str, str, frozenset[str]]  # key, operator, values


@dataclass(frozen=True)
class _Selector:
    """A label selector; `nothing` for a null one (matches no pod, as in affinity terms)."""

    requirements: tuple[Requirement, ...]
    nothing: bool = False

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None, own_labels: Mapping[str, str] | None = None,
           match_keys: Sequence[str] = (), mismatch_keys: Sequence[str] = ()) -> _Selector:
        if raw is None:
            return cls((), nothing=True)
        reqs: list[Requirement] = [(k, "In", frozenset([str(v)])) for k, v in (raw.get("matchLabels") or {}).items()]
        for expr in raw.get("matchExpressions") or []:
            reqs.append((expr["key"], expr["operator"], frozenset(str(v) for v in expr.get("values") or ())))
        labels = own_labels or {}
        # matchLabelKeys / mismatchLabelKeys take the incoming pod's own value of each key
        # (a key it lacks is ignored); the API server may already have merged them, which the
        # same requirement twice does not change.
        reqs += [(k, "In", frozenset([labels[k]])) for k in match_keys if k in labels]
        reqs += [(k, "NotIn", frozenset([labels[k]])) for k in mismatch_keys if k in labels]
        return cls(tuple(sorted(reqs, key=lambda r: (r[0], r[1], sorted(r[2])))))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(_label_requirement(labels, *req) for req in self.requirements)

    def equalities(self) -> list[tuple[str, frozenset[str]]]:
        """The (key, values) a matching pod must carry one of: what an index can look up."""
        return [(key, values) for key, op, values in self.requirements if op == "In"]


def _label_requirement(labels: Mapping[str, str], key: str, op: str, values: frozenset[str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):  # node selectors only: integers compared
        try:
            have, want = int(labels[key]), int(next(iter(values)))
        except (KeyError, ValueError, StopIteration):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _node_term_matches(term: Mapping[str, Any], node: _Node) -> bool:
    """A nodeSelectorTerm: every expression and every field requirement holds; an empty term
    matches no node."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    for expr in exprs:
        if not _label_requirement(node.labels, expr["key"], expr["operator"],
                                  frozenset(str(v) for v in expr.get("values") or ())):
            return False
    for expr in fields:
        # metadata.name is the one field a node selector may name.
        if expr.get("key") != "metadata.name" or expr.get("operator") not in ("In", "NotIn"):
            return False
        if not _label_requirement({"metadata.name": node.name}, "metadata.name", expr["operator"],
                                  frozenset(str(v) for v in expr.get("values") or ())):
            return False
    return True


# ------------------------------------------------------------------ the objects, read once


@dataclass
class _Node:
    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: list[dict[str, Any]]
    unschedulable: bool


@dataclass(frozen=True)
class _Term:
    """An inter-pod (anti-)affinity term of a pod, its namespaces resolved."""

    selector: _Selector
    namespaces: frozenset[str] | None  # None: every namespace
    topology_key: str

    def matches(self, pod: _Pod) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) and self.selector.matches(pod.labels)


@dataclass
class _Pod:
    key: str
    namespace: str
    labels: dict[str, str]
    node: str | None
    raw: Mapping[str, Any]
    terminating: bool
    affinity: list[_Term] = field(default_factory=list)
    anti_affinity: list[_Term] = field(default_factory=list)

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.raw.get("spec") or {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _read_node(obj: Mapping[str, Any]) -> _Node:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return _Node(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        allocatable=_resource_list(status.get("allocatable") or status.get("capacity")),
        taints=list(spec.get("taints") or []),
        unschedulable=bool(spec.get("unschedulable")),
    )


def _terms(raw_terms: Iterable[Mapping[str, Any]], pod: Mapping[str, Any],
           namespace_labels: Mapping[str, Mapping[str, str]]) -> list[_Term]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    own_namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    terms = []
    for raw in raw_terms:
        listed = frozenset(raw.get("namespaces") or ())
        ns_selector = raw.get("namespaceSelector")
        namespaces: frozenset[str] | None
        if ns_selector is None:
            namespaces = listed or frozenset([own_namespace])
        elif not ns_selector.get("matchLabels") and not ns_selector.get("matchExpressions"):
            namespaces = None  # an empty namespaceSelector selects every namespace
        else:
            chosen = _Selector.of(ns_selector)
            namespaces = listed | {name for name, ns_labels in namespace_labels.items() if chosen.matches(ns_labels)}
        selector = _Selector.of(raw.get("labelSelector"), labels, raw.get("matchLabelKeys") or (),
                                raw.get("mismatchLabelKeys") or ())
        terms.append(_Term(selector, namespaces, raw["topologyKey"]))
    return terms


def _read_pod(obj: Mapping[str, Any], namespace_labels: Mapping[str, Mapping[str, str]]) -> _Pod:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    affinity = spec.get("affinity") or {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    return _Pod(
        key=_key(obj),
        namespace=meta.get("namespace") or "default",
        labels=dict(meta.get("labels") or {}),
        node=spec.get("nodeName") or None,
        raw=obj,
        terminating=bool(meta.get("deletionTimestamp")),
        affinity=_terms((affinity.get("podAffinity") or {}).get(required) or [], obj, namespace_labels),
        anti_affinity=_terms((affinity.get("podAntiAffinity") or {}).get(required) or [], obj, namespace_labels),
    )


class _Index:
    """The bound pods, by label, so that a selector's candidates are found without a scan."""

    def __init__(self, pods: Sequence[_Pod]) -> None:
        self.pods = pods
        self.by_label: dict[tuple[str, str], list[_Pod]] = defaultdict(list)
        for pod in pods:
            for item in pod.labels.items():
                self.by_label[item].append(pod)

    def candidates(self, selector: _Selector) -> Sequence[_Pod]:
        if selector.nothing:
            return ()
        best: Sequence[_Pod] | None = None
        for key, values in selector.equalities():
            found = [p for v in values for p in self.by_label.get((key, v), ())]
            if best is None or len(found) < len(best):
                best = found
        return self.pods if best is None else best

    def matching(self, terms: Sequence[_Term], exclude: _Pod) -> list[_Pod]:
        """The pods other than `exclude` that every term matches."""
        if not terms:
            return []
        return [p for p in self.candidates(terms[0].selector) if p is not exclude and all(t.matches(p) for t in terms)]


def _names(pods: Iterable[str]) -> str:
    listed = sorted(pods)
    shown = ", ".join(listed[:NAMED_PODS])
    return shown + (f" and {len(listed) - NAMED_PODS} more" if len(listed) > NAMED_PODS else "")


def _fmt(value: Decimal) -> str:
    return format(value.normalize(), "f")


# ------------------------------------------------------------------ the check


def check(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
          namespaces: Iterable[Mapping[str, Any]] = (), *, podgroups: Iterable[Mapping[str, Any]] = (),
          history: Mapping[str, Sequence[str]] | None = None) -> list[Violation]:
    """Every required rule for every bound pod (see the module's docstring); the violations, sorted.

    `namespaces` gives the labels that namespaceSelectors read (a namespace not given has only
    `kubernetes.io/metadata.name`); `podgroups` turns the gang rule on for those groups;
    `history` maps a pod ("namespace/name") to every node it was ever seen bound to, in order.
    """
    namespace_labels: dict[str, dict[str, str]] = {}
    for ns in namespaces:
        name = ns["metadata"]["name"]
        namespace_labels[name] = {**(ns["metadata"].get("labels") or {}), NAMESPACE_NAME_LABEL: name}
    raw_pods = list(pods)
    for pod in raw_pods:
        ns_name = (pod.get("metadata") or {}).get("namespace") or "default"
        namespace_labels.setdefault(ns_name, {NAMESPACE_NAME_LABEL: ns_name})
    node_by_name = {n.name: n for n in (_read_node(obj) for obj in nodes)}

    violations: list[Violation] = []
    seen: dict[str, str | None] = {}
    all_pods: list[_Pod] = []
    for obj in raw_pods:
        pod = _read_pod(obj, namespace_labels)
        if pod.key in seen and seen[pod.key] != pod.node:
            violations.append(Violation(pod.key, "bound-once", f"listed twice, on {seen[pod.key]} and on {pod.node}"))
        seen[pod.key] = pod.node
        all_pods.append(pod)
    for key, nodes_seen in (history or {}).items():
        distinct = [n for i, n in enumerate(nodes_seen) if i == 0 or nodes_seen[i - 1] != n]
        if len(distinct) > 1:
            violations.append(Violation(key, "bound-once", "bound to " + " then ".join(distinct)))

    bound: list[_Pod] = []
    for pod in all_pods:
        if pod.node is None or _finished(pod.raw):
            continue
        if pod.node not in node_by_name:
            violations.append(Violation(pod.key, "node", f"bound to {pod.node}, which is not a node"))
            continue
        bound.append(pod)
    index = _Index(bound)

    for pod in bound:
        node = node_by_name[pod.node]  # type: ignore[index]
        violations += _check_gates(pod)
        violations += _check_node_fit(pod, node)
    violations += _check_resources(bound, node_by_name)
    violations += _check_host_ports(bound)
    violations += _check_affinity(bound, index, node_by_name)
    violations += _check_anti_affinity(bound, index, node_by_name)
    violations += _check_spread(bound, index, node_by_name)
    violations += _check_gangs(podgroups, all_pods)
    return sorted(violations)


def _check_gates(pod: _Pod) -> list[Violation]:
    gates = [g.get("name", "") for g in pod.spec.get("schedulingGates") or []]
    if gates:
        return [Violation(pod.key, "scheduling-gates", f"bound to {pod.node} while gated by {', '.join(gates)}")]
    return []


def _node_affinity_fits(spec: Mapping[str, Any], node: _Node) -> tuple[bool, bool]:
    """(nodeSelector holds, required node affinity holds) for a pod spec on `node`."""
    selector = spec.get("nodeSelector") or {}
    selector_ok = all(node.labels.get(k) == v for k, v in selector.items())
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    affinity_ok = required is None or any(_node_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])
    return selector_ok, affinity_ok


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif operator == "Equal" and key and key == taint.get("key") and (tol.get("value") or "") == (
                taint.get("value") or ""):
            return True
    return False


def _untolerated(spec: Mapping[str, Any], node: _Node) -> list[Mapping[str, Any]]:
    tolerations = spec.get("tolerations") or []
    return [t for t in node.taints if t.get("effect") in FILTERING_EFFECTS and not _tolerates(tolerations, t)]


def _check_node_fit(pod: _Pod, node: _Node) -> list[Violation]:
    found = []
    selector_ok, affinity_ok = _node_affinity_fits(pod.spec, node)
    if not selector_ok:
        found.append(Violation(pod.key, "node-selector", f"{node.name} lacks {pod.spec.get('nodeSelector')}"))
    if not affinity_ok:
        found.append(Violation(pod.key, "node-affinity", f"{node.name} matches no required nodeSelectorTerm"))
    for taint in _untolerated(pod.spec, node):
        found.append(Violation(pod.key, "taints", f"{node.name} has taint {taint.get('key')}="
                                                  f"{taint.get('value') or ''}:{taint.get('effect')}, not tolerated"))
    if node.unschedulable and not _tolerates(pod.spec.get("tolerations") or [],
                                             {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}):
        found.append(Violation(pod.key, "unschedulable", f"{node.name} is cordoned (spec.unschedulable)"))
    return found


def _check_resources(bound: Sequence[_Pod], nodes: Mapping[str, _Node]) -> list[Violation]:
    per_node: dict[str, list[tuple[_Pod, Resources]]] = defaultdict(list)
    for pod in bound:
        per_node[pod.node].append((pod, pod_requests(pod.raw)))  # type: ignore[index]
    found = []
    for name, placed in sorted(per_node.items()):
        node = nodes[name]
        max_pods = node.allocatable.get("pods")
        if max_pods is not None and len(placed) > max_pods:
            found.append(Violation(",".join(sorted(p.key for p, _ in placed)), "pod-count",
                                   f"{len(placed)} pods on {name}, which allows {_fmt(max_pods)}"))
        totals: Resources = {}
        for _, requests in placed:
            _add(totals, requests)
        for resource, total in sorted(totals.items()):
            have = node.allocatable.get(resource, Decimal(0))
            if total > have and total > 0:
                takers = sorted(p.key for p, r in placed if r.get(resource, 0) > 0)
                found.append(Violation(",".join(takers), "resources",
                                       f"{name}: {resource} requested {_fmt(total)} of allocatable {_fmt(have)} "
                                       f"by {len(takers)} pods"))
    return found


def _host_ports(pod: _Pod) -> list[tuple[str, int, str]]:
    """(protocol, port, host IP) of every host port the pod's containers and sidecars claim
    (kube-scheduler counts sidecars' ports too; a plain init container's are not held)."""
    containers = list(pod.spec.get("containers") or [])
    containers += [c for c in pod.spec.get("initContainers") or [] if _is_sidecar(c)]
    claimed = []
    for container in containers:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                claimed.append((port.get("protocol") or "TCP", int(port["hostPort"]),
                                port.get("hostIP") or WILDCARD_IP))
    return claimed


def _check_host_ports(bound: Sequence[_Pod]) -> list[Violation]:
    claims: dict[tuple[str, str, int], list[tuple[str, _Pod]]] = defaultdict(list)
    for pod in bound:
        for protocol, port, ip in _host_ports(pod):
            claims[(pod.node, protocol, port)].append((ip, pod))  # type: ignore[index]
    found = []
    for (node, protocol, port), holders in sorted(claims.items(), key=lambda item: item[0]):
        for i, (ip_a, pod_a) in enumerate(holders):
            for ip_b, pod_b in holders[i + 1:]:
                if pod_a is not pod_b and (ip_a == ip_b or WILDCARD_IP in (ip_a, ip_b)):
                    found.append(Violation(",".join(sorted((pod_a.key, pod_b.key))), "host-ports",
                                           f"{node}: both claim {protocol} {port} ({ip_a} and {ip_b})"))
    return found


def _domain(node: _Node, key: str) -> str | None:
    return node.labels.get(key)


def _check_affinity(bound: Sequence[_Pod], index: _Index, nodes: Mapping[str, _Node]) -> list[Violation]:
    """Required pod affinity, as the final-state rule of the module's docstring.

    kube-scheduler places a pod with required affinity on a node that carries every term's key
    and where each term's domain already holds a pod matching *all* its terms (a witness); or,
    when no pod matches them anywhere yet and the pod matches them itself, anywhere (the first of
    its group). So a final placement is possible when its pods can be put in an order where each
    has its witnesses before it, or is such a first pod. Found here by grounding: pods without
    affinity are placed; a pod whose witnesses are all placed is placed; when nothing more can be,
    a self-matching pod is taken as a first pod (the one that lets the most others follow), as
    long as the first pods can still be ordered before every pod matching them; the pods left
    ungrounded are the violations."""
    found = []
    needs: dict[str, tuple[_Pod, list[_Pod]]] = {}
    for pod in bound:
        if not pod.affinity:
            continue
        node = nodes[pod.node]  # type: ignore[index]
        missing = [t.topology_key for t in pod.affinity if _domain(node, t.topology_key) is None]
        if missing:
            found.append(Violation(pod.key, "pod-affinity", f"{node.name} has no label {', '.join(missing)}"))
            continue
        needs[pod.key] = (pod, index.matching(pod.affinity, pod))
    # Pods placed regardless of witnesses: those without affinity, and those already reported.
    grounded = {p.key for p in bound if p.key not in needs}

    def witnessed(key: str, placed: set[str]) -> bool:
        pod, matching = needs[key]
        here = nodes[pod.node]  # type: ignore[index]
        return all(any(q.key in placed and _domain(nodes[q.node], t.topology_key)  # type: ignore[index]
                       == _domain(here, t.topology_key) for q in matching) for t in pod.affinity)

    def spread(placed: set[str]) -> set[str]:
        placed = set(placed)
        changed = True
        while changed:
            changed = False
            for key in needs:
                if key not in placed and witnessed(key, placed):
                    placed.add(key)
                    changed = True
        return placed

    grounded = spread(grounded)
    firsts: set[str] = set()
    while True:
        candidates = [key for key in sorted(needs) if key not in grounded
                      and all(t.matches(needs[key][0]) for t in needs[key][0].affinity)
                      and _orderable(firsts | {key}, needs)]
        if not candidates:
            break
        # The first pod that grounds the most others (a split group keeps its largest part).
        gains = {key: len(spread(grounded | {key})) for key in candidates[:FIRST_POD_TRIALS]}
        pick = max(gains, key=lambda key: gains[key])
        firsts.add(pick)
        grounded = spread(grounded | {pick})
    for key in sorted(needs):
        if key in grounded:
            continue
        pod, matching = needs[key]
        here = nodes[pod.node]  # type: ignore[index]
        term = next((t for t in pod.affinity if not any(
            _domain(nodes[q.node], t.topology_key) == _domain(here, t.topology_key)  # type: ignore[index]
            for q in matching)), None)
        if term is not None:
            detail = f"no pod matching its terms in {term.topology_key}={_domain(here, term.topology_key)}"
        else:
            detail = "its domains hold matching pods, but none that could have been placed before it"
        if firsts and all(t.matches(pod) for t in pod.affinity):
            detail += f"; its group already started elsewhere ({_names(firsts)})"
        found.append(Violation(key, "pod-affinity", detail))
    return found


def _orderable(firsts: set[str], needs: Mapping[str, tuple[_Pod, list[_Pod]]]) -> bool:
    """Whether first pods can be put in an order where each precedes every pod matching its terms:
    the graph of "must precede" among them has no cycle (pods with no edge in are taken first)."""
    before = {key: {q.key for q in needs[key][1] if q.key in firsts} for key in firsts}
    left = set(firsts)
    while left:
        free = [key for key in left if not any(key in before[other] for other in left)]
        if not free:
            return False
        left.difference_update(free)
    return True


def _check_anti_affinity(bound: Sequence[_Pod], index: _Index, nodes: Mapping[str, _Node]) -> list[Violation]:
    """Required pod anti-affinity: no other pod the term matches in the pod's domain of the term's
    key (a node without the key is in no domain). Checked from the side of the pod that carries
    the term, this also covers kube-scheduler's symmetric rule: a pod placed into the domain of an
    existing pod whose term matches it is reported on that existing pod's term."""
    found = []
    for pod in bound:
        node = nodes[pod.node]  # type: ignore[index]
        for term in pod.anti_affinity:
            here = _domain(node, term.topology_key)
            if here is None:
                continue
            clashing = [q.key for q in index.candidates(term.selector)
                        if q is not pod and _domain(nodes[q.node], term.topology_key) == here  # type: ignore[index]
                        and term.matches(q)]
            if clashing:
                found.append(Violation(pod.key, "pod-anti-affinity",
                                       f"{term.topology_key}={here} also holds {_names(clashing)}"))
    return found


@dataclass(frozen=True)
class _Spread:
    """One DoNotSchedule constraint of one pod, as what decides its verdict (pods alike share it)."""

    namespace: str
    topology_key: str
    selector: _Selector
    max_skew: int
    min_domains: int
    keys: tuple[str, ...]  # every DoNotSchedule key of the pod: a node needs them all to count
    node_affinity: str | None  # the pod's node selection, JSON, when nodeAffinityPolicy is Honor
    tolerations: str | None  # the pod's tolerations, JSON, when nodeTaintsPolicy is Honor


def _spread_constraints(pod: _Pod) -> list[_Spread]:
    raw = [c for c in pod.spec.get("topologySpreadConstraints") or []
           if (c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"]
    keys = tuple(sorted({c["topologyKey"] for c in raw}))
    node_choice = json.dumps({"nodeSelector": pod.spec.get("nodeSelector") or {},
                              "affinity": ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                                  "requiredDuringSchedulingIgnoredDuringExecution")}, sort_keys=True)
    tolerations = json.dumps(pod.spec.get("tolerations") or [], sort_keys=True)
    return [_Spread(
        namespace=pod.namespace,
        topology_key=c["topologyKey"],
        selector=_Selector.of(c.get("labelSelector"), pod.labels, c.get("matchLabelKeys") or ()),
        max_skew=int(c.get("maxSkew") or 1),
        min_domains=int(c.get("minDomains") or 1),
        keys=keys,
        node_affinity=node_choice if (c.get("nodeAffinityPolicy") or "Honor") == "Honor" else None,
        tolerations=tolerations if (c.get("nodeTaintsPolicy") or "Ignore") == "Honor" else None,
    ) for c in raw]


def _eligible_nodes(spread: _Spread, nodes: Mapping[str, _Node]) -> set[str]:
    """The nodes kube-scheduler counts for the constraint: those carrying every key of the pod's
    DoNotSchedule constraints and passing the node inclusion policies."""
    spec: dict[str, Any] = {}
    if spread.node_affinity is not None:
        choice = json.loads(spread.node_affinity)
        spec["nodeSelector"] = choice["nodeSelector"]
        if choice["affinity"] is not None:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": choice["affinity"]}}
    tolerations = None if spread.tolerations is None else {"tolerations": json.loads(spread.tolerations)}
    eligible = set()
    for name, node in nodes.items():
        if any(k not in node.labels for k in spread.keys):
            continue
        if spread.node_affinity is not None and not all(_node_affinity_fits(spec, node)):
            continue
        if tolerations is not None and _untolerated(tolerations, node):
            continue
        eligible.add(name)
    return eligible


def _check_spread(bound: Sequence[_Pod], index: _Index, nodes: Mapping[str, _Node]) -> list[Violation]:
    """DoNotSchedule topology spread, as the final-state rule of the module's docstring. Counted
    as kube-scheduler counts: pods of the pod's namespace that the selector matches and that are
    not being deleted, on eligible nodes; the domains are those of the eligible nodes."""
    found = []
    # Per constraint (shared by the pods alike): domain -> matching pods, and the allowed ceiling;
    # per node choice, the eligible nodes.
    verdicts: dict[_Spread, tuple[dict[str, list[str]], int]] = {}
    eligible: dict[tuple[tuple[str, ...], str | None, str | None], set[str]] = {}
    for pod in bound:
        node = nodes[pod.node]  # type: ignore[index]
        for spread in _spread_constraints(pod):
            if _domain(node, spread.topology_key) is None:
                found.append(Violation(pod.key, "topology-spread", f"{node.name} has no label {spread.topology_key}"))
                continue
            if not spread.selector.matches(pod.labels):
                continue
            if spread not in verdicts:
                choice = (spread.keys, spread.node_affinity, spread.tolerations)
                if choice not in eligible:
                    eligible[choice] = _eligible_nodes(spread, nodes)
                verdicts[spread] = _spread_counts(spread, index, nodes, eligible[choice])
            counts, ceiling = verdicts[spread]
            here = _domain(node, spread.topology_key)
            if here in counts and len(counts[here]) > ceiling:
                shown = ", ".join(f"{d}: {len(p)}" for d, p in sorted(counts.items()))
                found.append(Violation(pod.key, "topology-spread",
                                       f"{spread.topology_key}={here} holds {len(counts[here])} matching pods, "
                                       f"more than {ceiling} (maxSkew {spread.max_skew}; {shown})"))
    return found


def _spread_counts(spread: _Spread, index: _Index, nodes: Mapping[str, _Node],
                   eligible: set[str]) -> tuple[dict[str, list[str]], int]:
    counts: dict[str, list[str]] = {nodes[name].labels[spread.topology_key]: [] for name in eligible}
    for pod in index.candidates(spread.selector):
        if (pod.namespace == spread.namespace and not pod.terminating and pod.node in eligible
                and spread.selector.matches(pod.labels)):
            counts[nodes[pod.node].labels[spread.topology_key]].append(pod.key)  # type: ignore[index]
    if len(counts) < spread.min_domains:
        floor = 0  # fewer domains than minDomains: the global minimum is taken as 0
    else:
        floor = min((len(p) for p in counts.values()), default=0)
    return counts, floor + spread.max_skew


def _check_gangs(podgroups: Iterable[Mapping[str, Any]], pods: Sequence[_Pod]) -> list[Violation]:
    members: dict[tuple[str, str], list[_Pod]] = defaultdict(list)
    for pod in pods:
        annotations = (pod.raw.get("metadata") or {}).get("annotations") or {}
        group = next((annotations[a] for a in GROUP_ANNOTATIONS if annotations.get(a)), None)
        if group:
            members[(pod.namespace, group)].append(pod)
    found = []
    for group in podgroups:
        meta = group["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        min_member = int((group.get("spec") or {}).get("minMember") or 1)
        placed = [p.key for p in members.get((namespace, name), []) if p.node and not _finished(p.raw)]
        if 0 < len(placed) < min_member:
            found.append(Violation(",".join(sorted(placed)), "gang",
                                   f"PodGroup {namespace}/{name}: {len(placed)} of minMember {min_member} bound"))
    return found


# ------------------------------------------------------------------ reading a cluster

Get = Callable[[str, Mapping[str, str]], Mapping[str, Any]]  # API path, query -> the JSON answer


@dataclass(frozen=True)
class Placement:
    """The objects a check reads, as read from an API server."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    podgroups: list[dict[str, Any]]

    def check(self, history: Mapping[str, Sequence[str]] | None = None) -> list[Violation]:
        return check(self.nodes, self.pods, self.namespaces, podgroups=self.podgroups, history=history)


def list_all(get: Get, path: str, query: Mapping[str, str] | None = None, page: int = 500) -> list[dict[str, Any]]:
    """Every item of a list, page by page."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        answer = get(path, {**(query or {}), "limit": str(page), **({"continue": token} if token else {})})
        items += answer.get("items") or []
        token = (answer.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


def read_placement(get: Get, *, node_selector: str = "", namespace: str | None = None,
                   podgroups: bool = True) -> Placement:
    """The nodes `node_selector` chooses (all by default), every pod bound to one of them, the pods
    of `namespace` (bound or not) and, with `podgroups`, that namespace's PodGroups."""
    nodes = list_all(get, "/api/v1/nodes", {"labelSelector": node_selector} if node_selector else {})
    names = {n["metadata"]["name"] for n in nodes}
    pods = [p for p in list_all(get, "/api/v1/pods")
            if (p.get("spec") or {}).get("nodeName") in names or p["metadata"].get("namespace") == namespace]
    groups = []
    if podgroups and namespace:
        groups = list_all(get, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups")
    return Placement(nodes, pods, list_all(get, "/api/v1/namespaces"), groups)


def bearer_get(server: str, token: str, ca_cert: str, timeout: float = 60.0) -> Get:
    """A `Get` over plain HTTPS with a bearer token (for callers without a client at hand)."""
    context = ssl.create_default_context(cafile=ca_cert)

    def get(path: str, query: Mapping[str, str]) -> Mapping[str, Any]:
        url = f"{server}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            answer: Mapping[str, Any] = json.loads(response.read())
        return answer

    return get
