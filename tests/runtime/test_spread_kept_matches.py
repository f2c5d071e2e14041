"""TopologySpreadRule's profile matches kept across cycles (runtime.engine.rules.spread._KeptMatches,
in Snapshot.rule_tables beside the snapshot cache): which selections a pod profile matches is kept
while the selections and the label keys stay. Each test runs a cycle that fills the table, changes
what it was made from, and asserts the next cycle with the same cache places as a cycle with a
fresh cache does; each fails without its invalidation (the stale matches count a pod under a
selector it does not match, and a node it holds fails the skew)."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodRules, SpreadConstraint
from runtime.cluster.selectors import LabelSelector
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.rules import spread
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, node, pod, policy

PLAN = policy(STANDARD_TIERS)
HOST = "kubernetes.io/hostname"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def spread_over_hosts(key: str, value: str, hard: bool = True) -> PodRules:
    """Spread over hostnames, maxSkew 1, of the pods with key=value."""
    return PodRules(spread=(SpreadConstraint(1, HOST, "DoNotSchedule" if hard else "ScheduleAnyway",
                                             LabelSelector(((key, value),))),))


def placed(state: ClusterState, cache: SnapshotCache, pure: bool) -> dict[str, str]:
    """pod -> node of a cycle with `cache`, checked against a fresh cache's."""
    def one(c: SnapshotCache) -> dict[str, str]:
        decisions = run_cycle(PLAN, state, Options(pure_python=pure), c)
        return {b.pod.split("/")[1]: b.node for b in decisions.bindings}
    kept = one(cache)
    assert kept == one(SnapshotCache())
    return kept


def two_nodes() -> ClusterState:
    state = ClusterState()
    for name in ("n1", "n2"):
        node(state, name, cpu=8000, labels={HOST: name})
    return state


def test_the_table_is_kept_while_the_selections_stay(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    kept = cache.rule_tables[spread.KEPT_MATCHES]
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[spread.KEPT_MATCHES] is kept and kept.by_profile


def test_other_selections_empty_the_table(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The pending pod now spreads app=b: the first selection's place holds another selector, and
    # x's kept match (the first selection) would count x under it, failing n1.
    state.remove_pod("ns/p")
    pod(state, "q", labels={"app": "b"}, rules=spread_over_hosts("app", "b"))
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {"q": "n1"}


def test_other_label_keys_empty_the_table(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a", "tier": "b"}, node_name="n1")
    pod(state, "s", labels={}, rules=spread_over_hosts("tier", "x", hard=False), node_name="n2")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The same selections, other label keys: ("aaa", "app") instead of ("app", "tier"). z's
    # profile has the values x's had (("a", "b")), and x's kept match would count z under app=a.
    state.remove_pod("ns/x")
    state.remove_pod("ns/s")
    pod(state, "z", labels={"aaa": "a", "app": "b"}, node_name="n1")
    pod(state, "s2", labels={}, rules=spread_over_hosts("aaa", "x", hard=False), node_name="n1")
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}
