"""The snapshot's pass over the pods, kept across cycles (`PodScanMemo`).

A cluster's pods change a few at a time between cycles while most stay bound where they are:
reading all of them every cycle (runtime.engine.kernels.scan_pods) costs a running scheduler
more the bigger its cluster, whatever changed. The memo keeps what the last scan read of each
pod, by its place in the state's pods (dict order), and reads again only the pods that are new,
replaced by another object, moved in the dict's order, or noted as changed in place
(runtime.cluster.model.pod_changed: ClusterState's own transitions note the pods they change).
Its answer is the PodScan a full scan gives, field for field (shape and job numbers by first
appearance, as the scan numbers them), so the snapshot decides alike; tests hold the two side
by side. Anything else the scan reads (the node rows, the priority classes, the scheduler's
name, whether settled pods fold, the kernels) changing makes it scan every pod again.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from runtime.cluster.model import IN_PLACE, QUEUE_ANNOTATION
from runtime.engine.kernels import Kernels
from runtime.engine.kernels.records import PodScan

_GROUP = operator.attrgetter("group")
_ANNOTATIONS = operator.attrgetter("annotations")
# Above one pod in RESCAN_SHARE changed, every pod is scanned again (as cheap, and simpler).
RESCAN_SHARE = 4


@dataclass
class _Kept:
    """What the last scan read, pods by their place in the state's pods (dict order)."""

    setting: tuple                  # what the scan read besides the pods (compared by identity)
    priority_classes: dict[str, int]
    mark: tuple[int, int]           # IN_PLACE's position when the scan began
    keys: list[str]
    values: list[Any]
    own: np.ndarray                 # (n,) each pod's request map, numbered as `shapes`
    # Rows of the pods holding room on a node, in place order (PodScan.placed_*); `p_fold`:
    # the queue (number in `queues`) a folded settled pod counts under, -1 for the others.
    p_node: np.ndarray
    p_shape: np.ndarray
    p_gone: np.ndarray
    p_mine: np.ndarray
    p_pos: np.ndarray
    p_fold: np.ndarray
    # Our pods as tasks, in place order (PodScan's task columns); `t_volume`: in volume_tasks,
    # `t_asking`: in asking_tasks.
    t_pos: np.ndarray
    t_shape: np.ndarray
    t_job: np.ndarray
    t_priority: np.ndarray
    t_creation: np.ndarray
    t_status: np.ndarray
    t_node: np.ndarray
    t_plain: np.ndarray
    t_volume: np.ndarray
    t_asking: np.ndarray
    rule_at: np.ndarray             # (n,) bool: in PodScan.rule_pods
    volume_at: np.ndarray           # (n,) bool: in PodScan.volume_pods
    shapes: list[dict[str, int]]    # request maps (copies), numbered as the scan numbers them
    job_names: list[str]
    queues: list[str | None]
    # Per placed row, its group for the inter-pod rules (`PodScanMemo.placed_grouping`: a number
    # in the memo's table of group keys), -1 where not made yet.
    p_group: np.ndarray | None = None
    # The pods on known nodes, in placed order (`PodScanMemo.placed_pods`), and PodScan's lists of
    # pods (ours, their keys, the rule pods), once listed (read only: shared by the snapshots
    # while no pod is read again).
    placed_pods: list[Any] | None = None
    lists: tuple[list[Any], list[str], list[Any]] | None = None
    # PlacedGrouping's lists and rows as last made from these rows, and the label keys they were
    # made for: made again only where a pod is grouped again (read only).
    grouped: tuple | None = None


@dataclass(frozen=True)
class PlacedGrouping:
    """The placed pods on known nodes (Snapshot.placed_pods, in its order) grouped as the rules
    group them (runtime.engine.rules.pods): by namespace, the values of the label keys the rules'
    selectors read, and rules object. Groups in order of their first pod; group g's first pod is
    placed_pods[first[g]], its live rows rows[bounds[2g]:bounds[2g+1]] and its leaving rows (pods
    being deleted) rows[bounds[2g+1]:bounds[2g+2]], each in placed order; profiles[g] is
    (namespace, label values)."""

    first: list[int]
    rows: np.ndarray                # read-only: the groups' rows are views of it
    bounds: list[int]
    profiles: list[tuple]
    keys: list[int]                 # each group's number in the memo's table (stable across cycles)
    reuse: dict[int, Any]           # what `groups` made last time for groups whose pods did not change
    made: dict[int, Any]            # what `groups` makes now (kept for the next cycle's reuse)
    # The memo's [lists, groups] of the last `groups` answer (filled here), these lists (the
    # memo's _Kept.grouped) and, where nothing changed since that answer, the answer itself.
    listed: list = field(default_factory=lambda: [None, None])
    source: tuple | None = None
    ready: list[Any] | None = None

    def groups(self, make: Callable[[int, int, tuple], Any]) -> list[Any]:
        """One object per group, in order: made by make(group, first pod's index, profile), or the
        one made for it in an earlier cycle when none of its pods changed since (the list made
        then, read only, when no group changed)."""
        if self.ready is not None:
            return self.ready
        out = []
        reuse, made = self.reuse, self.made
        for g, (key, f, profile) in enumerate(zip(self.keys, self.first, self.profiles)):
            found = reuse.get(key)
            if found is None:
                found = make(g, f, profile)
            made[key] = found
            out.append(found)
        self.listed[:] = [self.source, out]
        return out


class PodScanMemo:
    """scan_pods kept across cycles (see the module's docstring). One per SnapshotCache."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self.rescanned = 0          # pods the last call read (tests and the benchmark say how many)
        # The placed pods' group keys (placed_grouping): key -> number, and the rules objects the
        # keys name by id (held, so no other object takes the id), for these label keys.
        self._group_ids: dict[tuple, int] = {}
        self._group_rules: list[Any] = []
        self._group_label_keys: tuple[str, ...] | None = None
        self.regrouped = 0          # placed pods the last placed_grouping read
        # Counts the scans that read some pod again: while it stays, the scan answers alike
        # (SnapshotCache keeps what it makes from the scan by it).
        self.generation = 0
        # What PlacedGrouping.groups made, by group number, and the groups whose pods changed
        # since (a row dropped or added; every group when the rows moved or were all read again).
        self._made: dict[int, Any] = {}
        self._dirty: set[int] = set()
        self._all_dirty = True
        self._listed: list = [None, None]      # PlacedGrouping.listed

    def placed_grouping(self, label_keys: tuple[str, ...]) -> PlacedGrouping:
        """The last scan's placed pods on known nodes grouped for the inter-pod rules; a pod's
        group key is read again only where the scan read the pod again (or the keys changed)."""
        kept = self._kept
        assert kept is not None, "placed_grouping follows a scan"
        if kept.p_group is None or label_keys != self._group_label_keys \
                or len(self._group_ids) > 4 * len(kept.p_node) + 1024:
            kept.p_group = np.full(len(kept.p_node), -1, dtype=np.int64)
            self._group_ids, self._group_rules, self._group_label_keys = {}, [], label_keys
            self._all_dirty = True
        known = np.flatnonzero(kept.p_node >= 0)
        groups = kept.p_group
        todo = known[groups[known] < 0]
        self.regrouped = len(todo)
        ids, holders, values = self._group_ids, self._group_rules, kept.values
        one = len(label_keys) == 1
        key0 = label_keys[0] if one else None
        for r, place in zip(todo.tolist(), kept.p_pos[todo].tolist()):
            pod = values[place]
            labels = pod.labels
            value = labels.get(key0) if one else tuple([labels.get(k) for k in label_keys])
            key = (pod.namespace, value, id(pod.rules))
            found = ids.get(key)
            if found is None:
                found = ids[key] = len(holders)
                holders.append(pod.rules)
            groups[r] = found
        dirty = self._dirty
        dirty.update(groups[todo].tolist())
        same = not len(todo) and kept.grouped is not None and kept.grouped[0] == label_keys
        if same and not dirty and not self._all_dirty and self._listed[0] is kept.grouped:
            # No pod changed since the last groups were made from these lists: the same groups.
            return PlacedGrouping(*kept.grouped[1:], self._made, self._made, self._listed, kept.grouped,
                                  self._listed[1])
        reuse = {} if self._all_dirty else {key: made for key, made in self._made.items() if key not in dirty}
        self._made, self._dirty, self._all_dirty = {}, set(), False
        if same:
            return PlacedGrouping(*kept.grouped[1:], reuse, self._made, self._listed, kept.grouped)
        g_of = groups[known]
        numbers, order = _first_seen(g_of, len(holders))
        g = numbers[g_of]
        count = len(order)
        first = np.full(count, len(g), dtype=np.int64)
        first[g[::-1]] = np.arange(len(g) - 1, -1, -1, dtype=np.int64)
        sort_key = 2 * g + (kept.p_gone[known] != 0)
        by_group = np.argsort(sort_key, kind="stable")
        rows = kept.p_node[known][by_group]
        rows.flags.writeable = False
        bounds = np.searchsorted(sort_key[by_group], np.arange(2 * count + 1, dtype=np.int64)).tolist()
        keys = list(ids)
        profiles = [(keys[i][0], (keys[i][1],)) if one else (keys[i][0], keys[i][1]) for i in order.tolist()]
        kept.grouped = (label_keys, first.tolist(), rows, bounds, profiles, order.tolist())
        return PlacedGrouping(*kept.grouped[1:], reuse, self._made, self._listed, kept.grouped)

    def placed_pods(self) -> list[Any]:
        """The last scan's pods holding room on a known node, in placed order (Snapshot.placed_pods):
        listed again only after a scan that read some pod again (a list of every bound pod, read
        only: the snapshot shares it)."""
        kept = self._kept
        assert kept is not None, "placed_pods follows a scan"
        if kept.placed_pods is None:
            values = kept.values
            kept.placed_pods = [values[i] for i in kept.p_pos[kept.p_node >= 0].tolist()]
        return kept.placed_pods

    def scan(self, k: Kernels, pods: dict, scheduler_name: str, priority_classes: dict[str, int],
             default_priority: int, node_pos: dict[str, int], fold: bool) -> PodScan:
        setting = (k.scan_pods, scheduler_name, default_priority, node_pos, bool(fold))
        mark = IN_PLACE.mark()        # before reading: a change noted meanwhile is read next time
        keys = list(pods)
        values = list(pods.values())
        n = len(keys)
        kept = self._kept
        if kept is not None and (any(a is not b for a, b in zip(kept.setting, setting))
                                 or kept.priority_classes != priority_classes):
            kept = None
        noted = IN_PLACE.since(*kept.mark) if kept is not None else None
        if noted is None:
            kept = None
        new_of_old = None
        if kept is not None:
            if keys == kept.keys:
                same = k.same_objects(values, kept.values)
            else:
                where = {key: i for i, key in enumerate(kept.keys)}
                old_of_new = np.fromiter((where.get(key, -1) for key in keys), dtype=np.int64, count=n)
                old = kept.values
                same = np.fromiter((j >= 0 and old[j] is v for j, v in zip(old_of_new.tolist(), values)),
                                   dtype=bool, count=n)
                # Kept rows move to their pod's new place (and are sorted by it: a key removed and
                # added again moves to the end of the dict's order).
                valid = np.flatnonzero(old_of_new >= 0)
                new_of_old = np.full(len(kept.keys), -1, dtype=np.int64)
                new_of_old[old_of_new[valid]] = valid
            if noted:
                ids = set(noted)
                same &= ~np.fromiter((id(v) in ids for v in values), dtype=bool, count=n)
            if (n - int(same.sum())) * RESCAN_SHARE > n:
                kept = None
        if kept is not None and new_of_old is None and same.all():     # nothing changed
            kept.mark = mark
            self.rescanned = 0
            return _answer(kept)
        if kept is None:
            same = np.zeros(n, dtype=bool)
            changed = np.arange(n, dtype=np.int64)
            sub_keys, sub_values, sub_pods = keys, values, pods
        else:
            changed = np.flatnonzero(~same)
            sub_keys = [keys[i] for i in changed.tolist()]
            sub_values = [values[i] for i in changed.tolist()]
            sub_pods = dict(zip(sub_keys, sub_values))
        self.rescanned = len(changed)
        sub = k.scan_pods(sub_pods, scheduler_name, priority_classes, default_priority, node_pos, fold)
        out = self._merge(kept, new_of_old, same, changed, sub_keys, sub_values, sub, n, fold)
        out.setting, out.priority_classes, out.mark, out.keys, out.values = \
            setting, dict(priority_classes), mark, keys, values
        self._kept = out
        self.generation += 1
        return _answer(out)

    def _merge(self, kept: _Kept | None, new_of_old: np.ndarray | None, same: np.ndarray, changed: np.ndarray,
               sub_keys: list[str], sub_values: list[Any], sub: PodScan, n: int, fold: bool) -> _Kept:
        """The kept rows of the pods unchanged and the new scan's rows of the others, in place
        order, renumbered (shapes, jobs, queues) as one scan of every pod would number them."""
        shapes = list(kept.shapes) if kept is not None else []
        shape_ids = {tuple(s.items()): i for i, s in enumerate(shapes)}

        def shape_id(requests: dict[str, int]) -> int:
            items = tuple(requests.items())
            found = shape_ids.get(items)
            if found is None:
                found = shape_ids[items] = len(shapes)
                shapes.append(dict(requests))
            return found

        job_names = list(kept.job_names) if kept is not None else []
        job_ids = dict(zip(job_names, range(len(job_names))))
        queues = list(kept.queues) if kept is not None else []
        queue_ids = {q: i for i, q in enumerate(queues)}
        m = len(sub_values)
        at = changed      # sub-scan place -> place

        # The new scan's rows, in the memo's numbers.
        sub_shape = np.array([shape_id(s) for s in sub.shapes], dtype=np.int64).reshape(-1)
        p_pos_new = at[sub.placed_at]
        p_shape_new = sub_shape[sub.placed_shape]
        p_fold_new = np.full(len(p_pos_new), -1, dtype=np.int64)
        if fold:
            # Our lone pods bound and not releasing are folded (counted under their queue
            # annotation), as the scan folds them; read with C-level maps, not a loop.
            rows = np.flatnonzero((sub.placed_mine != 0) & (sub.placed_gone == 0))
            candidates = list(map(sub_values.__getitem__, sub.placed_at[rows].tolist()))
            lone = np.fromiter(map(operator.not_, map(_GROUP, candidates)), dtype=bool, count=len(candidates))
            rows = rows[lone]
            candidates = list(itertools.compress(candidates, lone.tolist()))
            named = list(map(dict.get, map(_ANNOTATIONS, candidates), itertools.repeat(QUEUE_ANNOTATION)))
            for queue in dict.fromkeys(named):
                if queue not in queue_ids:
                    queue_ids[queue] = len(queues)
                    queues.append(queue)
            p_fold_new[rows] = np.fromiter(map(queue_ids.__getitem__, named), dtype=np.int64, count=len(named))
        # Where each listed pod is among those scanned: the lists are in their order, by identity.
        place = dict(zip(map(id, sub_values), range(m))) if sub.ours or sub.rule_pods or sub.volume_pods else {}
        distinct = len(place) == m
        if distinct:
            t_sub = np.fromiter(map(place.__getitem__, map(id, sub.ours)), dtype=np.int64, count=len(sub.ours))
        else:     # one object under two keys (or none listed): by key
            place_of = dict(zip(sub_keys, range(m)))
            t_sub = np.fromiter(map(place_of.__getitem__, sub.keys), dtype=np.int64, count=len(sub.keys))
        t_pos_new = at[t_sub]
        sub_job = np.empty(len(sub.job_names), dtype=np.int64)
        for j, name in enumerate(sub.job_names):
            found = job_ids.get(name)
            if found is None:
                found = job_ids[name] = len(job_names)
                job_names.append(name)
            sub_job[j] = found
        t_shape_new = sub_shape[sub.shape]
        t_volume_new = np.zeros(len(t_pos_new), dtype=bool)
        t_volume_new[np.asarray(sub.volume_tasks, dtype=np.int64)] = True
        t_asking_new = np.zeros(len(t_pos_new), dtype=bool)
        t_asking_new[np.asarray(sub.asking_tasks, dtype=np.int64)] = True
        # Each pod's own request map: the scan's rows give it, but a pod on a node that is gone
        # has the empty map in its rows; those (and pods in no row) are read here.
        own_sub = np.full(m, -1, dtype=np.int64)
        own_sub[t_sub] = t_shape_new
        own_sub[sub.placed_at] = np.where(sub.placed_node >= 0, p_shape_new, -1)
        for i in np.flatnonzero(own_sub < 0).tolist():
            own_sub[i] = shape_id(sub_values[i].requests)
        rule_sub, volume_sub = (_listed(sub_values, place if distinct else None, chosen)
                                for chosen in (sub.rule_pods, sub.volume_pods))

        own = np.empty(n, dtype=np.int64)
        rule_at = np.zeros(n, dtype=bool)
        volume_at = np.zeros(n, dtype=bool)
        own[at] = own_sub
        rule_at[at] = rule_sub
        volume_at[at] = volume_sub
        if kept is None:
            self._all_dirty = True
            p_cols = [p_pos_new, sub.placed_node, p_shape_new, sub.placed_gone, sub.placed_mine, p_fold_new,
                      np.full(len(p_pos_new), -1, dtype=np.int64)]
            t_cols = [t_pos_new, t_shape_new, sub_job[sub.job],
                      sub.priority, sub.creation, sub.status, sub.node, sub.plain, t_volume_new, t_asking_new]
        else:
            old_places = np.flatnonzero(same) if new_of_old is None else None
            if new_of_old is None:
                own[old_places] = kept.own[old_places]
                rule_at[old_places] = kept.rule_at[old_places]
                volume_at[old_places] = kept.volume_at[old_places]
            else:
                old_of = np.flatnonzero((new_of_old >= 0))
                old_of = old_of[same[new_of_old[old_of]]]
                own[new_of_old[old_of]] = kept.own[old_of]
                rule_at[new_of_old[old_of]] = kept.rule_at[old_of]
                volume_at[new_of_old[old_of]] = kept.volume_at[old_of]

            def kept_rows(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                place = pos if new_of_old is None else new_of_old[pos]
                ok = place >= 0
                ok[ok] = same[place[ok]]
                return ok, place[ok]

            p_ok, p_place = kept_rows(kept.p_pos)
            t_ok, t_place = kept_rows(kept.t_pos)
            # The groups of the rows dropped changed; rows kept in another order change them all.
            if kept.p_group is not None:
                dropped = kept.p_group[~p_ok]
                self._dirty.update(dropped[dropped >= 0].tolist())
            if len(p_place) > 1 and not bool((p_place[1:] > p_place[:-1]).all()):
                self._all_dirty = True
            p_cols = [np.concatenate([p_place, p_pos_new]),
                      *(np.concatenate([old[p_ok], new]) for old, new in (
                          (kept.p_node, sub.placed_node), (kept.p_shape, p_shape_new), (kept.p_gone, sub.placed_gone),
                          (kept.p_mine, sub.placed_mine), (kept.p_fold, p_fold_new),
                          (kept.p_group if kept.p_group is not None else np.full(len(kept.p_pos), -1, dtype=np.int64),
                           np.full(len(p_pos_new), -1, dtype=np.int64))))]
            t_cols = [np.concatenate([t_place, t_pos_new]),
                      *(np.concatenate([old[t_ok], new]) for old, new in (
                          (kept.t_shape, t_shape_new), (kept.t_job, sub_job[sub.job]),
                          (kept.t_priority, sub.priority), (kept.t_creation, sub.creation), (kept.t_status, sub.status),
                          (kept.t_node, sub.node), (kept.t_plain, sub.plain), (kept.t_volume, t_volume_new),
                          (kept.t_asking, t_asking_new)))]
            p_cols = _in_place_order(p_cols)
            t_cols = _in_place_order(t_cols)

        p_pos, p_node, p_shape, p_gone, p_mine, p_fold, p_group = p_cols
        t_pos, t_shape, t_job, t_priority, t_creation, t_status, t_node, t_plain, t_volume, t_asking = t_cols
        # Numbered by first appearance, as one scan numbers them: a pod's own request map, then
        # (a pod bound to a node that is gone) the empty map its row holds.
        gone = np.flatnonzero(p_node < 0)
        if len(gone):
            events = np.concatenate([own, np.full(len(gone), shape_id({}), dtype=np.int64)])
            events = events[np.argsort(np.concatenate([2 * np.arange(n), 2 * p_pos[gone] + 1]), kind="stable")]
        else:
            events = own
        shape_map, shape_order = _first_seen(events, len(shapes))
        job_map, job_order = _first_seen(t_job, len(job_names))
        folded = p_fold >= 0
        queue_map, queue_order = _first_seen(p_fold[folded], len(queues))
        p_fold = p_fold.copy()
        p_fold[folded] = queue_map[p_fold[folded]]
        return _Kept(
            (), {}, (0, 0), [], [], shape_map[own],
            p_node, shape_map[p_shape], p_gone, p_mine, p_pos, p_fold,
            t_pos, shape_map[t_shape], job_map[t_job], t_priority, t_creation, t_status, t_node, t_plain, t_volume,
            t_asking, rule_at, volume_at, [shapes[i] for i in shape_order.tolist()], [job_names[i] for i in job_order.tolist()],
            [queues[i] for i in queue_order.tolist()], p_group)


def _listed(values: list[Any], place: dict[int, int] | None, chosen: list[Any]) -> np.ndarray:
    """(len(values),) bool: which of `values` are in `chosen`, a subsequence of them (by
    identity). `place`: id -> place in `values`, None when an object is there twice."""
    out = np.zeros(len(values), dtype=bool)
    if not chosen:
        return out
    if place is not None:
        out[np.fromiter(map(place.__getitem__, map(id, chosen)), dtype=np.int64, count=len(chosen))] = True
    else:     # one object under two keys: each place of it is listed
        ids = set(map(id, chosen))
        out[:] = np.fromiter((id(v) in ids for v in values), dtype=bool, count=len(values))
    return out


def _in_place_order(columns: list[np.ndarray]) -> list[np.ndarray]:
    """Rows (columns[0]: their place) sorted by place; kept rows then new ones, each in order,
    so a stable sort is a merge of two runs."""
    places = columns[0]
    if len(places) < 2 or bool((places[1:] > places[:-1]).all()):
        return columns
    order = np.argsort(places, kind="stable")
    return [c[order] for c in columns]


def _first_seen(ids: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(new number of each id, ids in order of first appearance): ids numbered by where they
    first appear in `ids`; ids that do not appear get -1."""
    first = np.full(size, len(ids), dtype=np.int64)
    # Fancy assignment with repeated indices keeps the last value written: written from the
    # end, that is each id's first place.
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1, dtype=np.int64)
    seen = np.flatnonzero(first < len(ids))
    order = seen[np.argsort(first[seen], kind="stable")]
    numbers = np.full(size, -1, dtype=np.int64)
    numbers[order] = np.arange(len(order), dtype=np.int64)
    return numbers, order


def _answer(kept: _Kept) -> PodScan:
    """The PodScan for the snapshot: its own lists and arrays (the snapshot adds to some), but
    for the lists of ours, their keys and the rule pods, read only, kept while no pod is read
    again (the snapshot cache knows the rule pods' by identity: SnapshotCache.rule_reading)."""
    values, keys = kept.values, kept.keys
    if kept.lists is None:
        t_pos = kept.t_pos.tolist()
        kept.lists = ([values[i] for i in t_pos], [keys[i] for i in t_pos],
                      [values[i] for i in np.flatnonzero(kept.rule_at).tolist()])
    ours, our_keys, rule_pods = kept.lists
    settled: dict[tuple[str | None, int], int] = {}
    folded = kept.p_fold >= 0
    if folded.any():
        width = max(len(kept.shapes), 1)
        counts = np.bincount(kept.p_fold[folded] * width + kept.p_shape[folded])
        for code in np.flatnonzero(counts).tolist():
            settled[(kept.queues[code // width], code % width)] = int(counts[code])
    return PodScan(
        [dict(s) for s in kept.shapes], kept.p_node.copy(), kept.p_shape.copy(), kept.p_gone.copy(),
        kept.p_mine.copy(), ours, our_keys, kept.t_shape.copy(),
        kept.t_job.copy(), kept.t_priority.copy(), kept.t_creation.copy(), kept.t_status.copy(), kept.t_node.copy(),
        kept.t_plain.copy(), list(kept.job_names), settled, rule_pods,
        [values[i] for i in np.flatnonzero(kept.volume_at).tolist()], np.flatnonzero(kept.t_volume).tolist(),
        kept.p_pos.copy(), np.flatnonzero(kept.t_asking).tolist())
