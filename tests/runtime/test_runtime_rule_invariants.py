"""Invariants of the placement rules over generated clusters, both kernels: after every cycle no
placed pod (bound, or pipelined on room being freed) breaks a required affinity or
anti-affinity term, a DoNotSchedule spread constraint, a host port or a scheduling gate, as
the independent checker (tests/placement_checker.py, no engine code) reads the pods' YAML."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_checker import check
from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime_helpers import STANDARD_TIERS, cycle, policy

ALLOCATE = policy(STANDARD_TIERS)
EVICTING = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, reclaim, backfill")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOST, ZONE = "kubernetes.io/hostname", "zone"
APPS = ("a", "b", "c")


def _node(name: str, zone: str | None, cpu: int) -> dict:
    labels = {HOST: name, **({ZONE: zone} if zone else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": f"{cpu}m", "memory": "16Gi", "pods": "110"}}}


@st.composite
def workloads(draw):
    """Nodes in up to three zones (some without a zone label), pods of three apps that may repel
    their own kind per node or per zone, follow another app into its zone, spread over zones
    or hosts, ask for a host port, wait on a gate; some already running (lower priority)."""
    nodes = [_node(f"n{i}", draw(st.sampled_from(["z0", "z1", "z2", None])), draw(st.sampled_from([1000, 2000, 4000])))
             for i in range(draw(st.integers(1, 6)))]
    # An app's pods all spread alike, or none does: a matching pod placed without the constraint
    # may raise the skew legitimately, which a check of the final placement could not tell.
    spreads = {app: [{"maxSkew": draw(st.integers(1, 2)), "topologyKey": draw(st.sampled_from([HOST, ZONE])),
                      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}]
               for app in APPS if draw(st.integers(0, 2)) == 0}
    pods = []
    for i in range(draw(st.integers(1, 14))):
        app = draw(st.sampled_from(APPS))
        spec: dict = {"schedulerName": "volcano", "priority": draw(st.integers(0, 3)),
                      "containers": [{"name": "c", "resources": {"requests": {
                          "cpu": f"{draw(st.sampled_from([100, 500, 1000]))}m", "memory": "64Mi"}}}]}
        affinity: dict = {}
        if draw(st.integers(0, 3)) == 0:
            key = draw(st.sampled_from([HOST, ZONE]))
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": draw(st.sampled_from(APPS))}}, "topologyKey": key}]}
        if draw(st.integers(0, 5)) == 0:
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": draw(st.sampled_from(APPS))}}, "topologyKey": ZONE}]}
        if affinity:
            spec["affinity"] = affinity
        if app in spreads:
            spec["topologySpreadConstraints"] = spreads[app]
        if draw(st.integers(0, 4)) == 0:
            spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([80, 81]))}]
        if draw(st.integers(0, 9)) == 0:
            spec["schedulingGates"] = [{"name": "example.com/hold"}]
        pods.append({"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": "Pending"},
                     "metadata": {"name": f"p{i}", "namespace": "ns", "labels": {"app": app},
                                  "uid": f"u{i}", "creationTimestamp": f"2026-01-01T00:00:{i:02d}Z"}})
    return nodes, pods


def _state(nodes: list[dict], pods: list[dict]) -> ClusterState:
    return load_objects(("gen", obj) for obj in [*nodes, *pods])


def _placed_docs(state: ClusterState, pods: list[dict], decisions) -> list[dict]:
    """The pods as the API server would show them: bound ones with their node, and those the
    cycle pipelined counted where they wait (they hold that room)."""
    docs = []
    for doc in pods:
        key = f"ns/{doc['metadata']['name']}"
        pod = state.pods.get(key)
        if pod is None:
            continue
        doc = copy.deepcopy(doc)
        where = pod.node_name or (decisions.pipelined.get(key) if decisions is not None else None)
        if where:
            doc["spec"]["nodeName"] = where
        docs.append(doc)
    return docs


def _run(nodes, pods, plan, pure: bool, ignore: set[str]) -> None:
    state = _state(nodes, pods)
    for _ in range(3):
        decisions = cycle(plan, state, pure)
        state.apply(decisions)
        # Now: the bound pods, those leaving included. Once they left: with the pipelined ones.
        now = [v for v in check(nodes, _placed_docs(state, pods, None)) if v.rule not in ignore]
        assert now == [], now
        gone = set(state.advance())
        pods = [p for p in pods if f"ns/{p['metadata']['name']}" not in gone]
        later = [v for v in check(nodes, _placed_docs(state, pods, decisions)) if v.rule not in ignore]
        assert later == [], later


@SETTINGS
@given(workloads(), st.booleans())
def test_no_placement_breaks_a_required_rule(workload, pure):
    nodes, pods = workload
    _run(nodes, pods, ALLOCATE, pure, ignore=set())


@SETTINGS
@given(workloads(), st.booleans())
def test_preempt_and_reclaim_keep_the_rules(workload, pure):
    # An eviction may take away the pod an earlier placement's affinity was checked against,
    # or lower a domain's count below what spread's placements were checked against
    # (IgnoredDuringExecution: kube-scheduler's preemption re-checks neither): the final-state
    # checks of those two do not apply once pods were evicted.
    nodes, pods = workload
    _run(nodes, pods, EVICTING, pure, ignore={"topology-spread", "pod-affinity"})


@SETTINGS
@given(workloads())
def test_compiled_and_python_paths_decide_alike_with_rules(workload):
    nodes, pods = workload
    state = _state(nodes, pods)
    for _ in range(3):
        compiled, python = cycle(EVICTING, state, False), cycle(EVICTING, state, True)
        assert compiled.to_dict() == python.to_dict()
        assert compiled.pipelined == python.pipelined
        state.apply(compiled)
        state.advance()
