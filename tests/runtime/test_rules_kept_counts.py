"""The inter-pod rules' counts of the placed pods kept across cycles (runtime.engine.rules.pods.
KeptCounts, in Snapshot.rule_tables beside the snapshot cache): PodAffinityRule's per group of
terms and per carried term, TopologySpreadRule's per selection, NodePortsRule's host ports. A cycle brings them up to date
from the placed groups that changed (a pod placed, removed or changed in place) and makes them
anew where the nodes, the terms or selections, or the label keys changed. Each test runs a cycle
that keeps the counts, changes one input, and asserts the next cycle with the same cache places
as a cycle with a fresh cache does and as the change asks; each fails without its update or
invalidation (the stale counts miss or keep a pod, or count it in another domain or node). Other
terms or selections, and the spread's other label keys, are test_rules_kept_matches' cases: they
fail without the counts' checks too."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, HostPort, PodAffinityTerm, PodRules, pod_changed
from runtime.cluster.selectors import LabelSelector
from runtime.engine.rules import podaffinity, ports, spread
from runtime.engine.cycle import Options, open_session
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import node, pod
from test_rules_kept_matches import HOST, PLAN, away_from, placed, spread_on, spread_over_hosts, two_nodes

ZONE = "zone"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def away_by_zone(**labels: str) -> PodRules:
    """Required zone anti-affinity to pods with these labels."""
    return PodRules(anti_affinity=(PodAffinityTerm(ZONE, LabelSelector(tuple(labels.items())), frozenset({"ns"})),))


def three_zoned() -> ClusterState:
    state = ClusterState()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "b")):
        node(state, name, cpu=8000, labels={HOST: name, ZONE: zone})
    return state


# --- PodAffinityRule ------------------------------------------------------------------------

def test_affinity_counts_are_kept_while_nothing_changes(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    kept = cache.rule_tables[podaffinity.KEPT_COUNTS]
    counted = dict(kept.counted)
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[podaffinity.KEPT_COUNTS] is kept and kept.counted == counted


def test_a_pod_placed_since_is_counted(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    pod(state, "y", labels={"app": "a"}, node_name="n2")
    assert placed(state, cache, pure) == {}


def test_a_pod_removed_since_is_no_longer_counted(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "fill", cpu=8000, node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {}
    state.remove_pod("ns/x")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_a_pod_relabelled_in_place_is_counted_as_it_is(pure):
    state = two_nodes()
    x = pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "fill", cpu=8000, node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {}
    x.labels = {"app": "z"}
    pod_changed(x)
    assert placed(state, cache, pure) == {"p": "n1"}


def test_a_carried_term_removed_since_is_no_longer_counted(pure):
    # The placed pod repels p (its own anti-affinity term matches p): its hold is taken away.
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
    pod(state, "fill", cpu=8000, node_name="n2")
    pod(state, "keep", labels={"app": "k"}, node_name="n2", rules=away_from(app="p"))
    pod(state, "p", labels={"app": "p"})
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {}
    state.remove_pod("ns/x")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_other_nodes_make_the_affinity_counts_anew(pure):
    state = three_zoned()
    pod(state, "x", labels={"app": "a"}, node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_by_zone(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n1"}
    # n1 joins zone b: one domain now, numbered 0, which x's node was not; the kept counts hold
    # x in the old numbering.
    node(state, "n1", cpu=8000, labels={HOST: "n1", ZONE: "b"})
    assert placed(state, cache, pure) == {}


def test_other_label_keys_make_the_affinity_counts_anew(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a", "tier": "b"}, node_name="n1")
    pod(state, "s", labels={}, rules=spread_on("tier"), node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # Other label keys, ("aaa", "app"): z's profile holds the values x's did.
    state.remove_pod("ns/x")
    state.remove_pod("ns/s")
    pod(state, "z", labels={"aaa": "a", "app": "b"}, node_name="n1")
    pod(state, "s2", labels={}, rules=spread_on("aaa"), node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_terms_selecting_namespaces_by_labels_keep_no_counts(pure):
    state = two_nodes()
    state.namespaces["team"] = {"kind": "blue"}
    pod(state, "x", labels={"app": "a"}, node_name="n1", ns="team")
    term = PodAffinityTerm(HOST, LabelSelector((("app", "a"),)), frozenset(), LabelSelector((("kind", "blue"),)))
    pod(state, "p", labels={"app": "p"}, rules=PodRules(anti_affinity=(term,)))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables.get(podaffinity.KEPT_COUNTS) is None


def holds_of_session(state: ClusterState, cache: SnapshotCache, pure: bool) -> list[tuple]:
    """The holds (term, kind, weight) a session's PodAffinityRule made, in order, and per pod
    in play with rules its holds' keys."""
    ssn = open_session(PLAN, state, Options(pure_python=pure), cache)
    rule = ssn.rule_state("podaffinity", lambda: None)
    keys = [(h.term, h.kind, h.weight) for h in rule._hold_list]
    return keys + [(p.key, [(h.term, h.kind) for h in rule._holds_of(p.rules)]) for p in ssn.snap.rule_pods]


def test_the_hold_plan_is_kept_while_the_rules_objects_stay(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
    pod(state, "s", labels={"app": "s"}, node_name="n2", rules=spread_on("app"))
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    first = holds_of_session(state, cache, pure)
    plan = cache.rule_tables[podaffinity.KEPT_HOLDS]
    assert holds_of_session(state, cache, pure) == first == holds_of_session(state, SnapshotCache(), pure)
    assert cache.rule_tables[podaffinity.KEPT_HOLDS] is plan


def test_other_rules_objects_make_the_hold_plan_anew(pure):
    state = two_nodes()
    x = pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    holds_of_session(state, cache, pure)
    plan = cache.rule_tables[podaffinity.KEPT_HOLDS]
    # x now repels app=q: a rules object the plan does not know, its term a hold it lacks.
    x.rules = away_from(app="q")
    pod_changed(x)
    assert holds_of_session(state, cache, pure) == holds_of_session(state, SnapshotCache(), pure)
    assert cache.rule_tables[podaffinity.KEPT_HOLDS] is not plan
    assert ("ns/x", [(away_from(app="q").anti_affinity[0], podaffinity.REPELS)]) in holds_of_session(state, cache, pure)


# --- TopologySpreadRule ---------------------------------------------------------------------

def test_spread_counts_are_kept_while_nothing_changes(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    kept = cache.rule_tables[spread.KEPT_COUNTS]
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[spread.KEPT_COUNTS] is kept and kept.tables[0].per_node == {0: 1}


def test_a_pod_placed_since_is_counted_by_spread(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    pod(state, "y", labels={"app": "a"}, node_name="n2")
    pod(state, "y2", labels={"app": "a"}, node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_a_pod_removed_since_is_no_longer_counted_by_spread(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "x2", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    state.remove_pod("ns/x")
    state.remove_pod("ns/x2")
    pod(state, "y", labels={"app": "a"}, node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_pods_relabelled_in_place_are_counted_by_spread_as_they_are(pure):
    state = two_nodes()
    x = pod(state, "x", labels={"app": "a"}, node_name="n1")
    x2 = pod(state, "x2", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    for one in (x, x2):
        one.labels = {"app": "z"}
        pod_changed(one)
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_other_nodes_make_the_spread_counts_anew(pure):
    state = ClusterState()
    for name in ("n1", "n2", "n3"):
        node(state, name, cpu=8000, labels={HOST: name})
    pod(state, "x", labels={"app": "a"}, node_name="n3")
    pod(state, "fill", cpu=8000, node_name="n1")
    pod(state, "p", labels={"app": "a"}, rules=spread_over_hosts("app", "a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # n1 leaves: n3 is row 1 now. (Every placed group is made anew when the node rows move, so
    # the update alone takes x off row 2 as well: the counts are made anew all the same.)
    state.remove_node("n1")
    state.remove_pod("ns/fill")
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {}


# --- NodePortsRule --------------------------------------------------------------------------

PORT = PodRules(host_ports=(HostPort(8080),))


def test_port_counts_are_kept_while_nothing_changes(pure):
    state = two_nodes()
    pod(state, "x", node_name="n1", rules=PORT)
    pod(state, "p", rules=PORT)
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    kept = cache.rule_tables[ports.KEPT_COUNTS]
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[ports.KEPT_COUNTS] is kept and kept.tables == {("TCP", 8080): {(0, "0.0.0.0", False): 1}}


def test_a_port_taken_since_is_counted(pure):
    state = two_nodes()
    pod(state, "x", node_name="n1", rules=PORT)
    pod(state, "p", rules=PORT)
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    pod(state, "y", node_name="n2", rules=PORT)
    assert placed(state, cache, pure) == {}


def test_a_port_freed_since_is_no_longer_counted(pure):
    state = two_nodes()
    pod(state, "x", node_name="n1", rules=PORT)
    pod(state, "y", node_name="n2", rules=PORT)
    pod(state, "p", rules=PORT)
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {}
    state.remove_pod("ns/y")
    assert placed(state, cache, pure) == {"p": "n2"}


def test_ports_after_other_nodes(pure):
    state = ClusterState()
    for name in ("n1", "n2", "n3"):
        node(state, name, cpu=8000, labels={HOST: name})
    pod(state, "x", node_name="n3", rules=PORT)
    pod(state, "fill", cpu=8000, node_name="n2")
    pod(state, "p", rules=PORT)
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n1"}
    # n1 leaves: n3 is row 1 now, n2 row 0 (full).
    state.remove_node("n1")
    assert placed(state, cache, pure) == {}


def test_counts_half_brought_up_to_date_are_not_taken_again(pure, monkeypatch):
    # A cycle that fails while bringing the kept counts up to date leaves them for a new count.
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    pod(state, "y", labels={"app": "a"}, node_name="n2")

    def failing(self, alike, step, kept=None):
        raise RuntimeError("stopped")
    with monkeypatch.context() as patched:
        patched.setattr(podaffinity.PodAffinityRule, "_tally", failing)
        with pytest.raises(RuntimeError):
            placed(state, cache, pure)
    assert cache.rule_tables[podaffinity.KEPT_COUNTS].made_from is None
    assert placed(state, cache, pure) == {}
