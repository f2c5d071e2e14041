"""The resource-strategy-fit plugin, on both kernels.

Translated from Volcano v1.14.1's pkg/scheduler/plugins/resource-strategy-fit: TestScore (the
score of one task on one node per strategy table, pod-level annotations included),
Test_mostRequestedScore / Test_leastRequestedScore (over capacity: 0),
TestResourceStrategyFitPlugin (scores per task and node in a session), sra_test.go's TestNode
(scarce-resource avoidance) and TestAllocate (where a cycle binds). Then: the score follows this
cycle's placements, and pods of one class asking different pod-level strategies wait, saying so."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.cluster.model import ClusterState, PodGroup
from runtime.engine.cycle import open_session
from runtime.engine.plugins.resource_strategy_fit import (
    LEAST, MIXED, MOST, SCORING_TYPE, SCORING_WEIGHT, pod_strategies, strategy_score,
)
from runtime.engine.session import Options
from runtime_helpers import GiB, cycle, node, placements, pod, policy


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def mixed(cpu_type, cpu_w, mem_type, mem_w):
    return {"cpu": (cpu_type, cpu_w), "memory": (mem_type, mem_w)}


# (Go case name, task (cpu, memory), annotations, node (used cpu, used mem, alloc cpu, alloc mem),
#  strategies, plugin weight, expected)
SCORE_CASES = [
    ("test1", (100, 100), {}, (200, 200, 500, 500), mixed(LEAST, 1, LEAST, 1), 10, 400),
    ("test2", (100, 100), {}, (200, 200, 400, 400), mixed(LEAST, 1, LEAST, 1), 10, 250),
    ("test3", (100, 100), {}, (200, 200, 500, 500), mixed(MOST, 1, MOST, 1), 10, 600),
    ("test4", (100, 100), {}, (200, 200, 400, 400), mixed(MOST, 1, MOST, 1), 10, 750),
    ("test5", (100, 100), {}, (200, 200, 500, 500), mixed(LEAST, 2, MOST, 1), 10, 466.66666667),
    ("test6", (100, 100), {}, (200, 200, 500, 500), mixed(LEAST, 1, MOST, 2), 10, 533.33333333),
    ("test7", (0, 100), {}, (200, 200, 500, 500), mixed(LEAST, 1, MOST, 2), 10, 600),
    ("test8", (100, 100), {}, (200, 200, 0, 400), mixed(LEAST, 1, MOST, 2), 10, 500),
    ("test9", (100, 100), {}, (200, 200, 500, 500), {"memory": (MOST, 2)}, 10, 600),
    ("pod-level-scoring-least-allocated", (100, 100),
     {SCORING_TYPE: LEAST, SCORING_WEIGHT: '{"cpu": 2, "memory": 1}'}, (200, 200, 500, 500),
     mixed(LEAST, 1, LEAST, 1), 10, 400),
    ("pod-level-scoring-most-allocated", (100, 100),
     {SCORING_TYPE: MOST, SCORING_WEIGHT: '{"cpu": 1, "memory": 2}'}, (200, 200, 500, 500),
     mixed(LEAST, 1, LEAST, 1), 10, 600),
    ("pod-level-scoring-invalid-json", (100, 100), {SCORING_TYPE: LEAST, SCORING_WEIGHT: "invalid-json"},
     (200, 200, 500, 500), mixed(LEAST, 1, LEAST, 1), 10, 0),
    ("pod-level-scoring-missing-resource-weight", (100, 100), {SCORING_TYPE: LEAST, SCORING_WEIGHT: '{"cpu": 2}'},
     (200, 200, 500, 500), mixed(LEAST, 1, LEAST, 1), 10, 400),
    ("zero-resources-requested", (0, 0), {}, (200, 200, 500, 500), mixed(LEAST, 1, LEAST, 1), 10, 0),
    ("node-fully-allocated", (100, 100), {}, (500, 500, 500, 500), mixed(LEAST, 1, LEAST, 1), 10, 0),
    ("mixed-scoring-strategies", (100, 100), {}, (200, 200, 500, 500), mixed(LEAST, 3, MOST, 1), 10, 450),
    ("high-weight-scenario", (100, 100), {}, (200, 200, 500, 500), mixed(LEAST, 5, LEAST, 5), 20, 800),
]


@pytest.mark.parametrize("name, task, annotations, node_info, strategies, weight, expected", SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(name, task, annotations, node_info, strategies, weight, expected):
    own = pod_strategies(annotations)
    if own == "invalid":
        got = 0.0
    else:
        used = np.array([[node_info[0], node_info[1]]], dtype=np.float64)
        alloc = np.array([[node_info[2], node_info[3]]], dtype=np.float64)
        got = float(strategy_score({"cpu": task[0], "memory": task[1]}, used, alloc, ["cpu", "memory"],
                                   own if isinstance(own, dict) else strategies, weight)[0])
    assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("kind", [MOST, LEAST])
def test_requested_scores_over_capacity_and_empty(kind):
    # Test_mostRequestedScore / Test_leastRequestedScore: nothing on an empty node; over capacity 0.
    got = strategy_score({"cpu": 0}, np.array([[0.0]]), np.array([[0.0]]), ["cpu"], {"cpu": (kind, 0)}, 1)
    assert got.tolist() == [0.0]
    got = strategy_score({"cpu": 1}, np.array([[2.0]]), np.array([[2.0]]), ["cpu"], {"cpu": (kind, 1)}, 1)
    assert got.tolist() == [0.0]


def test_a_wildcard_weighs_the_resources_it_prefixes_the_longest_prefix_winning():
    from runtime.engine.plugins.resource_strategy_fit import strategy_for
    table = {"nvidia.com/*": (MOST, 1), "nvidia.com/a*": (LEAST, 3), "cpu": (LEAST, 2)}
    assert strategy_for("nvidia.com/gpu", table) == (MOST, 1)
    assert strategy_for("nvidia.com/a10", table) == (LEAST, 3)
    assert strategy_for("cpu", table) == (LEAST, 2)
    assert strategy_for("memory", table) is None


def rsf_policy(args: str, actions: str = "enqueue, allocate") -> object:
    weight = ""
    if args.startswith("    weight "):      # the plugin's weight is written after its name
        first, _, args = args.partition("\n")
        weight = first.strip() + " "
    return policy("tier {\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin proportion\n"
                  f"  plugin resource-strategy-fit {weight}{{\n{args}\n  }}\n}}\n", actions=actions)


def session_scores(plan, state, pure) -> dict[str, dict[str, float]]:
    ssn = open_session(plan, state, Options(pure_python=pure))
    [rule] = [r for r in ssn.stateful_scorers if r.name == "resource-strategy-fit"]
    snap = ssn.snap
    out = {}
    for t, p in enumerate(snap.pods):
        score = rule.score(int(snap.task_class[t]), None)
        out[p.name] = {n: float(score[i]) for i, n in enumerate(snap.node_names)}
    return out


def four_nodes(state, extra: dict[str, dict[str, int]]):
    for name, res in extra.items():
        node(state, name, cpu=4000, memory=4 * GiB, **res)


def test_resource_strategy_fit_plugin_scores(pure):
    # TestResourceStrategyFitPlugin "single job": gpu MostAllocated 1, foo LeastAllocated 1, weight 10.
    plan = rsf_policy('    weight 10\n    most_allocated = { "nvidia.com/gpu": 1 }\n'
                      '    least_allocated = { "example.com/foo": 1 }')
    state = ClusterState()
    four_nodes(state, {"n1": {"nvidia.com/gpu": 10}, "n2": {"nvidia.com/gpu": 5},
                       "n3": {"example.com/foo": 10}, "n4": {"example.com/foo": 5}})
    state.add_podgroup(PodGroup("c1", "pg1", min_member=0, queue="default", phase="Inqueue", uid="pg"))
    for name, res in (("p1", {"example.com/foo": 2}), ("p2", {"example.com/foo": 3}),
                      ("p3", {"nvidia.com/gpu": 2}), ("p4", {"nvidia.com/gpu": 3})):
        pod(state, name, cpu=1000, memory=GiB * (10 if name == "p3" else 1), group="pg1", ns="c1", requests=res)
    got = session_scores(plan, state, pure)
    expected = {"p1": {"n1": 0, "n2": 0, "n3": 800, "n4": 600}, "p2": {"n1": 0, "n2": 0, "n3": 700, "n4": 400},
                "p3": {"n1": 200, "n2": 400, "n3": 0, "n4": 0}, "p4": {"n1": 300, "n2": 600, "n3": 0, "n4": 0}}
    for p, row in expected.items():
        assert got[p] == pytest.approx(row), p


def test_resource_strategy_fit_plugin_scores_weighted(pure):
    # TestResourceStrategyFitPlugin's second case: foo LeastAllocated at weight 2.
    plan = rsf_policy('    most_allocated = { "nvidia.com/gpu": 1 }\n    least_allocated = { "example.com/foo": 2 }')
    state = ClusterState()
    four_nodes(state, {"n5": {"nvidia.com/gpu": 10, "example.com/foo": 5}, "n6": {"example.com/foo": 10}})
    state.add_podgroup(PodGroup("c1", "pg1", min_member=0, phase="Inqueue", uid="pg"))
    pod(state, "p5", cpu=1000, memory=GiB, group="pg1", ns="c1", requests={"nvidia.com/gpu": 4, "example.com/foo": 4})
    got = session_scores(plan, state, pure)
    assert got["p5"] == pytest.approx({"n5": 266.66666666, "n6": 399.99999999})


SRA_NODES = {"n1": (32, 64, {}), "n2": (8, 16, {"nvidia.com/t4": 16}), "n3": (8, 16, {"nvidia.com/a10": 16}),
             "n4": (8, 16, {"nvidia.com/t4": 8, "nvidia.com/a10": 16})}
SRA_PODS = {"p1": (1000, 1, {}), "p2": (1500, 0, {"nvidia.com/t4": 2}), "p3": (2000, 4, {"nvidia.com/a10": 2}),
            "p4": (3000, 4, {"nvidia.com/t4": 1, "nvidia.com/a10": 3})}


@pytest.mark.parametrize("args, expected", [
    # sra_test.go TestNode case1: both GPUs scarce, t4 2 and a10 3, weight 5.
    ('    weight 0\n    sra_weight = 5\n    sra_resources = { "nvidia.com/t4": 2, "nvidia.com/a10": 3 }',
     {"p1": {"n1": 500, "n2": 300, "n3": 200, "n4": 0}, "p2": {"n1": 0, "n2": 300, "n3": 0, "n4": 0},
      "p3": {"n1": 0, "n2": 0, "n3": 200, "n4": 0}, "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}}),
    # case2: t4 alone.
    ('    weight 0\n    sra_weight = 5\n    sra_resources = { "nvidia.com/t4": 2 }',
     {"p1": {"n1": 500, "n2": 0, "n3": 500, "n4": 0}, "p2": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
      "p3": {"n1": 0, "n2": 0, "n3": 500, "n4": 0}, "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}}),
], ids=["case1", "case2"])
def test_sra_node_scores(args, expected, pure):
    plan = rsf_policy(args)
    state = ClusterState()
    for name, (cpu, mem, extra) in SRA_NODES.items():
        node(state, name, cpu=cpu * 1000, memory=mem * GiB, **extra)
    state.add_podgroup(PodGroup("c1", "pg1", min_member=0, phase="Inqueue", uid="pg"))
    for name, (cpu, mem, extra) in SRA_PODS.items():
        pod(state, name, cpu=cpu, memory=mem * GiB, group="pg1", ns="c1", requests=extra)
    got = session_scores(plan, state, pure)
    for p, row in expected.items():
        assert got[p] == pytest.approx(row), p


ALLOCATE_ARGS = '    weight 10\n    most_allocated = { "nvidia.com/gpu": 2 }\n    least_allocated = { cpu: 1 }'


@pytest.mark.parametrize("kind, expected", [("gpu", {"c1/p1": "n2"}), ("cpu", {"c1/p3": "n4"})],
                         ids=["GPU MostAllocated", "cpu LeastAllocated"])
def test_allocate(kind, expected, pure):
    # TestAllocate: a GPU pod joins the GPU node already holding one; a CPU pod goes to the emptier CPU node.
    plan = rsf_policy(ALLOCATE_ARGS)
    state = ClusterState()
    for name, typ in (("n1", "gpu"), ("n2", "gpu"), ("n3", "cpu"), ("n4", "cpu")):
        node(state, name, cpu=5000, memory=10 * GiB, labels={"nodeResourceType": typ},
             **({"nvidia.com/gpu": 10} if typ == "gpu" else {}))
    state.add_podgroup(PodGroup("c1", "pg1", min_member=1, queue="default", phase="Inqueue", uid="pg"))
    gpu = {"nvidia.com/gpu": 2} if kind == "gpu" else {}
    new, running = ("p1", "p2") if kind == "gpu" else ("p3", "p4")
    pod(state, new, cpu=1000, memory=10**9, group="pg1", ns="c1", requests=gpu,
        node_selector={"nodeResourceType": kind})
    pod(state, running, cpu=1000, memory=10**9, group="pg1", ns="c1", requests=gpu,
        node_selector={"nodeResourceType": kind}, node_name="n2" if kind == "gpu" else "n3")
    assert placements(cycle(plan, state, pure)) == expected


def test_the_score_follows_this_cycles_placements(pure):
    # MostAllocated on cpu: once the first pod lands on a node, the next pods follow it there.
    plan = rsf_policy("    most_allocated = { cpu: 1 }")
    state = ClusterState()
    for name in ("n1", "n2", "n3"):
        node(state, name, cpu=4000, memory=8 * GiB)
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    for i in range(4):
        pod(state, f"p{i}", cpu=1000, memory=GiB, group="job")
    bound = placements(cycle(plan, state, pure))
    assert len(bound) == 4 and len(set(bound.values())) == 1


def test_pods_of_one_class_asking_different_strategies_wait_saying_so(pure):
    plan = rsf_policy("    most_allocated = { cpu: 1 }")
    state = ClusterState()
    node(state, "n1")
    state.add_podgroup(PodGroup("ns", "job", min_member=1, phase="Inqueue", uid="pg"))
    pod(state, "a", group="job", annotations={SCORING_TYPE: MOST, SCORING_WEIGHT: '{"cpu": 1}'})
    pod(state, "b", group="job", annotations={SCORING_TYPE: LEAST, SCORING_WEIGHT: '{"cpu": 1}'})
    decisions = cycle(plan, state, pure)
    assert placements(decisions) == {}
    assert any(MIXED in r.message for r in decisions.reasons_for("ns/a"))
