"""A Pod object's spec as the scheduler evaluates it (runtime.cluster.model.Pod).

- Requests as the kubelet computes them: per resource, a container's `limits` stand in for a
  request it does not set (the API server's defaulting); the regular containers add up; an
  init container runs before them, beside the sidecars started before it (init containers
  with `restartPolicy: Always`), which keep running and add to the total; the pod needs the
  larger of its running total and its init peak; pod-level `spec.resources` replace the
  containers' figures for the resources they name; `overhead` is added.
- Node affinity (nodeSelector, required terms with matchExpressions and matchFields on
  metadata.name, preferred terms), tolerations.
- Inter-pod affinity and anti-affinity (namespaces resolved, matchLabelKeys and
  mismatchLabelKeys merged into the selector as the API server does), topology spread
  constraints, host ports: `Pod.rules`.
- Scheduling gates and the preemption policy.
- Volumes: the claims of `persistentVolumeClaim` and generic `ephemeral` volumes (`Pod.volumes`,
  runtime.cluster.storagespec); a volume type the scheduler does not evaluate is named as unsupported.

A field the scheduler does not evaluate is named in `Pod.unsupported`, so the pod waits with a
reason rather than be placed as if the field were absent.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from runtime.cluster import kubefields as kf
from runtime.cluster.kubefields import FieldError
from runtime.cluster.model import (
    MAX_POD_REQUEST,
    POD_PENDING,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    POD_RUNNING,
    WILDCARD_IP,
    GROUP_ANNOTATIONS,
    HostPort,
    Pod,
    PodAffinityTerm,
    PodRules,
    SpreadConstraint,
    Toleration,
    WeightedTerm,
)
from runtime.cluster.draspec import pod_resource_claims
from runtime.cluster.numa import exclusive_cpus
from runtime.cluster.selectors import LabelSelector, MatchExpression
from runtime.cluster.storagespec import pod_volumes

CRITICAL_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def read_pod(obj: dict, priority_classes: Mapping[str, int]) -> Pod:
    namespace, name = kf.name_of(obj)
    meta = obj["metadata"]
    spec = kf.mapping(obj, "spec", required=True)
    status = kf.mapping(obj, "status")
    if not kf.listing(spec, "containers"):
        raise FieldError("missing `spec.containers`")
    annotations = kf.strings(meta.get("annotations"), "metadata.annotations")
    labels = kf.strings(meta.get("labels"), "metadata.labels")
    affinity = kf.mapping(spec, "affinity")
    node_affinity = kf.mapping(affinity, "nodeAffinity")
    where = "spec.affinity.nodeAffinity"
    required = kf.mapping(node_affinity, REQUIRED)
    preferred = []
    for i, p in enumerate(kf.listing(node_affinity, PREFERRED)):
        term = kf.node_selector_terms([kf.mapping(p, "preference")], f"{where}.{PREFERRED}[{i}].preference")[0]
        preferred.append((_weight(p, f"{where}.{PREFERRED}[{i}]"), term))
    priority_class = spec.get("priorityClassName")
    priority = spec.get("priority")
    if priority is None and priority_class is not None:
        priority = priority_classes.get(priority_class, CRITICAL_CLASSES.get(priority_class))
    policy = str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise FieldError(f"`spec.preemptionPolicy` must be {PREEMPT_LOWER_PRIORITY} or {PREEMPT_NEVER}, "
                         f"found `{policy}`")
    affinity_required, affinity_preferred = _pod_affinity(
        kf.mapping(affinity, "podAffinity"), "spec.affinity.podAffinity", namespace, labels)
    anti_required, anti_preferred = _pod_affinity(
        kf.mapping(affinity, "podAntiAffinity"), "spec.affinity.podAntiAffinity", namespace, labels)
    rules = _shared_rules(affinity_required, anti_required, affinity_preferred, anti_preferred,
                          _spread(spec, labels), _host_ports(spec))
    gates = []
    for i, gate in enumerate(kf.listing(spec, "schedulingGates")):
        if not isinstance(gate, dict) or not gate.get("name"):
            raise FieldError(f"`spec.schedulingGates[{i}].name` is missing")
        gates.append(str(gate["name"]))
    volumes, odd_volume = pod_volumes(spec, name)
    return Pod(
        namespace=namespace, name=name, requests=pod_requests(spec), uid=kf.uid_of(meta, namespace, name),
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or (POD_RUNNING if spec.get("nodeName") else POD_PENDING)),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        group=next((annotations[a] for a in GROUP_ANNOTATIONS if annotations.get(a)), None),
        priority_class=priority_class, priority=None if priority is None else kf.integer(priority, "spec.priority", 0),
        node_selector=kf.strings(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_terms=kf.node_selector_terms(kf.listing(required, "nodeSelectorTerms"), f"{where}.{REQUIRED}.nodeSelectorTerms"),
        preferred_terms=tuple(preferred), tolerations=_tolerations(spec), annotations=annotations, labels=labels,
        creation=kf.timestamp(meta), releasing=bool(meta.get("deletionTimestamp")),
        rules=rules if rules else None, scheduling_gates=tuple(gates), preemption_policy=policy,
        unsupported=odd_volume, volumes=volumes, resource_claims=pod_resource_claims(spec, status),
        nominated_node=str(status.get("nominatedNodeName") or "") or None, numa_cpus=exclusive_cpus(spec),
    )


# --- requests -------------------------------------------------------------------------------

def container_requests(container: Any, where: str) -> dict[str, int]:
    """A container's requests, its limits standing in for each resource it requests nothing of."""
    res = kf.mapping(container, "resources")
    out = kf.resources(res.get("limits"), f"{where}.resources.limits")
    out.update(kf.resources(res.get("requests"), f"{where}.resources.requests"))
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _peak(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(spec: dict) -> dict[str, int]:
    """What the pod holds on its node, per resource, as the kubelet admits it."""
    running: dict[str, int] = {}
    for i, c in enumerate(kf.listing(spec, "containers")):
        _add(running, container_requests(c, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}     # sidecars started so far: they keep running
    init_peak: dict[str, int] = {}
    for i, c in enumerate(kf.listing(spec, "initContainers")):
        need = container_requests(c, f"spec.initContainers[{i}]")
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            _add(running, need)
            _add(sidecars, need)
            _peak(init_peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, need)
            _peak(init_peak, during)
    _peak(running, init_peak)
    pod_level = kf.mapping(spec, "resources")
    if pod_level:
        level = kf.resources(pod_level.get("limits"), "spec.resources.limits")
        level.update(kf.resources(pod_level.get("requests"), "spec.resources.requests"))
        running.update(level)
    _add(running, kf.resources(spec.get("overhead"), "spec.overhead"))
    return {k: min(v, MAX_POD_REQUEST) for k, v in running.items() if v}   # more fits no node either


# --- node affinity and tolerations ----------------------------------------------------------

def _weight(raw: Any, where: str) -> int:
    weight = kf.integer(raw.get("weight") if isinstance(raw, dict) else None, f"{where}.weight", 1)
    if not 1 <= weight <= 100:
        raise FieldError(f"`{where}.weight` must be 1..100, found {weight}")
    return weight


def _tolerations(spec: dict) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(kf.listing(spec, "tolerations")):
        if not isinstance(t, dict):
            raise FieldError(f"`spec.tolerations[{i}]`: bad toleration {t!r}")
        out.append(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                              str(t.get("effect") or "")))
    return tuple(out)


# --- inter-pod rules ------------------------------------------------------------------------

def _merge_label_keys(selector: LabelSelector | None, raw: dict, where: str, labels: Mapping[str, str],
                      mismatch: bool = True) -> LabelSelector | None:
    """matchLabelKeys (key In [the pod's value]) and mismatchLabelKeys (NotIn), for the keys the
    pod has, added to the selector."""
    match = [str(k) for k in kf.listing(raw, "matchLabelKeys")]
    differ = [str(k) for k in kf.listing(raw, "mismatchLabelKeys")] if mismatch else []
    if not (match or differ):
        return selector
    if selector is None:
        raise FieldError(f"`{where}.matchLabelKeys` and `mismatchLabelKeys` need a `labelSelector`")
    extra = [MatchExpression(k, "In", (labels[k],)) for k in match if k in labels]
    extra += [MatchExpression(k, "NotIn", (labels[k],)) for k in differ if k in labels]
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))


def _affinity_term(raw: Any, where: str, namespace: str, labels: Mapping[str, str]) -> PodAffinityTerm:
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping, found {type(raw).__name__}")
    key = raw.get("topologyKey")
    if not key or not isinstance(key, str):
        raise FieldError(f"`{where}.topologyKey` is missing")
    selector = _merge_label_keys(kf.label_selector(raw.get("labelSelector"), f"{where}.labelSelector"), raw, where,
                                 labels)
    names = frozenset(str(n) for n in kf.listing(raw, "namespaces"))
    ns_selector = kf.label_selector(raw.get("namespaceSelector"), f"{where}.namespaceSelector")
    if not names and ns_selector is None:
        names = frozenset({namespace})
    return PodAffinityTerm(key, selector, names, ns_selector)


def _pod_affinity(raw: dict, where: str, namespace: str,
                  labels: Mapping[str, str]) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedTerm, ...]]:
    required = tuple(_affinity_term(t, f"{where}.{REQUIRED}[{i}]", namespace, labels)
                     for i, t in enumerate(kf.listing(raw, REQUIRED)))
    preferred = []
    for i, p in enumerate(kf.listing(raw, PREFERRED)):
        at = f"{where}.{PREFERRED}[{i}]"
        term = _affinity_term(kf.mapping(p, "podAffinityTerm", required=True), f"{at}.podAffinityTerm", namespace,
                              labels)
        preferred.append(WeightedTerm(_weight(p, at), term))
    return required, tuple(preferred)


def _spread(spec: dict, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, raw in enumerate(kf.listing(spec, "topologySpreadConstraints")):
        where = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(raw, dict):
            raise FieldError(f"`{where}` must be a mapping")
        skew = kf.integer(raw.get("maxSkew"), f"{where}.maxSkew", 0)
        if skew < 1:
            raise FieldError(f"`{where}.maxSkew` must be at least 1, found {skew}")
        key = raw.get("topologyKey")
        if not key or not isinstance(key, str):
            raise FieldError(f"`{where}.topologyKey` is missing")
        when = raw.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise FieldError(f"`{where}.whenUnsatisfiable` must be DoNotSchedule or ScheduleAnyway, found `{when}`")
        min_domains = raw.get("minDomains")
        if min_domains is not None:
            min_domains = kf.integer(min_domains, f"{where}.minDomains", 1)
            if min_domains < 1:
                raise FieldError(f"`{where}.minDomains` must be at least 1, found {min_domains}")
            if when != "DoNotSchedule":
                raise FieldError(f"`{where}.minDomains` needs whenUnsatisfiable DoNotSchedule")
        policies = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            value = str(raw.get(name) or default)
            if value not in ("Honor", "Ignore"):
                raise FieldError(f"`{where}.{name}` must be Honor or Ignore, found `{value}`")
            policies.append(value)
        selector = kf.label_selector(raw.get("labelSelector"), f"{where}.labelSelector")
        keys = [str(k) for k in kf.listing(raw, "matchLabelKeys")]
        if keys and selector is None:
            raise FieldError(f"`{where}.matchLabelKeys` needs a `labelSelector`")
        if keys:
            extra = tuple(MatchExpression(k, "In", (labels[k],)) for k in keys if k in labels)
            selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
        out.append(SpreadConstraint(skew, key, when, selector, min_domains, *policies))
    return tuple(out)


def _host_ports(spec: dict) -> tuple[HostPort, ...]:
    """The host ports of the containers that run alongside each other: the regular ones and
    the sidecars (init containers with restartPolicy Always)."""
    out = []
    containers = [(f"spec.containers[{i}]", c) for i, c in enumerate(kf.listing(spec, "containers"))]
    containers += [(f"spec.initContainers[{i}]", c) for i, c in enumerate(kf.listing(spec, "initContainers"))
                   if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    for where, c in containers:
        for k, port in enumerate(kf.listing(c, "ports") if isinstance(c, dict) else []):
            at = f"{where}.ports[{k}]"
            if not isinstance(port, dict):
                raise FieldError(f"`{at}` must be a mapping")
            host = kf.integer(port.get("hostPort"), f"{at}.hostPort", 0)
            if host == 0:
                continue
            if not 1 <= host <= 65535:
                raise FieldError(f"`{at}.hostPort` must be 1..65535, found {host}")
            protocol = str(port.get("protocol") or "TCP")
            if protocol not in ("TCP", "UDP", "SCTP"):
                raise FieldError(f"`{at}.protocol` must be TCP, UDP or SCTP, found `{protocol}`")
            out.append(HostPort(host, protocol, str(port.get("hostIP") or WILDCARD_IP)))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _shared_rules(*fields) -> PodRules:
    """One PodRules object for the pods of a template: every cycle groups pods by their rules,
    and a set or dict finds an identical object without comparing the nested terms."""
    return PodRules(*fields)
