"""The inter-pod rules' profile matches kept across cycles (runtime.engine.rules.pods.KeptMatches,
in Snapshot.rule_tables beside the snapshot cache): which groups of terms (PodAffinityRule) or
selections (TopologySpreadRule) a pod profile matches is kept while what they were made from and
the label keys stay. Each test runs a cycle that fills the table, changes what it was made from,
and asserts the next cycle with the same cache places as a cycle with a fresh cache does; each
fails without its invalidation (the stale matches count a pod under a term or selector it does
not match)."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState, PodAffinityTerm, PodRules, SpreadConstraint
from runtime.cluster.selectors import LabelSelector, MatchExpression
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.rules import podaffinity, spread
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, node, pod, policy

PLAN = policy(STANDARD_TIERS)
HOST = "kubernetes.io/hostname"


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


def away_from(**labels: str) -> PodRules:
    """Required hostname anti-affinity to pods with these labels."""
    return PodRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector(tuple(labels.items())), frozenset({"ns"})),))


def spread_on(key: str) -> PodRules:
    """A spread constraint whose selector reads `key` (it adds the key to the profiles' keys)."""
    return PodRules(spread=(SpreadConstraint(5, HOST, "ScheduleAnyway", LabelSelector(((key, "x"),))),))


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


@pytest.mark.parametrize("carried", [False, True], ids=["own terms", "carried terms"])
def test_the_table_is_kept_while_the_terms_stay(pure, carried):
    """The pending pod's own terms' matches (KEPT_MATCHES), or those of the terms a placed pod
    carries, kept with the hold plan (KEPT_HOLDS)."""
    state = two_nodes()
    if carried:     # x repels app=p
        pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
        pod(state, "p", labels={"app": "p"})
    else:           # p avoids app=a
        pod(state, "x", labels={"app": "a"}, node_name="n1")
        pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    table, matches = (podaffinity.KEPT_HOLDS, "matches") if carried else (podaffinity.KEPT_MATCHES, "by_profile")
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    kept = cache.rule_tables[table]
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[table] is kept and getattr(kept, matches)


@pytest.mark.parametrize("carried", [False, True], ids=["own terms", "carried terms"])
def test_a_table_outgrowing_the_pods_is_emptied(pure, carried):
    """Profiles of pods long gone (here: made up) do not pile up while the rules stay."""
    state = two_nodes()
    if carried:
        pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
        pod(state, "p", labels={"app": "p"})
    else:
        pod(state, "x", labels={"app": "a"}, node_name="n1")
        pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    table = cache.rule_tables[podaffinity.KEPT_HOLDS].matches if carried else \
        cache.rule_tables[podaffinity.KEPT_MATCHES].by_profile
    gone = [("ns", (f"gone-{i}",)) for i in range(2000)]
    table.update(dict.fromkeys(gone, ()))
    assert placed(state, cache, pure) == {"p": "n2"}
    assert not any(key in table for key in gone) and table      # emptied, then the live profiles again


def test_other_terms_empty_the_table(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1")
    pod(state, "y", labels={"app": "b"}, node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The pending pod now avoids app=b: the first group's place holds other terms, and x's kept
    # match (the first group) would count x under them.
    state.remove_pod("ns/p")
    pod(state, "q", labels={"app": "p"}, rules=away_from(app="b"))
    assert placed(state, cache, pure) == {"q": "n1"}


def test_other_label_keys_empty_the_table(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a", "tier": "b"}, node_name="n1")
    pod(state, "s", labels={}, rules=spread_on("tier"), node_name="n2")
    pod(state, "p", labels={"app": "p"}, rules=away_from(app="a"))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The same terms, other label keys: ("aaa", "app") instead of ("app", "tier"). z's profile
    # has the values x's had (("a", "b")), and x's kept match would count z under app=a.
    state.remove_pod("ns/x")
    state.remove_pod("ns/s")
    pod(state, "z", labels={"aaa": "a", "app": "b"}, node_name="n1")
    pod(state, "s2", labels={}, rules=spread_on("aaa"), node_name="n1")
    state.remove_node("n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_terms_selecting_namespaces_by_labels_are_not_kept(pure):
    state = two_nodes()
    state.namespaces["team"] = {"kind": "blue"}
    pod(state, "x", labels={"app": "a"}, node_name="n1", ns="team")
    term = PodAffinityTerm(HOST, LabelSelector((("app", "a"),)), frozenset(),
                           LabelSelector((("kind", "blue"),)))
    pod(state, "p", labels={"app": "p"}, rules=PodRules(anti_affinity=(term,)))
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The namespace's labels change, no pod does: x no longer matches the term.
    state.namespaces["team"] = {"kind": "red"}
    state.remove_node("n2")
    assert placed(state, cache, pure) == {"p": "n1"}


def test_a_pod_of_other_labels_is_matched_anew(pure):
    state = two_nodes()
    pod(state, "x", labels={"app": "a"}, node_name="n1", rules=away_from(app="p"))
    pod(state, "p", labels={"app": "p"})
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The same rules objects (the plan is kept), a pending pod of another profile: p's kept
    # match (x's term) would keep q off n1, and n2 is full.
    state.remove_pod("ns/p")
    pod(state, "q", labels={"app": "q"})
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {"q": "n1"}


def test_a_new_profile_a_kept_plans_term_matches_is_repelled(pure):
    state = two_nodes()
    term = PodAffinityTerm(HOST, LabelSelector((), (MatchExpression("app", "In", ("p", "q")),)), frozenset({"ns"}))
    pod(state, "x", labels={"app": "a"}, node_name="n1", rules=PodRules(anti_affinity=(term,)))
    pod(state, "p", labels={"app": "p"})
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    # The plan is kept (x's rules), q's profile is new: its match is found from the terms.
    state.remove_pod("ns/p")
    pod(state, "q", labels={"app": "q"})
    assert placed(state, cache, pure) == {"q": "n2"}


def test_carried_terms_selecting_namespaces_by_labels_are_not_kept(pure):
    state = two_nodes()
    state.namespaces["ns"] = {"kind": "blue"}
    term = PodAffinityTerm(HOST, LabelSelector((("app", "p"),)), frozenset(), LabelSelector((("kind", "blue"),)))
    pod(state, "x", labels={"app": "a"}, node_name="n1", rules=PodRules(anti_affinity=(term,)))
    pod(state, "p", labels={"app": "p"})
    cache = SnapshotCache()
    assert placed(state, cache, pure) == {"p": "n2"}
    assert cache.rule_tables[podaffinity.KEPT_HOLDS].matches is None
    # The namespace's labels change, no pod does: x's term no longer selects p's namespace.
    state.namespaces["ns"] = {"kind": "red"}
    pod(state, "fill", cpu=8000, node_name="n2")
    assert placed(state, cache, pure) == {"p": "n1"}


# --- TopologySpreadRule ---------------------------------------------------------------------

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


def test_other_label_keys_empty_the_spread_table(pure):
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
