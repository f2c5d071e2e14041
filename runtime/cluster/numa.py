"""CPUs and NUMA nodes as Volcano's numa-aware plugin reads them: the `Numatopology` objects of
Volcano's resource exporter (nodeinfo.volcano.sh/v1alpha1, one per node, named after it) and a
pod's `volcano.sh/numa-topology-policy` annotation with its containers' exclusive CPUs.

A Numatopology's spec, as Volcano v1.14.1 reads it (cache/event_handlers.go getNumaInfo):
- `policies`: `CPUManagerPolicy` (the kubelet's; `static` hands out exclusive CPUs) and
  `TopologyManagerPolicy` (none, best-effort, restricted, single-numa-node);
- `numares`: per resource, `allocatable` (a Linux CPU list such as `0-3,8-11`: the CPUs no
  container holds exclusively) and `capacity`;
- `cpuDetail`: per CPU id, its `numa` node, `socket` and `core`;
- `resReserved`: quantities the kubelet reserves (`cpu: 2`); the reserved CPUs are taken from
  every CPU by topology, as the kubelet's static policy does.
Volcano logs and skips a field it cannot parse; here a bad field is a located error.

Exclusive CPUs (Volcano's cpumanager provider, guaranteedCPUs): only a Guaranteed pod (kubelet's
QoS: every container, init ones too, limits cpu and memory, and requests equal limits) gets
any; each of its regular containers gets its CPU request when that is a whole number of CPUs,
none (the shared pool) otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from runtime.cluster import kubefields as kf
from runtime.cluster.kubefields import FieldError

NUMATOPOLOGY_API = "nodeinfo.volcano.sh/v1alpha1"
NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
# The policies a pod may ask for (Volcano's batch.NumaPolicy); "none" asks nothing.
NUMA_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
SPEC_FIELDS = ("policies", "resReserved", "numares", "cpuDetail")
QOS_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class CpuInfo:
    numa: int
    socket: int
    core: int


@dataclass(frozen=True)
class NumaTopology:
    """One node's Numatopology. `allocatable` is the scheduler's view of the free CPUs: the
    exporter's list, less what this scheduler assigned since (ClusterState.numa_take)."""

    name: str
    cpu_manager_policy: str
    topology_manager_policy: str
    allocatable: Mapping[str, frozenset[int]]            # numares resource -> free CPU ids
    cpus: Mapping[int, CpuInfo]                          # cpuDetail
    reserved_cpus: int = 0                               # ceil(resReserved.cpu)
    capacity: Mapping[str, int] = field(default_factory=dict, compare=False)
    # How many free CPUs the exporter last reported (the view's own count may be lower).
    reported: int = 0

    @property
    def free_cpus(self) -> frozenset[int]:
        return self.allocatable.get("cpu", frozenset())

    def with_free_cpus(self, cpus: frozenset[int]) -> "NumaTopology":
        return replace(self, allocatable={**self.allocatable, "cpu": cpus})


def parse_cpu_list(text: Any, where: str) -> frozenset[int]:
    """A Linux CPU list (`0-3,8,10-11`; empty: none), as k8s.io/utils/cpuset.Parse reads it."""
    if text is None or text == "":
        return frozenset()
    if not isinstance(text, str):
        raise FieldError(f"`{where}` must be a CPU list such as `0-3,8-11`, found {text!r}")
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        bounds = part.split("-")
        try:
            if len(bounds) == 1:
                out.add(int(bounds[0]))
                continue
            if len(bounds) != 2:
                raise ValueError
            lo, hi = int(bounds[0]), int(bounds[1])
        except ValueError:
            raise FieldError(f"`{where}` must be a CPU list such as `0-3,8-11`, found `{text}`") from None
        if lo < 0 or hi < lo:
            raise FieldError(f"`{where}`: range `{part}` runs backwards or below 0")
        out.update(range(lo, hi + 1))
    if any(c < 0 for c in out):
        raise FieldError(f"`{where}`: CPU ids are never negative, found `{text}`")
    return frozenset(out)


def format_cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """The Linux CPU list of `cpus` (`0-3,8`), as the exporter writes `numares.cpu.allocatable`."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _count(value: Any, where: str) -> int:
    number = kf.integer(value, where, 0)
    if number < 0:
        raise FieldError(f"`{where}` must not be negative, found {number}")
    return number


def read_numatopology(obj: dict) -> NumaTopology:
    """A Numatopology object (located FieldError for a field Volcano could not use)."""
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec")
    unknown = sorted(set(spec) - set(SPEC_FIELDS))
    if unknown:
        raise FieldError(f"`spec.{unknown[0]}` is not a field of Numatopology ({', '.join(SPEC_FIELDS)})")
    policies = kf.strings(spec.get("policies"), "spec.policies")
    for key in policies:
        if key not in (CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY):
            raise FieldError(f"`spec.policies.{key}` is not a policy Volcano reads "
                             f"({CPU_MANAGER_POLICY}, {TOPOLOGY_MANAGER_POLICY})")
    cpus: dict[int, CpuInfo] = {}
    detail = kf.mapping(spec, "cpuDetail")
    for key, info in detail.items():
        where = f"spec.cpuDetail.{key}"
        try:
            cpu = int(str(key))
        except ValueError:
            raise FieldError(f"`{where}`: a CPU id must be a whole number") from None
        if cpu < 0:
            raise FieldError(f"`{where}`: a CPU id must not be negative")
        if info is not None and not isinstance(info, dict):
            raise FieldError(f"`{where}` must be a mapping of numa, socket and core")
        info = info or {}
        numa = _count(info.get("numa"), f"{where}.numa")
        if numa >= 64:
            raise FieldError(f"`{where}.numa`: NUMA node ids run below 64 (the kubelet's bitmask), found {numa}")
        cpus[cpu] = CpuInfo(numa, _count(info.get("socket"), f"{where}.socket"),
                            _count(info.get("core"), f"{where}.core"))
    allocatable: dict[str, frozenset[int]] = {}
    capacity: dict[str, int] = {}
    for resource, info in kf.mapping(spec, "numares").items():
        where = f"spec.numares.{resource}"
        if info is not None and not isinstance(info, dict):
            raise FieldError(f"`{where}` must be a mapping of allocatable and capacity")
        info = info or {}
        allocatable[str(resource)] = parse_cpu_list(info.get("allocatable"), f"{where}.allocatable")
        capacity[str(resource)] = _count(info.get("capacity"), f"{where}.capacity")
    unknown_cpus = sorted(allocatable.get("cpu", frozenset()) - set(cpus))
    if unknown_cpus:
        raise FieldError(f"`spec.numares.cpu.allocatable` lists CPU {unknown_cpus[0]}, which `spec.cpuDetail` "
                         "does not describe (its NUMA node, socket and core are needed)")
    reserved = kf.resources(kf.strings(spec.get("resReserved"), "spec.resReserved"), "spec.resReserved")
    return NumaTopology(
        name=name, cpu_manager_policy=policies.get(CPU_MANAGER_POLICY, ""),
        topology_manager_policy=policies.get(TOPOLOGY_MANAGER_POLICY, ""), allocatable=allocatable,
        cpus=cpus, reserved_cpus=math.ceil(reserved.get("cpu", 0) / 1000), capacity=capacity,
        reported=len(allocatable.get("cpu", frozenset())))


def pod_numa_policy(annotations: Mapping[str, str]) -> str:
    """The pod's volcano.sh/numa-topology-policy ("" when not set)."""
    return annotations.get(NUMA_POLICY_ANNOTATION, "")


def _container_qos(container: Any, where: str) -> tuple[dict[str, int], dict[str, int]]:
    res = kf.mapping(container, "resources")
    limits = kf.resources(res.get("limits"), f"{where}.resources.limits")
    requests = dict(limits)          # the API server defaults a request to its limit
    requests.update(kf.resources(res.get("requests"), f"{where}.resources.requests"))
    return requests, limits


def guaranteed(spec: dict) -> bool:
    """The kubelet's QoS class is Guaranteed (v1qos.GetPodQOS): every container, init ones
    included, limits both cpu and memory and requests what it limits; with pod-level
    `spec.resources`, those decide."""
    pod_level = kf.mapping(spec, "resources")
    if pod_level:
        parts = [(pod_level, "spec.resources")]
    else:
        parts = [(c, f"spec.{kind}[{i}]") for kind in ("initContainers", "containers")
                 for i, c in enumerate(kf.listing(spec, kind))]
    total_requests: dict[str, int] = {}
    total_limits: dict[str, int] = {}
    for item, where in parts:
        if where == "spec.resources":
            limits = kf.resources(item.get("limits"), "spec.resources.limits")
            requests = {**limits, **kf.resources(item.get("requests"), "spec.resources.requests")}
        else:
            requests, limits = _container_qos(item, where)
        if any(not limits.get(r) for r in QOS_RESOURCES):
            return False
        for r in QOS_RESOURCES:
            if requests.get(r):
                total_requests[r] = total_requests.get(r, 0) + requests[r]
            total_limits[r] = total_limits.get(r, 0) + limits[r]
    return bool(parts) and total_requests == total_limits


def exclusive_cpus(spec: dict) -> tuple[int, ...] | None:
    """Each regular container's exclusive CPUs for a Guaranteed pod (0: a fractional or no CPU
    request, the shared pool); None when the pod is not Guaranteed (the plugin passes it)."""
    if not guaranteed(spec):
        return None
    out = []
    for i, c in enumerate(kf.listing(spec, "containers")):
        requests, _ = _container_qos(c, f"spec.containers[{i}]")
        milli = requests.get("cpu", 0)
        out.append(milli // 1000 if milli % 1000 == 0 else 0)
    return tuple(out)


# --- the snapshot's use ------------------------------------------------------------------------

def numa_class_key(pod: Any) -> tuple | None:
    """What tells a pending pod's task class apart for the numa-aware plugin (its policy and each
    container's exclusive CPUs); None when the plugin passes it on every node (not Guaranteed)."""
    if pod.numa_cpus is None:
        return None
    return ("numa", pod_numa_policy(pod.annotations), pod.numa_cpus)


def numa_policy_unevaluated(pods: list, waiting: list[int]) -> dict[int, tuple[str, str]]:
    """Of the `waiting` tasks (pending: the snapshot finds them at once among every task), those
    that ask for a NUMA policy while the numa-aware plugin is off: task -> (the field, why it
    waits). Volcano would place them as if they asked nothing; here they wait."""
    out: dict[int, tuple[str, str]] = {}
    # pod_numa_policy inline: asked of every pending pod each cycle, and most ask nothing.
    asking = [(t, policy) for t in waiting if (policy := pods[t].annotations.get(NUMA_POLICY_ANNOTATION, ""))
              and policy != "none"]
    for t, policy in asking:
        out[t] = (f"metadata.annotations[{NUMA_POLICY_ANNOTATION}]",
                  f"pod asks for NUMA policy `{policy}` ({NUMA_POLICY_ANNOTATION}), which only the numa-aware "
                  "plugin evaluates and the policy does not enable: it is not placed without it")
    return out
