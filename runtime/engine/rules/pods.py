"""What the stateful rules share: the pods they count and a pod's label profile.

A rule counts every pod on a node (Snapshot.placed_pods, whoever's) and is told of the
cycle's placements, undos and evictions of our tasks (runtime.engine.extension.StatefulRule). Two pods
with the same namespace and the same values of the label keys the rules' selectors read
(Snapshot.label_keys) match the same selectors: their profile, the key matches are cached by.
The placed pods are grouped once per session by profile and rules (`placed_groups`), so that a
rule matches a group once and counts its nodes at once: the replicas of one template are one
group however many there are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, Hashable, TypeVar

import numpy as np

from runtime.cluster.model import Pod, PodRules
from runtime.cluster.selectors import LabelSelector
from runtime.engine.extension import StatefulRule
from runtime.engine.snapshot import Snapshot

Profile = Hashable
T = TypeVar("T")


def profile(snap: Snapshot, pod: Pod) -> Profile:
    labels = pod.labels
    keys = snap.label_keys or ()
    return pod.namespace, tuple([labels.get(k) for k in keys])


@dataclass(eq=False)
class KeptMatches:
    """Which of a rule's selectors (as positions in `made_from`) each pod profile matches, kept
    across cycles beside the snapshot cache (Snapshot.rule_tables) while what decides them stays:
    the selectors, in order, and the label keys a profile holds the values of."""

    made_from: list
    label_keys: tuple[str, ...] | None
    by_profile: dict[Profile, tuple[int, ...]] = field(default_factory=dict)


def kept_matches(snap: Snapshot, table: str, made_from: list) -> KeptMatches:
    """The snapshot cache's KeptMatches under `table`, made anew (empty) where the selectors or
    the label keys changed, or where it outgrew the pods in play (bounded_profiles)."""
    tables = snap.rule_tables
    kept = tables.get(table)
    if kept is None or kept.label_keys != snap.label_keys or kept.made_from != made_from:
        kept = tables[table] = KeptMatches(made_from, snap.label_keys)
    bounded_profiles(snap, kept.by_profile)
    return kept


def bounded_profiles(snap: Snapshot, by_profile: dict) -> None:
    """Empties a table kept by pod profile once it holds many more profiles than there are pods
    in play: while the rules stay, pods come and go with label values of their own (a
    StatefulSet's pod names, where a selector reads them), and each left a profile behind."""
    if len(by_profile) > 4 * (len(snap.pods) + len(snap.placed_pods)) + 1024:
        by_profile.clear()


@dataclass(eq=False)
class KeptCounts(Generic[T]):
    """A rule's counts of the placed pods as a session opens (its `tables`), kept across cycles
    beside the snapshot cache (Snapshot.rule_tables) and brought up to date from the placed
    groups that changed (`count_changes`), while what else decides them stays: what the tables
    were made for (the rule's terms or selections, in order: `made_from`), the label keys and the
    nodes' domains (Snapshot.topology, made anew when the nodes change). A session counts its
    placements on copies."""

    made_from: list | None
    label_keys: tuple[str, ...] | None
    topology: object
    tables: T
    # Per placed group's number (PlacedGrouping.keys), the group the tables count: a group is
    # made anew when one of its pods changes, so the same object means the same pods.
    counted: dict[int, PlacedGroup] = field(default_factory=dict)
    # The list of groups `counted` was last brought to: the grouping hands the same list (read
    # only) while no placed pod changed, and then nothing is to be counted.
    seen: list[PlacedGroup] | None = None


def kept_counts(snap: Snapshot, table: str, made_from: list) -> KeptCounts | None:
    """The snapshot cache's KeptCounts under `table` where it holds for this snapshot, else None
    (it is dropped: the rule counts every placed group and keeps anew, `keep_counts`)."""
    kept = snap.rule_tables.get(table)
    if kept is not None and not (kept.topology is snap.topology and kept.label_keys == snap.label_keys
                                 and kept.made_from == made_from and snap.placed_grouping is not None):
        kept = snap.rule_tables[table] = None
    return kept


def keep_counts(snap: Snapshot, table: str, made_from: list, tables: T, groups: list[PlacedGroup]) -> None:
    """Keeps `tables` (just made from every one of `groups`, the session's placed groups) for
    the next cycles, where the placed pods are grouped by the snapshot cache."""
    grouping = snap.placed_grouping
    if grouping is not None:
        snap.rule_tables[table] = KeptCounts(made_from, snap.label_keys, snap.topology, tables,
                                             dict(zip(grouping.keys, groups)), groups)


def count_changes(kept: KeptCounts, snap: Snapshot, groups: list[PlacedGroup],
                  tally: Callable[[PlacedGroup, int], None]) -> None:
    """Brings kept's tables to `groups` (the session's placed groups, in PlacedGrouping order):
    tally(group, -1) takes away each group counted that is no longer there, then tally(group, 1)
    counts each new one; kept.counted is updated."""
    if kept.seen is groups:
        return
    counted = kept.counted
    gone: list[PlacedGroup] = []
    new: list[PlacedGroup] = []
    keys = snap.placed_grouping.keys
    for key, group in zip(keys, groups):
        old = counted.get(key)
        if old is not group:
            if old is not None:
                gone.append(old)
            new.append(group)
            counted[key] = group
    if len(counted) > len(keys):       # groups no longer placed (every one of keys is counted)
        present = set(keys)
        for key in [key for key in counted if key not in present]:
            gone.append(counted.pop(key))
    try:
        for group in gone:
            tally(group, -1)
        for group in new:
            tally(group, 1)
    except BaseException:
        kept.made_from = None      # half brought up to date: never taken again (kept_counts)
        raise
    kept.seen = groups


def count_each(counts: dict[int, int], keys: list[int], step: int) -> None:
    """Adds `step` (1, or -1 to take away) to counts[key] for each of `keys` (a key repeated
    counts again). A key taken to 0 is dropped: counts kept across cycles would otherwise
    gather every key (domain, node) pods ever were in."""
    if step > 0:
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    else:
        for key in keys:
            left = counts[key] - 1
            if left:
                counts[key] = left
            else:
                del counts[key]


class Reading:
    """What the counting rules read on each placement, as Python lists and dicts made once per
    session and shared by the rules (`reading`): indexing a list costs a tenth of reading one
    element of an array, and a placement reads a few."""

    def __init__(self, ssn) -> None:
        # Per task, a key it shares with the tasks every rule answers alike for (-1: none): a
        # pending task's class, which its namespace, rules and the inter-pod selectors its labels
        # satisfy make (runtime.engine.kernels.task_columns); the others are keyed by themselves.
        # The snapshot's statuses (the session's own copy changes).
        self.alike: list[int] = ssn.pending_classes()
        self._snap = ssn.snap
        self._profiles: dict[int, Profile] = {}      # id(pod) -> its profile (the pods live as long)

    def profile(self, pod: Pod) -> Profile:
        """profile(snap, pod), made once per pod of the snapshot: a class's head is asked by
        each rule (its terms, the holds and the selections it matches)."""
        found = self._profiles.get(id(pod))
        if found is None:
            found = self._profiles[id(pod)] = profile(self._snap, pod)
        return found


def _one_code(code: int) -> np.ndarray:
    out = np.array([code], dtype=np.uint8)
    out.flags.writeable = False
    return out


# A rule's codes on one node, read only (ClassPlacement.update reads them): a placement re-asks
# a class about the node it touched, thousands of times a cycle, and a new array each costs more
# than the answer.
ONE_NODE_CODES = tuple(_one_code(code) for code in range(4))


def reading(ssn) -> Reading:
    """The session's Reading (made by the first rule to ask)."""
    return ssn.rule_state("rule-reading", lambda: Reading(ssn))


def placed(snap: Snapshot) -> Iterator[tuple[Pod, int]]:
    """Every pod holding room on a node, with its node row."""
    return zip(snap.placed_pods, snap.placed_rows.tolist())


@dataclass(frozen=True, eq=False)
class PlacedGroup:
    """Placed pods alike to every rule: one profile and one rules object."""

    pod: Pod              # the first of them: its namespace and labels answer for all
    rules: PodRules | None
    live: np.ndarray      # node rows of those running, one per pod (a row may repeat)
    leaving: np.ndarray   # node rows of those being evicted or deleted
    profile: Profile      # profile(snap, pod), made once for every rule


def placed_groups(ssn) -> list[PlacedGroup]:
    """The snapshot's placed pods, grouped (made once per session, for every rule)."""
    return ssn.rule_state("placed-groups", lambda: _group_placed(ssn.snap))


def _group_placed(snap: Snapshot) -> list[PlacedGroup]:
    grouping = snap.placed_grouping
    if grouping is not None:     # grouped by the snapshot cache, read again only where pods changed
        pods, rows, bounds = snap.placed_pods, grouping.rows, grouping.bounds
        return grouping.groups(lambda g, f, profile: PlacedGroup(
            pods[f], pods[f].rules or None, rows[bounds[2 * g]:bounds[2 * g + 1]],
            rows[bounds[2 * g + 1]:bounds[2 * g + 2]], profile))
    keys = snap.label_keys or ()
    rows: dict[tuple, tuple[Pod, list[int], list[int]]] = {}
    pods = snap.placed_pods
    # The values of the keys the selectors read, per pod (one key, the common case, without a
    # tuple each: a cluster's bound pods are many).
    if len(keys) == 1:
        key0 = keys[0]
        values: list = [pod.labels.get(key0) for pod in pods]
    else:
        values = [tuple([pod.labels.get(k) for k in keys]) for pod in pods]
    for pod, value, row in zip(pods, values, snap.placed_rows.tolist()):
        # Rules objects are shared by the pods of a template (runtime.cluster.podspec), so their
        # identity groups them without comparing terms (nor asking each whether it is empty: an
        # empty rules object only makes a group of its own, which counts as one without).
        key = (pod.namespace, value, id(pod.rules))
        found = rows.get(key)
        if found is None:
            found = rows[key] = (pod, [], [])
        found[2 if pod.releasing else 1].append(row)
    one_key = len(keys) == 1
    return [PlacedGroup(pod, pod.rules or None, np.array(live, dtype=np.int64), np.array(leaving, dtype=np.int64),
                        (namespace, (value,) if one_key else value))
            for (namespace, value, _), (pod, live, leaving) in rows.items()]


class CountingRule(StatefulRule):
    """A stateful rule that counts our pods where they are, those leaving apart: a placement
    adds a live pod on its node, an undo takes it away, an eviction moves it to the leaving,
    an undone eviction back. A subclass says what one such move does (`_move`)."""

    def _move(self, t: int, node: int, step: int = 1, leaving: bool = False) -> None:
        raise NotImplementedError

    def placed(self, t: int, node: int) -> None:
        self._move(t, node, 1, False)

    def __init_subclass__(cls, **kwargs) -> None:
        # A placement (the commonest notification, one per pod placed) is the move with its
        # defaults, a live pod in: a subclass's `_move` is its `placed`, a call fewer each time.
        super().__init_subclass__(**kwargs)
        if "_move" in cls.__dict__ and "placed" not in cls.__dict__:
            cls.placed = cls.__dict__["_move"]

    def unplaced(self, t: int, node: int) -> None:
        self._move(t, node, -1, False)

    def evicted(self, t: int, node: int) -> None:
        self._move(t, node, -1, False)
        self._move(t, node, 1, True)

    def unevicted(self, t: int, node: int) -> None:
        self._move(t, node, -1, True)
        self._move(t, node, 1, False)


class SelectorIndex(Generic[T]):
    """Items (terms, selections) by a label pair their selector requires, so that a pod's
    candidates are found from its labels instead of by trying every item; items whose
    selector requires no single pair are always candidates."""

    def __init__(self) -> None:
        self._anchored: dict[tuple[str, str], list[T]] = {}
        self._loose: list[T] = []
        # Items added since the last `candidates`, indexed when next asked: a rule whose profile
        # matches are kept across cycles (KeptMatches) asks about few pods, often none.
        self._added: list[tuple[T, LabelSelector | None]] = []

    def add(self, item: T, selector: LabelSelector | None) -> None:
        self._added.append((item, selector))

    def add_all(self, items: list[tuple[T, LabelSelector | None]]) -> None:
        """`add` of each (item, selector), in order."""
        self._added.extend(items)

    def _index_added(self) -> None:
        anchored, loose = self._anchored, self._loose
        for item, selector in self._added:
            pair = selector.anchor if selector is not None else None
            if pair is None:
                loose.append(item)
            else:
                anchored.setdefault(pair, []).append(item)
        self._added = []

    def candidates(self, labels: Mapping[str, str]) -> list[T]:
        """Each item at most once (an item is listed under one pair only)."""
        if self._added:
            self._index_added()
        out = [item for pair in labels.items() for item in self._anchored.get(pair, ())]
        return out + self._loose if self._loose else out
