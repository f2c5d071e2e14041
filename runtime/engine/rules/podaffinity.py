"""InterPodAffinity (kube-scheduler's plugin, which Volcano's predicates and nodeorder wrap).

Filter, for a pod P on node n (each node lacking a term's topology key as kube-scheduler has it):
- existing pods' required anti-affinity: n fails when a pod with a required anti-affinity term
  that matches P runs in n's domain of that term's key (symmetry);
- P's required affinity: n needs every term's key, and in each term's domain of n a pod that
  matches all of P's terms; where no pod anywhere matches them all and P matches them itself,
  any node with the keys passes (the first pod of a self-affine group);
- P's required anti-affinity: n fails when a pod matching a term runs in n's domain of it.
Score: per node, Σ weights of P's preferred terms times the pods matching them in the node's
domain (anti-affinity negative), plus existing pods' preferred terms that match P (their
weight) and existing pods' required affinity terms that match P (`hard_weight`, kube's
hardPodAffinityWeight), normalized to 0..100 over the nodes as kube-scheduler does.

Counts are kept per term and per topology domain: a pod matching a term (or a group of
terms) counts in its node's domain, live or leaving; a pod carrying a term counts as its
holder. A placement, undo or eviction changes one domain per key, and only the classes whose
terms it touches are marked, on that domain's nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass, field

import numpy as np

from runtime.cluster.model import Pod, PodAffinityTerm, PodRules
from runtime.engine.rules.pods import (
    ONE_NODE_CODES, CountingRule, KeptCounts, KeptMatches, PlacedGroup, Profile, SelectorIndex, bounded_profiles,
    count_changes, count_each, keep_counts, kept_counts, kept_matches, placed_groups, reading,
)
from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, MASK_RELEASING, Check
from runtime.engine.snapshot import Domains

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session

AFFINITY_MESSAGE = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MESSAGE = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MESSAGE = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_NODE_SCORE = 100.0
# Up to this many nodes, `codes` answers node by node (see there).
FEW_NODES = 8
DEFAULT_HARD_WEIGHT = 1

# What a pod carrying a term does to others: repels them (required anti-affinity), or scores
# them up or down (kube-scheduler's symmetric weights).
REPELS, ATTRACTS, PREFERS, AVOIDS = "repels", "attracts", "prefers", "avoids"
_NO_HOLDS: list = []      # the holds of a rules object without affinity terms (shared: never changed)


class _Counts:
    """Pods per domain of one topology key, those running and those leaving apart, kept sparse
    (domain -> pods): a term's key is often the hostname, the terms are one per rule group and
    count the few replicas of one template, so a node-long array each would cost memory (most
    of a large cluster's session) and its zeroing. Read per node through a dense array made
    for the read."""

    # Thousands a session (one per term's key and carried term): no instance dictionary each.
    __slots__ = ("domains", "of", "live", "gone", "live_total", "gone_total")

    def __init__(self, domains: Domains, of: list[int]):
        self.domains = domains
        self.of = of                      # domains.of_list
        self.live: dict[int, int] = {}
        self.gone: dict[int, int] = {}
        # Pods counted in any domain, live and leaving: a filter over counts that are all zero
        # is skipped without looking at the nodes.
        self.live_total = 0
        self.gone_total = 0

    def add(self, node: int, step: int, leaving: bool) -> int:
        """Returns the node's domain (-1: the node lacks the key, nothing counted)."""
        d = self.of[node]
        if d >= 0:
            if leaving:
                self.gone[d] = self.gone.get(d, 0) + step
                self.gone_total += step
            else:
                self.live[d] = self.live.get(d, 0) + step
                self.live_total += step
        return d

    def add_rows(self, nodes: np.ndarray, leaving: bool, step: int = 1) -> int:
        """`step` (1, or -1 to take them away) pods on each of `nodes` (rows may repeat);
        returns the pods counted (on nodes with the key), times step."""
        if not len(nodes):
            return 0
        d = self.domains.of[nodes]
        d = d[d >= 0].tolist()
        if d:
            count_each(self.gone if leaving else self.live, d, step)
            if leaving:
                self.gone_total += step * len(d)
            else:
                self.live_total += step * len(d)
        return step * len(d)

    def copy(self) -> _Counts:
        out = _Counts(self.domains, self.of)
        out.load(self)
        return out

    def load(self, other: _Counts) -> None:
        """Counts as `other` does (copies: a session's placements change its own)."""
        self.live, self.gone = dict(other.live), dict(other.gone)
        self.live_total, self.gone_total = other.live_total, other.gone_total

    def at_row(self, r: int) -> tuple[bool, int, int]:
        """`at` on the one node row r."""
        d = self.of[r]
        if d < 0:
            return False, 0, 0
        return True, self.live.get(d, 0), self.gone.get(d, 0)

    def _dense(self, counts: dict[int, int]) -> np.ndarray:
        """Per domain, and 0 in an extra last entry (read by nodes lacking the key, domain -1)."""
        out = np.zeros(self.domains.count + 1, dtype=np.int64)
        if counts:
            out[np.fromiter(counts, dtype=np.int64, count=len(counts))] = np.fromiter(
                counts.values(), dtype=np.int64, count=len(counts))
        return out

    def at(self, nodes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(has the key, live count, leaving count) on `nodes` (all when None)."""
        of = self.domains.of if nodes is None else self.domains.of[nodes]
        zero = np.zeros(len(of), dtype=np.int64)
        return (of >= 0, self._dense(self.live)[of] if self.live else zero,
                self._dense(self.gone)[of] if self.gone else zero)


@dataclass(eq=False, slots=True)
class _Group:
    """Pods matching every one of `terms`, counted per domain of each term's key."""

    terms: tuple[PodAffinityTerm, ...]
    counts: dict[str, _Counts]
    matched: int = 0                      # live pods matching, on nodes with the keys
    users: list[int] = field(default_factory=list)   # classes whose own terms these are
    # Classes whose required affinity these terms are and whose pods match them: their filter
    # reads `matched == 0` (the first pod of a self-affine group), on every node.
    first_pod_users: list[int] = field(default_factory=list)

    def matches(self, pod: Pod, namespace_labels) -> bool:
        return all(t.matches(pod.namespace, pod.labels, namespace_labels) for t in self.terms)


@dataclass(eq=False, slots=True)
class _Hold:
    """Pods carrying `term` (as `kind`, with `weight`), counted per domain of its key."""

    term: PodAffinityTerm
    kind: str
    weight: int
    counts: _Counts
    matched: list[int] = field(default_factory=list)  # classes the term matches


KEPT_MATCHES = "podaffinity-matches"      # its Snapshot.rule_tables key
KEPT_COUNTS = "podaffinity-counts"        # its Snapshot.rule_tables key for the placed pods' counts
KEPT_HOLDS = "podaffinity-holds"          # its Snapshot.rule_tables key for the holds' plan


@dataclass(eq=False)
class _HoldPlan:
    """The holds the rules objects in play carry, kept across cycles while they are the same
    objects (the snapshot cache hands the same Snapshot.rule_objects list while they are) and
    the hard weight stays: the holds' keys in the order made, and per rules object (by identity,
    the object held beside) its holds' places among them. A session makes the holds from the
    keys and finds a rules object's when asked, instead of reading every rules object."""

    rule_objects: list[PodRules]
    hard_weight: int
    keys: list[tuple[PodAffinityTerm, str, int]]
    places: dict[int, tuple[PodRules, tuple[int, ...]]]
    # Per pod profile, the places of the holds whose terms match it (`_terms_of`), found as
    # classes ask; None where a term selects namespaces by their labels (a Namespace's labels
    # change without a pod changing).
    matches: dict[Profile, tuple[int, ...]] | None = None


@dataclass(eq=False, slots=True)
class _ClassTerms:
    """A class's own terms and the carried terms that match its pods (made once, `_class`;
    the lists are shared with the rules object's groups and never changed)."""

    affinity: _Group | None
    self_affine: bool
    anti: list[_Group]
    preferred: list[tuple[float, _Group]]   # (signed weight, group)
    repelled_by: list[_Hold]
    scored_by: list[_Hold]
    # The counts a pod in a node's domain fails (or, leaving, delays) the node by (existing
    # pods' anti-affinity, then the class's own), and whether the class has score terms.
    against: list[_Counts]
    score_terms: bool


_ALL_PASS: dict[int, np.ndarray] = {}


def _all_pass(size: int) -> np.ndarray:
    """MASK_PASS on `size` nodes, read only and one array per size: a class's first codes are
    asked of every node, and most classes have no pod counted against them yet."""
    found = _ALL_PASS.get(size)
    if found is None:
        found = np.full(size, MASK_PASS, dtype=np.uint8)
        found.flags.writeable = False
        found = _ALL_PASS.setdefault(size, found)
    return found


# A class no term concerns (most classes where the pods spread and carry no term): one object.
_NO_TERMS = _ClassTerms(None, False, [], [], [], [], [], False)
_NO_GROUPS: tuple[None, list, list] = (None, [], [])       # _groups_of of a pod without rules


class PodAffinityRule(CountingRule):
    """The session's InterPodAffinity state: predicates turns its filter on (`filter_on`),
    nodeorder its scorer (`weight`)."""

    name = "podaffinity"

    def __init__(self, ssn: Session, hard_weight: int = DEFAULT_HARD_WEIGHT):
        self.ssn = ssn
        self.snap = snap = ssn.snap
        self.filter_on = False
        self.weight = 0.0
        self.hard_weight = hard_weight
        self.ns_labels = snap.namespace_labels
        self._reading = reading(ssn)
        self._alike = self._reading.alike
        self._groups: dict[tuple[PodAffinityTerm, ...], _Group] = {}
        self._group_list: list[_Group] = []               # in the order made
        self._position: dict[int, int] = {}               # id(group) -> its place in _group_list
        self._holds: dict[tuple[PodAffinityTerm, str, int], _Hold] = {}
        self._hold_position: dict[int, int] = {}          # id(hold) -> its place in _holds
        self._hold_list: list[_Hold] = []                 # in the order made
        # The kept _HoldPlan's places of the rules objects' holds (_plan_holds), read by _holds_of.
        self._planned: dict[int, tuple[PodRules, tuple[int, ...]]] = {}
        self._group_index: SelectorIndex[_Group] = SelectorIndex()
        self._hold_index: SelectorIndex[_Hold] = SelectorIndex()
        self._matches: dict[Profile, list[_Group]] = {}
        # By identity (the object held beside, so its id is not another's): hashing a PodRules
        # walks all its terms (equal rules objects share their holds all the same: `_hold`).
        self._carried_by_id: dict[int, tuple[PodRules, list[_Hold]]] = {}
        self._classes: dict[int, _ClassTerms] = {}
        self._own: dict[int, tuple[bool, bool]] = {}     # class -> _own_effect
        self._one_node: dict[str, bool] = {}             # topology key -> _one_node_domains
        self._score_terms: dict[int, bool] = {}          # class -> _ClassTerms.score_terms
        # Per task: the groups it matches and the terms it carries (a pod's labels and rules do
        # not change within a session), found once however often it is placed and undone, and
        # once per class for pending tasks (Reading.alike).
        self._task_moves: dict[int, tuple[list[_Group], list[_Hold]]] = {}
        self._class_moves: dict[int, tuple[list[_Group], list[_Hold]]] = {}
        # A rules object's groups (affinity, anti-affinity, signed preferred), by identity: made
        # here for every class, read again by _class without hashing the terms again.
        self._rules_groups: dict[int, tuple[_Group | None, list[_Group], list[tuple[float, _Group]]]] = {}
        pods = snap.pods
        for cls in snap.classes:
            rules = pods[cls.head].rules if cls.head >= 0 else None
            if rules is not None:       # (an empty one makes no group)
                self._groups_of(rules)
        # Every group is made by now (a class's are its head's terms): the profile matches of
        # the cycle before hold while the terms do.
        self._kept = self._kept_matches()
        self._planned = self._plan_holds()
        # The kept plan's hold matches per profile, while the holds are the plan's (a hold made
        # later is in none of them).
        plan = snap.rule_tables[KEPT_HOLDS]
        self._hold_matches, self._planned_holds = plan.matches, len(plan.keys)
        self._count_placed(placed_groups(ssn))

    def _plan_holds(self) -> dict[int, tuple[PodRules, tuple[int, ...]]]:
        """Makes the holds of every pod's rules object (Snapshot.rule_objects), from the plan
        kept since the cycle before where it holds (_HoldPlan; its places are returned, for
        _holds_of), else from the rules objects, and keeps the plan."""
        snap = self.snap
        plan = snap.rule_tables.get(KEPT_HOLDS)
        if plan is not None and plan.rule_objects is snap.rule_objects and plan.hard_weight == self.hard_weight:
            # _hold for each key, in bulk (the keys are distinct: nothing to look up first).
            holds = self._hold_list
            keyed: dict[str, tuple[Domains, list[int]]] = {}      # _counts' reads, once per key
            topology = snap.topology
            for term, kind, weight in plan.keys:
                at = keyed.get(term.topology_key)
                if at is None:
                    domains = topology.domains(term.topology_key)
                    at = keyed[term.topology_key] = (domains, domains.of_list)
                holds.append(_Hold(term, kind, weight, _Counts(*at)))
            self._holds = dict(zip(plan.keys, holds))
            self._hold_position = {id(h): i for i, h in enumerate(holds)}
            self._hold_index.add_all([(h, h.term.selector) for h in holds])
            if plan.matches is not None:
                bounded_profiles(snap, plan.matches)
            return plan.places
        for rules in snap.rule_objects:       # every pod's (shared by the pods of a template)
            self._holds_of(rules)
        position = self._hold_position
        snap.rule_tables[KEPT_HOLDS] = _HoldPlan(snap.rule_objects, self.hard_weight, list(self._holds), {
            key: (rules, tuple(position[id(h)] for h in holds)) for key, (rules, holds) in self._carried_by_id.items()},
            None if any(key[0].namespace_selector is not None for key in self._holds) else {})
        return {}

    def _count_placed(self, placed: list[PlacedGroup]) -> None:
        """Counts the placed pods in the groups and holds: from the tables kept since the cycle
        before (pods.KeptCounts) where they hold, brought up to date by the placed groups that
        changed; else every group, and the tables are kept (where the matches are)."""
        made_from = [list(self._groups), list(self._holds)]
        kept: KeptCounts | None = kept_counts(self.snap, KEPT_COUNTS, made_from) if self._kept is not None else None
        groups = self._group_list
        if kept is None:
            for alike in placed:
                self._tally(alike, 1)
            if self._kept is not None:
                # Listed again: a placed pod's rules may have made a hold while counting (the
                # tables then hold more than the next cycle's are made from, and are not taken).
                keep_counts(self.snap, KEPT_COUNTS, [list(self._groups), list(self._holds)], (
                    [_Group(g.terms, {k: c.copy() for k, c in g.counts.items()}, g.matched) for g in groups],
                    [h.counts.copy() for h in self._holds.values()]), placed)
            return
        count_changes(kept, self.snap, placed, lambda alike, step: self._tally(alike, step, kept.tables))
        kept_groups, kept_holds = kept.tables
        holds = list(self._holds.values())
        for group, base in zip(groups, kept_groups):
            group.matched = base.matched
            for key, counts in group.counts.items():
                counts.load(base.counts[key])
        for hold, base_counts in zip(holds, kept_holds):
            hold.counts.load(base_counts)

    def _tally(self, alike: PlacedGroup, step: int, kept: tuple[list[_Group], list[_Counts]] | None = None) -> None:
        """Counts (step 1) or takes away (-1) a group of placed pods in the session's groups and
        holds or, given, in kept tables (a group per group and counts per hold, in their order:
        those of a KeptCounts, made for the same groups and holds)."""
        for group in self._matching(alike.pod, alike.profile):
            if kept is not None:
                group = kept[0][self._position[id(group)]]
            for counts in group.counts.values():
                group.matched += counts.add_rows(alike.live, False, step)
                counts.add_rows(alike.leaving, True, step)
        if alike.rules is not None:      # None or a non-empty rules object (PlacedGroup)
            for hold in self._holds_of(alike.rules):
                counts = hold.counts if kept is None else kept[1][self._hold_position[id(hold)]]
                counts.add_rows(alike.live, False, step)
                counts.add_rows(alike.leaving, True, step)

    # --- the tables ------------------------------------------------------------------------
    def _counts(self, key: str) -> _Counts:
        domains = self.snap.topology.domains(key)
        return _Counts(domains, domains.of_list)

    def _group(self, terms: tuple[PodAffinityTerm, ...]) -> _Group:
        group = self._groups.get(terms)
        if group is None:
            group = self._groups[terms] = _Group(terms, {t.topology_key: self._counts(t.topology_key) for t in terms})
            self._position[id(group)] = len(self._group_list)
            self._group_list.append(group)
            # A pod must match every term: any term's required pair finds the candidates.
            self._group_index.add(group, next((t.selector for t in terms if t.selector is not None), None))
        return group

    def _groups_of(self, rules: PodRules) -> tuple[_Group | None, list[_Group], list[tuple[float, _Group]]]:
        """The groups of a rules object's terms, in the order made (kept by identity: the rules
        object lives as long as the session)."""
        found = self._rules_groups.get(id(rules))
        if found is None:
            affinity = self._group(rules.affinity) if rules.affinity else None
            anti = [self._group((t,)) for t in rules.anti_affinity] if rules.anti_affinity else []
            # Preferred terms are rarer: no comprehension run for none.
            preferred = [(float(w.weight), self._group((w.term,))) for w in rules.preferred_affinity] \
                if rules.preferred_affinity else []
            if rules.preferred_anti_affinity:
                preferred += [(-float(w.weight), self._group((w.term,))) for w in rules.preferred_anti_affinity]
            found = self._rules_groups[id(rules)] = (affinity, anti, preferred)
        return found

    def _holds_of(self, rules: PodRules) -> list[_Hold]:
        found = self._carried_by_id.get(id(rules))
        if found is not None and found[0] is rules:
            return found[1]
        planned = self._planned.get(id(rules))
        if planned is not None and planned[0] is rules:       # a rules object in play: its places
            holds = [self._hold_list[i] for i in planned[1]] if planned[1] else _NO_HOLDS
        elif not (rules.anti_affinity or rules.affinity or rules.preferred_affinity or rules.preferred_anti_affinity):
            # Spread or ports only (most rules objects at scale): no term, nothing to hash.
            holds = _NO_HOLDS
        else:
            wanted = [(t, REPELS, 0) for t in rules.anti_affinity]
            wanted += [(t, ATTRACTS, self.hard_weight) for t in rules.affinity]
            wanted += [(w.term, PREFERS, w.weight) for w in rules.preferred_affinity]
            wanted += [(w.term, AVOIDS, w.weight) for w in rules.preferred_anti_affinity]
            holds = [self._hold(*item) for item in wanted]
        self._carried_by_id[id(rules)] = (rules, holds)
        return holds

    def _hold(self, term: PodAffinityTerm, kind: str, weight: int) -> _Hold:
        key = (term, kind, weight)
        hold = self._holds.get(key)
        if hold is None:
            hold = self._holds[key] = _Hold(term, kind, weight, self._counts(term.topology_key))
            self._hold_position[id(hold)] = len(self._hold_list)
            self._hold_list.append(hold)
            self._hold_index.add(hold, term.selector)
        return hold

    def _kept_matches(self) -> KeptMatches | None:
        """The groups each profile matches, kept across cycles (pods.KeptMatches, made from the
        groups' terms); not kept when a term selects namespaces by their labels (a Namespace's
        labels change without a pod changing)."""
        terms = list(self._groups)
        if any(t.namespace_selector is not None for group in terms for t in group):
            return None
        return kept_matches(self.snap, KEPT_MATCHES, terms)

    def _matching(self, pod: Pod, key: Profile | None = None) -> list[_Group]:
        """The groups whose terms all match the pod, in the order they were made (cached by its
        profile, and across cycles while the groups' terms stay)."""
        if key is None:
            key = self._reading.profile(pod)
        found = self._matches.get(key)
        if found is None:
            groups = self._group_list
            # A group made after the session opened is not among the kept terms.
            kept = self._kept if self._kept is not None and len(groups) == len(self._kept.made_from) else None
            at = kept.by_profile.get(key) if kept is not None else None
            if at is None:
                position = self._position
                at = tuple(sorted(position[id(g)] for g in self._group_index.candidates(pod.labels)
                                  if g.matches(pod, self.ns_labels)))
                if kept is not None:
                    kept.by_profile[key] = at
            found = self._matches[key] = [groups[i] for i in at]
        return found

    def _class(self, cid: int) -> _ClassTerms:
        ct = self._classes.get(cid)
        if ct is None:
            ct = self._classes[cid] = self._terms_of(cid)
        return ct

    def _terms_of(self, cid: int) -> _ClassTerms:
        """Class cid's terms (its head pod's) and the carried terms matching its pods; the class
        is listed among their users (the groups' users and first_pod_users, the holds' matched)."""
        pod = self.snap.pods[self.snap.classes[cid].head]
        rules = pod.rules
        affinity, anti, preferred = _NO_GROUPS if rules is None else self._groups_of(rules)
        repelled_by: list[_Hold] = []
        scored_by: list[_Hold] = []
        for hold in self._matching_holds(pod):
            (repelled_by if hold.kind == REPELS else scored_by).append(hold)
            hold.matched.append(cid)
        if affinity is None and not anti and not preferred and not repelled_by and not scored_by:
            return _NO_TERMS
        self_affine = affinity is not None and affinity.matches(pod, self.ns_labels)
        if affinity is None and not preferred and len(anti) == 1:      # one anti-affinity term (most)
            anti[0].users.append(cid)
        else:
            for group in {id(g): g for g in (affinity, *anti, *(g for _, g in preferred)) if g}.values():
                group.users.append(cid)
        if self_affine:
            affinity.first_pod_users.append(cid)
        against = [h.counts for h in repelled_by]
        for g in anti:
            against.extend(g.counts.values())
        return _ClassTerms(affinity, self_affine, anti, preferred, repelled_by, scored_by, against,
                           bool(preferred or scored_by))

    def _matching_holds(self, pod: Pod) -> list[_Hold]:
        """The holds whose term matches the pod, in the order made (their places kept across
        cycles by profile in the hold plan, while the holds are its own)."""
        kept = self._hold_matches if len(self._hold_list) == self._planned_holds else None
        key = self._reading.profile(pod) if kept is not None else None
        at = kept.get(key) if kept is not None else None
        if at is None:
            position = self._hold_position
            at = tuple(sorted(position[id(h)] for h in self._hold_index.candidates(pod.labels)
                              if h.term.matches(pod.namespace, pod.labels, self.ns_labels)))
            if kept is not None:
                kept[key] = at
        holds = self._hold_list
        return [holds[i] for i in at]

    # --- the extension point ---------------------------------------------------------------
    def filters(self, cid: int) -> bool:
        ct = self._class(cid)
        return self.filter_on and bool(ct.affinity or ct.anti or ct.repelled_by)

    def scores(self, cid: int) -> bool:
        return self.weight > 0 and self._class(cid).score_terms

    def _own_effect(self, cid: int) -> tuple[bool, bool]:
        """(unchanged_by_own, excludes_own_node) of class cid: what placing one of its tasks
        does to the counts the class's filter reads. Without required affinity (whose counts a
        placement can only make pass), the filter reads the counts against the class (ct.against);
        a placement adds to those of the groups its pod matches and the terms it carries (the
        same for every task of the class: `_moves`). None of them: nothing changes. Each on a
        key whose every domain is one node and which every node has (the hostname): the
        placement fails its own node for the class and no other."""
        found = self._own.get(cid)
        if found is None:
            ct = self._class(cid)
            found = (False, False)
            if ct.affinity is None:
                groups, holds = self._moves(self.snap.classes[cid].head)
                changed = {id(c) for g in groups for c in g.counts.values()} | {id(h.counts) for h in holds}
                touched = [c for c in ct.against if id(c) in changed]
                found = (True, False) if not touched else (
                    False, all(self._one_node_domains(c.domains) for c in touched))
            self._own[cid] = found
        return found

    def _one_node_domains(self, domains: Domains) -> bool:
        """Whether every node has the key and no two share a value."""
        found = self._one_node.get(domains.key)
        if found is None:
            found = self._one_node[domains.key] = bool(
                domains.count == self.snap.n_nodes and (not len(domains.of) or int(domains.of.min()) >= 0))
        return found

    def unchanged_by_own(self, cid: int) -> bool:
        return self._own_effect(cid)[0]

    def excludes_own_node(self, cid: int) -> bool:
        return self._own_effect(cid)[1]

    def _verdicts(self, cid: int, nodes: np.ndarray | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per message: (nodes failing now, nodes passing only once leaving pods are gone)."""
        ct = self._class(cid)
        size = self.snap.n_nodes if nodes is None else len(nodes)
        out = {}
        for message, sources in ((EXISTING_ANTI_AFFINITY_MESSAGE, [h.counts for h in ct.repelled_by]),
                                 (ANTI_AFFINITY_MESSAGE, [c for g in ct.anti for c in g.counts.values()])):
            fail = np.zeros(size, dtype=bool)
            later = np.zeros(size, dtype=bool)
            for counts in sources:
                if not (counts.live_total or counts.gone_total):
                    continue      # no pod counted anywhere: nothing fails or waits
                has, live, gone = counts.at(nodes)
                fail |= live > 0
                later |= gone > 0
            out[message] = (fail, later & ~fail)
        if ct.affinity is not None:
            keyed = np.ones(size, dtype=bool)
            found = np.ones(size, dtype=bool)
            for counts in ct.affinity.counts.values():
                has, live, _ = counts.at(nodes)
                keyed &= has
                found &= live > 0
            ok = keyed if (ct.affinity.matched == 0 and ct.self_affine) else keyed & found
            out[AFFINITY_MESSAGE] = (~ok, np.zeros(size, dtype=bool))
        return out

    def code_at(self, cid: int, r: int) -> int:
        ct = self._classes.get(cid) or self._class(cid)
        later = False
        for counts in ct.against:
            if counts.live_total or counts.gone_total:
                d = counts.of[r]
                if d >= 0:
                    if counts.live.get(d, 0) > 0:
                        return MASK_FAIL
                    later = later or counts.gone.get(d, 0) > 0
        if ct.affinity is not None:
            first = ct.affinity.matched == 0 and ct.self_affine
            for counts in ct.affinity.counts.values():
                has, live, _ = counts.at_row(r)
                if not has or (not first and live <= 0):
                    return MASK_FAIL
        return MASK_LATER if later else MASK_PASS

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        if nodes is not None and len(nodes) <= FEW_NODES:
            # A placement re-asks about the node or few it touched: node by node in Python costs
            # less than the whole-array path's fixed numpy overhead (same answers).
            if len(nodes) == 1:
                return ONE_NODE_CODES[self.code_at(cid, int(nodes[0]))]
            return np.array([self.code_at(cid, r) for r in nodes.tolist()], dtype=np.uint8)
        size = self.snap.n_nodes if nodes is None else len(nodes)
        ct = self._class(cid)
        if ct.affinity is None and not any(c.live_total or c.gone_total for c in ct.against):
            # No pod counted against the class anywhere (its group's first pod): every node passes.
            return _all_pass(size)
        verdicts = self._verdicts(cid, nodes)
        fail = np.zeros(size, dtype=bool)
        later = np.zeros(size, dtype=bool)
        for f, lt in verdicts.values():
            fail |= f
            later |= lt
        out = np.full(size, MASK_PASS, dtype=np.uint8)
        out[later] |= MASK_RELEASING
        out[fail] = MASK_FAIL
        return out

    def checks(self, cid: int) -> list[Check]:
        # kube-scheduler's order: a node is counted under the first check it fails.
        order = (AFFINITY_MESSAGE, ANTI_AFFINITY_MESSAGE, EXISTING_ANTI_AFFINITY_MESSAGE)
        verdicts = self._verdicts(cid, None)
        return [Check(m, ~verdicts[m][0]) for m in order if m in verdicts and verdicts[m][0].any()]

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        # Normalized over every node, as kube-scheduler's NormalizeScore does over the nodes it
        # scores: each change marks the whole class (notify), so `nodes` is always None here.
        ct = self._class(cid)
        raw = np.zeros(self.snap.n_nodes, dtype=np.float64)
        for weight, group in ct.preferred:
            for counts in group.counts.values():
                _, live, _ = counts.at(None)
                raw += weight * live
        for hold in ct.scored_by:
            _, live, _ = hold.counts.at(None)
            raw += (-hold.weight if hold.kind == AVOIDS else hold.weight) * live
        low, high = float(raw.min(initial=0.0)), float(raw.max(initial=0.0))
        scores = MAX_NODE_SCORE * (raw - low) / (high - low) if high > low else np.zeros_like(raw)
        scores *= self.weight
        return scores if nodes is None else scores[nodes]

    # --- notifications ---------------------------------------------------------------------
    def _changed(self, cids: list[int], counts: _Counts, d: int) -> None:
        """Marks classes `cids` where a count change in `counts` in domain d may have changed
        their answers: on the domain's nodes, or on every node where the class is scored (scores
        are normalized over all nodes: a change anywhere re-scores it). A class marked on the
        same domain again in a move (a pod often matches the term it carries itself, a group's
        anti-affinity) is marked once: ClassPlacement.mark keeps a kept array marked twice in a
        row once."""
        nodes = counts.domains.kept_nodes[d]
        if nodes is None:       # Domains.nodes inline: most are kept
            nodes = counts.domains.nodes(d)
        mark = self.ssn.mark_dirty
        if self.weight > 0:
            for cid in cids:
                mark(cid, None if self._scored(cid) else nodes)
        else:
            for cid in cids:
                mark(cid, nodes)

    def _scored(self, cid: int) -> bool:
        """_ClassTerms.score_terms of class cid, kept."""
        found = self._score_terms.get(cid)
        if found is None:
            found = self._score_terms[cid] = (self._classes.get(cid) or self._class(cid)).score_terms
        return found

    def _moves(self, t: int) -> tuple[list[_Group], list[_Hold]]:
        """The groups task t matches and the terms it carries."""
        alike = self._alike[t]
        found = self._class_moves.get(alike) if alike >= 0 else self._task_moves.get(t)
        if found is None:
            pod = self.snap.pods[t]
            found = (self._matching(pod), _NO_HOLDS if pod.rules is None else self._holds_of(pod.rules))
            if alike >= 0:
                self._class_moves[alike] = found
            else:
                self._task_moves[t] = found
        return found

    def listens(self, cid: int) -> bool:
        groups, holds = self._moves(self.snap.classes[cid].head)
        return bool(groups or holds)

    def _move(self, t: int, node: int, step: int = 1, leaving: bool = False) -> None:
        alike = self._alike[t]          # _moves' lookup inline: a pending task's class has them
        found = self._class_moves.get(alike) if alike >= 0 else None
        groups, holds = found if found is not None else self._moves(t)
        if not groups and not holds:
            return
        for group in groups:
            before = group.matched
            for counts in group.counts.values():
                d = counts.of[node]          # _Counts.add, inline (as for the holds below)
                if d < 0:
                    continue
                if leaving:
                    counts.gone[d] = counts.gone.get(d, 0) + step
                    counts.gone_total += step
                else:
                    counts.live[d] = counts.live.get(d, 0) + step
                    counts.live_total += step
                    group.matched += step
                if group.users:
                    self._changed(group.users, counts, d)
            if (before == 0) != (group.matched == 0):   # the self-affine first-pod rule flips
                for cid in group.first_pod_users:
                    self.ssn.mark_dirty(cid, None)
        for hold in holds:
            counts = hold.counts
            d = counts.of[node]          # _Counts.add, inline: a placement's commonest step
            if d < 0:
                continue
            if leaving:
                counts.gone[d] = counts.gone.get(d, 0) + step
                counts.gone_total += step
            else:
                counts.live[d] = counts.live.get(d, 0) + step
                counts.live_total += step
            if hold.matched:
                self._changed(hold.matched, counts, d)
