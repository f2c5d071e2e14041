"""The benchmark's workloads and the Kubernetes objects that make them up.

Every scheduler gets the same pods. Schedulers speaking Volcano's API also
get PodGroups, created just before their job's pods, as Volcano's
controllers would: its job controller for gangs, its PodGroup controller
(one group of minMember 1 per pod) for plain pods. vc-scheduler needs both
(it ignores a pod without a PodGroup); ours takes a pod without one as a
one-pod job, so it gets PodGroups for gangs only, and is measured a second
time with a PodGroup per pod. kube-scheduler gets bare pods; the raw binder gets
the gangs' PodGroups (part of the load of a gang workload) and ignores them.

Workload (d) carries the placement rules of a Deployment's replicas: its pods come
in groups, each pod its own job, whose members repel each other per host (required
podAntiAffinity on kubernetes.io/hostname) and spread over the zones the nodes are
labelled with (topologySpreadConstraints, maxSkew 1, DoNotSchedule).

Workload (e) puts the nodes under Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`, created in
the API server with the nodes: tier 1 over consecutive nodes, each tier above over consecutive
HyperNodes of the tier below) and gives every gang's PodGroup `spec.networkTopology` (mode hard,
`highestTierAllowed` 1), as Volcano's job controller writes it from a vcjob's `networkTopology`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano's pod → PodGroup link
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # the queue of a pod without a PodGroup
PODGROUP_API = "/apis/scheduling.volcano.sh/v1beta1"
HYPERNODE_GROUP, HYPERNODE_VERSION = "topology.volcano.sh", "v1alpha1"
HYPERNODE_LABEL = "bench.policydsl/hypernode"   # what the harness deletes them by

# Fake node shape and pod request: small enough that every workload fits
# several times over, so placement never fails for lack of room and the
# schedulers are compared on the work of deciding and binding.
NODE_CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "110"}
POD_REQUEST = {"cpu": "100m", "memory": "128Mi"}
POD_REQUEST_BASE = {"cpu": 0.1, "memory": 128 * 2**20}  # the same, for a PodGroup's minResources
# Which jobs get a PodGroup (Scheduler.podgroups).
NO_PODGROUPS = "none"
GANGS_ONLY = "gangs"  # jobs of more than one pod
EVERY_JOB = "every-job"
PODGROUP_MODES = (NO_PODGROUPS, GANGS_ONLY, EVERY_JOB)

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: there is no kubelet

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
GROUP_LABEL = "bench.policydsl/group"  # the replicas of one group: what their rules select


@dataclass(frozen=True)
class Workload:
    key: str  # what --only names it by
    nodes: int
    jobs: int
    gang_size: int  # 1: plain pods
    queues: int = 4
    zones: int = 0  # nodes labelled with this many zones, in blocks of consecutive nodes (0: no zone label)
    # Pods per group of replicas that repel each other per host and spread over the zones
    # (0: no placement rules). Every pod is still a job of its own.
    spread_group: int = 0
    # HyperNodes over the nodes: nodes per tier-1 HyperNode, then children per HyperNode of each
    # tier above (() : none).
    hypernode_fanout: tuple[int, ...] = ()
    # Every gang asks for hard topology within this tier (0: no topology request).
    topology_tier: int = 0

    @property
    def pods(self) -> int:
        return self.jobs * self.gang_size

    @property
    def rules(self) -> bool:
        return self.spread_group > 0

    @property
    def gangs(self) -> bool:
        return self.gang_size > 1

    @property
    def title(self) -> str:
        shape = f"{self.jobs:,} gangs of {self.gang_size}" if self.gangs else f"{self.pods:,} pods"
        if self.rules:
            shape += (f" in {self.pods // self.spread_group:,} groups of {self.spread_group} (hostname "
                      "anti-affinity, zone spread maxSkew 1)")
        nodes = f"{self.nodes:,} nodes" + (f" in {self.zones} zones" if self.zones else "")
        if self.hypernode_fanout:
            counts = hypernode_counts(self.nodes, self.hypernode_fanout)
            nodes += " under HyperNodes (" + ", ".join(
                f"{count:,} of tier {tier}" for tier, count in enumerate(counts, start=1)) + (
                f"; {self.hypernode_fanout[0]} nodes per tier 1)")
        if self.topology_tier:
            shape += f", hard topology within tier {self.topology_tier}"
        return f"({self.key}) {nodes} / {shape}"

    def scaled(self, factor: float) -> Workload:
        """Nodes and jobs times `factor` (at least one of each); gang size, queues and zones kept.
        With placement rules, whole groups, and at least a node per group member and per zone
        (a group needs a host per member, and every zone is a domain its spread counts)."""
        nodes, jobs = max(1, round(self.nodes * factor)), max(1, round(self.jobs * factor))
        if self.rules:
            jobs = max(1, round(jobs / self.spread_group)) * self.spread_group
            nodes = max(nodes, self.spread_group, self.zones)
        return replace(self, nodes=nodes, jobs=jobs)


WORKLOADS: tuple[Workload, ...] = (
    Workload("a", nodes=1_000, jobs=10_000, gang_size=1),
    Workload("b", nodes=1_000, jobs=2_000, gang_size=8),
    Workload("c", nodes=5_000, jobs=20_000, gang_size=1),
    Workload("d", nodes=1_000, jobs=10_000, gang_size=1, zones=10, spread_group=10),
    # 1,000 nodes under 100 tier-1 HyperNodes of 10 nodes and 10 tier-2 HyperNodes of 10 of those.
    Workload("e", nodes=1_000, jobs=1_000, gang_size=8, hypernode_fanout=(10, 10), topology_tier=1),
)


def hypernode_counts(nodes: int, fanout: tuple[int, ...]) -> list[int]:
    """HyperNodes per tier over `nodes` nodes (the last of a tier may hold fewer)."""
    counts, below = [], nodes
    for width in fanout:
        below = -(-below // width)
        counts.append(below)
    return counts


def hypernode_name(tier: int, index: int) -> str:
    return f"bench-t{tier}-{index:04d}"


def hypernode_manifests(workload: Workload) -> list[dict[str, Any]]:
    """The workload's HyperNodes, lowest tier first: members by exactMatch (a tier-1 HyperNode's
    nodes, a higher one's child HyperNodes), as Volcano's user guide builds a tree by hand."""
    out: list[dict[str, Any]] = []
    members, kind = [node_name(i) for i in range(workload.nodes)], "Node"
    for tier, width in enumerate(workload.hypernode_fanout, start=1):
        names = []
        for index, start in enumerate(range(0, len(members), width)):
            name = hypernode_name(tier, index)
            out.append({
                "apiVersion": f"{HYPERNODE_GROUP}/{HYPERNODE_VERSION}",
                "kind": "HyperNode",
                "metadata": {"name": name, "labels": {HYPERNODE_LABEL: "true"}},
                "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                                   for m in members[start:start + width]]},
            })
            names.append(name)
        members, kind = names, "HyperNode"
    return out


def node_name(index: int) -> str:
    return f"bench-node-{index:05d}"


def zone_name(index: int) -> str:
    return f"bench-zone-{index:02d}"


def node_manifest(index: int, count: int = 1, zones: int = 0) -> dict[str, Any]:
    """A Node as a kubelet registers it: allocatable == capacity, Ready. Nothing updates it again.
    With `zones`, node `index` of `count` is in a zone of consecutive nodes, as a cloud names them
    (so that binding in node order, as the raw binder does, does not spread by accident)."""
    name = node_name(index)
    labels = {HOSTNAME_LABEL: name, "kubernetes.io/os": "linux", "bench.policydsl/node": "true"}
    if zones:
        labels[ZONE_LABEL] = zone_name(index * zones // count)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": dict(NODE_CAPACITY),
            "allocatable": dict(NODE_CAPACITY),
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node (no kubelet)"}
            ],
        },
    }


def queue_name(index: int) -> str:
    return f"bench-q{index}"


def queue_manifest(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": queue_name(index)},
        "spec": {"weight": 1, "reclaimable": True},
    }


def pod_manifest(namespace: str, name: str, scheduler_name: str, group: str | None, queue: str,
                 replicas_of: str | None = None) -> dict[str, Any]:
    """A pod of `group` (None: no PodGroup) in `queue` (Volcano's PodGroup controller copies the
    annotation into the group it makes; ours reads it when there is no group); with `replicas_of`,
    one of those replicas, with their placement rules."""
    annotations = {QUEUE_ANNOTATION: queue}
    if group is not None:
        annotations[GROUP_ANNOTATION] = group
    labels = {"app": "bench"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": {"requests": dict(POD_REQUEST)}}],
    }
    if replicas_of is not None:
        labels[GROUP_LABEL] = replicas_of
        spec.update(replica_rules(replicas_of))
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def replica_rules(replicas_of: str) -> dict[str, Any]:
    """The pod spec fields of a replica of `replicas_of`: at most one of them per host, and spread
    evenly over the zones (the two rules a Deployment for high availability asks for)."""
    selector = {"matchLabels": {GROUP_LABEL: replicas_of}}
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOSTNAME_LABEL, "labelSelector": selector}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}],
    }


def podgroup_manifest(namespace: str, name: str, min_member: int, queue: str, topology_tier: int = 0) -> dict[str, Any]:
    """A PodGroup as Volcano's controllers create it: minMember, minResources, queue, phase Pending;
    with `topology_tier`, `networkTopology` hard within that tier (as the job controller copies a
    vcjob's)."""
    min_resources = {
        "cpu": f"{round(POD_REQUEST_BASE['cpu'] * 1000 * min_member)}m",
        "memory": str(POD_REQUEST_BASE["memory"] * min_member),
    }
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "minResources": min_resources, "queue": queue,
                 **({"networkTopology": {"mode": "hard", "highestTierAllowed": topology_tier}}
                    if topology_tier else {})},
        "status": {"phase": "Pending"},
    }


def _post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"method": "POST", "path": path, "body": body}


def gets_podgroup(mode: str, job_size: int) -> bool:
    """Whether a job of `job_size` pods gets a PodGroup under `mode` (PODGROUP_MODES)."""
    if mode not in PODGROUP_MODES:
        raise ValueError(f"unknown PodGroup mode {mode!r}; one of {', '.join(PODGROUP_MODES)}")
    return mode == EVERY_JOB or (mode == GANGS_ONLY and job_size > 1)


def job_requests(
    workload: Workload, namespace: str, scheduler_name: str, podgroups: str
) -> Iterator[list[dict[str, Any]]]:
    """Per job, the create requests in order: its PodGroup (if `podgroups` gives it one), then its pods.

    Jobs go round-robin over the queues. Pod names are `job-NNNNN-T`; with placement rules,
    consecutive jobs make a group of replicas `group-NNNNN`.
    """
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    groups_path = f"{PODGROUP_API}/namespaces/{namespace}/podgroups"
    grouped = gets_podgroup(podgroups, workload.gang_size)
    for job in range(workload.jobs):
        group, queue = f"job-{job:05d}", queue_name(job % workload.queues)
        steps = []
        if grouped:
            steps.append(_post(groups_path, podgroup_manifest(namespace, group, workload.gang_size, queue,
                                                              workload.topology_tier if workload.gangs else 0)))
        replicas_of = f"group-{job // workload.spread_group:05d}" if workload.rules else None
        for task in range(workload.gang_size):
            pod = pod_manifest(namespace, f"{group}-{task}", scheduler_name, group if grouped else None, queue,
                               replicas_of)
            steps.append(_post(pods_path, pod))
        yield steps


def node_requests(count: int, zones: int = 0) -> Iterator[list[dict[str, Any]]]:
    for index in range(count):
        yield [_post("/api/v1/nodes", node_manifest(index, count, zones))]


def write_jobs_file(path: Path, jobs: Iterator[list[dict[str, Any]]]) -> int:
    """Write the JSON-lines input of `loadgen create`; returns the number of requests in it."""
    count = 0
    with path.open("w") as out:
        for steps in jobs:
            out.write(json.dumps(steps, separators=(",", ":")))
            out.write("\n")
            count += len(steps)
    return count
