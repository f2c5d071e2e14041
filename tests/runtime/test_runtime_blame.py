"""A pod that no node could hold even empty is told so first, whatever its queue says (issue 32:
explain blamed the queue for a 64-CPU pod when no node has more than 32); one the nodes could
hold but its queue may not take yet is told about its queue only. And explain names the queue of
a pod without a PodGroup by its queue annotation."""

from __future__ import annotations

import pytest

from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState, QUEUE_ANNOTATION
from runtime.engine.explanation import explain_pod
from runtime.engine.session import Options
from runtime_helpers import cycle, node, pod, policy

PLAN = policy("tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n}\n"
              "queue a {\n  weight = 1\n}\nqueue b {\n  weight = 3\n}\n")


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def cluster(cpu: int) -> ClusterState:
    # Two nodes of 64 CPUs; queue b (weight 3) asks 96 of the 128, so a deserves 32.
    state = ClusterState()
    node(state, "n1", cpu=64000, memory=128 * 2**30)
    node(state, "n2", cpu=64000, memory=128 * 2**30)
    pod(state, "want", cpu=cpu, annotations={QUEUE_ANNOTATION: "a"})
    for i in range(2):
        pod(state, f"other-{i}", cpu=48000, annotations={QUEUE_ANNOTATION: "b"})
    return state


def test_no_node_could_hold_it_comes_first(pure):
    decisions = cycle(PLAN, cluster(65000), pure)
    kinds = [r.kind for r in decisions.reasons_for("ns/want")]
    assert kinds[0] == d.NODES and d.QUEUE in kinds


def test_a_pod_the_nodes_could_hold_is_told_about_its_queue_only(pure):
    # 40 CPUs fit an empty node; queue a, deserving 32, may not take them.
    decisions = cycle(PLAN, cluster(40000), pure)
    kinds = [r.kind for r in decisions.reasons_for("ns/want")]
    assert kinds == [d.QUEUE]


def test_explain_names_the_queue_of_a_pod_without_a_group():
    state = cluster(65000)
    decisions = cycle(PLAN, state)
    explanation = explain_pod(state, "ns/want", decisions, Options())
    assert explanation.queue == "a"
