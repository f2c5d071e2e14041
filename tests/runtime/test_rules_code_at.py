"""StatefulRule.code_at (one node's code, which ClassPlacement.update asks on each placement
that touched one node) answers as `codes` does on every node, for every class the filter
concerns, as the session opens and after a cycle's placements: inter-pod anti-affinity by host
and by zone, required affinity (its first pod and after), topology spread (the base class's
code_at), on nodes with and without the zone key, both kernels."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.engine import session as session_module
from runtime.engine.actions import registry as actions
from runtime.engine.cycle import Options, open_session
from runtime.engine.extension import MASK_FAIL, MASK_PASS
from runtime.engine.rules.spread import TopologySpreadRule
from runtime.engine.session import ClassPlacement, Session
from runtime_helpers import STANDARD_TIERS, policy
from test_runtime_placement_rules import ZONE, affine, anti, cluster, pod_doc, term

PLAN = policy(STANDARD_TIERS)


def spread(app: str) -> list[dict]:
    return [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": app}}}]


def assert_code_at_is_codes(ssn: Session) -> int:
    """Asserts it for every filter and class it concerns; returns the classes checked."""
    rows = range(ssn.snap.n_nodes)
    checked = 0
    for rule in ssn.stateful_filters:
        for cls in ssn.snap.classes:
            if cls.head < 0 or not rule.filters(cls.index):
                continue
            every = rule.codes(cls.index, None).tolist()
            assert [rule.code_at(cls.index, r) for r in rows] == every, (rule.name, cls.index)
            assert [int(rule.codes(cls.index, np.array([r]))[0]) for r in rows] == every
            checked += 1
    return checked


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_code_at_answers_as_codes(pure):
    nodes = {f"n{i}": {ZONE: f"z{i % 3}"} for i in range(7)}
    nodes["bare"] = {}          # no zone: fails a zone spread, has no domain under a zone term
    pods = [pod_doc("web-running", {"app": "web"}, node_name="n0"),
            *(pod_doc(f"web-{i}", {"app": "web"}, affinity=anti(term({"app": "web"}))) for i in range(4)),
            *(pod_doc(f"db-{i}", {"app": "db"}, affinity=anti(term({"app": "db"}, ZONE))) for i in range(2)),
            *(pod_doc(f"api-{i}", {"app": "api"}, affinity=affine(term({"app": "api"}, ZONE))) for i in range(2)),
            *(pod_doc(f"s-{i}", {"app": "s"}, spread=spread("s")) for i in range(5))]
    ssn = open_session(PLAN, cluster(nodes, pods), Options(pure_python=pure))
    assert assert_code_at_is_codes(ssn) >= 4
    registry = actions()
    for name in PLAN.actions:
        registry[name](ssn)
    assert int((ssn.task_node >= 0).sum()) > 5      # placements changed the counts
    assert_code_at_is_codes(ssn)
    ssn.close()


@pytest.mark.parametrize("selected", [False, True], ids=["every-node", "node-selector"])
@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_marked_masks_are_the_rules_answers(pure, selected, monkeypatch):
    """The classes' masks as the rules' marks keep them (a zone's verdict written without asking
    where the spread is the class's only filter, ClassPlacement.mark_as; the rules asked about
    the nodes marked otherwise) are the rules' answers asked afresh, after every placement; with
    a node selector (the static predicates failing some nodes) a failing zone's verdict is
    written as it is, a passing one asked."""
    nodes = {f"n{i}": {ZONE: f"z{i % 4}", **({"disk": "ssd"} if i < 6 else {})} for i in range(8)}
    nodes["bare"] = {}
    chosen = {"nodeSelector": {"disk": "ssd"}} if selected else {}
    pods = [*(pod_doc(f"s-{i}", {"app": "s"}, spread=spread("s"), **chosen) for i in range(6)),
            *(pod_doc(f"t-{i}", {"app": "t"}, spread=spread("t"), affinity=anti(term({"app": "t"})))
              for i in range(4)),
            pod_doc("s-running", {"app": "s"}, node_name="n1")]
    ssn = open_session(PLAN, cluster(nodes, pods), Options(pure_python=pure))
    compared, written = [], []
    placed, update = Session.placed_by, ClassPlacement.update

    def checked(self, cp):
        placed(self, cp)
        for other in list(self.placements.values()):
            if other.filters and not other.lazy:
                other.update()
                everywhere = np.arange(self.snap.n_nodes)
                assert other.mask.tolist() == self.stateful_codes(other.cid, everywhere).tolist()
                compared.append(other.cid)

    def updated(self):
        written.append((self.dirty_code, self.static_passes))
        return update(self)

    monkeypatch.setattr(Session, "placed_by", checked)
    monkeypatch.setattr(ClassPlacement, "update", updated)
    registry = actions()
    for name in PLAN.actions:
        registry[name](ssn)
    assert len(set(compared)) >= 2
    assert (MASK_FAIL, not selected) in written      # a failing zone written without asking
    ssn.close()


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_passing_nodes_hold_every_passing_node(pure, monkeypatch):
    """A filter's passing nodes (StatefulRule.passing_nodes, which Session.place_few scans
    alone) are distinct and hold every node where its codes pass, after every placement; the
    zone spread's replicas, one zone passing once the others are a pod ahead, are placed by
    that scan (and every zone's count within one of the others') once the shared tree's search
    goes past its budget (none here, as thousands of nodes differing would), two zones passing
    then (z1 and z2 a pod ahead). A zone spread alone places by its request's DomainTree
    (test_spread_soft_scores.py); the scan is what it takes beside another filter, as here with
    the DomainTree turned off."""
    monkeypatch.setattr(session_module, "SHARED_BUDGET", 0)
    monkeypatch.setattr(TopologySpreadRule, "domain_verdicts", lambda self, cid: None)
    nodes = {f"n{i}": {ZONE: f"z{i % 4}"} for i in range(8)}
    nodes["bare"] = {}
    pods = [*(pod_doc(f"s-{i}", {"app": "s"}, spread=spread("s")) for i in range(6)),
            pod_doc("s-running", {"app": "s"}, node_name="n1"), pod_doc("s-running-2", {"app": "s"}, node_name="n2")]
    ssn = open_session(PLAN, cluster(nodes, pods), Options(pure_python=pure))
    asked, scanned = [], []
    placed, few = Session.placed_by, Session.place_few

    def checked(self, cp):
        placed(self, cp)
        for rule in self.stateful_filters:
            for cid in self.placements:
                if not rule.filters(cid):
                    continue
                found = rule.passing_nodes(cid, self.snap.n_nodes)
                if found is None:
                    continue
                assert len(found) == len(set(found.tolist()))
                passing = np.flatnonzero(rule.codes(cid, None) & MASK_PASS).tolist()
                assert set(passing) <= set(found.tolist()), (rule.name, cid)
                asked.append(cid)

    def counted(self, cp, tree, mask):
        got = few(self, cp, tree, mask)
        scanned.append(got is not False)
        return got

    monkeypatch.setattr(Session, "placed_by", checked)
    monkeypatch.setattr(Session, "place_few", counted)
    registry = actions()
    for name in PLAN.actions:
        registry[name](ssn)
    assert asked and True in scanned
    snap = ssn.snap
    zones = [nodes[snap.node_names[int(ssn.task_node[t])]][ZONE] for t in range(len(snap.task_keys))]
    zones += ["z1", "z2"]          # the running ones'
    assert sorted(zones.count(z) for z in ("z0", "z1", "z2", "z3")) == [2, 2, 2, 2]
    ssn.close()


# The spread filter off, the rule scoring still (nodeorder), binpack alone choosing among nodes.
SPREAD_SCORED_ONLY = policy(STANDARD_TIERS.replace("plugin predicates", "plugin predicates {\n pod_topology_spread = false\n }")
                            .replace("plugin nodeorder", "plugin nodeorder {\n leastrequested = 0\n balancedresource = 0\n }"))


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_a_zone_verdict_is_written_only_where_the_spread_filters(pure):
    """With the spread filter off (predicates' pod_topology_spread = false, nodeorder still
    scoring it) a class's one filter is the anti-affinity (to another app's pods: its own
    placements mark nothing for it): a zone flipping under its hard spread constraint is not
    written into its mask (ClassPlacement.mark_as), and binpack stacks the replicas on one
    node as if the constraint were not there."""
    nodes = {f"n{i}": {ZONE: f"z{i % 2}"} for i in range(6)}
    pods = [pod_doc("x-running", {"app": "x"}, node_name="n5"),
            *(pod_doc(f"w-{i}", {"app": "w"}, spread=spread("w"), affinity=anti(term({"app": "x"})))
              for i in range(5))]
    ssn = open_session(SPREAD_SCORED_ONLY, cluster(nodes, pods), Options(pure_python=pure))
    registry = actions()
    for name in SPREAD_SCORED_ONLY.actions:
        registry[name](ssn)
    snap = ssn.snap
    rows = {int(ssn.task_node[t]) for t, key in enumerate(snap.task_keys) if "/w-" in key}
    assert len(rows) == 1 and -1 not in rows
    checked = 0
    for cp in ssn.placements.values():
        if cp.filters and not cp.lazy:
            assert [rule.name for rule in cp.filters] == ["podaffinity"]
            cp.update()
            everywhere = np.arange(snap.n_nodes)
            assert cp.mask.tolist() == ssn.stateful_codes(cp.cid, everywhere).tolist()
            checked += 1
    assert checked
    ssn.close()


@pytest.mark.parametrize("carried", [(), ("anti",), ("spread",), ("ports",), ("anti", "spread", "ports")])
def test_a_rule_is_opened_only_where_some_pod_carries_its_kind(carried):
    """Snapshot.rule_kinds: the predicates and nodeorder plugins open an inter-pod rule only
    where some pod in play carries its kind (one no pod carries would be asked about every class
    for nothing); a settled pod's terms count as much as a pending one's."""
    nodes = {f"n{i}": {ZONE: f"z{i % 2}"} for i in range(4)}
    rules = {"anti": {"affinity": anti(term({"app": "a"}))}, "spread": {"spread": spread("a")},
             "ports": {"ports": [{"containerPort": 80, "hostPort": 8080}]}}
    pods = [pod_doc("plain", {"app": "a"}), pod_doc("other", {"app": "b"})]
    for i, kind in enumerate(carried):
        # Every other kind on a settled pod: its terms are in play as much as a waiting pod's.
        pods.append(pod_doc(f"p{i}", {"app": "a"}, node_name="n0" if i % 2 else None, **rules[kind]))
    ssn = open_session(PLAN, cluster(nodes, pods), Options())
    opened = {rule.name for rule in (*ssn.stateful_filters, *ssn.stateful_scorers)}
    kinds = {"anti": "podaffinity", "spread": "podtopologyspread", "ports": "nodeports"}
    assert opened == {kinds[k] for k in carried}
    assert ssn.snap.rule_kinds() == frozenset(kinds[k] for k in carried)
    ssn.close()
