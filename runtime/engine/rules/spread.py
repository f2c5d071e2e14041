"""PodTopologySpread (kube-scheduler's plugin, which Volcano's predicates and nodeorder wrap).

For a pod P and each of its constraints (key, maxSkew, selector):
- eligible nodes: those with every key of P's DoNotSchedule constraints (of its ScheduleAnyway
  ones, for scoring), and, by the inclusion policies, matching P's node selector and required
  node affinity (nodeAffinityPolicy Honor, the default) and tolerating its NoSchedule and
  NoExecute taints (nodeTaintsPolicy Honor; Ignore is the default);
- domains: the key's values on eligible nodes; a domain counts the pods of P's namespace that
  the selector matches on its eligible nodes (an empty or missing selector counts none;
  leaving pods are not counted);
- filter (DoNotSchedule): a node lacking the key fails; else with P's own match (1 or 0),
  count(domain of n) + self − global minimum > maxSkew fails, the minimum being 0 while fewer
  domains than minDomains exist;
- score (ScheduleAnyway): Σ count(domain) × ln(domains + 2) + (maxSkew − 1) per node, normalized
  so that the node with the fewest matching pods scores 100 (kube-scheduler's NormalizeScore).

Counts are kept per node for each (namespace, selector) the cycle's constraints use, and per
domain for each class's constraint (its eligible nodes). A placement changes one domain's
count: the class is marked on that domain's nodes, or on every node when the global minimum
moved. The global minimum is kept with the number of domains at it, so that a placement finds
it without a pass over the domains. Classes whose constraints differ only in the pods they
count (each Deployment's own selector) share their eligible nodes and domains: those depend
on the keys, the inclusion policies and the class's node affinity and tolerations only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
from dataclasses import dataclass, field

import numpy as np

from runtime.cluster.model import Pod, SpreadConstraint
from runtime.cluster.selectors import LabelSelector
from runtime.engine.nodemasks import affinity_mask, untolerated_taint_checks
from runtime.engine.rules.pods import (
    CountingRule, KeptMatches, PlacedGroup, Profile, SelectorIndex, count_changes, count_each, keep_counts,
    kept_counts, kept_matches, placed_groups, reading,
)
from runtime.engine.extension import MASK_FAIL, MASK_PASS, Check
from runtime.engine.snapshot import Domains

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session

SKEW_MESSAGE = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_MESSAGE = "node(s) didn't match pod topology spread constraints (missing required label)"
MAX_NODE_SCORE = 100.0


@dataclass(eq=False)
class _Selection:
    """Pods of one namespace a selector matches, counted per node (node row -> pods: a selector
    matches the few replicas of one template, and a node-long array each would cost memory and
    a pass per class over the nodes)."""

    namespace: str
    selector: LabelSelector
    per_node: dict[int, int]
    users: list["_Spread"] = field(default_factory=list)
    total: int = 0                    # pods counted on any node: a class's counts start at 0 while none


@dataclass(frozen=True, eq=False)
class _Eligible:
    """A constraint's eligible nodes and the domains they make (shared by classes alike)."""

    eligible: np.ndarray              # (N,) bool
    present: np.ndarray               # (D,) bool: the domain has an eligible node
    domains_present: int              # present.sum()
    # Per node row its domain where eligible, else -1 (what a placement reads, as a list).
    eligible_domain: list[int] = field(default_factory=list)


@dataclass(eq=False)
class _Spread:
    """One constraint of one class: its eligible nodes' domains and their counts."""

    cid: int
    constraint: SpreadConstraint
    domains: Domains
    eligible: np.ndarray              # (N,) bool
    present: np.ndarray               # (D,) bool: the domain has an eligible node
    count: np.ndarray                 # (D,) int64
    self_match: int
    low: int = 0                      # the global minimum (0 while fewer domains than minDomains)
    domains_present: int = -1         # domains with an eligible node (counted when not given)
    at_low: int = 0                   # of those, the ones counting `low` (when the minimum is theirs)
    # A hard constraint's filter code per domain, and MASK_FAIL in an extra last entry (read by
    # nodes lacking the key); kept as counts move (`refresh_codes`, `_move`).
    codes: np.ndarray | None = None
    eligible_domain: list[int] = field(default_factory=list)    # _Eligible.eligible_domain
    # The class's only hard constraint: a domain's code here is the rule's answer on its nodes.
    alone: bool = False
    # How many nodes the passing domains hold (-1: not known since `codes` was made), kept as a
    # domain's verdict flips: passing_nodes is asked on every placement, mostly to say "many".
    passing_size: int = -1
    # `codes` as a placement by domain reads them (0 passing, -inf failing), made when first asked
    # after `codes` was made anew (None: not made since), kept in step as a domain's code flips.
    verdicts: np.ndarray | None = None
    is_floored: bool = field(init=False, default=False)     # floored(), made once
    hard: bool = field(init=False, default=False)           # constraint.hard (a property), read per placement

    def __post_init__(self) -> None:
        if self.domains_present < 0:
            self.domains_present = int(self.present.sum())
        self.hard = self.constraint.hard
        domains, least = self.domains_present, self.constraint.min_domains
        self.is_floored = not domains or bool(least and domains < least)

    def floored(self) -> bool:
        """Whether the minimum is 0 whatever the counts (no domain, or fewer than minDomains)."""
        return self.is_floored

    def soft_terms(self) -> np.ndarray:
        """(D + 1,) float64: a ScheduleAnyway constraint's raw score term per domain, unrounded,
        0 in the extra last entry (read by nodes lacking the key)."""
        per_domain = np.zeros(self.domains.count + 1, dtype=np.float64)
        per_domain[:-1] = self.count * math.log(self.domains_present + 2) + (self.constraint.max_skew - 1)
        return per_domain

    def refresh_codes(self) -> None:
        """`codes` from the counts."""
        if len(self.count) <= FEW_DOMAINS:      # as reset_low: a list, for a zone key's few domains
            most = self.constraint.max_skew - (self.self_match - self.low)
            codes = np.array([MASK_PASS if c <= most else MASK_FAIL for c in self.count.tolist()] + [MASK_FAIL],
                             dtype=np.uint8)
        else:
            codes = np.full(self.domains.count + 1, MASK_FAIL, dtype=np.uint8)
            codes[:-1][self.count + (self.self_match - self.low) <= self.constraint.max_skew] = MASK_PASS
        self.codes, self.passing_size, self.verdicts = codes, -1, None

    def start(self, by_domain: dict[int, int]) -> None:
        """The counts, `low`, `at_low` and (hard) `codes` of a new constraint from its nonzero
        counts per domain (each domain present): what `reset_low` and `refresh_codes` find from
        the dense counts, without a pass over the domains."""
        if len(by_domain) <= FEW_DOMAINS:       # a replica group's few domains: no arrays made for them
            count = self.count
            for d, v in by_domain.items():
                count[d] = v
        else:
            self.count[np.fromiter(by_domain, dtype=np.int64, count=len(by_domain))] = np.fromiter(
                by_domain.values(), dtype=np.int64, count=len(by_domain))
        if self.floored():
            self.low, self.at_low = 0, 0
        elif len(by_domain) < self.domains_present:      # a present domain counts 0
            self.low, self.at_low = 0, self.domains_present - len(by_domain)
        else:
            low = min(by_domain.values())
            self.low, self.at_low = low, sum(1 for v in by_domain.values() if v == low)
        if self.hard:
            skew, shift = self.constraint.max_skew, self.self_match - self.low
            codes = _uniform_codes(self.domains.count, shift <= skew).copy()
            for d, v in by_domain.items():
                codes[d] = MASK_PASS if v + shift <= skew else MASK_FAIL
            self.codes, self.passing_size, self.verdicts = codes, -1, None

    def reset_low(self) -> None:
        """`low` and `at_low` from the counts (a pass over the domains)."""
        if self.floored():
            self.low, self.at_low = 0, 0
            return
        if len(self.count) <= FEW_DOMAINS:
            # A few domains (a zone key): a list's min and count cost less than numpy's calls,
            # and a zone spread's last domain at the minimum gains a pod once per round.
            counts = self.count.tolist()
            if self.domains_present != len(counts):
                counts = [c for c, present in zip(counts, self.present.tolist()) if present]
            low = min(counts)
            self.low, self.at_low = low, counts.count(low)
            return
        # Every domain has an eligible node (the common case): the counts need no selection.
        counts = self.count if self.domains_present == len(self.count) else self.count[self.present]
        low = int(counts.min())
        self.low, self.at_low = low, int((counts == low).sum())

    def step(self, d: int, step: int) -> tuple[int, int]:
        """Count `step` pods more in domain d (eligible); returns (the domain's count before, the
        global minimum before). The minimum moves only when the last domain at it gains a pod, or
        a domain drops under it: only then are the domains looked at."""
        count = self.count
        before = int(count[d])
        after = before + step
        count[d] = after
        low = self.low
        if self.is_floored:
            return before, low
        if step > 0:
            if before == low:
                self.at_low -= 1
                if self.at_low <= 0:
                    self.reset_low()
        elif after < low:
            self.low, self.at_low = after, 1
        elif after == low:
            self.at_low += 1
        return before, low


_UNIFORM: dict[tuple[int, bool], np.ndarray] = {}
# A hard constraint's domain verdict by its code, as a placement by domain reads it: 0 where it
# passes, -inf where it fails (a hard spread's codes are MASK_PASS or MASK_FAIL).
_VERDICT_OF_CODE = np.array([0.0 if code == MASK_PASS else -np.inf for code in range(4)])
_FAILING = -math.inf         # a failing domain's verdict, written per placement
_NO_NODES = np.zeros(0, dtype=np.int64)         # passing_nodes' answer where no domain passes
FEW_DOMAINS = 64            # passing_nodes answers for constraints over at most this many domains


def _uniform_codes(domains: int, passes: bool) -> np.ndarray:
    """Codes of `domains` domains that all pass or all fail, and MASK_FAIL in the extra last
    entry (read only: copied by each constraint)."""
    found = _UNIFORM.get((domains, passes))
    if found is None:
        found = np.full(domains + 1, MASK_FAIL, dtype=np.uint8)
        if passes:
            found[:-1] = MASK_PASS
        found.flags.writeable = False
        found = _UNIFORM.setdefault((domains, passes), found)
    return found


@dataclass(eq=False)
class _SoftScores:
    """A class's ScheduleAnyway scores as last normalized: each node's rounded raw score, the nodes
    with every key, and the raw range over them. A count change moves the raw score of one
    domain's nodes only; while the range stays, only those nodes' scores change."""

    raw: np.ndarray                   # (N,) float64, rounded
    valid: np.ndarray                 # (N,) bool
    high: float
    low: float


@dataclass(eq=False)
class _DomainScores:
    """The ScheduleAnyway scores of a class with one such constraint: every node of a domain has
    the same raw score, so the raw scores, their range and the normalized scores are kept per
    domain (the domains of a zone key are a few, the nodes thousands) and read through the
    nodes' domains. The element-wise operations are those of the per-node path, so a node's
    score is the same float."""

    spread: "_Spread"
    raw: np.ndarray                   # (D + 1,) float64, rounded; the last entry (nodes lacking the key) unused
    high: float = 0.0
    low: float = 0.0
    normalized: np.ndarray | None = None     # (D + 1,) weighted scores, 0 in the last entry; None: stale
    weighted_by: float = 0.0                 # the weight `normalized` was made with

    def recount(self) -> None:
        """raw, high and low from the constraint's counts (a pass over the domains)."""
        s = self.spread
        if s.domains.count <= FEW_DOMAINS:
            # A few domains (a zone key, a class placing by a DomainTree, scored once or twice):
            # soft_terms' operations on Python floats (round: half to even, as numpy's) spare
            # numpy's per-call costs.
            weight, shift = math.log(s.domains_present + 2), s.constraint.max_skew - 1
            raw = [float(round(c * weight + shift)) for c in s.count.tolist()]
            self.high, self.low = (max(raw), min(raw)) if raw else (0.0, 0.0)
            raw.append(0.0)
            self.raw = np.array(raw)
            self.normalized = None
            return
        self.raw = np.round(s.soft_terms())
        # Every domain has a node (Domains), and every node with the key is in one: the range
        # over the nodes with the key is the range over the domains.
        real = self.raw[:-1]
        self.high, self.low = (float(real.max()), float(real.min())) if len(real) else (0.0, 0.0)
        self.normalized = None

    def moved(self, d: int) -> None:
        """recount where domain d's count alone moved: its raw score by recount's operations on
        one entry (a Python float, the same), then the range."""
        s = self.spread
        self.raw[d] = round(int(s.count[d]) * math.log(s.domains_present + 2) + (s.constraint.max_skew - 1))
        real = self.raw[:-1]
        if len(real) <= FEW_DOMAINS:        # as reset_low: a list's max and min, the same floats
            listed = real.tolist()
            self.high, self.low = max(listed), min(listed)
        else:
            self.high, self.low = float(real.max()), float(real.min())
        self.normalized = None

    def weighted(self, weight: float) -> np.ndarray:
        """The weighted scores per domain, 0 in the last entry (read only: made anew as they change)."""
        per_domain = self.normalized
        if per_domain is None or weight != self.weighted_by:
            high, low = self.high, self.low
            if len(self.raw) <= FEW_DOMAINS + 1:       # as recount: Python floats, the same operations
                per_domain = np.array([MAX_NODE_SCORE * weight if high == 0 else
                                       MAX_NODE_SCORE * (high + low - r) / high * weight
                                       for r in self.raw[:-1].tolist()] + [0.0])
            else:
                keyed = np.ones(len(self.raw), dtype=bool)
                keyed[-1] = False           # the extra last entry scores 0
                per_domain = TopologySpreadRule._normalized(self.raw, keyed, high, low)
                per_domain *= weight
            self.normalized, self.weighted_by = per_domain, weight
        return per_domain

    def scores(self, nodes: np.ndarray | None, weight: float) -> np.ndarray:
        of = self.spread.domains.of
        return self.weighted(weight)[of if nodes is None else of[nodes]]


KEPT_MATCHES = "podtopologyspread-matches"      # its Snapshot.rule_tables key
KEPT_COUNTS = "podtopologyspread-counts"        # its Snapshot.rule_tables key for the placed pods' counts


class TopologySpreadRule(CountingRule):
    """The session's PodTopologySpread state: predicates turns its filter on (`filter_on`),
    nodeorder its scorer (`weight`)."""

    name = "podtopologyspread"

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.snap = snap = ssn.snap
        self.filter_on = False
        self.weight = 0.0
        self._reading = reading(ssn)
        self._selections: dict[tuple[str, LabelSelector], _Selection] = {}
        self._selection_list: list[_Selection] = []        # in the order made
        self._selection_by_id: dict[tuple[str, int], tuple[_Selection, LabelSelector]] = {}
        self._position: dict[int, int] = {}                # id(selection) -> its place in _selection_list
        self._by_namespace: dict[str, SelectorIndex[_Selection]] = {}
        self._matches: dict[Profile, list[_Selection]] = {}
        self._task_matches: dict[int, list[_Selection]] = {}     # per task, and per class (Reading.alike)
        self._class_matches: dict[int, list[_Selection]] = {}
        self._eligible: dict[tuple, _Eligible] = {}
        self._classes: dict[int, list[_Spread]] = {}
        self._soft: dict[int, _SoftScores | _DomainScores] = {}
        self._hard: dict[int, list[_Spread]] = {}
        pods = snap.pods
        for cls in snap.classes:
            pod = pods[cls.head] if cls.head >= 0 else None
            rules = pod.rules if pod is not None else None
            if rules is not None:       # (not its truth: a Python call; an empty one has no spread)
                for c in rules.spread:
                    if c.selector is not None and (c.selector.match_labels or c.selector.match_expressions):
                        self._selection(pod.namespace, c.selector)
        # Every selection is made by now (a class's are its head's): the profile matches of the
        # cycle before hold while the selections do.
        self._kept = self._kept_matches()
        if self._selections:
            self._count_placed(placed_groups(ssn))

    def _count_placed(self, placed: list[PlacedGroup]) -> None:
        """Counts the placed pods in the selections: from the counts kept since the cycle before
        (pods.KeptCounts; node rows stay while the nodes' domains do) where they hold, brought up
        to date by the placed groups that changed; else every group, and the counts are kept."""
        made_from = self._kept.made_from            # the selections, in order
        kept = kept_counts(self.snap, KEPT_COUNTS, made_from)
        selections = self._selection_list
        if kept is None:
            for alike in placed:
                self._tally(alike, 1)
            keep_counts(self.snap, KEPT_COUNTS, made_from,
                        [_Selection(s.namespace, s.selector, dict(s.per_node), total=s.total) for s in selections],
                        placed)
            return
        count_changes(kept, self.snap, placed, lambda alike, step: self._tally(alike, step, kept.tables))
        for selection, base in zip(selections, kept.tables):
            selection.per_node, selection.total = dict(base.per_node), base.total

    def _tally(self, alike: PlacedGroup, step: int, kept: list[_Selection] | None = None) -> None:
        """Counts (step 1) or takes away (-1) the running pods of a group of placed pods in the
        session's selections or, given, in kept ones (one per selection, in their order)."""
        if not len(alike.live):
            return
        matching = self._matching(alike.pod, alike.profile)
        if not matching:
            return
        rows = alike.live.tolist()
        for selection in matching:
            if kept is not None:
                selection = kept[self._position[id(selection)]]
            count_each(selection.per_node, rows, step)
            selection.total += step * len(rows)

    def _selection(self, namespace: str, selector: LabelSelector) -> _Selection:
        # Found again by the selector object's identity first (a selector's hash walks its terms);
        # the object is held beside, so its id is not another's.
        by_id = (namespace, id(selector))
        held = self._selection_by_id.get(by_id)
        if held is not None and held[1] is selector:
            return held[0]
        key = (namespace, selector)
        found = self._selections.get(key)
        if found is None:
            found = self._selections[key] = _Selection(namespace, selector, {})
            self._position[id(found)] = len(self._selection_list)
            self._selection_list.append(found)
            self._by_namespace.setdefault(namespace, SelectorIndex()).add(found, selector)
        self._selection_by_id[by_id] = (found, selector)
        return found

    def _matching(self, pod: Pod, key: Profile | None = None) -> list[_Selection]:
        if key is None:
            key = self._reading.profile(pod)
        found = self._matches.get(key)
        if found is None:
            selections = self._selection_list
            # A selection made after the session opened is not among the kept ones.
            kept = self._kept if len(selections) == len(self._kept.made_from) else None
            at = kept.by_profile.get(key) if kept is not None else None
            if at is None:
                index = self._by_namespace.get(pod.namespace)
                position = self._position
                at = tuple(sorted(position[id(s)] for s in index.candidates(pod.labels)
                                  if s.selector.matches(pod.labels))) if index is not None else ()
                if kept is not None:
                    kept.by_profile[key] = at
            found = self._matches[key] = [selections[i] for i in at]
        return found

    def _kept_matches(self) -> KeptMatches:
        """The selections each profile matches, kept across cycles (pods.KeptMatches, made from
        the selections' (namespace, selector))."""
        return kept_matches(self.snap, KEPT_MATCHES, list(self._selections))

    def _eligible_for(self, cid: int, keys: tuple[str, ...], c: SpreadConstraint) -> _Eligible:
        """Constraint c's eligible nodes for class cid, among the nodes with every one of `keys`
        (those of the class's constraints of c's kind): made once per such keys, inclusion
        policies and the class's node affinity and tolerations, as far as they are read."""
        cls = self.snap.classes[cid]
        honor_affinity = c.node_affinity_policy == "Honor" and bool(cls.node_selector or cls.required_terms)
        honor_taints = c.node_taints_policy == "Honor"
        key = (keys, c.topology_key, (cls.node_selector, cls.required_terms) if honor_affinity else None,
               cls.tolerations if honor_taints else None)
        try:
            found = self._eligible.get(key)
        except TypeError:       # a term that does not hash: made for this class alone
            key, found = None, None
        if found is None:
            snap = self.snap
            eligible = np.ones(snap.n_nodes, dtype=bool)
            for k in keys:
                eligible &= snap.topology.domains(k).of >= 0
            if honor_affinity:
                eligible &= affinity_mask(snap, cls)
            if honor_taints:
                for check in untolerated_taint_checks(snap, cls.tolerations):
                    eligible &= check.passing
            domains = snap.topology.domains(c.topology_key)
            of_eligible = domains.of[eligible]
            present = np.zeros(max(domains.count, 1), dtype=bool)
            present[of_eligible] = True
            present = present[:domains.count] if domains.count else present[:0]
            for array in (eligible, present, of_eligible):
                array.flags.writeable = False        # shared by the classes alike
            found = _Eligible(eligible, present, int(present.sum()),
                              np.where(eligible, domains.of, -1).tolist())
            if key is not None:
                self._eligible[key] = found
        return found

    def _class(self, cid: int) -> list[_Spread]:
        found = self._classes.get(cid)
        if found is None:
            found = self._classes[cid] = []
            snap = self.snap
            cls = snap.classes[cid]
            pod = snap.pods[cls.head]
            hard_ones: list[_Spread] = []
            kinds: tuple[list[SpreadConstraint], list[SpreadConstraint]] = ([], [])     # (hard, soft)
            for c in (pod.rules.spread if pod.rules is not None else ()):
                kinds[0 if c.hard else 1].append(c)
            for hard, group in zip((True, False), kinds):
                if not group:
                    continue
                # A node counts only if it has every key of the pod's constraints (of each kind).
                keys = (group[0].topology_key,) if len(group) == 1 else tuple(sorted({c.topology_key for c in group}))
                for c in group:
                    shared = self._eligible_for(cid, keys, c)
                    domains = snap.topology.domains(c.topology_key)
                    selector = c.selector
                    counted = selector is not None and bool(selector.match_labels or selector.match_expressions)
                    # The pods counted per domain, sparse (a selector matches a few replicas):
                    # the counts, the minimum and a hard constraint's codes are set from them.
                    by_domain: dict[int, int] = {}
                    selection = self._selection(pod.namespace, selector) if counted else None
                    if selection is not None and selection.total and domains.count:
                        # The nodes holding matching pods, those eligible (they have the key).
                        eligible_domain = shared.eligible_domain
                        for row, pods in selection.per_node.items():
                            d = eligible_domain[row]
                            if d >= 0 and pods:
                                by_domain[d] = by_domain.get(d, 0) + pods
                    spread = _Spread(cid, c, domains, shared.eligible, shared.present,
                                     np.zeros(domains.count, dtype=np.int64),
                                     int(selector is not None and selector.matches(pod.labels)),
                                     domains_present=shared.domains_present, eligible_domain=shared.eligible_domain)
                    if selection is not None:
                        selection.users.append(spread)
                    spread.start(by_domain)
                    found.append(spread)
                    if hard:
                        hard_ones.append(spread)
            self._hard[cid] = hard_ones
            if len(hard_ones) == 1:
                hard_ones[0].alone = True
        return found

    def _hard_of(self, cid: int) -> list[_Spread]:
        """Class cid's hard constraints (listed as `_class` makes its constraints)."""
        found = self._hard.get(cid)
        if found is None:
            self._class(cid)
            found = self._hard[cid]
        return found

    # --- the extension point ---------------------------------------------------------------
    def filters(self, cid: int) -> bool:
        return self.filter_on and bool(self._hard_of(cid))

    def scores(self, cid: int) -> bool:
        return self.weight > 0 and any(not s.hard for s in self._class(cid))

    def _verdicts(self, cid: int, nodes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(nodes lacking a key, nodes over a skew) among `nodes` (all when None)."""
        size = self.snap.n_nodes if nodes is None else len(nodes)
        missing = np.zeros(size, dtype=bool)
        skewed = np.zeros(size, dtype=bool)
        for s in self._class(cid):
            if not s.constraint.hard:
                continue
            of = s.domains.of if nodes is None else s.domains.of[nodes]
            has = of >= 0
            count = np.where(has, s.count[np.where(has, of, 0)] if s.domains.count else 0, 0)
            missing |= ~has
            skewed |= has & (count + s.self_match - s.low > s.constraint.max_skew)
        return missing, skewed & ~missing

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        # Each domain's code is kept (`_Spread.codes`), read through the nodes' domains: a node
        # lacking the key reads the extra last entry (it fails), as `_verdicts` has it.
        hard = self._hard_of(cid)
        if not hard:
            return np.full(self.snap.n_nodes if nodes is None else len(nodes), MASK_PASS, dtype=np.uint8)
        out = None
        for s in hard:
            codes = s.codes[s.domains.of if nodes is None else s.domains.of[nodes]]
            # MASK_FAIL < MASK_PASS: a node fails if any constraint fails it.
            out = codes if out is None else np.minimum(out, codes, out=out)
        return out

    def passing_nodes(self, cid: int, most: int) -> np.ndarray | None:
        # A hard constraint's verdict is its domain's: where one passes in few domains (a zone
        # spread whose other zones are a pod ahead), their nodes are the only ones that may pass.
        # One over many domains (hostnames) is not asked: its domains would be listed one by one,
        # on every placement of its class.
        found = None
        for s in self._hard_of(cid):
            if s.domains.count > FEW_DOMAINS:
                continue
            size = s.passing_size
            if size < 0:
                sizes = s.domains.sizes
                size = s.passing_size = sum(sizes[d] for d in np.flatnonzero(s.codes[:-1]).tolist())
            if size <= most and (found is None or size < len(found)):
                passing = np.flatnonzero(s.codes[:-1]).tolist()       # MASK_FAIL is 0
                parts = [s.domains.nodes(d) for d in passing]
                found = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else _NO_NODES
        return found

    def domain_verdicts(self, cid: int) -> tuple[Domains, np.ndarray] | None:
        # One hard constraint over few domains: every node of a domain shares its code (MASK_PASS
        # or MASK_FAIL; the extra last entry, nodes lacking the key, fails).
        hard = (self._hard.get(cid) or self._hard_of(cid)) if self.filter_on else ()      # asked per placement
        if len(hard) != 1 or hard[0].domains.count > FEW_DOMAINS:
            return None
        s = hard[0]
        if s.verdicts is None:      # asked on each of the class's placements: made once per `codes`, kept by _move
            s.verdicts = _VERDICT_OF_CODE.take(s.codes)
        return s.domains, s.verdicts

    def checks(self, cid: int) -> list[Check]:
        missing, skewed = self._verdicts(cid, None)
        return [Check(m, ~f) for m, f in ((MISSING_LABEL_MESSAGE, missing), (SKEW_MESSAGE, skewed)) if f.any()]

    def _raw(self, soft: list[_Spread], nodes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(rounded raw scores, nodes with every key) on `nodes` (all when None): the same
        element-wise operations either way, so a node's raw score is the same float."""
        size = self.snap.n_nodes if nodes is None else len(nodes)
        raw = np.zeros(size, dtype=np.float64)
        valid = np.ones(size, dtype=bool)
        for s in soft:
            of = s.domains.of if nodes is None else s.domains.of[nodes]
            valid &= of >= 0
            # Each domain's term once, read through the nodes' domains; nodes lacking the key
            # read the extra last entry, 0.
            raw += s.soft_terms()[of]
        return np.round(raw), valid

    @staticmethod
    def _normalized(raw: np.ndarray, valid: np.ndarray, high: float, low: float) -> np.ndarray:
        scores = np.zeros(len(raw), dtype=np.float64)
        scores[valid] = MAX_NODE_SCORE if high == 0 else MAX_NODE_SCORE * (high + low - raw[valid]) / high
        return scores

    def score(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        # Normalized over every node (kube-scheduler's NormalizeScore): asked about a few nodes
        # only when the range stayed (see `_move`), from the raw scores kept since.
        kept = self._soft.get(cid)
        if nodes is not None and kept is not None:
            if isinstance(kept, _DomainScores):
                return kept.scores(nodes, self.weight)
            scores = self._normalized(kept.raw[nodes], kept.valid[nodes], kept.high, kept.low)
            scores *= self.weight
            return scores
        soft = [s for s in self._class(cid) if not s.constraint.hard]
        if len(soft) == 1:
            return self._scored_by_domain(cid, soft[0]).scores(nodes, self.weight)
        raw, valid = self._raw(soft, None)
        high, low = (float(raw[valid].max()), float(raw[valid].min())) if valid.any() else (0.0, 0.0)
        self._soft[cid] = _SoftScores(raw, valid, high, low)
        scores = self._normalized(raw, valid, high, low)
        scores *= self.weight
        return scores if nodes is None else scores[nodes]

    def _scored_by_domain(self, cid: int, soft: _Spread) -> _DomainScores:
        """Class cid's scores per domain of its one ScheduleAnyway constraint, from its counts (kept
        from here on: `_soft_moved`)."""
        by_domain = self._soft[cid] = _DomainScores(soft, np.zeros(0))
        by_domain.recount()
        return by_domain

    def domain_scores(self, cid: int) -> tuple[Domains, np.ndarray] | None:
        # A class with one ScheduleAnyway constraint scores alike every node of a domain: over a
        # zone key (few domains) it places by the domains' top nodes, not by a score per node.
        kept = self._soft.get(cid)
        if kept is None:
            soft = [s for s in self._class(cid) if not s.constraint.hard] if self.weight > 0 else []
            if len(soft) != 1 or soft[0].domains.count > FEW_DOMAINS:
                return None
            kept = self._scored_by_domain(cid, soft[0])
        elif not isinstance(kept, _DomainScores) or kept.spread.domains.count > FEW_DOMAINS:
            return None
        return kept.spread.domains, kept.weighted(self.weight)

    def _soft_moved(self, s: _Spread, d: int) -> None:
        """Class s.cid's soft count moved in domain d: its raw scores there afresh; the class is
        marked on the domain's nodes while the range over all nodes stays, else everywhere."""
        kept = self._soft.get(s.cid)
        if kept is None:
            self.ssn.mark_dirty(s.cid, None)        # not scored yet: its first score reads all
            return
        nodes = s.domains.nodes(d)
        if isinstance(kept, _DomainScores):
            high, low = kept.high, kept.low
            kept.moved(d)
            if high != kept.high or low != kept.low:
                self.ssn.mark_dirty(s.cid, None)
            else:
                self.ssn.mark_dirty(s.cid, nodes)
            return
        kept.raw[nodes] = self._raw([c for c in self._class(s.cid) if not c.constraint.hard], nodes)[0]
        valid = kept.raw[kept.valid]
        high, low = (float(valid.max()), float(valid.min())) if len(valid) else (0.0, 0.0)
        if high != kept.high or low != kept.low:
            kept.high, kept.low = high, low
            self.ssn.mark_dirty(s.cid, None)
        else:
            self.ssn.mark_dirty(s.cid, nodes)

    # --- notifications ---------------------------------------------------------------------
    def _selections_of(self, t: int) -> list[_Selection]:
        """The selections task t's labels match."""
        alike = self._reading.alike[t]
        selections = self._class_matches.get(alike) if alike >= 0 else self._task_matches.get(t)
        if selections is None:
            selections = self._matching(self.snap.pods[t])
            if alike >= 0:
                self._class_matches[alike] = selections
            else:
                self._task_matches[t] = selections
        return selections

    def listens(self, cid: int) -> bool:
        return bool(self._selections_of(self.snap.classes[cid].head))

    def _move(self, t: int, node: int, step: int = 1, leaving: bool = False) -> None:
        if leaving:
            return      # a leaving pod no longer counts
        alike = self._reading.alike[t]      # _selections_of's lookup inline: a pending task's class has them
        selections = self._class_matches.get(alike) if alike >= 0 else None
        for selection in selections if selections is not None else self._selections_of(t):
            selection.per_node[node] = selection.per_node.get(node, 0) + step
            selection.total += step
            for s in selection.users:
                d = s.eligible_domain[node]
                if d < 0:           # not eligible (or lacking the key: not eligible either)
                    continue
                before, low = s.step(d, step)
                if not s.hard:
                    self._soft_moved(s, d)
                    continue
                if low != s.low:
                    s.refresh_codes()
                    self.ssn.mark_dirty(s.cid, None)
                    continue
                # Every node of the domain shares its verdict: re-asked only when it flips (and
                # not asked at all where it is the class's only hard constraint: its code is theirs).
                skew, own = s.constraint.max_skew, s.self_match
                fails = before + step + own - low > skew
                if (before + own - low > skew) != fails:
                    code = s.codes[d] = MASK_FAIL if fails else MASK_PASS
                    if s.verdicts is not None:      # domain_verdicts' array, kept in step (read per call)
                        s.verdicts[d] = _FAILING if fails else 0.0
                    nodes = s.domains.kept_nodes[d]
                    if nodes is None:       # Domains.nodes inline: most are kept
                        nodes = s.domains.nodes(d)
                    if s.passing_size >= 0:
                        s.passing_size += -len(nodes) if fails else len(nodes)
                    if s.alone:
                        self.ssn.mark_dirty_as(s.cid, nodes, code, self)
                    else:
                        self.ssn.mark_dirty(s.cid, nodes)
