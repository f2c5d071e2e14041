"""vcjobs with network topology end to end: Volcano's job controller (vc-controller-manager) writes
the PodGroup from a vcjob's `networkTopology` and its tasks' `partitionPolicy`, ours places the
pods over HyperNodes (Volcano's HyperNode CRD from deploy/crds, objects in the API server).

Each case reads the final placement back from the API server (pods, nodes, HyperNodes) and checks
it with code independent of the scheduler: bench/e2e/topology_check.py computes each HyperNode's
nodes from its member list and the tightest HyperNode holding a set of pods; every hard
constraint of the PodGroup (the whole job within `highestTierAllowed`; each sub-group, the pods of
one task with one `volcano.sh/partition-id`, within its own tier) is checked against it, and
tests/placement_checker.py checks the rest (room, node selection, the gang's minimum).

Field names are Volcano v1.14.1's (the release the dev cluster pins): a vcjob's
`spec.networkTopology {mode, highestTierAllowed}`, a task's `partitionPolicy {totalPartitions,
partitionSize, minPartitions, networkTopology}`; the job controller turns a partitioned task
into a PodGroup `spec.subGroupPolicy` entry (`subGroupSize` = partitionSize, `labelSelector`
volcano.sh/task-spec = the task, `matchLabelKeys` [volcano.sh/partition-id], its
`networkTopology`) and labels pod `ix` of the task with partition `ix // partitionSize`
(pkg/controllers/job/job_controller_actions.go getSubGroupPolicy, job_controller_util.go).
No admission webhook runs (see volcano_controller.py): the vcjobs spell out its defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from bench.e2e import topology_check
from placement_checker import read_placement

from .connector_helpers import Objects, SchedulerProcess
from .kube_helpers import KubeCluster
from .test_vcjob import (  # noqa: F401 - vcjobs is the fixture this file shares
    NODE_LABEL, POLICY, TIMEOUT, Task, VcJobs, vcjob_body, vcjobs, wait_admitted, wait_podgroup,
)
from .volcano_controller import VolcanoController

pytestmark = pytest.mark.integration

TOPOLOGY = "/apis/topology.volcano.sh/v1alpha1"
TASK_SPEC_LABEL = "volcano.sh/task-spec"
PARTITION_LABEL = "volcano.sh/partition-id"


@pytest.fixture
def ours(vc_controller: VolcanoController, kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[SchedulerProcess]:
    """`policydsl run` with Volcano's default policy (allocate keeps network topology without the
    network-topology-aware plugin), under the controller's scheduler name."""
    with SchedulerProcess(tmp_path, POLICY.read_text(), kube_cluster.kubeconfig, vc_controller.scheduler_name,
                          "--min-interval", "100ms") as scheduler:
        scheduler.wait_ready()
        yield scheduler


def switches(objects: Objects, leaves: dict[str, list[str]]) -> dict[str, list[str]]:
    """Nodes under tier-1 HyperNodes (`leaves`: switch → its nodes' cpu) and one tier-2 HyperNode
    over every switch; names carry the namespace (HyperNodes are cluster-wide). The nodes of each
    switch, by switch name."""
    ns = objects.namespace
    made: dict[str, list[str]] = {}
    for switch, cpus in leaves.items():
        made[switch] = []
        for i, cpu in enumerate(cpus):
            name = f"{ns}-{switch}-n{i}"
            objects.node(name, cpu=cpu, memory="64Gi", labels={NODE_LABEL: ns})
            made[switch].append(name)
        hypernode(objects, f"{ns}-{switch}", 1, "Node", made[switch])
    hypernode(objects, f"{ns}-spine", 2, "HyperNode", [f"{ns}-{s}" for s in leaves])
    return made


def hypernode(objects: Objects, name: str, tier: int, member_type: str, members: list[str]) -> None:
    objects.api.post(f"{TOPOLOGY}/hypernodes", {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
        "spec": {"tier": tier, "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}}
                                           for m in members]}})
    objects.cluster_objects.append(f"{TOPOLOGY}/hypernodes/{name}")


def topology_violations(objects: Objects, group: dict[str, Any]) -> list[str]:
    """Every hard topology constraint of the PodGroup `group` (as the API server holds it) that its
    bound pods break, read back from the API server: the job's, and each sub-group's."""
    api, ns = objects.api, objects.namespace
    tree = topology_check.tree_of(api.get(f"{TOPOLOGY}/hypernodes")["items"], api.get("/api/v1/nodes")["items"])
    name = group["metadata"]["name"]
    pods = [p for p in api.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            if (p["metadata"].get("annotations") or {}).get(topology_check.GROUP_ANNOTATION) == name]
    problems = []

    def check(what: str, members: list[dict[str, Any]], request: dict[str, Any] | None) -> None:
        if not request or request.get("mode", "hard") != "hard":
            return
        tier = int(request["highestTierAllowed"])
        for span in topology_check.gang_spans(members, tree, group_of=lambda _: what):
            if span.bound and (span.tier is None or span.tier > tier):
                problems.append(f"{what}: {span.bound} bound pods span "
                                + (f"{span.hypernode} (tier {span.tier})" if span.hypernode else "no HyperNode")
                                + f", above tier {tier}")

    check(f"PodGroup {name}", pods, group["spec"].get("networkTopology"))
    for policy in group["spec"].get("subGroupPolicy") or []:
        selector = (policy.get("labelSelector") or {}).get("matchLabels") or {}
        keys = policy.get("matchLabelKeys") or []
        chosen = [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
        partitions: dict[tuple[str | None, ...], list[dict[str, Any]]] = {}
        for pod in chosen:
            labels = pod["metadata"].get("labels") or {}
            partitions.setdefault(tuple(labels.get(k) for k in keys), []).append(pod)
        for values, members in sorted(partitions.items(), key=lambda item: str(item[0])):
            check(f"sub-group {policy['name']} {dict(zip(keys, values))}", members, policy.get("networkTopology"))
    return problems


def rule_violations(objects: Objects) -> list[str]:
    """What the independent placement checker finds wrong with the namespace's pods on its nodes."""
    placement = read_placement(objects.api.get, node_selector=f"{NODE_LABEL}={objects.namespace}",
                               namespace=objects.namespace)
    return [str(v) for v in placement.check()]


def bound_pods(vcjobs: VcJobs, job: str, count: int, scheduler: SchedulerProcess) -> dict[str, str]:
    """Pod → node once `count` pods of the job are bound (the scheduler's log on a timeout)."""
    def enough() -> dict[str, str] | None:
        placed = {n: p["spec"]["nodeName"] for n, p in vcjobs.pods(job).items() if p["spec"].get("nodeName")}
        return placed if len(placed) == count else None
    try:
        return wait_for(enough, f"{count} pods of vcjob {job} bound", TIMEOUT, interval=0.2)
    except AssertionError as exc:
        group = vcjobs.podgroup(job) or {}
        raise AssertionError(f"{exc}; its PodGroup's status: {group.get('status')}\n--- scheduler log (tail)\n"
                             f"{scheduler.log()[-3000:]}") from None


def test_a_hard_tier_one_vcjob_lands_within_one_switch(vc_controller: VolcanoController, ours: SchedulerProcess,
                                                       objects: Objects, vcjobs: VcJobs) -> None:
    """Three tier-1 switches of 4, 8 and 6 cpus under one spine; 6 pods of 1 cpu, minAvailable 6,
    hard within tier 1: only s1 or s2 can hold the whole job, and the cluster has room to spread it."""
    queue = f"topo-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    made = switches(objects, {"s0": ["2", "2"], "s1": ["4", "4"], "s2": ["2", "2", "2"]})
    body = vcjob_body("train", vc_controller.scheduler_name, queue, 6, [Task("worker", 6, 6)], objects.namespace)
    body["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    vcjobs.create(body)

    group = wait_podgroup(vcjobs, "train", vc_controller)
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}   # the controller copied it
    wait_admitted(vcjobs, "train", ours)
    placed = bound_pods(vcjobs, "train", 6, ours)

    group = vcjobs.podgroup("train") or group
    assert topology_violations(objects, group) == []
    assert rule_violations(objects) == []
    # Said plainly as well: every pod on the nodes of one switch that can hold six.
    [switch] = [s for s in ("s1", "s2") if set(placed.values()) <= set(made[s])]
    # The job's HyperNode is written on its PodGroup (Volcano's volcano.sh/job-allocated-hypernode),
    # where later members and a restarted scheduler read it.
    wait_for(lambda: ((vcjobs.podgroup("train") or {})["metadata"].get("annotations") or {}).get(
        "volcano.sh/job-allocated-hypernode") == f"{objects.namespace}-{switch}",
        "the job's HyperNode annotation on its PodGroup", TIMEOUT)


def test_each_partition_of_a_vcjob_lands_within_its_own_switch(vc_controller: VolcanoController,
                                                               ours: SchedulerProcess, objects: Objects,
                                                               vcjobs: VcJobs) -> None:
    """Volcano's user guide's example (section 3.3.2): the job hard within tier 2, its 8 pods in 2
    partitions of 4, each hard within tier 1. Switches of 4, 4 and 2 cpus: the only placement that
    keeps both partitions whole gives s0 to one and s1 to the other (the job alone, within the
    spine, could put pods on s2)."""
    queue = f"parts-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    made = switches(objects, {"s0": ["2", "2"], "s1": ["2", "2"], "s2": ["1", "1"]})
    body = vcjob_body("parts", vc_controller.scheduler_name, queue, 8, [Task("worker", 8, 8)], objects.namespace)
    body["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    body["spec"]["tasks"][0]["partitionPolicy"] = {
        "totalPartitions": 2, "partitionSize": 4, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    vcjobs.create(body)

    group = wait_podgroup(vcjobs, "parts", vc_controller)
    [policy] = group["spec"]["subGroupPolicy"]        # what the controller made of the partitionPolicy
    assert policy["subGroupSize"] == 4 and policy["matchLabelKeys"] == [PARTITION_LABEL]
    assert policy["labelSelector"]["matchLabels"] == {TASK_SPEC_LABEL: "worker"}
    assert policy["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    wait_admitted(vcjobs, "parts", ours)
    bound_pods(vcjobs, "parts", 8, ours)

    group = vcjobs.podgroup("parts") or group
    assert topology_violations(objects, group) == []
    assert rule_violations(objects) == []
    by_partition: dict[str, set[str]] = {}
    for pod in vcjobs.pods("parts").values():
        by_partition.setdefault(pod["metadata"]["labels"][PARTITION_LABEL], set()).add(pod["spec"]["nodeName"])
    switch_of = {node: s for s, nodes in made.items() for node in nodes}
    assert sorted({switch_of[n] for n in nodes}.pop() for nodes in by_partition.values()
                  if len({switch_of[n] for n in nodes}) == 1) == ["s0", "s1"], by_partition
