"""A task class of one pending pod whose stateful rules only filter (a replica group one pod
short under anti-affinity or hard spread) places by the shared tree of its request, asking the
rules only about the nodes that tree offers it (Session.place_lazy) instead of about every node:
the same decisions as with every node's codes made first, on both kernels, and the answers it
was given asked again once a placement changed them."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime.engine.cycle import Options, open_session, run_cycle
from runtime.engine.rules.spread import TopologySpreadRule
from runtime.engine import session as session_module
from runtime.engine.session import Session
from runtime.engine.snapshot import ALLOCATED
from runtime_helpers import STANDARD_TIERS, node, placements, policy
from test_runtime_placement_rules import HOST, ZONE, anti, pod_doc, term

PLAN = policy(STANDARD_TIERS)
# Binpack alone: a node a pod was placed on ranks above the empty ones for the next.
BINPACK = policy("tier {\n  plugin priority\n  plugin gang\n  plugin predicates\n  plugin binpack\n}")


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def hard_spread(labels: dict) -> list[dict]:
    return [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": labels}}]


def replica_groups() -> ClusterState:
    """12 nodes in 6 zones; groups of 4 replicas with hostname or zone anti-affinity or hard
    zone spread within the group, 3 bound and 1 pending (a class of one pending pod each), and
    plain pods of the same request (their placements change the shared tree's keys)."""
    state = ClusterState()
    for i in range(12):
        node(state, f"n{i:02d}", cpu=4000, labels={HOST: f"n{i:02d}", ZONE: f"z{i % 6}"})
    docs = []
    for g in range(12):
        labels = {"app": f"g{g}"}
        rule = [{"affinity": anti(term(labels))}, {"affinity": anti(term(labels, ZONE))},
                {"spread": hard_spread(labels)}][g % 3]
        for r in range(4):
            bound = f"n{(g * 5 + r * 3) % 12:02d}" if r < 3 else None
            docs.append(pod_doc(f"g{g}-{r}", labels, cpu="500m", node_name=bound, **rule))
        docs.append(pod_doc(f"plain-{g}", {"app": "plain"}, cpu="500m"))
    return load_objects((("test", d) for d in docs), state=state)


def decide(state: ClusterState, pure: bool, monkeypatch, lazy: bool = True, plan=PLAN) -> tuple[dict, int]:
    """(placements, place_lazy calls) of one cycle, lazy classes as they are or none."""
    calls = []
    place_lazy = Session.place_lazy

    def counted(self, cp):
        calls.append(cp.cid)
        return place_lazy(self, cp)
    with monkeypatch.context() as m:
        m.setattr(Session, "place_lazy", counted)
        if not lazy:    # every class counted as several pending tasks: its codes on every node first
            m.setattr(Session, "class_pending", property(lambda self: [2] * len(self.snap.classes)))
        return placements(run_cycle(plan, state, Options(pure_python=pure))), len(calls)


@pytest.mark.parametrize("ask", [1, 2, 8], ids=lambda n: f"ask-{n}")
@pytest.mark.parametrize("domain_tree", [True, False], ids=["spread-by-domain", "spread-lazy"])
def test_classes_of_one_pending_pod_decide_as_with_every_nodes_codes(pure, domain_tree, ask, monkeypatch):
    # A hard zone spread alone places by its request's DomainTree (StatefulRule.domain_verdicts);
    # off, its replica is lazy too, as it is beside another filter. However few nodes a lazy class
    # asks about at a time (session.LAZY_ASK: binpack offers the nodes its own replicas fill
    # first, so a round of one fails), it places where every node's codes would.
    monkeypatch.setattr(session_module, "LAZY_ASK", ask)
    if not domain_tree:
        monkeypatch.setattr(TopologySpreadRule, "domain_verdicts", lambda self, cid: None)
    state = replica_groups()
    placed, calls = decide(state, pure, monkeypatch, lazy=True)
    assert calls == (8 if domain_tree else 12)      # each group's pending replica (but the spread ones')
    assert len(placed) == 24
    assert (placed, 0) == decide(state, pure, monkeypatch, lazy=False)
    zone = {n.name: n.labels[ZONE] for n in state.nodes.values()}
    for pod, name in placed.items():
        if pod.startswith("ns/g") and int(pod[4:].split("-")[0]) % 3 < 2:   # anti-affinity groups
            group = pod.split("-")[0]
            held = [p.node_name for p in state.pods.values() if p.key.startswith(group + "-") and p.node_name]
            if int(group[4:]) % 3 == 0:
                assert name not in held, pod
            else:
                assert zone[name] not in {zone[n] for n in held}, pod


def test_an_answer_changed_since_it_was_asked_is_asked_again(pure):
    """A lazy class is told its best node, the placement is undone, and a pod its anti-affinity
    repels lands on that node (binpack now ranks the node first): placed again, it goes
    elsewhere. (Without asking again, it would take the node the rule now forbids.)"""
    state = ClusterState()
    for i in range(6):      # two nodes a zone (a zone of one node would only exclude a placement's own)
        node(state, f"n{i}", cpu=4000, labels={HOST: f"n{i}", ZONE: f"z{i // 2}"})
    # Zone anti-affinity among its own group (its own placements change its answers: a shared
    # tree); x, of the group's labels without the rule, is repelled by it.
    docs = [pod_doc("a", {"app": "a"}, affinity=anti(term({"app": "a"}, ZONE))), pod_doc("x", {"app": "a"})]
    state = load_objects((("test", d) for d in docs), state=state)
    ssn = open_session(BINPACK, state, Options(pure_python=pure))
    snap = ssn.snap
    t_a, t_x = snap.task_keys.index("ns/a"), snap.task_keys.index("ns/x")
    cp = ssn.placement(int(snap.task_class[t_a]))
    assert cp.lazy
    stmt = ssn.new_statement()
    tree = ssn.place_lazy(cp)
    first = int(tree.out_nodes[0])
    stmt.placed([t_a], tree.out_nodes, tree.out_kinds, 1)
    ssn.placed_by(cp)
    assert first in cp.known
    stmt.discard()
    other = ssn.new_statement()
    other.place(t_x, first, ALLOCATED)
    other.commit()
    tree = ssn.place_lazy(cp)
    assert tree is not None and int(tree.out_nodes[0]) // 2 != first // 2     # another zone
    ssn.close()


def test_past_the_budget_its_own_tree_reads_every_nodes_codes(pure, monkeypatch):
    """Forty nodes of zone z0, each fuller for a pod of the group (binpack ranks them first), all
    refused by the pending replica's zone anti-affinity, four empty ones in z1: the shared tree
    offers more refused nodes than its budget, and the class goes on with a tree of its own, its
    codes on every node made first (not only on those it was told about), so it goes to z1."""
    state = ClusterState()
    for i in range(44):
        node(state, f"n{i:02d}", cpu=4000, labels={HOST: f"n{i:02d}", ZONE: "z0" if i < 40 else "z1"})
    labels = {"app": "a"}
    docs = [pod_doc(f"a-{i}", labels, cpu="1000m", node_name=f"n{i:02d}") for i in range(40)]
    docs.append(pod_doc("a-new", labels, cpu="1000m", affinity=anti(term(labels, ZONE))))
    state = load_objects((("test", d) for d in docs), state=state)
    placed, calls = decide(state, pure, monkeypatch, plan=BINPACK)
    assert calls == 1 and placed == {"ns/a-new": placed["ns/a-new"]}
    assert int(placed["ns/a-new"][1:]) >= 40

