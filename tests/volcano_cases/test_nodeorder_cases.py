"""pkg/scheduler/plugins/nodeorder/nodeorder_test.go (Volcano v1.14.1), TestNodeOrderPlugin case
by case: allocate with gang (job ready) and nodeorder, every scorer weight set by the case
(unset ones are 0 in Go, written out here). No predicates plugin, as in Go: only resources
filter. (TestInitPlugin checks argument parsing only.)"""

from __future__ import annotations

import pytest

from runtime.cluster.model import PodAffinityTerm, PodRules, SpreadConstraint, WeightedTerm
from runtime.cluster.selectors import LabelSelector, MatchExpression
from vcase import Case, Expect, node, params, plugin, pod, podgroup, queue, res, run_and_check

SCORERS = ("leastrequested", "mostrequested", "balancedresource", "nodeaffinity", "tainttoleration", "podaffinity",
           "podtopologyspread", "imagelocality")
PODS10 = {"pods": "10"}
PG1 = [podgroup("pg1", "c1", "c1", 0)]
C1 = [queue("c1", 1)]


def case(name: str, weights: dict[str, int], **kw) -> Case:
    args = {s: weights.get(s, 0) for s in SCORERS}
    return Case(f"TestNodeOrderPlugin / {name}", [[plugin("gang", "job_ready"), plugin("nodeorder", "node_order", **args)]],
                ("allocate",), podgroups=PG1, queues=C1, **kw)


CASES = [
    # "leastAllocated strategy": the emptier n2 wins.
    case("leastAllocated strategy", {"leastrequested": 1},
         nodes=[node("n1", res("2", "4Gi", PODS10)), node("n2", res("4", "8Gi", PODS10))],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1")],
         expect=Expect(binds={"c1/p1": "n2"})),
    # "mostAllocated strategy": the fuller n1 wins.
    case("mostAllocated strategy", {"mostrequested": 1},
         nodes=[node("n1", res("2", "4Gi", PODS10)), node("n2", res("4", "8Gi", PODS10))],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1")],
         expect=Expect(binds={"c1/p1": "n1"})),
    # "balanced allocation prefers balanced node": 1 cpu / 1Gi balances n1 (2 / 2Gi).
    case("balanced allocation prefers balanced node", {"balancedresource": 10},
         nodes=[node("n1", res("2", "2Gi", PODS10)), node("n2", res("4", "2Gi", PODS10))],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1Gi"), "pg1")],
         expect=Expect(binds={"c1/p1": "n1"})),
    # "node affinity prefers labeled node".
    case("node affinity prefers labeled node", {"nodeaffinity": 10},
         nodes=[node("n1", res("2", "4Gi", PODS10), {"zone": "zone1"}), node("n2", res("2", "4Gi", PODS10), {"zone": "zone2"})],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1",
                   preferred_terms=((100, (MatchExpression("zone", "In", ("zone1",)),)),))],
         expect=Expect(binds={"c1/p1": "n1"})),
    # "taint toleration prefers non-tainted node": n2 has a PreferNoSchedule taint.
    case("taint toleration prefers non-tainted node", {"tainttoleration": 10},
         nodes=[node("n1", res("2", "4Gi", PODS10)),
                node("n2", res("2", "4Gi", PODS10), taints=(("key1", "value1", "PreferNoSchedule"),))],
         pods=[pod("c1", "p1", "", "Pending", res("1", "1G"), "pg1")],
         expect=Expect(binds={"c1/p1": "n1"})),
    # "inter-pod affinity prefers node with matching pod": p2 prefers the host of service=s1.
    case("inter-pod affinity prefers node with matching pod", {"podaffinity": 10},
         nodes=[node(n, res("2", "4Gi", PODS10), {"kubernetes.io/hostname": n}) for n in ("n1", "n2", "n3")],
         pods=[pod("c1", "p1", "n1", "Running", res("1", "1G"), "pg1", {"service": "s1"}),
               pod("c1", "p-noise", "n3", "Running", res("1", "1G"), "pg1", {"service": "s2"}),
               pod("c1", "p2", "", "Pending", res("1", "1G"), "pg1", rules=PodRules(preferred_affinity=(WeightedTerm(
                   100, PodAffinityTerm("kubernetes.io/hostname", LabelSelector(match_labels=(("service", "s1"),)),
                                        frozenset({"c1"}))),)))],
         expect=Expect(binds={"c1/p2": "n1"})),
    # "pod topology spread prefers node to reduce skew": zone3 has none of the app's pods.
    case("pod topology spread prefers node to reduce skew", {"podtopologyspread": 10},
         nodes=[node(n, res("4", "4Gi", PODS10), {"zone": z}) for n, z in (("n1", "zone1"), ("n2", "zone2"), ("n3", "zone3"))],
         pods=[pod("c1", "p1", "n1", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
               pod("c1", "p2", "n1", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
               pod("c1", "p3", "n2", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
               pod("c1", "p4", "", "Pending", res("1", "1G"), "pg1", {"app": "foo"}, rules=PodRules(spread=(SpreadConstraint(
                   1, "zone", "ScheduleAnyway", LabelSelector(match_labels=(("app", "foo"),))),)))],
         expect=Expect(binds={"c1/p4": "n3"})),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_nodeorder_case(case, pure):
    run_and_check(case, pure)
