"""PodTopologySpread's state kept between placements (runtime.engine.rules.spread): ScheduleAnyway
scores (a placement re-scores only its domain's nodes while the normalization range stays) and
DoNotSchedule codes per domain (set as a domain's verdict flips), and classes scored per zone
placing by their request's DomainTree. Cycles decide exactly as when every placement re-scores
the class on every node (by a tree of its own), and as when every filter answer is made afresh
from the counts, on random clusters (zones of uneven sizes, nodes lacking the key,
constraints on zone and hostname, minDomains, pods already running, preemption), both kernels."""

from __future__ import annotations

import random

import pytest

import numpy as np

from runtime.cluster.model import ClusterState, PodRules, SpreadConstraint
from runtime.cluster.selectors import LabelSelector
from runtime.engine.rules import spread as spread_module
from runtime.engine.extension import MASK_FAIL, MASK_PASS
from runtime.engine.session import Session
from runtime_helpers import STANDARD_TIERS, cycle, node, placements, pod, policy

PLAN = policy(STANDARD_TIERS)
EVICTING = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
SCORES_ONLY = policy("tier {\n plugin predicates\n plugin nodeorder {\n leastrequested = 0\n balancedresource = 0\n }\n}")
HOST = "kubernetes.io/hostname"


def random_cluster(seed: int) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    names = [f"n{i}" for i in range(rng.randint(6, 24))]
    for name in names:
        labels = {HOST: name}
        if rng.random() < 0.9:
            labels["zone"] = f"z{rng.randint(0, 3)}"
        node(state, name, cpu=rng.choice([4000, 8000, 16000]), labels=labels)
    for g in range(rng.randint(2, 6)):
        selector = LabelSelector((("app", f"a{g}"),))
        constraints = [SpreadConstraint(rng.randint(1, 3), rng.choice(["zone", HOST]), "ScheduleAnyway", selector)]
        if rng.random() < 0.3:
            constraints.append(SpreadConstraint(rng.randint(1, 2), "zone", "ScheduleAnyway", selector))
        if rng.random() < 0.2:
            constraints.append(SpreadConstraint(rng.randint(2, 3), "zone", "DoNotSchedule", selector))
        rules = PodRules(spread=tuple(constraints))
        for r in range(rng.randint(2, 9)):
            running = rng.random() < 0.25
            pod(state, f"g{g}-{r}", cpu=rng.choice([250, 500, 1000]), labels={"app": f"a{g}"}, rules=rules,
                node_name=rng.choice(names) if running else None, creation=float(g))
    return state


def every_node_rescored(self, s, d):
    """The behaviour before scores were kept: a soft count change re-scores the class everywhere."""
    self.ssn.mark_dirty(s.cid, None)


def no_domain_scores(self, cid):
    """The behaviour before classes placed by a DomainTree: scored on every node, a tree of their own."""
    return None


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("plan", [PLAN, SCORES_ONLY], ids=["standard", "scores-only"])
@pytest.mark.parametrize("seed", range(25))
def test_kept_scores_decide_as_scores_made_afresh(seed, plan, pure, monkeypatch):
    kept = cycle(plan, random_cluster(seed), pure)
    monkeypatch.setattr(spread_module.TopologySpreadRule, "_soft_moved", every_node_rescored)
    monkeypatch.setattr(spread_module.TopologySpreadRule, "domain_scores", no_domain_scores)
    afresh = cycle(plan, random_cluster(seed), pure)
    assert placements(kept) == placements(afresh)
    assert kept.to_json() == afresh.to_json()


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_classes_scored_per_zone_place_by_domain_tree(pure, monkeypatch):
    """Classes with one soft zone constraint and no stateful filter place by their request's
    DomainTree (Session.place_by_domain), deciding as by trees of their own over every node's
    scores; their scores per domain, read through the nodes' zones, are the per-node floats."""
    used = []
    by_domain = Session.place_by_domain
    kept_scores = spread_module.TopologySpreadRule.domain_scores

    def counted(self, cp):
        used.append(cp.cid)
        return by_domain(self, cp)

    def checked(self, cid):
        found = kept_scores(self, cid)
        if found is not None:
            domains, scores = found
            np.testing.assert_array_equal(scores[domains.of], per_node_scores(self, cid, None))
        return found

    with monkeypatch.context() as mp:
        mp.setattr(Session, "place_by_domain", counted)
        mp.setattr(spread_module.TopologySpreadRule, "domain_scores", checked)
        kept = [cycle(plan, random_cluster(seed), pure) for seed in range(12) for plan in (PLAN, SCORES_ONLY)]
    assert used
    monkeypatch.setattr(spread_module.TopologySpreadRule, "domain_scores", no_domain_scores)
    own = [cycle(plan, random_cluster(seed), pure) for seed in range(12) for plan in (PLAN, SCORES_ONLY)]
    assert [c.to_json() for c in kept] == [c.to_json() for c in own]


def hard_cluster(seed: int) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    names = [f"n{i}" for i in range(rng.randint(4, 16))]
    for name in names:
        labels = {HOST: name}
        if rng.random() < 0.85:
            labels["zone"] = f"z{rng.randint(0, 3)}"
        node(state, name, cpu=rng.choice([2000, 4000]), labels=labels)
    for g in range(rng.randint(2, 5)):
        selector = LabelSelector((("app", f"a{g}"),))
        constraints = [SpreadConstraint(rng.randint(1, 2), rng.choice(["zone", HOST]), "DoNotSchedule", selector,
                                        min_domains=rng.choice([None, None, 2, 6]))]
        if rng.random() < 0.3:
            constraints.append(SpreadConstraint(rng.randint(1, 3), "zone", "DoNotSchedule", selector))
        rules = PodRules(spread=tuple(constraints))
        priority = rng.choice([None, 10, 1000])
        for r in range(rng.randint(2, 8)):
            running = rng.random() < 0.3
            pod(state, f"g{g}-{r}", cpu=rng.choice([500, 1000, 1500]), labels={"app": f"a{g}"}, rules=rules,
                node_name=rng.choice(names) if running else None, creation=float(g), priority=priority)
    return state


def codes_afresh(self, cid, nodes):
    """The filter's answer made from the counts on every call (no codes kept)."""
    missing, skewed = self._verdicts(cid, nodes)
    out = np.full(len(missing), MASK_PASS, dtype=np.uint8)
    out[missing | skewed] = MASK_FAIL
    return out


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("plan", [PLAN, EVICTING], ids=["standard", "evicting"])
@pytest.mark.parametrize("seed", range(25))
def test_kept_codes_decide_as_codes_made_afresh(seed, plan, pure, monkeypatch):
    kept = cycle(plan, hard_cluster(seed), pure)
    monkeypatch.setattr(spread_module.TopologySpreadRule, "codes", codes_afresh)
    monkeypatch.setattr(spread_module.TopologySpreadRule, "domain_verdicts", no_domain_verdicts)
    afresh = cycle(plan, hard_cluster(seed), pure)
    assert kept.to_json() == afresh.to_json()


def no_domain_verdicts(self, cid):
    """The behaviour before classes with one hard zone constraint placed by a DomainTree: codes on
    every node, a tree of their own (or the shared one)."""
    return None


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_classes_filtered_per_zone_place_by_domain_tree(pure, monkeypatch):
    """Classes whose one filter is a hard constraint over few domains place by their request's
    DomainTree, failing domains left out (Session.place_by_domain), deciding as by codes on
    every node; their verdicts per domain, read through the nodes' domains, are the codes made
    afresh from the counts."""
    used = []
    by_domain = Session.place_by_domain
    kept_verdicts = spread_module.TopologySpreadRule.domain_verdicts

    def counted(self, cp):
        used.append(not cp.scorers)
        return by_domain(self, cp)

    def checked(self, cid):
        found = kept_verdicts(self, cid)
        if found is not None:
            domains, scores = found
            assert set(np.unique(scores).tolist()) <= {0.0, float("-inf")}
            codes = np.where(scores[domains.of] == 0.0, MASK_PASS, MASK_FAIL)
            np.testing.assert_array_equal(codes, codes_afresh(self, cid, None))
        return found

    plans = (PLAN, EVICTING)
    with monkeypatch.context() as mp:
        mp.setattr(Session, "place_by_domain", counted)
        mp.setattr(spread_module.TopologySpreadRule, "domain_verdicts", checked)
        kept = [cycle(plan, hard_cluster(seed), pure) for seed in range(25) for plan in plans]
    assert any(used)
    monkeypatch.setattr(spread_module.TopologySpreadRule, "domain_verdicts", no_domain_verdicts)
    own = [cycle(plan, hard_cluster(seed), pure) for seed in range(25) for plan in plans]
    assert [c.to_json() for c in kept] == [c.to_json() for c in own]


def per_node_scores(rule, cid, nodes):
    """A class's ScheduleAnyway scores made afresh on every node (the per-node path)."""
    raw, valid = rule._raw([s for s in rule._class(cid) if not s.constraint.hard], None)
    high, low = (float(raw[valid].max()), float(raw[valid].min())) if valid.any() else (0.0, 0.0)
    scores = rule._normalized(raw, valid, high, low)
    scores *= rule.weight
    return scores if nodes is None else scores[nodes]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("seed", range(25))
def test_scores_kept_per_domain_are_the_per_node_floats(seed, pure, monkeypatch):
    """A class with one soft constraint keeps its scores per domain (_DomainScores); every answer,
    to every node or to a domain's nodes after a placement, is bit for bit the per-node one."""
    kept_score = spread_module.TopologySpreadRule.score
    asked = []

    def checked(self, cid, nodes):
        out = kept_score(self, cid, nodes)
        np.testing.assert_array_equal(out, per_node_scores(self, cid, nodes))
        asked.append(isinstance(self._soft.get(cid), spread_module._DomainScores))
        return out

    monkeypatch.setattr(spread_module.TopologySpreadRule, "score", checked)
    # Scored on every node (not by a DomainTree: test_classes_scored_per_zone_place_by_domain_tree).
    monkeypatch.setattr(spread_module.TopologySpreadRule, "domain_scores", no_domain_scores)
    cycle(SCORES_ONLY, random_cluster(seed), pure)
    assert asked


def test_scores_kept_per_domain_are_asked():
    """The per-domain path is taken (a class with one soft constraint) in the random clusters."""
    seen = []
    kept_score = spread_module.TopologySpreadRule.score

    def spy(self, cid, nodes):
        out = kept_score(self, cid, nodes)
        seen.append(isinstance(self._soft.get(cid), spread_module._DomainScores))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spread_module.TopologySpreadRule, "score", spy)
        for seed in range(5):
            cycle(SCORES_ONLY, random_cluster(seed), False)
    assert any(seen) and not all(seen)
