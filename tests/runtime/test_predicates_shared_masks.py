"""The predicates plugin makes each distinct node selector's and toleration set's masks once a
session and hands them to every task class that has them (a cluster of many rule groups has
thousands of classes and a handful of tolerations). Classes sharing them, and classes differing
only in them, must each still be kept off the nodes theirs exclude; and the capacity plugin's
queue order (its per-queue columns found once a session) must still serve the queue below its
deserved share first. Checked from the pods' own specs, not the engine's masks, on both kernels."""

from __future__ import annotations

import pytest

from runtime.cluster.model import (
    ClusterState, PodAffinityTerm, PodRules, QueueObject, Toleration,
)
from runtime.cluster.selectors import LabelSelector, MatchExpression
from runtime.engine.cycle import Options, run_cycle
from tests.runtime.runtime_helpers import STANDARD_TIERS, gang, node, pod, policy

PLAN = policy(STANDARD_TIERS)
CAPACITY_PLAN = policy(STANDARD_TIERS.replace("plugin proportion", "plugin capacity"))
KERNELS = [False, True]   # compiled, pure Python
HOST = "kubernetes.io/hostname"


def tolerated(pod, node) -> bool:
    return all(any((not t.key and t.operator == "Exists") or (t.key == taint.key and (
        t.operator == "Exists" or t.value == taint.value)) for t in pod.tolerations) for taint in node.taints
        if taint.effect == "NoSchedule")


@pytest.mark.parametrize("pure", KERNELS)
def test_classes_sharing_and_differing_in_tolerations_and_selectors_each_keep_to_their_nodes(pure: bool) -> None:
    state = ClusterState()
    for i in range(4):
        node(state, f"gpu-{i}", cpu=8000, labels={HOST: f"gpu-{i}", "pool": "gpu"}, taints=[("gpu", "yes", "NoSchedule")])
        node(state, f"infra-{i}", cpu=8000, labels={HOST: f"infra-{i}", "pool": "infra"},
             taints=[("infra", "yes", "NoSchedule")])
        node(state, f"plain-{i}", cpu=8000, labels={HOST: f"plain-{i}", "pool": "plain"})
    gpu_ok = (Toleration("gpu", "Equal", "yes", "NoSchedule"),)
    kinds = [((), {}, None), (gpu_ok, {"pool": "gpu"}, None), (gpu_ok, {}, None),
             ((Toleration(operator="Exists"),), {}, ((MatchExpression("pool", "In", ("infra",)),),))]
    for g in range(12):
        tolerations, selector, terms = kinds[g % len(kinds)]
        # Anti-affinity within each group: a class per group, the kinds shared by three groups each.
        rules = PodRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector((("app", f"a{g}"),)), frozenset({"ns"})),))
        for r in range(2):
            pod(state, f"a{g}-{r}", cpu=500, labels={"app": f"a{g}"}, rules=rules, tolerations=tolerations,
                node_selector=dict(selector), required_terms=terms or ())
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert len(decisions.bindings) == 24
    seen: dict[tuple[str, str], int] = {}
    for b in decisions.bindings:
        p, n = state.pods[b.pod], state.nodes[b.node]
        assert tolerated(p, n), (b.pod, b.node)
        assert all(n.labels.get(k) == v for k, v in p.node_selector.items()), (b.pod, b.node)
        assert not p.required_terms or n.labels["pool"] == "infra", (b.pod, b.node)
        key = (p.labels["app"], b.node)
        seen[key] = seen.get(key, 0) + 1
    assert max(seen.values()) == 1      # anti-affinity kept: the classes are distinct


@pytest.mark.parametrize("pure", KERNELS)
def test_capacity_serves_the_queue_furthest_below_its_deserved_first(pure: bool) -> None:
    state = ClusterState()
    node(state, "n0", cpu=4000, memory=64 * 2**30)
    state.add_queue(QueueObject("rich", deserved={"cpu": 2000, "memory": 32 * 2**30}))
    state.add_queue(QueueObject("poor", deserved={"cpu": 2000, "memory": 32 * 2**30}))
    pod(state, "held", cpu=1500, node_name="n0", annotations={"scheduling.volcano.sh/queue-name": "rich"})
    gang(state, "r", 1, queue="rich", cpu=2000, creation=0.0)
    gang(state, "p", 1, queue="poor", cpu=2000, creation=1.0)
    decisions = run_cycle(CAPACITY_PLAN, state, Options(pure_python=pure))
    # Room for one more 2-CPU pod: the queue at share 0 goes before the one at 0.75.
    assert [b.pod for b in decisions.bindings] == ["ns/p-0"]
