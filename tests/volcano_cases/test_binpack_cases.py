"""pkg/scheduler/plugins/binpack/binpack_test.go (Volcano v1.14.1), TestNode: ssn.NodeOrderFn of
every task on every node with binpack alone. Ours: the session's score kernel for the task's
request on each node (the same call preempt's victim choice scores nodes with), nothing else
scoring. p1 and p2 are bound (Pending with a nodeName), so n1 and n3 hold them, and each is
scored as if placed once more, as in Go. (TestArguments parses arguments only.)"""

from __future__ import annotations

import numpy as np
import pytest

from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

GPU, FOO = "nvidia.com/gpu", "example.com/foo"
PODS = [pod("c1", "p1", "n1", "Pending", res("1", "1Gi"), "pg1"),
        pod("c1", "p2", "n3", "Pending", res("1.5", "0Gi"), "pg1"),
        pod("c1", "p3", "", "Pending", res("2", "10Gi", {GPU: "2"}), "pg1"),
        pod("c1", "p4", "", "Pending", res("3", "4Gi", {FOO: "3"}), "pg1")]
NODES = [node("n1", res("2", "4Gi", {"pods": "10"})), node("n2", res("4", "16Gi", {"pods": "10", GPU: "4"})),
         node("n3", res("2", "4Gi", {"pods": "10", FOO: "16"}))]


def scores_are(want: dict[str, dict[str, float]]):
    def probe(ssn, decisions):
        snap = ssn.snap
        out = np.empty(snap.n_nodes, dtype=np.float64)
        got = {}
        for key in want:
            t = snap.task_keys.index(key)
            ssn.k.score_nodes(snap.allocatable, ssn.used, ssn.fit_request(t), ssn.score_params,
                              np.zeros(snap.n_nodes), out)
            got[key] = {name: round(float(out[i]), 6) for i, name in enumerate(snap.node_names)}
        for key, per_node in want.items():
            for name, score in per_node.items():
                assert got[key][name] == pytest.approx(score, abs=1e-5), (key, name, got[key])
    return probe


def case(name: str, weight: float, args: dict, want, xfail=None) -> Case:
    return Case(f"TestNode / {name}", [[plugin("binpack", "node_order", weight=weight, **args)]], (),
                nodes=NODES, pods=PODS, podgroups=[podgroup("pg1", "c1", "c1", 0, None, "")],
                queues=[queue("c1", 1)], expect=Expect(binds=None, evicted=None), probe=scores_are(want),
                also_listed=("preempt",), lint_refuses="PD304", xfail=xfail)


CASES = [
    # "single job" (binpack.weight 10, cpu 2, memory 3, nvidia.com/gpu 7, example.com/foo 8).
    # p4 on n2: n2 has no example.com/foo; Volcano scores that resource 0 but keeps its weight
    # (2.25 / 13 x 1000), and does not zero the node.
    case("single job (weights 10, cpu 2, memory 3, gpu 7, foo 8)", 10,
         {"cpu": 2, "memory": 3, "resources": {GPU: 7, FOO: 8}},
         {"c1/p1": {"n1": 700, "n2": 137.5, "n3": 0}, "c1/p2": {"n1": 0, "n2": 375, "n3": 0},
          "c1/p3": {"n1": 0, "n2": 531.25, "n3": 0}, "c1/p4": {"n1": 0, "n2": 173.076923076, "n3": 0}}),
    # "single job" (binpack.weight 1, cpu 1, memory 1, nvidia.com/gpu 23).
    case("single job (weights 1, cpu 1, memory 1, gpu 23)", 1,
         {"cpu": 1, "memory": 1, "resources": {GPU: 23}},
         {"c1/p1": {"n1": 75, "n2": 15.625, "n3": 0}, "c1/p2": {"n1": 0, "n2": 37.5, "n3": 0},
          "c1/p3": {"n1": 0, "n2": 50.5, "n3": 0}, "c1/p4": {"n1": 0, "n2": 50, "n3": 0}}),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_binpack_case(case, pure):
    run_and_check(case, pure)
