"""Volcano's HyperNodes on a real API server: watched by the cache (the dev cluster installs the
CRD from deploy/crds/), a hard tier-1 gang placed within one tier-1 HyperNode, a gang that no
tier-1 HyperNode can hold waiting with the tier named, and an independent check of the placement
from what the API server holds (pods, nodes, HyperNodes), not from the scheduler's model."""

from __future__ import annotations

from typing import Any

import pytest

from polling import wait_for
from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import VOLCANO, InProcess, Objects, unique_scheduler_name

pytestmark = pytest.mark.integration

TOPOLOGY = "/apis/topology.volcano.sh/v1alpha1"


def hypernode_body(name: str, tier: int, members: list[str], member_type: str = "Node") -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}}
                                               for m in members]}}


def create_hypernode(objects: Objects, name: str, tier: int, members: list[str], member_type: str = "Node") -> None:
    objects.api.post(f"{TOPOLOGY}/hypernodes", hypernode_body(name, tier, members, member_type))
    objects.cluster_objects.append(f"{TOPOLOGY}/hypernodes/{name}")


def topology_gang(objects: Objects, name: str, size: int, scheduler: str, tier: int) -> list[str]:
    objects.api.post(f"{VOLCANO}/namespaces/{objects.namespace}/podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": size, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": tier}}})
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        objects.pod(pod, scheduler, group=name, cpu="2", memory="1Gi")
    return pods


def leaf_nodes(api: KubeApi) -> dict[str, tuple[int, set[str]]]:
    """Every HyperNode the API server holds: its tier and the nodes under it, by walking the
    members (exactMatch only, as this test writes them), independently of runtime.cluster.topology."""
    items = {h["metadata"]["name"]: h for h in api.get(f"{TOPOLOGY}/hypernodes")["items"]}
    nodes = {n["metadata"]["name"] for n in api.get("/api/v1/nodes")["items"]}

    def under(name: str, seen: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for member in items[name]["spec"].get("members") or []:
            target = member["selector"]["exactMatch"]["name"]
            if member["type"] == "Node" and target in nodes:
                out.add(target)
            elif member["type"] == "HyperNode" and target in items and target not in seen:
                out |= under(target, seen | {target})
        return out

    return {name: (int(h["spec"]["tier"]), under(name, frozenset({name}))) for name, h in items.items()}


def within_one(api: KubeApi, pods: dict[str, Any], names: list[str], tier: int) -> str | None:
    """The HyperNode of tier <= `tier` that holds every pod of `names` (bound), per the API server."""
    where = {pods[n]["spec"].get("nodeName") for n in names}
    if None in where:
        return None
    fitting = sorted(name for name, (t, leaves) in leaf_nodes(api).items() if t <= tier and where <= leaves)
    return fitting[0] if fitting else None


def test_hard_tier_one_gangs_land_within_one_switch_or_wait_naming_the_tier(objects: Objects, in_process) -> None:
    ns, name = objects.namespace, unique_scheduler_name()
    nodes = [f"{ns}-n{i}" for i in range(1, 5)]
    for node in nodes:
        objects.node(node, cpu="2", memory="8Gi")           # room for one 2-cpu task each
    scheduler: InProcess = in_process(name)
    # Created after the cache synced: they arrive through the watch, not the first list.
    s1, s2, spine = f"{ns}-s1", f"{ns}-s2", f"{ns}-spine"
    create_hypernode(objects, s1, 1, nodes[:2])
    create_hypernode(objects, s2, 1, nodes[2:])
    create_hypernode(objects, spine, 2, [s1, s2], member_type="HyperNode")
    wait_for(lambda: {s1, s2, spine} <= set(scheduler.cluster.snapshot().hypernodes),
             "the cache to see the HyperNodes", 10)
    topology = scheduler.cluster.snapshot().topology()
    assert topology.leaves[s1] == frozenset(nodes[:2]) and topology.leaves[spine] == frozenset(nodes)
    assert not topology.blocking

    pair = topology_gang(objects, "pair", 2, name, tier=1)
    wait_for(lambda: scheduler.sees(ns, 2, nodes=4), "the cache to see the gang and the nodes", 10)
    scheduler.cycle_until(lambda: len(objects.bound()) == 2, 15, "the pair bound")

    pods = objects.pods()
    assert within_one(objects.api, pods, pair, tier=1) in (s1, s2), {p: pods[p]["spec"]["nodeName"] for p in pair}

    # Three tasks of one node each: no tier-1 HyperNode has three nodes, let alone three free.
    trio = topology_gang(objects, "trio", 3, name, tier=1)
    wait_for(lambda: scheduler.sees(ns, 5, nodes=4), "the cache to see the trio", 10)
    cycle = scheduler.cycle()
    assert cycle.binds.bound == 0
    reasons = {u.pod: " ".join(r.message for r in u.reasons) for u in cycle.decisions.unschedulable}
    assert set(reasons) >= {f"{ns}/{p}" for p in trio}
    assert all("within one HyperNode of tier <= 1" in reasons[f"{ns}/{p}"] for p in trio), reasons

    group = scheduler.cycle_until(lambda: objects.read_podgroup("trio").get("status", {}).get("conditions")
                                  and objects.read_podgroup("trio"), 10, "a PodGroup condition on the trio")
    condition = group["status"]["conditions"][0]
    assert (condition["type"], condition["status"]) == ("Unschedulable", "True")
    assert "tier <= 1" in condition["message"], condition
    assert not {p for p in trio if objects.pods()[p]["spec"].get("nodeName")}
    # The pair is still where it was, within one tier-1 HyperNode (read back from the API server).
    assert within_one(objects.api, objects.pods(), pair, tier=1) in (s1, s2)

    # A HyperNode the API server accepts but that cannot be read (Go's regexp refuses "(" too):
    # left out, named among the cache's invalid objects, the watch and the placement go on.
    bad = f"{ns}-bad"
    objects.api.post(f"{TOPOLOGY}/hypernodes", {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": bad},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]}})
    objects.cluster_objects.append(f"{TOPOLOGY}/hypernodes/{bad}")
    invalid = wait_for(lambda: [i for i in scheduler.cluster.cache.invalid_objects() if i.key == bad],
                       "the bad HyperNode named invalid", 10)
    assert invalid[0].kind == "HyperNode" and "regexMatch.pattern" in invalid[0].message, invalid
    assert bad not in scheduler.cluster.snapshot().hypernodes
    assert scheduler.cycle().binds.bound == 0

    # A HyperNode deleted on the server leaves the cache through the watch.
    objects.api.delete(f"{TOPOLOGY}/hypernodes/{spine}")
    wait_for(lambda: spine not in scheduler.cluster.snapshot().hypernodes, "the deleted HyperNode gone", 10)


def test_the_hypernode_crd_is_installed_by_the_dev_cluster(kube_api: KubeApi) -> None:
    crd = kube_api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/hypernodes.topology.volcano.sh")
    assert crd["spec"]["scope"] == "Cluster"
    try:
        kube_api.get(f"{TOPOLOGY}/hypernodes")
    except ApiError as err:  # pragma: no cover - the point of the test
        pytest.fail(f"HyperNodes not served: {err}")
