"""What a SnapshotCache keeps across cycles (the pod scan, the placed pods' lists and grouping,
the rules' match tables, counts and hold plans, the task columns) changes what a cycle costs,
never what it decides: over generated clusters with inter-pod rules and host ports, and the
state moving between cycles the ways a cluster's does (bindings applied, pods leaving, pods
removed, relabelled in place or replaced, new pods, a node relabelled, added or removed), each
cycle decides with the kept cache exactly as with a fresh one, on both kernels."""

from __future__ import annotations

import copy
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cluster.model import ClusterState, pod_changed
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, policy
from test_runtime_rule_invariants import APPS, HOST, ZONE, _state, workloads

PLANS = (policy(STANDARD_TIERS), policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, reclaim, backfill"))
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CHANGES = ("remove a placed pod", "relabel a placed pod in place", "replace a placed pod relabelled",
           "add a pending pod", "relabel a node", "add a node", "remove a node", "nothing")


def _change(state: ClusterState, what: str, pick: int, round_: int) -> None:
    placed = sorted(k for k, p in state.pods.items() if p.node_name)
    nodes = sorted(state.nodes)
    if what == "remove a placed pod" and placed:
        state.remove_pod(placed[pick % len(placed)])
    elif what == "relabel a placed pod in place" and placed:
        pod = state.pods[placed[pick % len(placed)]]
        pod.labels = {**pod.labels, "app": APPS[(APPS.index(pod.labels.get("app", "a")) + 1) % len(APPS)]}
        pod_changed(pod)
    elif what == "replace a placed pod relabelled" and placed:
        pod = state.pods[placed[pick % len(placed)]]
        state.add_pod(replace(pod, labels={**pod.labels, "app": APPS[(pick + 1) % len(APPS)]}))
    elif what == "add a pending pod" and state.pods:
        template = state.pods[sorted(state.pods)[pick % len(state.pods)]]
        pod = copy.copy(template)
        pod.name, pod.uid = f"{template.name}-r{round_}-{pick}", f"{template.uid}-r{round_}-{pick}"
        pod.labels, pod.annotations = dict(template.labels), dict(template.annotations)
        pod.node_name, pod.phase, pod.scheduled_at, pod.releasing = None, "Pending", None, False
        state.add_pod(pod)
    elif what == "relabel a node" and nodes:
        node = state.nodes[nodes[pick % len(nodes)]]
        zone = ("z0", "z1", "z2")[(pick + round_) % 3]
        state.add_node(replace(node, labels={**node.labels, ZONE: zone}))
    elif what == "add a node" and nodes:
        node = state.nodes[nodes[pick % len(nodes)]]
        name = f"new-{round_}-{pick}"
        state.add_node(replace(node, name=name, labels={**node.labels, HOST: name}))
    elif what == "remove a node" and len(nodes) > 1:
        state.remove_node(nodes[pick % len(nodes)])


@SETTINGS
@given(workloads(), st.sampled_from(PLANS), st.booleans(),
       st.lists(st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 50)), max_size=4), min_size=2, max_size=4))
def test_a_kept_cache_decides_as_a_fresh_one(workload, plan, pure, rounds):
    nodes, pods = workload
    state = _state(nodes, pods)
    kept = SnapshotCache()
    for round_, changes in enumerate(rounds):
        with_kept = run_cycle(plan, state, Options(pure_python=pure), cache=kept)
        with_fresh = run_cycle(plan, state, Options(pure_python=pure), cache=SnapshotCache())
        assert with_kept == with_fresh, round_
        state.apply(with_kept)
        if round_ % 2:
            state.advance()     # the pods leaving are gone, those pipelined may bind
        for what, pick in changes:
            _change(state, what, pick, round_)
