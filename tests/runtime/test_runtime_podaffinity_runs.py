"""A gang's run under required pod anti-affinity placed in one call where the rule allows it
(PodAffinityRule.unchanged_by_own, excludes_own_node): the same decisions as pod by pod, and
the predicates only where they hold. Hostname anti-affinity among a gang's own pods (one member
per node, the usual training-gang rule) excludes each member's node for the rest; a zone term
does not (a placement fails a whole zone); anti-affinity to other pods is left unchanged by the
gang's own placements."""

from __future__ import annotations

import pytest

from runtime.cluster.objects import load_objects
from runtime.engine.cycle import Options, open_session, run_cycle
from runtime.engine.rules.podaffinity import PodAffinityRule
from runtime.engine.session import Session
from runtime_helpers import STANDARD_TIERS, node, placements, policy
from runtime.cluster.model import ClusterState
from test_runtime_placement_rules import HOST, ZONE, anti, pod_doc, term

PLAN = policy(STANDARD_TIERS)


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def gang(name: str, size: int, affinity: dict, cpu: str = "100m") -> list[dict]:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "ns"}, "spec": {"minMember": size}, "status": {"phase": "Inqueue"}}
    return [group, *(pod_doc(f"{name}-{i}", {"job": name}, group=name, cpu=cpu, affinity=affinity)
                     for i in range(size))]


def state_of(nodes: dict[str, dict], docs: list[dict], hostname: bool = True) -> ClusterState:
    state = ClusterState()
    for name, labels in nodes.items():
        node(state, name, cpu=4000, labels={**({HOST: name} if hostname else {}), **labels})
    return load_objects((("test", d) for d in docs), state=state)


def flags(state: ClusterState) -> dict[str, tuple[bool, bool]]:
    """Per pending pod's class: (unchanged_by_own, excludes_own_node) of the rule."""
    ssn = open_session(PLAN, state, Options())
    rule = ssn.rule_state("podaffinity", lambda: None)
    snap = ssn.snap
    out = {snap.task_keys[c.head]: (rule.unchanged_by_own(c.index), rule.excludes_own_node(c.index))
           for c in snap.classes if c.head >= 0 and snap.pods[c.head].rules}
    ssn.close()
    return out


def decide(state: ClusterState, pure: bool, monkeypatch, one_by_one: bool) -> tuple[dict, int]:
    """(placements, calls placing runs in one call) of a cycle, with the rule's predicates as
    they are or turned off (every member placed one at a time)."""
    calls = []
    excluding = Session.place_excluding

    def counted(self, *args):
        calls.append(1)
        return excluding(self, *args)
    with monkeypatch.context() as m:
        m.setattr(Session, "place_excluding", counted)
        if one_by_one:
            m.setattr(PodAffinityRule, "unchanged_by_own", lambda self, cid: False)
            m.setattr(PodAffinityRule, "excludes_own_node", lambda self, cid: False)
        return placements(run_cycle(PLAN, state, Options(pure_python=pure))), len(calls)


def test_hostname_anti_affinity_among_a_gangs_own_pods_is_placed_in_one_call(pure, monkeypatch):
    nodes = {f"n{i}": {} for i in range(6)}
    state = state_of(nodes, gang("g", 4, anti(term({"job": "g"}))))
    assert set(flags(state).values()) == {(False, True)}
    placed, calls = decide(state, pure, monkeypatch, one_by_one=False)
    assert calls >= 1 and len(placed) == 4 and len(set(placed.values())) == 4
    assert (placed, 0) == decide(state, pure, monkeypatch, one_by_one=True)


def test_a_gang_too_big_for_the_nodes_waits_either_way(pure, monkeypatch):
    state = state_of({f"n{i}": {} for i in range(3)}, gang("g", 4, anti(term({"job": "g"}))))
    assert decide(state, pure, monkeypatch, one_by_one=False)[0] == {}
    assert decide(state, pure, monkeypatch, one_by_one=True)[0] == {}


def test_zone_anti_affinity_is_placed_pod_by_pod(pure, monkeypatch):
    nodes = {f"n{i}": {ZONE: f"z{i % 3}"} for i in range(6)}
    state = state_of(nodes, gang("g", 3, anti(term({"job": "g"}, ZONE))))
    assert set(flags(state).values()) == {(False, False)}
    placed, calls = decide(state, pure, monkeypatch, one_by_one=False)
    assert calls == 0 and len({state.nodes[n].labels[ZONE] for n in placed.values()}) == 3


def test_nodes_without_the_hostname_label_keep_the_run_pod_by_pod(pure, monkeypatch):
    # A pod counts nowhere on a node lacking the term's key: its node is not excluded.
    state = state_of({f"n{i}": {} for i in range(4)}, gang("g", 3, anti(term({"job": "g"}))), hostname=False)
    assert set(flags(state).values()) == {(False, False)}
    placed, calls = decide(state, pure, monkeypatch, one_by_one=False)
    assert calls == 0
    assert placed == decide(state, pure, monkeypatch, one_by_one=True)[0]


def test_anti_affinity_to_other_pods_is_unchanged_by_the_gangs_own(pure, monkeypatch):
    docs = [pod_doc("db", {"app": "db"}, node_name="n0"), *gang("g", 3, anti(term({"app": "db"})))]
    state = state_of({f"n{i}": {} for i in range(3)}, docs)
    assert set(flags(state).values()) == {(True, False)}
    placed, _ = decide(state, pure, monkeypatch, one_by_one=False)
    assert len(placed) == 3 and "n0" not in placed.values()
    assert placed == decide(state, pure, monkeypatch, one_by_one=True)[0]
