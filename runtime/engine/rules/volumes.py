"""The storage a pod claims, as kube-scheduler's volume plugins (which Volcano's predicates
wraps) decide it, in their filter order:

- VolumeRestrictions: a ReadWriteOncePod claim another pod uses fails every node (a leaving
  user frees it later: pipelined);
- NodeVolumeLimits: the distinct volumes of each CSI driver on a node (the CSINode's
  `allocatable.count`, else the node's `attachable-volumes-csi-<driver>`) — those of every pod
  there, the cycle's placements included, plus the pod's new ones — stay within the limit; an
  unbound claim counts under its class's provisioner;
- VolumeBinding: a bound claim's PV must be reachable from the node (its `nodeAffinity`); a
  delayed (WaitForFirstConsumer) claim needs, on the node, an unclaimed PV that fits it
  (class, size, access modes, volume mode, selector, node affinity) or a class that provisions
  there (`allowedTopologies`). When a pod is placed, each of its delayed claims takes the
  smallest such PV visible from its node (claims smallest first, as kube's volume binder),
  reserved for the rest of the cycle so that no PV goes to two claims; an undone placement (a
  gang that did not fit) gives it back. A claim pre-bound by a PV's claimRef follows that PV; one
  whose provisioning was already asked for a node (`volume.kubernetes.io/selected-node`) only
  goes there;
- VolumeZone: a bound PV's zone and region labels must match the node's (a node without any
  such label passes).

The choices a placement made (`choices`) become the cycle's `Decisions.volumes`
(runtime.cluster.decisions.VolumeChoice): on a cluster the PV's claimRef or the claim's selected-node
annotation is written before the pod is bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import copy
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from runtime.cluster.decisions import NODES, VOLUME, Reason, VolumeChoice
from runtime.cluster.selectors import SelectorTerm
from runtime.engine.nodemasks import label_exists, label_match, terms_mask
from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, Check, StatefulRule
from runtime.engine.rules.pods import ONE_NODE_CODES
from runtime.cluster.storage import (
    ATTACH_LIMIT_PREFIX, BOUND, DELAYED, GA_ZONE_LABEL, PREBOUND, READ_WRITE_ONCE_POD, SELECTED, ZONE_LABELS,
    ClaimUse, CSINode, PersistentVolume, PersistentVolumeClaim, Storage, StorageClass, VolumeSnapshot,
    attach_identity, claim_shape, volume_fits,
)

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session
    from runtime.engine.snapshot import Snapshot

RWOP_MESSAGE = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
LIMIT_MESSAGE = "node(s) exceed max volume count"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
# Up to this many nodes, `codes` answers node by node (see there).
FEW_NODES = 8
STORAGE_MESSAGES = frozenset({RWOP_MESSAGE, LIMIT_MESSAGE, NODE_CONFLICT, BIND_CONFLICT, PV_MISSING, ZONE_CONFLICT})


def waits_on_storage(reason: Reason) -> bool:
    """Whether a waiting reason is (partly) the pod's storage: its claims hold it from every
    node, or some nodes failed it for its volumes."""
    return reason.kind == VOLUME or (reason.kind == NODES and any(m in STORAGE_MESSAGES
                                                                   for m in reason.details.get("counts", {})))


@dataclass(frozen=True)
class _Candidates:
    """The PVs delayed claims alike (runtime.cluster.storage.claim_shape) could take, as
    VolumeTables keeps them: indices into its `pvs`, smallest first; those reachable from every
    node; per node row those reachable from it; per node how many reach it. Shared by the
    sessions: never written."""

    candidates: list[int]
    everywhere: list[int]
    by_node: dict[int, list[int]]
    reach: np.ndarray             # (N,) int64


@dataclass
class _Shape:
    """Delayed claims alike in one session: their candidates (read only, from VolumeTables),
    whether their class provisions for each node and, per node, how many candidates are still
    free there."""

    candidates: list[int]         # PV indices (VolumeTables.pvs)
    everywhere: list[int]
    by_node: dict[int, list[int]]
    provision: np.ndarray         # (N,) bool: the class provisions for the node
    free: np.ndarray              # (N,) int64
    classes: set[int] = field(default_factory=set)


class VolumeTables:
    """What the volume rule reads of the nodes, PVs, StorageClasses and CSINodes, kept across
    cycles beside the snapshot cache (Snapshot.rule_tables): with thousands of local PVs, finding
    a claim shape's candidates and the nodes each can be reached from is a tenth of a cycle that
    places a few hundred claims, and it seldom changes.

    `current` (each session's start) drops what was made from something that changed since:
    - the snapshot's node list (the snapshot cache's node arrays, rebuilt whenever a node is
      added, removed or changed): everything;
    - the PVs (one added, removed, or replaced by one not equal to it): the candidates (a PV's
      node rows are kept while its nodeAffinity and the nodes are the same);
    - the StorageClasses: which nodes each class provisions for;
    - the CSINodes: the attach limits.
    A claim that changes needs nothing dropped: its shape is the key its candidates are kept by.
    What a session changes (reservations, free counts) it keeps in its own arrays."""

    def __init__(self) -> None:
        self._nodes: list[str] | None = None           # the node list the rows index (held: compared by identity)
        self.node_row: dict[str, int] = {}
        self._volumes: dict[str, PersistentVolume] = {}    # the PVs the candidates were found among
        self._classes: dict[str, StorageClass] = {}
        self._csinodes: dict[str, CSINode] = {}
        self._rows: dict[str, tuple] = {}               # PV name -> (its nodeAffinity, its rows)
        self._provision: dict[str, np.ndarray] = {}     # class name -> (N,) bool
        self._limits: dict[str, tuple[np.ndarray, bool]] = {}   # driver -> ((N,) limit or -1, some node has one)
        self._drop_candidates()

    def _drop_candidates(self) -> None:
        self.pvs: list[PersistentVolume] = []
        self.pv_index: dict[str, int] = {}              # PV name -> its index in `pvs`
        self.pv_nodes: list[np.ndarray | None] = []     # rows, None: every node
        self.pv_single: list[int] = []                  # the one row a PV is reached from, else -1
        self.pv_keys: list[list[tuple]] = []            # PV index -> the shapes it is a candidate of
        self._by_class: dict[str, list[PersistentVolume]] | None = None   # storage class -> its PVs, in order
        self._shapes: dict[tuple, _Candidates] = {}

    def current(self, snap: Snapshot, storage: Storage) -> VolumeTables:
        """The tables for `snap`'s nodes and `storage`: these when nothing they were made from
        changed, else a copy with what changed dropped (a session still reading these keeps
        them as they were: parts only ever grow, by what the same objects give)."""
        nodes = snap.node_names is self._nodes
        # Dict compares: the same objects compare at once.
        volumes = nodes and self._volumes == storage.volumes
        classes = nodes and self._classes == storage.classes
        csinodes = nodes and self._csinodes == storage.csinodes
        if nodes and volumes and classes and csinodes:
            # The state's dicts change in place: a copy, whose objects make the next compare
            # one of identities.
            self._volumes = dict(storage.volumes)
            return self
        new = copy.copy(self)
        if not nodes:
            new._nodes = snap.node_names
            new.node_row = {name: i for i, name in enumerate(snap.node_names)}
            new._rows = {}
        if not volumes:
            new._drop_candidates()
            if nodes:       # a PV's rows stay while its nodeAffinity does
                new._rows = {name: kept for name, kept in self._rows.items() if name in storage.volumes}
        new._volumes = dict(storage.volumes)
        if not classes:
            new._provision = {}
            new._classes = dict(storage.classes)
        if not csinodes:
            new._limits = {}
            new._csinodes = dict(storage.csinodes)
        return new

    # --- node rows -------------------------------------------------------------------------
    def named_rows(self, terms: tuple[SelectorTerm, ...]) -> list[int] | None:
        """The node rows of terms that only name nodes (`metadata.name In (...)`, a local PV's
        usual affinity), found by name instead of by a pass over every node; None for any other
        terms. An empty term matches nothing (terms_mask)."""
        node_row = self.node_row
        if len(terms) == 1 and len(terms[0]) == 1:
            # One name list (a local PV's affinity, one per node): no sets of sets.
            e = terms[0][0]
            if not (e.field and e.key == "metadata.name" and e.operator == "In"):
                return None
            return sorted({node_row[name] for name in e.values if name in node_row})
        rows: set[int] = set()
        for term in terms:
            if not term:
                continue
            if not all(e.field and e.key == "metadata.name" and e.operator == "In" for e in term):
                return None
            named = set(term[0].values)
            for expr in term[1:]:
                named &= set(expr.values)
            rows.update(node_row[name] for name in named if name in node_row)
        return sorted(rows)

    def terms_mask(self, snap: Snapshot, terms: tuple[SelectorTerm, ...]) -> np.ndarray:
        rows = self.named_rows(terms)
        if rows is None:
            return terms_mask(snap, terms)
        mask = np.zeros(snap.n_nodes, dtype=bool)
        mask[rows] = True
        return mask

    def pv_rows(self, snap: Snapshot, pv: PersistentVolume) -> np.ndarray | None:
        """The rows of the nodes a PV is reachable from; None: every node."""
        affinity = pv.node_affinity
        if affinity is None:
            return None
        kept = self._rows.get(pv.name)
        if kept is not None and kept[0] == affinity:
            return kept[1]
        rows = self.named_rows(affinity)
        if rows is not None and len(rows) < snap.n_nodes:
            found: np.ndarray | None = np.array(rows, dtype=np.int64)
        else:
            mask = terms_mask(snap, affinity) if rows is None else np.ones(snap.n_nodes, dtype=bool)
            found = None if mask.all() else np.flatnonzero(mask)
        self._rows[pv.name] = (affinity, found)
        return found

    # --- classes, limits -------------------------------------------------------------------
    def provision(self, snap: Snapshot, storage: Storage, claim: PersistentVolumeClaim) -> np.ndarray:
        """(N,) bool: the nodes the claim's class provisions a volume for (read only)."""
        name = claim.storage_class or ""
        found = self._provision.get(name)
        if found is None:
            cls = storage.class_of(claim)
            if cls is None or not cls.provisions:
                found = np.zeros(snap.n_nodes, dtype=bool)
            elif not cls.allowed_topologies:
                found = np.ones(snap.n_nodes, dtype=bool)
            else:
                found = self.terms_mask(snap, cls.allowed_topologies)
            self._provision[name] = found
        return found

    def limit(self, snap: Snapshot, storage: Storage, driver: str) -> tuple[np.ndarray, bool]:
        """((N,) the nodes' attach limit for the driver, -1: none (read only); whether some node has one)."""
        found = self._limits.get(driver)
        if found is None:
            limit = np.full(snap.n_nodes, -1, dtype=np.int64)
            key = ATTACH_LIMIT_PREFIX + driver
            csinodes = storage.csinodes
            for row, node in enumerate(snap.node_objects):
                if key in node.allocatable:
                    limit[row] = node.allocatable[key]
                csinode = csinodes.get(node.name)
                if csinode is not None and driver in csinode.limits:
                    limit[row] = csinode.limits[driver]
            found = self._limits[driver] = (limit, bool((limit >= 0).any()))
        return found

    # --- candidates ------------------------------------------------------------------------
    def candidates(self, snap: Snapshot, key: tuple, claim: PersistentVolumeClaim) -> _Candidates:
        """The PVs claims of shape `key` (claim's) could take, none reserved."""
        found = self._shapes.get(key)
        if found is not None:
            return found
        known = self.pv_index
        if self._by_class is None:
            # volume_fits asks for the claim's class: a shape looks only at its class's PVs.
            self._by_class = {}
            for pv in self._volumes.values():
                self._by_class.setdefault(pv.storage_class, []).append(pv)
        candidates = []
        for pv in self._by_class.get(claim.storage_class or "", ()):
            if not volume_fits(pv, claim):
                continue
            i = known.get(pv.name)
            if i is None:
                i = known[pv.name] = len(self.pvs)
                self.pvs.append(pv)
                rows = self.pv_rows(snap, pv)
                self.pv_nodes.append(rows)
                self.pv_single.append(int(rows[0]) if rows is not None and len(rows) == 1 else -1)
                self.pv_keys.append([])
            candidates.append(i)
        pvs = self.pvs
        candidates.sort(key=lambda i: (pvs[i].capacity, pvs[i].name))
        everywhere: list[int] = []
        by_node: dict[int, list[int]] = {}
        # The count per node in one pass: the rows of every candidate together.
        rows: list[np.ndarray] = []
        for i in candidates:
            self.pv_keys[i].append(key)
            nodes = self.pv_nodes[i]
            if nodes is None:
                everywhere.append(i)
            else:
                rows.append(nodes)
                for node in nodes.tolist():
                    by_node.setdefault(node, []).append(i)
        reach = np.full(snap.n_nodes, len(everywhere), dtype=np.int64)
        if rows:
            np.add.at(reach, np.concatenate(rows), 1)
        reach.setflags(write=False)
        found = self._shapes[key] = _Candidates(candidates, everywhere, by_node, reach)
        return found


def volume_tables(snap: Snapshot, storage: Storage) -> VolumeTables:
    """The snapshot's kept VolumeTables (made on first use), current for its nodes and storage."""
    kept = snap.rule_tables.get(VolumeRule.name)
    now = (kept or VolumeTables()).current(snap, storage)
    if now is not kept:
        snap.rule_tables[VolumeRule.name] = now
    return now


@dataclass
class _Slot:
    """One delayed claim of a class: its shape, and its name when the class is that claim's
    own (a claim several pods share, or ReadWriteOncePod)."""

    shape: int
    request: int
    claim: str | None


@dataclass
class _Class:
    static: np.ndarray                        # (N,) bool: the bound PVs, pre-bound PVs, selected node
    checks: list[tuple[str, np.ndarray]]      # the static part's failures, in filter order
    slots: list[_Slot]                        # delayed claims, smallest request first
    overlapping: bool                         # shapes sharing candidates: the greedy decides per node
    rwop: tuple[str, ...]                     # ReadWriteOncePod claims
    drivers: dict[str, tuple[str, ...]]       # driver -> the class's volumes of it (unique names)


@dataclass(frozen=True)
class _Plan:
    """What placing a task of one class does with its claims, found once per class: the tasks
    of a class have alike claims position by position (the class keys of
    runtime.cluster.storage.volume_snapshot: a delayed claim of its pod alone by its shape, size
    included, any other by the claim itself)."""

    size: int                                  # claims
    fixed: tuple[VolumeChoice, ...]            # pre-bound and selected claims' choices (the same claims)
    delayed: tuple[tuple[int, int], ...]       # (claim position, shape), smallest request first
    rwop: tuple[int, ...]                      # positions of ReadWriteOncePod claims
    # Per position what NodeVolumeLimits counts it under: a bound claim's (driver, volume) (the
    # same claim), else the driver provisioning it (the volume is the claim's own), or None.
    attach: tuple[tuple[str, str] | str | None, ...]


class VolumeRule(StatefulRule):
    name = "volumes"

    def __init__(self, ssn: Session, zone: bool = True, limits: bool = True):
        self.ssn = ssn
        self.snap = snap = ssn.snap
        vs: VolumeSnapshot = snap.volumes
        self.vs = vs
        self.storage = vs.storage
        self.zone, self.limits = zone, limits
        n = snap.n_nodes
        self.n = n
        self.tables = tables = volume_tables(snap, vs.storage)
        self._node_row = tables.node_row
        self._masks: dict[tuple[SelectorTerm, ...], np.ndarray] = {}
        # PVs that delayed claims could take (the tables' indices), each with the nodes it is
        # reachable from; those reserved this session.
        self.pvs = tables.pvs
        self._pv_nodes = tables.pv_nodes
        self._reserved: set[int] = set()
        self.shapes: list[_Shape] = []
        self._shape_index: dict[tuple, int] = {}
        self._claim_shape: dict[int, tuple[PersistentVolumeClaim, int]] = {}
        self._classes: dict[int, _Class | None] = {}
        # Session choices: claim -> (PV index or -1 for provisioning, node row, tasks holding it)
        self._choice: dict[str, list] = {}
        self.choices: dict[int, list[VolumeChoice]] = {}
        self._holding: dict[int, list[str]] = {}       # task -> the delayed claims it holds a choice of
        self._task_claims: dict[int, tuple] = {}        # task -> (its ReadWriteOncePod claims, attach identities)
        self._plans: dict[int, _Plan] = {}              # class -> its placements' plan
        self._pv_single = tables.pv_single
        # ReadWriteOncePod claims in use: claim -> [live users, leaving users]
        self._users: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self._rwop_classes: dict[str, set[int]] = defaultdict(set)
        # Attach counts per driver: unique volume -> node -> [live users, leaving users]
        self._attached: dict[str, dict[str, dict[int, list[int]]]] = defaultdict(lambda: defaultdict(dict))
        self._any: dict[str, np.ndarray] = {}            # driver -> (N,) volumes attached (leaving ones too)
        self._live: dict[str, np.ndarray] = {}           # driver -> (N,) volumes attached by live pods
        self._limit: dict[str, np.ndarray] = {}          # driver -> (N,) limit, -1: none (the tables')
        self._has_limit: dict[str, bool] = {}            # driver -> some node has a limit
        self._driver_classes: dict[str, set[int]] = defaultdict(set)
        self._named_classes: dict[str, set[int]] = defaultdict(set)   # claim -> classes with it as a slot
        self._placed_by_key = {p.pod.key: p for p in vs.placed}
        for p in vs.placed:
            self._use(p.claims, p.attached, p.row, 1, p.leaving)

    # --- node masks ------------------------------------------------------------------------
    def _terms(self, terms: tuple[SelectorTerm, ...]) -> np.ndarray:
        mask = self._masks.get(terms)
        if mask is None:
            mask = self._masks[terms] = self.tables.terms_mask(self.snap, terms)
        return mask

    def _pv_mask(self, pv: PersistentVolume) -> np.ndarray:
        return np.ones(self.n, dtype=bool) if pv.node_affinity is None else self._terms(pv.node_affinity)

    def _zone_mask(self, pv: PersistentVolume) -> np.ndarray:
        snap = self.snap
        topologies = [(k, set(pv.labels[k].split("__"))) for k in ZONE_LABELS if pv.labels.get(k)]
        out = np.ones(self.n, dtype=bool)
        if not topologies:
            return out
        constrained = np.zeros(self.n, dtype=bool)
        for key in ZONE_LABELS:
            constrained |= label_exists(snap, key)
        for key, values in topologies:
            has = label_exists(snap, key)
            in_key = np.zeros(self.n, dtype=bool)
            in_ga = np.zeros(self.n, dtype=bool)
            ga = GA_ZONE_LABEL.get(key, key)
            for v in values:
                in_key |= label_match(snap, key, v)
                in_ga |= label_match(snap, ga, v)
            out &= np.where(has, in_key, in_ga)
        return ~constrained | out

    def _provision_mask(self, claim: PersistentVolumeClaim) -> np.ndarray:
        return self.tables.provision(self.snap, self.storage, claim)

    # --- shapes of delayed claims ----------------------------------------------------------
    def _shape(self, claim: PersistentVolumeClaim) -> int:
        key = claim_shape(claim)
        s = self._shape_index.get(key)
        if s is not None:
            return s
        found = self.tables.candidates(self.snap, key, claim)
        free = found.reach.copy()
        pv_keys = self.tables.pv_keys
        for i in self._reserved:       # taken earlier in the session
            if key in pv_keys[i]:
                self._add_free(free, i, -1)
        s = self._shape_index[key] = len(self.shapes)
        self.shapes.append(_Shape(found.candidates, found.everywhere, found.by_node,
                                  self._provision_mask(claim), free))
        return s

    def _shape_of(self, claim: PersistentVolumeClaim) -> int:
        """`_shape` by the claim object (claims are read once a cycle): no shape key computed
        per placement."""
        s = self._claim_shape.get(id(claim))
        if s is None or s[0] is not claim:
            s = self._claim_shape[id(claim)] = (claim, self._shape(claim))
        return s[1]

    def _pick(self, shape: _Shape, node: int, taken: set[int] = frozenset()) -> int:  # type: ignore[assignment]
        """The smallest candidate of `shape` reachable from `node` that is free: -1 if none."""
        reserved = self._reserved
        local = anywhere = -1
        for i in shape.by_node.get(node, ()):
            if i not in reserved and i not in taken:
                local = i
                break
        for i in shape.everywhere:
            if i not in reserved and i not in taken:
                anywhere = i
                break
        if local < 0 or anywhere < 0:
            return max(local, anywhere)
        pvs = self.pvs
        return min(local, anywhere, key=lambda i: (pvs[i].capacity, pvs[i].name))

    def _add_free(self, free: np.ndarray, pv: int, step: int) -> None:
        row = self._pv_single[pv]
        if row >= 0:              # a local PV: one node
            free[row] += step
            return
        nodes = self._pv_nodes[pv]
        if nodes is None:
            free += step
        else:
            free[nodes] += step

    # --- classes ---------------------------------------------------------------------------
    def _class(self, cid: int) -> _Class | None:
        if cid in self._classes:
            return self._classes[cid]
        head = self.snap.classes[cid].head
        uses = self.vs.uses.get(head)
        self._classes[cid] = built = self._build_class(cid, uses) if uses else None
        return built

    def _build_class(self, cid: int, uses: tuple[ClaimUse, ...]) -> _Class:
        n = self.n
        static = np.ones(n, dtype=bool)
        failures: dict[str, np.ndarray] = {}

        def fail(message: str, passing: np.ndarray) -> None:
            nonlocal static
            failures[message] = failures.get(message, np.ones(n, dtype=bool)) & passing
            static = static & passing

        slots: list[_Slot] = []
        drivers: dict[str, list[str]] = {}
        key_of = self.vs.class_keys.get(self.snap.classes[cid].head, ())
        for i, use in enumerate(uses):
            # A delayed claim only this pod names is known to the class by its shape alone.
            shaped = use.mode == DELAYED and not (i < len(key_of) and key_of[i][1] == use.key)
            if use.mode == BOUND:
                if use.volume is None:
                    fail(PV_MISSING, np.zeros(n, dtype=bool))
                    continue
                fail(NODE_CONFLICT, self._pv_mask(use.volume))
                if self.zone:
                    fail(ZONE_CONFLICT, self._zone_mask(use.volume))
            elif use.mode == PREBOUND:
                fail(BIND_CONFLICT, self._pv_mask(use.volume))
            elif use.mode == SELECTED:
                at = np.zeros(n, dtype=bool)
                row = self._node_row.get(use.claim.selected_node or "")
                if row is not None:
                    at[row] = True
                fail(BIND_CONFLICT, at & self._provision_mask(use.claim))
            elif use.mode == DELAYED:
                s = self._shape(use.claim)
                self.shapes[s].classes.add(cid)
                slots.append(_Slot(s, use.claim.request, None if shaped else use.key))
                if not shaped:
                    self._named_classes[use.key].add(cid)
            if READ_WRITE_ONCE_POD in use.claim.access_modes:
                self._rwop_classes[use.key].add(cid)
            ident = attach_identity(use.volume if use.mode == BOUND else None, use.claim, self.storage)
            if ident is not None and self.limits:
                # Such a claim is each pod's own: a volume attached nowhere yet, not the head
                # pod's claim (which may be placed already).
                drivers.setdefault(ident[0], []).append(f"{ident[0]}/<a new volume: claim {i}>" if shaped
                                                        else ident[1])
                self._limit_of(ident[0])
                self._driver_classes[ident[0]].add(cid)
        slots.sort(key=lambda sl: sl.request)      # kube's volume binder: smallest claims first
        seen: set[int] = set()
        overlapping = False
        for shape in {sl.shape for sl in slots}:
            cands = set(self.shapes[shape].candidates)
            overlapping |= bool(cands & seen)
            seen |= cands
        order = [NODE_CONFLICT, PV_MISSING, BIND_CONFLICT, ZONE_CONFLICT]   # VolumeBinding, then VolumeZone
        checks = [(m, failures[m]) for m in order if m in failures]
        rwop = tuple(u.key for u in uses if READ_WRITE_ONCE_POD in u.claim.access_modes)
        return _Class(static, checks, slots, overlapping, rwop,
                      {d: tuple(dict.fromkeys(h)) for d, h in drivers.items()})

    def _limited(self, driver: str) -> bool:
        """Whether some node has an attach limit for the driver."""
        found = self._has_limit.get(driver)
        if found is None:
            found = self._has_limit[driver] = self.tables.limit(self.snap, self.storage, driver)[1]
        return found

    def _limit_of(self, driver: str) -> np.ndarray:
        found = self._limit.get(driver)
        if found is None:
            found = self._limit[driver] = self.tables.limit(self.snap, self.storage, driver)[0]
            self._any.setdefault(driver, np.zeros(self.n, dtype=np.int64))
            self._live.setdefault(driver, np.zeros(self.n, dtype=np.int64))
        return found

    # --- StatefulRule ----------------------------------------------------------------------
    def filters(self, cid: int) -> bool:
        return self._class(cid) is not None

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        c = self._class(cid)
        if c is not None and nodes is not None and len(nodes) <= FEW_NODES:
            # A placement re-asks about the node or two it touched: node by node in Python costs
            # less than the whole-array path's fixed numpy overhead (same answers).
            if len(nodes) == 1:
                return ONE_NODE_CODES[self._code_at(c, int(nodes[0]))]
            return np.array([self._code_at(c, r) for r in nodes.tolist()], dtype=np.uint8)
        size = self.n if nodes is None else len(nodes)
        out = np.full(size, MASK_PASS, dtype=np.uint8)
        if c is None:
            return out
        at = slice(None) if nodes is None else nodes
        out[~c.static[at]] = MASK_FAIL
        later = np.zeros(size, dtype=bool)
        for claim in c.rwop:
            live, gone = self._users.get(claim, (0, 0))
            if live > 0:
                out[:] = MASK_FAIL
            elif gone > 0:
                later[:] = True
        for driver, volumes in c.drivers.items():
            now_ok, later_ok = self._within_limit(driver, volumes, at, size)
            out[~later_ok] = MASK_FAIL
            later |= ~now_ok
        if c.slots:
            out[~self._delayed_pass(c, nodes)] = MASK_FAIL
        out[(out == MASK_PASS) & later] = MASK_LATER
        return out

    def _code_at(self, c: _Class, r: int) -> int:
        """`codes` on the one node row r."""
        fail = not c.static[r]
        later = False
        for claim in c.rwop:
            live, gone = self._users.get(claim, (0, 0))
            if live > 0:
                fail = True
            elif gone > 0:
                later = True
        for driver, volumes in c.drivers.items():
            limit = int(self._limit_of(driver)[r])
            if limit < 0:
                continue
            need_now = need_later = len(volumes)
            attached = self._attached.get(driver, {})
            for v in volumes:
                on = attached.get(v)
                counts = on.get(r) if on else None
                if counts is None:
                    continue
                live, gone = counts
                if live + gone > 0:
                    need_now -= 1
                if live > 0:
                    need_later -= 1
            if int(self._live[driver][r]) + need_later > limit:
                fail = True
            if int(self._any[driver][r]) + need_now > limit:
                later = True
        if not fail and c.slots and not self._delayed_at(c, r):
            fail = True
        return MASK_FAIL if fail else (MASK_LATER if later else MASK_PASS)

    def _delayed_at(self, c: _Class, r: int) -> bool:
        """`_delayed_pass` on the one node row r."""
        counts: dict[int, int] = {}
        for sl in c.slots:
            chosen = self._choice.get(sl.claim) if sl.claim else None
            if chosen is not None:
                pv = chosen[0]
                if pv >= 0:
                    nodes = self._pv_nodes[pv]
                    if nodes is not None and not (nodes == r).any():
                        return False
                elif chosen[1] != r:
                    return False
                continue
            counts[sl.shape] = counts.get(sl.shape, 0) + 1
        for s, m in counts.items():
            shape = self.shapes[s]
            if shape.free[r] < m and not shape.provision[r]:
                return False
        return self._greedy(c, r) if c.overlapping else True

    def _within_limit(self, driver: str, volumes: tuple[str, ...], at, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(within the limit now, within it once leaving pods are gone) on the nodes `at`."""
        limit = self._limit_of(driver)[at]
        need_now = np.full(size, len(volumes), dtype=np.int64)
        need_later = need_now.copy()
        rows = np.arange(self.n)[at]
        attached = self._attached.get(driver, {})
        for v in volumes:
            on = attached.get(v)
            if not on:
                continue
            for node, (live, gone) in on.items():
                hit = rows == node
                if live + gone > 0:
                    need_now[hit] -= 1
                if live > 0:
                    need_later[hit] -= 1
        free = limit < 0
        now_ok = free | (self._any[driver][at] + need_now <= limit)
        later_ok = free | (self._live[driver][at] + need_later <= limit)
        return now_ok, later_ok

    def _delayed_pass(self, c: _Class, nodes: np.ndarray | None) -> np.ndarray:
        at = slice(None) if nodes is None else nodes
        size = self.n if nodes is None else len(nodes)
        ok = np.ones(size, dtype=bool)
        counts: dict[int, int] = {}
        for sl in c.slots:
            chosen = self._choice.get(sl.claim) if sl.claim else None
            if chosen is not None:        # a claim another pod of the cycle already took a volume for
                ok &= self._choice_mask(chosen)[at]
                continue
            counts[sl.shape] = counts.get(sl.shape, 0) + 1
        for s, m in counts.items():
            shape = self.shapes[s]
            ok &= (shape.free[at] >= m) | shape.provision[at]
        if c.overlapping and ok.any():
            rows = np.arange(self.n)[at]
            for i in np.flatnonzero(ok).tolist():
                ok[i] = self._greedy(c, int(rows[i]))
        return ok

    def _choice_mask(self, chosen: list) -> np.ndarray:
        pv, node = chosen[0], chosen[1]
        if pv >= 0:
            nodes = self._pv_nodes[pv]
            if nodes is None:
                return np.ones(self.n, dtype=bool)
            mask = np.zeros(self.n, dtype=bool)
            mask[nodes] = True
            return mask
        mask = np.zeros(self.n, dtype=bool)
        mask[node] = True
        return mask

    def _greedy(self, c: _Class, node: int) -> bool:
        """kube's volume binder on one node: whether each delayed claim (smallest first) takes
        the smallest free candidate reachable from the node, or else can be provisioned there."""
        taken: set[int] = set()
        for sl in c.slots:
            if sl.claim and sl.claim in self._choice:
                continue
            shape = self.shapes[sl.shape]
            pick = self._pick(shape, node, taken)
            if pick < 0:
                if not shape.provision[node]:
                    return False
            else:
                taken.add(pick)
        return True

    def checks(self, cid: int) -> list[Check]:
        c = self._class(cid)
        if c is None:
            return []
        out = []
        for claim in c.rwop:
            if self._users.get(claim, (0, 0))[0] > 0:
                out.append(Check(RWOP_MESSAGE, np.zeros(self.n, dtype=bool)))
                break
        for driver, volumes in c.drivers.items():
            _, later_ok = self._within_limit(driver, volumes, slice(None), self.n)
            if not later_ok.all():
                out.append(Check(LIMIT_MESSAGE, later_ok))
        static = [(m, p) for m, p in c.checks]
        if c.slots:
            delayed = self._delayed_pass(c, None)
            merged = False
            for i, (m, p) in enumerate(static):
                if m == BIND_CONFLICT:
                    static[i] = (m, p & delayed)
                    merged = True
            if not merged:
                static.append((BIND_CONFLICT, delayed))
            order = [NODE_CONFLICT, PV_MISSING, BIND_CONFLICT, ZONE_CONFLICT]
            static.sort(key=lambda mp: order.index(mp[0]))
        out.extend(Check(m, p) for m, p in static if not p.all())
        return out

    def unchanged_by_own(self, cid: int) -> bool:
        # Claims only provisioned (no PV could take them: nothing reserved), each the pod's own
        # (no choice others follow), none ReadWriteOncePod, no attach limit: a placement of the
        # class changes nothing the class's codes read.
        c = self._class(cid)
        return c is not None and not c.rwop and not any(self._limited(d) for d in c.drivers) and all(
            sl.claim is None and not self.shapes[sl.shape].candidates for sl in c.slots)

    def excludes_own_node(self, cid: int) -> bool:
        # One claim, the pod's own, only local PVs can take it (none reachable from every node,
        # no provisioning), at most one per node: a placement takes its node's PV, and the node
        # has none left for the class; nothing else the class reads changes (no ReadWriteOncePod,
        # no attach limit).
        c = self._class(cid)
        if c is None or c.rwop or any(self._limited(d) for d in c.drivers) or len(c.slots) != 1 \
                or c.slots[0].claim is not None:
            return False
        shape = self.shapes[c.slots[0].shape]
        return not shape.everywhere and not shape.provision.any() and all(
            len(pvs) == 1 for pvs in shape.by_node.values()) and all(
            self._pv_nodes[i] is not None and len(self._pv_nodes[i]) == 1 for i in shape.candidates)

    # --- placements ------------------------------------------------------------------------
    def listens(self, cid: int) -> bool:
        # The claims a task uses make its class (the head's are the class's, as in _class).
        return self.snap.classes[cid].head in self.vs.uses

    def placed(self, t: int, node: int) -> None:
        uses = self.vs.uses.get(t)
        if uses is None:
            return
        plan = self._plan_of(t, uses)
        self._choose(t, uses, plan, node)
        claims, identities = self._claims_of(t, uses, plan)
        if claims or identities:
            self._use(claims, identities, node, 1, False)

    def unplaced(self, t: int, node: int) -> None:
        uses = self.vs.uses.get(t)
        if uses is None:
            return
        self._release(t)
        claims, identities = self._claims_of(t, uses, self._plan_of(t, uses))
        if claims or identities:
            self._use(claims, identities, node, -1, False)

    def evicted(self, t: int, node: int) -> None:
        self._move(t, node, leaving=True)

    def unevicted(self, t: int, node: int) -> None:
        self._move(t, node, leaving=False)

    def _move(self, t: int, node: int, leaving: bool) -> None:
        """An evicted pod's volumes stay attached until it is gone (or it stays after all)."""
        placed = self._placed_by_key.get(self.snap.task_keys[t])
        if placed is None:
            return
        self._use(placed.claims, placed.attached, node, -1, not leaving)
        self._use(placed.claims, placed.attached, node, 1, leaving)

    def _plan_of(self, t: int, uses: tuple[ClaimUse, ...]) -> _Plan:
        """The plan of task t's class (made from the first of its tasks placed)."""
        cid = int(self.snap.task_class[t])
        plan = self._plans.get(cid)
        if plan is None:
            plan = self._plans[cid] = self._make_plan(uses)
        assert plan.size == len(uses), "the tasks of a class have alike claims"
        return plan

    def _make_plan(self, uses: tuple[ClaimUse, ...]) -> _Plan:
        fixed = tuple(VolumeChoice(u.key, u.volume.name if u.volume else None) if u.mode == PREBOUND
                      else VolumeChoice(u.key, None) for u in uses if u.mode in (PREBOUND, SELECTED))
        # kube's volume binder: the smallest claims first (a stable sort: as uses are ordered).
        delayed = sorted((i for i, u in enumerate(uses) if u.mode == DELAYED), key=lambda i: uses[i].claim.request)
        attach: list[tuple[str, str] | str | None] = []
        for u in uses:
            if u.mode == BOUND:
                attach.append(attach_identity(u.volume, u.claim, self.storage))
            else:
                cls = self.storage.class_of(u.claim)
                attach.append(cls.provisioner if cls is not None and cls.provisions else None)
        return _Plan(len(uses), fixed, tuple((i, self._shape_of(uses[i].claim)) for i in delayed),
                     tuple(i for i, u in enumerate(uses) if READ_WRITE_ONCE_POD in u.claim.access_modes),
                     tuple(attach))

    def _claims_of(self, t: int, uses: tuple[ClaimUse, ...], plan: _Plan,
                   ) -> tuple[tuple, tuple[tuple[str, str], ...]]:
        """Task t's ReadWriteOncePod claims and attach identities (`_use`'s arguments), found
        once per task."""
        found = self._task_claims.get(t)
        if found is None:
            identities: tuple[tuple[str, str], ...] = ()
            if any(plan.attach):
                out = []
                for u, a in zip(uses, plan.attach):
                    if a is None:
                        continue
                    # attach_identity: an unbound claim counts under its class's provisioner
                    out.append(a if isinstance(a, tuple) else (a, f"{a}/claim:{u.claim.key}"))
                identities = tuple(dict.fromkeys(out))
            found = self._task_claims[t] = (tuple(uses[i].claim for i in plan.rwop), identities)
        return found

    def _use(self, claims, attached, node: int, step: int, leaving: bool) -> None:
        """Count a pod's claims (ReadWriteOncePod users) and attached volumes on `node`."""
        slot = 1 if leaving else 0
        for claim in claims:
            if READ_WRITE_ONCE_POD in claim.access_modes:
                self._users[claim.key][slot] += step
                for cid in self._rwop_classes.get(claim.key, ()):
                    self.ssn.mark_dirty(cid, None)
        if not self.limits or not attached:
            return
        dirty = None
        for driver, volume in attached:
            self._limit_of(driver)
            if not self._limited(driver):
                continue      # no node limits the driver: its counts change no answer (codes, checks)
            on = self._attached[driver][volume]
            counts = on.setdefault(node, [0, 0])
            before_any, before_live = counts[0] + counts[1] > 0, counts[0] > 0
            counts[slot] += step
            after_any, after_live = counts[0] + counts[1] > 0, counts[0] > 0
            if not after_any:
                del on[node]
            if after_any != before_any:
                self._any[driver][node] += int(after_any) - int(before_any)
            if after_live != before_live:
                self._live[driver][node] += int(after_live) - int(before_live)
            if dirty is None:
                dirty = np.array([node], dtype=np.int64)
            for cid in self._driver_classes.get(driver, ()):
                self.ssn.mark_dirty(cid, dirty)

    def _choose(self, t: int, uses: tuple[ClaimUse, ...], plan: _Plan, node: int) -> None:
        """Pick (and reserve) the volumes of t's claims that are not bound yet."""
        out = list(plan.fixed)
        holding = []
        choice, pvs, shapes = self._choice, self.pvs, self.shapes
        for i, s in plan.delayed:
            key = uses[i].claim.key
            chosen = choice.get(key)
            if chosen is not None:
                chosen[2].append(t)
                pv = chosen[0]
            else:
                pv = self._pick(shapes[s], node)
                choice[key] = [pv, node, [t]]
                if pv >= 0:
                    self._reserve(pv, 1)
            out.append(VolumeChoice(key, pvs[pv].name if pv >= 0 else None))
            holding.append(key)
        self.choices[t] = out
        self._holding[t] = holding
        named = self._named_classes
        if named:
            for key in holding:      # classes that share a claim with t now follow its choice
                for cid in named.get(key, ()):
                    self.ssn.mark_dirty(cid, None)

    def _release(self, t: int) -> None:
        self.choices.pop(t, None)
        for key in self._holding.pop(t, ()):
            chosen = self._choice[key]
            chosen[2].remove(t)
            if chosen[2]:
                continue
            del self._choice[key]
            if chosen[0] >= 0:
                self._reserve(chosen[0], -1)
            for cid in self._named_classes.get(key, ()):
                self.ssn.mark_dirty(cid, None)

    def _reserve(self, pv: int, step: int) -> None:
        """PV `pv` taken (step 1) or given back (-1): every shape it is a candidate of has one
        fewer (more) free there, and their classes re-key those nodes."""
        if step > 0:
            self._reserved.add(pv)
        else:
            self._reserved.discard(pv)
        nodes = self._pv_nodes[pv]
        index = self._shape_index
        for key in self.tables.pv_keys[pv]:
            s = index.get(key)
            if s is None:             # a shape of another cycle's claims
                continue
            self._add_free(self.shapes[s].free, pv, -step)
            for cid in self.shapes[s].classes:
                self.ssn.mark_dirty(cid, nodes)


def volume_rule(ssn: Session) -> VolumeRule:
    """The session's storage rule, with predicates' switches (volume_zone, node_volume_limits)
    when the policy has the plugin."""
    spec = ssn.plan.plugin("predicates")
    args = dict(spec.arguments) if spec is not None else {}
    return VolumeRule(ssn, zone=bool(args.get("volume_zone", True)), limits=bool(args.get("node_volume_limits", True)))
