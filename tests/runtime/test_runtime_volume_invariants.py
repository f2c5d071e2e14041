"""Invariants of the volume rules over generated clusters, both kernels: across cycles (the test
plays the PV controller and a provisioner on the objects' dicts, not the engine's simulator) no
PV is chosen for two claims, no pod is bound before its claims or against its PV's node affinity
or zone, no ReadWriteOncePod claim has two pods and no node goes over a CSI driver's attach
limit — as the independent checker (tests/volume_checker.py, no engine code) reads the dicts."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.objects import load_objects
from runtime_helpers import STANDARD_TIERS, cycle, policy
from storage_docs import LOCAL, ZONE, claim_pod, csinode_doc, node_doc, podgroup_doc, pv_doc, pvc_doc, storage_class
from volume_checker import check

ALLOCATE = policy(STANDARD_TIERS)
EVICTING = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, reclaim, backfill")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DRIVER = "disk.csi.example.com"
ZONAL = "zonal"              # WaitForFirstConsumer, provisioned by DRIVER in z1 only


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 5))
    zones = [draw(st.sampled_from(["z1", "z2", None])) for _ in range(n)]
    docs = [node_doc(f"n{i}", labels={ZONE: z} if z else {}) for i, z in enumerate(zones)]
    docs += [storage_class(LOCAL), storage_class(ZONAL, provisioner=DRIVER, topologies=[(ZONE, ["z1"])])]
    docs += [csinode_doc(f"n{i}", {DRIVER: draw(st.integers(1, 3))}) for i in range(n) if draw(st.booleans())]
    for i in range(draw(st.integers(0, 6))):
        docs.append(pv_doc(f"local{i}", f"n{draw(st.integers(0, n - 1))}", size=f"{draw(st.integers(1, 4))}Gi"))
    for i in range(draw(st.integers(0, 4))):
        zone = draw(st.sampled_from(["z1", "z2"]))
        docs.append(pv_doc(f"zonal{i}", cls=ZONAL, driver=DRIVER, size=f"{draw(st.integers(1, 4))}Gi",
                           labels={ZONE: zone},
                           affinity=[{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]))
    pods, claim_n = [], 0
    gangs = []
    for i in range(draw(st.integers(1, 10))):
        claims = []
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["local", "zonal", "rwop", "shared"]))
            if kind == "shared" and claim_n:
                claims.append(f"c{draw(st.integers(0, claim_n - 1))}")
                continue
            name = f"c{claim_n}"
            claim_n += 1
            size = f"{draw(st.integers(1, 3))}Gi"
            if kind == "rwop":
                docs += [pv_doc(f"{name}-pv", cls="", driver=DRIVER, claim=name),
                         pvc_doc(name, cls="", volume=f"{name}-pv", modes=["ReadWriteOncePod"])]
            else:
                docs.append(pvc_doc(name, cls=LOCAL if kind == "local" else ZONAL, size=size))
            claims.append(name)
        group = None
        if i % 4 == 3 and draw(st.booleans()):
            group = f"g{i}"
            gangs.append(podgroup_doc(group, 2))
            pods.append(claim_pod(f"p{i}-b", [], group=group, cpu=f"{draw(st.sampled_from([100, 1000]))}m"))
        pods.append(claim_pod(f"p{i}", claims, group=group, priority=draw(st.integers(0, 2)),
                              cpu=f"{draw(st.sampled_from([100, 1000, 3000]))}m"))
    return docs + gangs, pods


def _play_controller(docs: list[dict], choices: dict, bindings: dict[str, str]) -> None:
    """What the PV controller and the provisioner do with a cycle's choices, on the dicts."""
    by_kind_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    for pod, picks in choices.items():
        node = bindings[pod]
        for pick in picks:
            claim = by_kind_name[("PersistentVolumeClaim", pick.claim.split("/")[1])]
            if claim["spec"].get("volumeName"):
                continue
            if pick.volume is None:
                pv = pv_doc(f"made-{claim['metadata']['name']}", cls=claim["spec"]["storageClassName"], driver=DRIVER,
                            size=claim["spec"]["resources"]["requests"]["storage"],
                            affinity=[{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}])
                docs.append(pv)
                by_kind_name[("PersistentVolume", pv["metadata"]["name"])] = pv
            else:
                pv = by_kind_name[("PersistentVolume", pick.volume)]
                assert not pv["spec"].get("claimRef"), f"{pick.volume} was chosen while already claimed"
            pv["spec"]["claimRef"] = {"namespace": "ns", "name": claim["metadata"]["name"]}
            pv["status"] = {"phase": "Bound"}
            claim["spec"]["volumeName"] = pv["metadata"]["name"]
            claim["status"] = {"phase": "Bound"}


def _run(docs: list[dict], pods: list[dict], plan, pure: bool) -> None:
    docs, pods = copy.deepcopy(docs), copy.deepcopy(pods)
    for _ in range(3):
        state = load_objects(("gen", d) for d in [*docs, *pods])
        decisions = cycle(plan, state, pure)
        owners: dict[str, set[str]] = {}
        for picks in decisions.volumes.values():     # pods sharing a claim share its volume
            for c in picks:
                if c.volume:
                    owners.setdefault(c.volume, set()).add(c.claim)
        assert all(len(claims) == 1 for claims in owners.values()), f"a PV chosen for two claims: {owners}"
        binds = {b.pod: b.node for b in decisions.bindings}
        _play_controller(docs, decisions.volumes, binds)
        evicted = {e.pod for e in decisions.evictions}
        pods = [p for p in pods if f"ns/{p['metadata']['name']}" not in evicted]    # gone once evicted
        for p in pods:
            where = binds.get(f"ns/{p['metadata']['name']}")
            if where:
                p["spec"]["nodeName"] = where
                p["status"] = {"phase": "Running"}
        kinds = {k: [d for d in docs if d["kind"] == k] for k in ("Node", "PersistentVolume", "PersistentVolumeClaim",
                                                                  "CSINode")}
        found = check(kinds["Node"], pods, kinds["PersistentVolume"], kinds["PersistentVolumeClaim"], kinds["CSINode"])
        assert found == [], found


@SETTINGS
@given(clusters(), st.booleans())
def test_no_placement_breaks_a_volume_rule(cluster, pure):
    _run(*cluster, ALLOCATE, pure)


@SETTINGS
@given(clusters(), st.booleans())
def test_preempt_and_reclaim_keep_the_volume_rules(cluster, pure):
    _run(*cluster, EVICTING, pure)


@SETTINGS
@given(clusters())
def test_compiled_and_python_paths_choose_the_same_volumes(cluster):
    docs, pods = cluster
    state = load_objects(("gen", d) for d in [*docs, *pods])
    compiled, python = cycle(EVICTING, state, False), cycle(EVICTING, state, True)
    assert compiled.to_dict() == python.to_dict()
