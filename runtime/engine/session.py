"""The session: one cycle's mutable view of the snapshot, the plugins' callbacks, statements.

Plugins register callbacks at named extension points (`Session.register`); the session asks
them through the combinators below, which implement the tier rules of Volcano:

| question                          | rule                                                      |
|-----------------------------------|-----------------------------------------------------------|
| job / queue / task order          | keys compared lexicographically in tier and plugin order  |
|                                   | (= first non-equal answer wins), then creation, then uid  |
| predicate                         | all must pass                                             |
| node score                        | sum (kernel terms folded into `score_params`, plus arrays) |
| job ready, preemptive             | all must agree (default yes)                              |
| allocatable                       | the smallest count any plugin allows                      |
| job pipelined, job enqueueable    | a reject anywhere says no; a permit in a tier says yes;   |
|                                   | otherwise next tier; default yes                          |
| job starving                      | first tier with an opinion decides (all of it); default no |
| overused                          | any says yes                                              |
| preemptable / reclaimable victims | per tier the intersection; first non-empty tier decides   |

Every change goes through a `Statement`, committed or discarded as a unit.

Filters (`predicate`) and scorers (`node_order`) are either static — a function of the task
class, answered once per class and cached (node selector, taints, least-requested) — or
stateful: a `StatefulRule`, whose answer depends on where pods are, those this cycle placed
included (inter-pod affinity, topology spread, host ports, device cards). A stateful rule is
told of every placement, undo and eviction (kube-scheduler's AddPod/RemovePod) and marks the
nodes whose answer changed for the classes it concerns (`Session.mark_dirty`); a class's
placement tree re-keys just those. Classes no stateful rule concerns pay nothing for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from compiler.plan import Plan
from runtime.cluster import decisions as d
from runtime.engine.extension import MASK_FAIL, MASK_PASS, PERMIT, POINTS, REJECT, Check, StatefulRule
from runtime.engine.kernels import Kernels, ScoreParams
from runtime.engine.rules.hypernodes import HyperNodeRule
from runtime.engine.rules.dra import dra_rule
from runtime.engine.rules.volumes import volume_rule
from runtime.engine.snapshot import (
    ALLOCATED, BOUND, HELD, PENDING, PIPELINED, RELEASING, SUCCEEDED, Domains, JobInfo, Snapshot, TaskClass,
)

_NONE: list = []          # the callbacks of a point nobody registered at (never appended to)
# Placement trees holding key arrays at once: a few per queue taking turns is plenty; a tree whose
# arrays another took is built again when next used (kernels.TreeRoom).
TREES_HOLDING_KEYS = 64
# A class placing by a shared tree (SharedTree) re-keys at most this many of its nodes whose codes
# differ from the tree's per placement; past that it gets a tree of its own.
SHARED_BUDGET = 16


class SharedTree:
    """A placement tree of the static mask and scores that classes whose stateful rules only
    filter share (one per request, static mask and static scores): under inter-pod rules each
    Deployment-like group is a class of its own, whose codes differ from the static mask on the
    few nodes its own pods hold. Such a class places by it (PlacementTree.place_masked) instead
    of scanning, building and refreshing a tree of its own over every node."""

    def __init__(self) -> None:
        self.tree: Any = None
        self.seen = 0           # the ledger log position the tree is up to date at


class ClassPlacement:
    """One task class's placement inputs for the session: the static mask and scores (cached),
    the stateful rules that concern it with the mask and scores they make (re-computed only on
    the nodes they marked dirty), and the class's placement tree with the ledger log position
    it was last brought up to date at."""

    # A class has one for the session, and under inter-pod rules classes are thousands.
    __slots__ = ("cid", "req", "req_key", "static_mask", "static_score", "filters", "scorers", "stateful", "mask",
                 "static_passes", "score", "tree", "seen", "shared", "unchanged", "excludes_own", "view", "lazy",
                 "known", "dirty_all", "dirty", "dirty_code", "by_domain", "scans")

    def __init__(self, cid: int, req: np.ndarray, req_key: bytes, static_mask: np.ndarray, mask_passes: bool,
                 static_score: np.ndarray, filters: list[StatefulRule], scorers: list[StatefulRule]):
        self.cid = cid
        self.req = req
        self.req_key = req_key              # its NodeFits' key (Session._fresh_fits)
        self.static_mask = static_mask
        self.static_score = static_score
        self.filters = filters
        self.scorers = scorers
        self.stateful = bool(filters or scorers)
        # The static codes, shared, until its own copy holds the rules' answers (update, or a
        # shared tree's MaskView): a class placing by a DomainTree never needs one.
        self.mask = static_mask
        self.static_passes = bool(filters) and mask_passes     # every node passes the static mask: see update
        # Its own array from its first update (one placing by a DomainTree never makes it).
        self.score = static_score
        self.tree = None
        self.seen = 0
        self.shared: SharedTree | None = None     # placing by a shared tree (Session.place_one)
        # Its rules' answers for it stay as they are while it places (StatefulRule.unchanged_by_own):
        # a run is placed in one tree call.
        self.unchanged = False
        # Its placements only exclude their own node for it (StatefulRule.excludes_own_node):
        # a run is placed in one call of its shared tree.
        self.excludes_own = False
        self.view: Any = None                      # kernels.MaskView of `mask`, when shared
        # A class of one pending task placing by a shared tree, its codes asked of the rules only
        # on the nodes that tree offers it (Session.place_lazy): `mask` holds the static codes but
        # on the nodes in `known`, where it holds the rules' answers as they were when asked (a
        # mark since makes them unknown again).
        self.lazy = False
        self.known: set[int] = set()
        self.dirty_all = self.stateful
        self.dirty: list[np.ndarray] = []
        # Set by mark_as while its nodes are the only ones marked: the code every one of them
        # takes (-1: the rules are asked).
        self.dirty_code = -1
        # A class with no stateful filter and one scorer whose score is one per topology domain
        # (StatefulRule.domain_scores), or no scorer and one filter whose verdict is one per
        # domain (StatefulRule.domain_verdicts), places by its request's DomainTree, this one
        # (Session.place_by_domain): its scores are not made per node, nor its codes, nor a tree.
        self.by_domain: SharedTree | None = None
        # It asks its filters for the few nodes they pass first (Session.place_few): a lazy
        # class from the start (one placement), another once its search of the shared tree went
        # past the budget (a class whose search stays within it is spared asking on every
        # placement).
        self.scans = False

    def mark(self, nodes: np.ndarray | None) -> None:
        # Marked on every node (dirty_all), it has nothing else marked: dirty is empty and
        # dirty_code -1, and a mark changes nothing (Session.mark_dirty asks first).
        self.dirty_code = -1        # another mark: the rules are asked about all the nodes marked
        if nodes is None:
            self.dirty_all = True
            self.dirty = []
        elif not self.dirty_all and not (self.dirty and self.dirty[-1] is nodes):
            self.dirty.append(nodes)        # a rule marking the same nodes again (a kept array) adds nothing

    def mark_as(self, nodes: np.ndarray, code: int, rule: StatefulRule) -> None:
        """mark(nodes), where `rule` answers `code` on every one of them (a topology domain's
        verdict): when it is the class's only filter (not a rule that only scores it, or whose
        filter is off) and nothing else is marked, update writes the code without asking where
        it fails the nodes or every node passes the static predicates (combined with them, the
        code is then itself)."""
        if self.dirty_all or self.dirty or (code != MASK_FAIL and not self.static_passes) or \
                len(self.filters) != 1 or self.filters[0] is not rule:
            self.mark(nodes)
        else:
            self.dirty.append(nodes)
            self.dirty_code = code

    def update(self) -> np.ndarray | None:
        """Re-compute the stateful answers where marked; returns the nodes re-computed (None:
        all, or nothing was marked and the result is an empty array)."""
        if self.dirty_all:
            nodes = None
        elif self.dirty:
            nodes = np.unique(np.concatenate(self.dirty)) if len(self.dirty) > 1 else self.dirty[0]
        else:
            return _EMPTY
        code = self.dirty_code if nodes is not None else -1
        self.dirty_all, self.dirty, self.dirty_code = False, [], -1
        if self.filters and self.mask is self.static_mask:
            self.mask = self.static_mask.copy()
        if code >= 0:
            # The class's one filter's code on each marked node: a failure, or the static
            # predicates pass everywhere (combined with them, the code is itself: mark_as).
            self.mask[nodes] = code
        elif self.filters and nodes is not None and len(nodes) <= FEW_NODES:
            # A placement re-asks about the node or few it touched: combined in Python, without
            # the numpy calls' fixed costs (combine_into's answers).
            rows = nodes.tolist()
            if len(rows) == 1 and len(self.filters) == 1 and self.static_passes:
                # The node a placement took, under one filter: its code (combined with the static
                # predicates' pass, a code is itself, as below).
                self.mask[rows[0]] = self.filters[0].code_at(self.cid, rows[0])
            else:
                codes = [MASK_PASS] * len(rows) if self.static_passes else self.static_mask[nodes].tolist()
                combine_few(codes, self.filters, self.cid, nodes, rows)
                mask = self.mask
                for row, code in zip(rows, codes):
                    mask[row] = code
        elif self.filters:
            rules = self.filters
            if self.static_passes:
                # Every node passes the static predicates: combined with them, the first rule's
                # codes are themselves (MASK_FAIL is 0, a passing code has MASK_PASS).
                codes = rules[0].codes(self.cid, nodes)
                if len(rules) > 1:
                    codes = np.array(codes, dtype=np.uint8)     # our own, to combine the others into
                rules = rules[1:]
            else:
                codes = self.static_mask.copy() if nodes is None else self.static_mask[nodes]
            for rule in rules:
                combine_into(codes, rule.codes(self.cid, nodes))
            if nodes is None:
                self.mask[:] = codes
            else:
                self.mask[nodes] = codes
        if self.scorers:
            scorers = self.scorers      # one scorer's array as it is (sum() would copy it once more)
            extra = scorers[0].score(self.cid, nodes) if len(scorers) == 1 else \
                sum(rule.score(self.cid, nodes) for rule in scorers)
            if nodes is None:
                if self.score is self.static_score:
                    self.score = np.add(self.static_score, extra)
                else:
                    np.add(self.static_score, extra, out=self.score)
            else:
                self.score[nodes] = self.static_score[nodes] + extra
        return nodes


_EMPTY = np.zeros(0, dtype=np.int64)
FEW_NODES = 8       # up to this many marked nodes, ClassPlacement.update combines codes in Python
# A lazy class asks the rules about this many of the nodes its shared tree offers at a time: the
# first node offered mostly passes (a replica group's own pods hold a few nodes of thousands), so
# asking about more costs more than the rare second round (section 12: 8 took half as long again).
LAZY_ASK = 2
# A class one of whose filters passes at most this fraction of the nodes places by a scan of
# those (Session.place_few): half its nodes or more differ from the shared tree's, and a tree of
# its own would be built for a placement or few (section 12's allocate, processor time: a half
# 305 ms, a quarter 314, every node 322, never 351).
FEW_PASSING = 2


def combine_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Both filters' answers at once: a node fails if either fails, else passes later if either
    says later."""
    return np.where((a & b & MASK_PASS) != 0, a | b, MASK_FAIL).astype(np.uint8)


def combine_into(codes: np.ndarray, other: np.ndarray) -> None:
    """combine_codes(codes, other) written into `codes` (uint8, the caller's own array): in
    place, a few passes over bytes instead of boolean, where and cast temporaries."""
    other = np.asarray(other).astype(np.uint8, copy=False)
    passing = codes & other
    passing &= MASK_PASS         # 1 where both pass (MASK_FAIL is 0)
    codes |= other
    codes *= passing


def combine_few(codes: list[int], filters: Sequence[StatefulRule], cid: int, nodes: np.ndarray,
                rows: list[int]) -> list[int]:
    """`codes` (of `nodes`, a list; `rows`: nodes as a list) combined with each filter's answers
    for class cid as combine_into combines them, in place and returned: for a node or few, in
    Python, without the numpy calls' fixed costs (one node asked by StatefulRule.code_at)."""
    one = len(rows) == 1
    for rule in filters:
        others = (rule.code_at(cid, rows[0]),) if one else rule.codes(cid, nodes).tolist()
        for i, other in enumerate(others):
            mine = codes[i]
            codes[i] = (mine | other) if mine & other & MASK_PASS else MASK_FAIL
    return codes


@dataclass(frozen=True)
class KernelScore:
    """A plugin's terms of the score kernel (runtime.engine.kernels.ScoreParams), registered at
    `node_order`: binpack's weight and per-resource weights, or nodeorder's least-requested,
    most-requested and balanced-allocation weights and the resources they average over."""

    binpack: float = 0.0
    binpack_resources: Mapping[int, float] = field(default_factory=dict)
    least_requested: float = 0.0
    most_requested: float = 0.0
    balanced: float = 0.0
    requested_resources: tuple[int, ...] = ()


@dataclass(frozen=True)
class Verdict:
    vote: bool | None              # PERMIT, REJECT or ABSTAIN
    reason: d.Reason | None = None


@dataclass
class Options:
    scheduler_name: str = "volcano"
    pure_python: bool | None = None          # None: POLICYDSL_PURE_PYTHON decides
    fold_settled: bool | None = None         # None: runtime.engine.snapshot.folds_settled(plan) decides
    now: float | None = None                 # the cycle's clock (seconds): reservations' time limit
    # Job -> queues it lost pods to within the eviction audit's window (EvictionAudit.lost_to):
    # reclaim takes nothing from those for it, so room is never traded back.
    lost_to: Mapping[str, frozenset[str]] | None = None


class Session:
    def __init__(self, plan: Plan, snap: Snapshot, kernels: Kernels):
        self.plan = plan
        self.snap = snap
        self.k = kernels
        n, r = snap.allocatable.shape
        self.used = snap.used.copy()
        self.releasing = snap.releasing.copy()
        self.pipelined = np.zeros_like(self.used)
        self.status = snap.status.copy()
        self.task_node = snap.task_node.copy()
        self.task_devices: dict[int, dict[str, tuple[int, ...]]] = {}
        self.total = snap.total.astype(np.int64)
        q_n, j_n = len(snap.queues), len(snap.jobs)
        # Allocated = what ready tasks hold (allocated, bound); a queue's includes its subtree.
        self.job_allocated = np.zeros((j_n, r), dtype=np.int64)
        self.job_ready = np.zeros(j_n, dtype=np.int64)
        self.job_pipelined = np.zeros(j_n, dtype=np.int64)
        self.job_pending = np.zeros(j_n, dtype=np.int64)
        self.job_request = np.zeros((j_n, r), dtype=np.int64)   # all non-terminal tasks
        self.queue_allocated = np.zeros((q_n, r), dtype=np.int64)
        self.queue_request = np.zeros((q_n, r), dtype=np.int64)
        self.queue_inqueue = np.zeros((q_n, r), dtype=np.int64)
        # Elastic: what running jobs hold beyond their minResources, which admission may count
        # as free (Volcano's proportion and capacity subtract it).
        self.queue_elastic = np.zeros((q_n, r), dtype=np.int64)
        self.job_phase = [job.phase for job in snap.jobs]
        pods_col = snap.resource_index["pods"]
        # Zero-request (best-effort) tasks: nothing requested but the pod slot.
        self.zero = ~np.delete(snap.request, pods_col, axis=1).any(axis=1) if len(snap.request) else \
            np.zeros(0, dtype=bool)
        self.queue_chain = [self._chain(q) for q in range(q_n)]
        self.queue_names = [queue.name for queue in snap.queues]
        # The jobs' fields as arrays, read for every job at once (job order columns, validity).
        self.job_cols = kernels.job_columns(snap.jobs)
        self._init_accounting()
        # The chains as arrays for kernels: queue q's are chains[chain_ptr[q]:chain_ptr[q + 1]].
        self.chain_ptr = np.zeros(q_n + 1, dtype=np.int64)
        self.chain_ptr[1:] = np.cumsum([len(c) for c in self.queue_chain]) if q_n else 0
        self.chains = np.array([c for chain in self.queue_chain for c in chain], dtype=np.int64)
        job_queue = self.job_queue = self.job_cols.queue
        self.ledger = kernels.Ledger(
            snap.request, snap.task_job, snap.task_class, self.zero.view(np.uint8), self.status, self.task_node,
            self.used, self.pipelined, self.releasing, snap.job_first, self.job_allocated, self.job_ready,
            self.job_pipelined, self.job_pending, job_queue, self.queue_allocated, self.chain_ptr, self.chains)
        self._fit_columns = np.ones(r, dtype=np.int64)
        self.check_columns_per_card(np.zeros(r, dtype=bool))
        self._custom_task_order = False
        # Callbacks per point: a list of tiers, each a list of (plugin name, fn).
        self.callbacks: dict[str, list[list[tuple[str, Callable]]]] = {}
        # The score kernel's terms (least-requested, binpack, ...), set by plugins by name.
        self.kernel_scores = ScoreParams(r)
        self.score_params = self.kernel_scores.vector
        # Stateful filters and scorers (StatefulRule), and every rule told of placements.
        self.stateful_filters: list[StatefulRule] = []
        self.stateful_scorers: list[StatefulRule] = []
        self.listeners: list[StatefulRule] = []
        self._class_listeners: dict[int, list[StatefulRule]] = {}     # listeners_of, per task class
        self._pending_class: list[int] | None = None    # per task: its class if pending in the snapshot, else -1
        self._class_pending: list[int] | None = None    # per class: its tasks pending in the snapshot
        self._rule_states: dict[str, Any] = {}
        self.answered: set[tuple[str, str]] = set()      # (plugin, point) registered
        self.enqueue_listeners: list[Callable[[int], None]] = []   # told when a job is admitted
        self.queue_deserved: np.ndarray | None = None   # set by proportion / capacity
        self.plugins: dict[str, Any] = {}
        self.storage: Any = None      # runtime.engine.rules.volumes.VolumeRule, where tasks have claims
        self.dra_rule: Any = None     # runtime.engine.rules.dra.DraRule, where tasks have ResourceClaims
        self.hypernode_rule: HyperNodeRule | None = None   # where some job asks for network topology
        # The network-topology-aware plugin's HyperNode score (job, {HyperNode: node rows}) →
        # {HyperNode: score}, when the plugin is on; allocate's topology placement ranks by it.
        self.hypernode_order: Callable[..., dict[str, float]] | None = None
        self._mask_cache: dict[int, tuple[np.ndarray, list[Check]]] = {}
        self._unschedulable: Check | None = None
        self._masks_alike: dict[tuple[int, ...], tuple[np.ndarray, list[Check]]] = {}   # class_mask by its checks' masks
        self._static_cache: dict[int, np.ndarray] = {}
        # Per static mask (by identity: class_mask's arrays live as long as the session), whether
        # every node passes it; per class request, the fit kernel's request and its bytes. Classes
        # are many under inter-pod rules, their masks and requests few: found once each.
        self._mask_passes: dict[int, bool] = {}
        self._fit_requests: dict[tuple[int, ...], tuple[np.ndarray, bytes]] = {}
        self._no_static_score: np.ndarray | None = None     # zeros, read-only, shared (class_static_score)
        # Each class's placement inputs and tree (ClassPlacement), made on first use; and per
        # stateful rule (by id) those it filters or scores, for mark_all_dirty.
        self.placements: dict[int, ClassPlacement] = {}
        self._placements_of_rule: dict[int, list[ClassPlacement]] = {}
        # Per fit request (its bytes): the nodes' fit and kernel score, which every class asking
        # that request reads its tree's keys from (kernels.NodeFits), made on first use.
        self.node_fits: dict[bytes, Any] = {}
        # The trees' key arrays: at most TREES_HOLDING_KEYS trees hold some at once (kernels.TreeRoom).
        self.tree_room = kernels.TreeRoom(TREES_HOLDING_KEYS)
        # More nodes changed than this since a tree's (or fit state's) last use: built afresh
        # rather than re-keyed node by node. Asked on every turn, so found once.
        self.rebuild_over = max(64, n // 8)
        self.fits_rebuild_over = n      # a NodeFits' (_fresh_fits)
        self.shared_trees: dict[tuple, SharedTree] = {}
        self.domain_trees: dict[tuple, SharedTree] = {}     # kernels.DomainTree per request, mask, scores, domains
        # Outcome
        self.evictions: list[d.Eviction] = []
        self.task_reasons: dict[int, list[d.Reason]] = {}
        self.job_reasons: dict[int, list[d.Reason]] = {}
        self.attempted: set[int] = set()     # jobs an action tried to place
        # Reservations of this cycle (hold_reservations): task -> node held, and those that ended.
        self.held: dict[int, int] = {}
        self.released: dict[int, d.Reason] = {}
        self.now: float | None = None
        self.lost_to: Mapping[str, frozenset[str]] = {}    # Options.lost_to
        self.held_counted: dict[int, np.ndarray] = {}      # queue -> reservations counted in (allocated_as_if)
        self._tier_index = 0
        self._flat: dict[str, list[Callable]] = {}
        # An order callback's answers for every row at once, when its plugin offers them.
        self.order_columns: dict[Callable, Callable[[], np.ndarray]] = {}
        self._job_tie_rank: np.ndarray | None = None

    # --- accounting ----------------------------------------------------------------------
    def _chain(self, q: int) -> list[int]:
        """The queue and its ancestors up to (not including) root."""
        out = []
        while q > 0:
            out.append(q)
            q = self.snap.queues[q].parent
        return out

    def _init_accounting(self) -> None:
        snap = self.snap
        req = snap.request
        st = self.status
        jobs_of = snap.task_job
        j_n = len(snap.jobs)
        ready = (st == ALLOCATED) | (st == BOUND)
        self.job_ready[:] = np.bincount(jobs_of[ready | (st == SUCCEEDED)], minlength=j_n)[:j_n]
        self.job_pending[:] = np.bincount(jobs_of[st == PENDING], minlength=j_n)[:j_n]
        live = (st != SUCCEEDED) & (st != RELEASING) & (st != HELD)
        sized = np.diff(snap.job_first) > 0     # jobs with tasks (a PodGroup may have none yet)
        if sized.any():
            # Each job's tasks are one range (snap.job_first): per-job sums are range sums.
            starts = snap.job_first[:-1][sized]
            self.job_allocated[sized] = np.add.reduceat(req * ready[:, None], starts, axis=0)
            self.job_request[sized] = np.add.reduceat(req * live[:, None], starts, axis=0)
        job_queue = self.job_cols.queue
        known = job_queue >= 0
        direct_alloc = np.zeros_like(self.queue_allocated)
        direct_req = np.zeros_like(self.queue_request)
        np.add.at(direct_alloc, job_queue[known], self.job_allocated[known])
        np.add.at(direct_req, job_queue[known], self.job_request[known])
        if snap.settled is not None:
            direct_alloc += snap.settled
            direct_req += snap.settled
        # Each queue holds its own jobs' and, through the chains, its descendants'.
        for q, chain in enumerate(self.queue_chain):
            if q == 0 or not (direct_alloc[q].any() or direct_req[q].any()):
                continue
            for c in chain:
                self.queue_allocated[c] += direct_alloc[q]
                self.queue_request[c] += direct_req[q]
        pods_column = snap.resource_index["pods"]
        cols = self.job_cols
        # Not a lone pod's implicit group (most jobs): that has nothing inqueue, nothing elastic.
        for j in np.flatnonzero((cols.queue >= 0) & (cols.grouped | cols.sized)).tolist():
            job = snap.jobs[j]
            allocated = self.job_allocated[j]
            if job.min_resources is not None and job.phase != "Pending":
                short = np.maximum(job.min_resources - allocated, 0)
                if job.phase == "Inqueue" or short.any():
                    for q in self.queue_chain[job.queue]:
                        self.queue_inqueue[q] += short
            # A lone pod's implicit group asks for what its pod requests (Volcano's podgroup
            # controller sets minResources so): nothing elastic. A PodGroup without minResources
            # has all its allocation elastic, as Volcano's GetElasticResources counts it.
            if not job.implicit and allocated.any():
                floor = job.min_resources if job.min_resources is not None else 0
                elastic = np.maximum(allocated - floor, 0)
                elastic[pods_column] = 0      # a count, not a resource admission weighs
                if elastic.any():
                    for q in self.queue_chain[job.queue]:
                        self.queue_elastic[q] += elastic
        if snap.settled_elastic is not None:     # settled gangs' (runtime.kube.settled)
            for q in np.flatnonzero(snap.settled_elastic.any(axis=1)).tolist():
                for c in self.queue_chain[q]:
                    self.queue_elastic[c] += snap.settled_elastic[q]
        children = self.snap.queues[0].children
        self.queue_allocated[0] = self.queue_allocated[children].sum(axis=0) if children else 0
        self.queue_request[0] = self.queue_request[children].sum(axis=0) if children else 0

    # --- registration --------------------------------------------------------------------
    def register(self, point: str, plugin: str, fn: Callable | StatefulRule,
                 column: Callable[[], np.ndarray] | None = None) -> None:
        """`column`: fn's answers for all rows at once, an array: at an order point the keys
        (job_order), at job_valid where a job may be invalid (jobs_to_validate).
        At `predicate` and `node_order`, `fn` is either static (a function of the task class:
        list[Check], or a score array or None) or a StatefulRule."""
        if point not in POINTS:
            raise ValueError(f"plugin {plugin} answers `{point}`, which is no extension point")
        self.answered.add((plugin, point))
        if isinstance(fn, KernelScore):
            if point != "node_order":
                raise ValueError(f"plugin {plugin}: kernel score terms answer node_order, not {point}")
            if fn.binpack:
                self.kernel_scores.binpack(fn.binpack, dict(fn.binpack_resources))
            if fn.least_requested or fn.most_requested or fn.balanced:
                self.kernel_scores.requested(fn.least_requested, fn.most_requested, fn.balanced,
                                             list(fn.requested_resources))
            return
        if isinstance(fn, StatefulRule):
            if point not in ("predicate", "node_order"):
                raise ValueError(f"plugin {plugin}: a stateful rule answers predicate or node_order, not {point}")
            (self.stateful_filters if point == "predicate" else self.stateful_scorers).append(fn)
            self.add_listener(fn)
            return
        if column is not None:
            self.order_columns[fn] = column
        if point in self._SPECIALIZED.values():
            self._unspecialize()
        tiers = self.callbacks.setdefault(point, [])
        while len(tiers) <= self._tier_index:
            tiers.append([])
        tiers[self._tier_index].append((plugin, fn))
        self._flat.pop(point, None)

    def open_plugins(self, registry: dict[str, type]) -> None:
        for ti, tier in enumerate(self.plan.tiers):
            self._tier_index = ti
            for spec in tier.plugins:
                cls = registry.get(spec.name)
                if cls is None:
                    continue
                plugin = cls(spec)
                self.plugins[spec.name] = plugin
                plugin.on_session_open(self)
        if self.snap.volumes is not None and self.snap.volumes.uses:
            # Storage is checked for every plan, as resource fit is: a pod cannot run where its
            # volumes cannot reach. First of the stateful filters: kube-scheduler runs the
            # volume plugins before the inter-pod ones, and a node counts under its first failure.
            self.storage = volume_rule(self)
            self.stateful_filters.insert(0, self.storage)
            self.add_listener(self.storage)
        if self.snap.dra is not None and self.snap.dra.uses:
            # ResourceClaims too, for every plan (kube-scheduler's DynamicResources, after the
            # volume plugins): a pod cannot run where its devices cannot be allocated.
            self.dra_rule = dra_rule(self)
            self.stateful_filters.insert(1 if self.storage is not None else 0, self.dra_rule)
            self.add_listener(self.dra_rule)
        if self.snap.hypernodes is not None:
            # Some job asks for network topology: allocate tries it HyperNode by HyperNode
            # (actions/topology.py). Nobody asking, nothing registered and nothing paid (with the
            # network-topology-aware plugin's normal-pod score on, the rule concerns no class).
            self.hypernode_rule = HyperNodeRule(self)
            self.stateful_filters.append(self.hypernode_rule)
        for point, tiers in self.callbacks.items():
            self.callbacks[point] = [t for t in tiers if t]
        # The snapshot lists a job's tasks by (priority desc, creation, uid): exactly the order
        # the priority plugin alone gives, so only other task orders need a sort.
        self._custom_task_order = any(name != "priority" for tier in self.fns("task_order") for name, _ in tier)
        self._specialize()

    # The combinators asked every allocate turn, and the points they combine.
    _SPECIALIZED = {"queue_key": "queue_order", "overused": "overused", "job_ready_ok": "job_ready",
                    "allocatable_count": "allocatable"}

    def _specialize(self) -> None:
        """Where one plugin answers a point that a combinator of _SPECIALIZED reads, an instance
        attribute shadows the combinator with that answer itself (queue_key: its key made
        without the loop): the same answers, without the combinator's call and loop, on each of
        thousands of turns. A callback registered later drops them (`register`)."""
        for name, point in self._SPECIALIZED.items():
            fns = self.flat(point)
            if len(fns) != 1:
                continue
            fn = fns[0]
            if name == "queue_key":
                names = self.queue_names
                if getattr(fn, "fixed_width", False):
                    self.queue_key = lambda q, fn=fn: (*fn(q), names[q])
                else:
                    self.queue_key = lambda q, fn=fn: (fn(q), names[q])
            elif name == "job_ready_ok":
                self.job_ready_ok = fn
            elif name == "allocatable_count":
                def allocatable_count(q: int, request, count: int, reserving: bool = False, fn=fn):
                    allowed, why = fn(q, request, count, reserving)
                    return (allowed, why) if allowed < count else (count, None)
                self.allocatable_count = allocatable_count
            else:
                self.overused = fn

    def _unspecialize(self) -> None:
        for name in self._SPECIALIZED:
            self.__dict__.pop(name, None)

    def add_listener(self, rule: StatefulRule) -> None:
        """Tell `rule` of every placement, undo and eviction (once, however often registered)."""
        if all(rule is not other for other in self.listeners):
            self.listeners.append(rule)
            self._class_listeners = {}

    def rule_state(self, name: str, make: Callable[[], Any]) -> Any:
        """The session's one instance of a stateful rule that several plugins register facets
        of (predicates its filter, nodeorder its scorer): made by the first to ask."""
        state = self._rule_states.get(name)
        if state is None:
            state = self._rule_states[name] = make()
        return state

    def check_columns_per_card(self, columns: np.ndarray) -> None:
        """Resource columns the device plugin checks card by card: the node fit (and the room a
        task holds on its node) leaves them out."""
        if self.snap.queue_only is not None:      # DRA device counts: queues count them, no node offers them
            columns = columns | self.snap.queue_only
        if columns.any():
            self._fit_columns = (~columns).astype(np.int64)
            self.ledger.set_held(self._fit_columns.astype(np.uint8))
            self._fit_requests = {}       # made with the columns before

    def enabled(self, plugin_spec, point: str) -> bool:
        return plugin_spec.enabled(point)

    def fns(self, point: str) -> list[list[tuple[str, Callable]]]:
        return self.callbacks.get(point, _NONE)

    def answers(self, point: str, plugin: str) -> bool:
        """Whether `plugin` registered a callback at `point`."""
        return any(name == plugin for tier in self.fns(point) for name, _ in tier)

    # --- combinators ---------------------------------------------------------------------
    def flat(self, point: str) -> list[Callable]:
        """The point's callbacks in tier and plugin order (for answers that combine over all
        plugins in order: orders, all/any)."""
        fns = self._flat.get(point)
        if fns is None:
            fns = self._flat[point] = [fn for tier in self.fns(point) for _, fn in tier]
        return fns

    def job_key(self, j: int) -> tuple:
        job = self.snap.jobs[j]
        fns = self.flat("job_order")
        if len(fns) == 1:
            return fns[0](j), job.creation, job.uid
        return (*[fn(j) for fn in fns], job.creation, job.uid)

    def job_order(self, js: list[int]) -> list[int]:
        """`js` in job order: by job_key, ties by index (as a heap of (job_key, j) pops them).
        When every job_order callback offers its column (Plugin.register), the keys are
        compared as arrays (one lexsort) instead of as a tuple per job."""
        fns = self.flat("job_order")
        columns = [self.order_columns.get(fn) for fn in fns]
        if len(js) < 2 or None in columns:
            return sorted(js, key=lambda j: (self.job_key(j), j))
        rows = np.array(js, dtype=np.int64)
        # lexsort: the last key is the first compared, and equal keys keep their input order.
        keys = [self.job_tie_rank()[rows]] + [column()[rows] for column in reversed(columns)]
        return rows[np.lexsort(keys)].tolist()

    def job_tie_rank(self) -> np.ndarray:
        """Each job's position in (creation, uid, index) order: job_key's last terms."""
        if self._job_tie_rank is None:
            jobs = self.snap.jobs
            creation = self.job_cols.creation
            uid = np.array([job.uid for job in jobs], dtype=str)
            rank = np.empty(len(jobs), dtype=np.int64)
            rank[np.lexsort((uid, creation))] = np.arange(len(jobs))
            self._job_tie_rank = rank
        return self._job_tie_rank

    def queue_key(self, q: int) -> tuple:
        fns = self._flat.get("queue_order") or self.flat("queue_order")     # flat's cache read inline: asked each turn
        if len(fns) == 1:       # asked twice a turn; most policies order queues by one plugin
            fn = fns[0]
            if getattr(fn, "fixed_width", False):
                # Its keys are tuples of one length: flat with the name they order the same,
                # and a heap of queues compares them in one pass instead of two levels.
                return (*fn(q), self.queue_names[q])
            return fn(q), self.queue_names[q]
        return (*[fn(q) for fn in fns], self.snap.queues[q].name)

    def task_key(self, t: int) -> tuple:
        pod = self.snap.pods[t]
        return (*[fn(t) for fn in self.flat("task_order")], pod.creation, pod.uid)

    def job_ready_ok(self, j: int) -> bool:
        for fn in self._flat.get("job_ready") or self.flat("job_ready"):     # as queue_key
            if not fn(j):
                return False
        return True

    def _votes(self, point: str, *args) -> Verdict:
        for tier in self.fns(point):
            permit = None
            for _, fn in tier:
                verdict: Verdict = fn(*args)
                if verdict.vote is REJECT:
                    return verdict
                if verdict.vote is PERMIT:
                    permit = verdict
            if permit is not None:
                return permit
        return Verdict(PERMIT)

    def job_pipelined_ok(self, j: int) -> bool:
        return self._votes("job_pipelined", j).vote is not REJECT

    def job_enqueueable(self, j: int) -> Verdict:
        return self._votes("job_enqueued", j)

    def job_starving(self, j: int) -> bool:
        for tier in self.fns("job_starving"):
            answers = [fn(j) for _, fn in tier]
            answers = [a for a in answers if a is not None]
            if answers:
                return all(answers)
        return False

    def job_valid(self, j: int) -> d.Reason | None:
        job = self.snap.jobs[j]
        if job.problem:
            return d.Reason(d.JOB, job.problem)
        for fn in self._flat.get("job_valid") or self.flat("job_valid"):     # as queue_key
            reason = fn(j)
            if reason is not None:
                return reason
        return None

    def jobs_to_validate(self) -> list[bool] | None:
        """Per job, whether job_valid must be asked of it: its problem, or a job_valid plugin's
        column (Plugin.register) saying it may be invalid; None where some job_valid plugin
        offers no column (every job is asked)."""
        columns = [self.order_columns.get(fn) for fn in self.flat("job_valid")]
        if None in columns:
            return None
        ask = self.job_cols.problem.copy()
        for column in columns:
            ask |= column()
        return ask.tolist()

    def overused(self, q: int) -> bool:
        for fn in self._flat.get("overused") or self.flat("overused"):     # as queue_key
            if fn(q):
                return True
        return False

    def allocatable_count(self, q: int, request: np.ndarray, count: int,
                          reserving: bool = False) -> tuple[int, d.Reason | None]:
        """How many of `count` tasks of `request` (a vector over the resource columns, or a task:
        its row of snap.request) queue q may allocate, and why not more.
        `reserving`: for a reservation held across cycles, which the queue plugins bound by its
        capability rather than its deserved share (runtime/engine/queueshare.py)."""
        reason = None
        for fn in self._flat.get("allocatable") or self.flat("allocatable"):     # as queue_key
            allowed, why = fn(q, request, count, reserving)
            if allowed < count:
                count, reason = allowed, why
        return count, reason

    def preemptive(self, q: int, t: int) -> bool:
        return all(fn(q, t) for tier in self.fns("preemptive") for _, fn in tier)

    def queue_reserved(self, q: int, among: Iterable[int] | None = None, floor: int | None = None) -> np.ndarray:
        """What queue q's reservations request (its PIPELINED tasks: held from earlier cycles,
        or made by this cycle's preempt and reclaim; only those `among` given tasks, and of
        priority `floor` or higher, when given). Pipelined room does not count in a queue's
        allocation, so an action reserving more for q adds this by hand: a reservation the queue
        could not take with these would never bind, and its evictions would buy nothing."""
        snap = self.snap
        tasks = np.flatnonzero(self.status == PIPELINED) if among is None else \
            np.fromiter((t for t in among if self.status[t] == PIPELINED), dtype=np.int64)
        keep = self.job_queue[snap.task_job[tasks]] == q
        if floor is not None:
            keep &= snap.task_priority[tasks] >= floor
        return snap.request[tasks[keep]].sum(axis=0, dtype=np.int64)

    @contextmanager
    def allocated_as_if(self, q: int, delta: np.ndarray, held: bool = False) -> Iterator[None]:
        """Queue q's allocation (and its ancestors', the root's total too) changed by `delta`
        while the block runs, then put back: the queue plugins' answers read nothing else.
        `held`: the delta is reservations counted as allocated, which reasons say."""
        chain = [*self.queue_chain[q], 0]
        for c in chain:
            self.queue_allocated[c] += delta
        if held:
            self.held_counted = {c: delta for c in chain}
        try:
            yield
        finally:
            for c in chain:
                self.queue_allocated[c] -= delta
            self.held_counted = {}

    def victims(self, point: str, preemptor: int, candidates: list[int]) -> list[int]:
        for tier in self.fns(point):
            chosen: set[int] | None = None
            for _, fn in tier:
                picked = set(fn(preemptor, candidates))
                chosen = picked if chosen is None else chosen & picked
            if chosen:
                return [c for c in candidates if c in chosen]
        return []

    # --- nodes for a task class ----------------------------------------------------------
    def class_mask(self, cls: TaskClass) -> tuple[np.ndarray, list[Check]]:
        """Nodes passing every static predicate (all but resources and the stateful rules), cached."""
        cached = self._mask_cache.get(cls.index)
        if cached is None:
            if self._unschedulable is None:      # one Check for every class (its mask's identity is in `same`)
                self._unschedulable = Check("node(s) were unschedulable", self.snap.schedulable)
            checks = [self._unschedulable]
            for fn in self.flat("predicate"):
                checks.extend(fn(cls))
            # Classes are many under inter-pod rules, their predicates' masks few (cached by the
            # predicates): classes with the same masks read one array (never written).
            same = tuple([id(check.passing) for check in checks])
            alike = self._masks_alike.get(same)
            if alike is None:
                mask = np.ones(self.snap.n_nodes, dtype=bool)
                for check in checks:
                    mask &= check.passing
                alike = self._masks_alike[same] = (mask.view(np.uint8), checks)   # the checks keep the ids taken
            cached = self._mask_cache[cls.index] = (alike[0], checks)
        return cached

    def class_static_score(self, cls: TaskClass) -> np.ndarray:
        cached = self._static_cache.get(cls.index)
        if cached is None:
            for scorer in self.flat("node_order"):
                extra = scorer(cls)
                if extra is not None:
                    if cached is None:
                        cached = np.zeros(self.snap.n_nodes, dtype=np.float64)
                    cached += extra
            if cached is None:      # no scorer scores the class: every such class reads one array
                if self._no_static_score is None:
                    self._no_static_score = np.zeros(self.snap.n_nodes, dtype=np.float64)
                    self._no_static_score.flags.writeable = False
                cached = self._no_static_score
            self._static_cache[cls.index] = cached
        return cached

    def placement(self, cid: int) -> ClassPlacement:
        """Class cid's placement inputs (node mask codes, scores, fit request) and tree, made on
        first use; `fresh_placement` brings them up to date."""
        cp = self.placements.get(cid)
        if cp is None:
            cls = self.snap.classes[cid]
            mask, _ = self.class_mask(cls)
            passes = self._mask_passes.get(id(mask))
            if passes is None:
                passes = self._mask_passes[id(mask)] = bool(mask.all())
            fit = self._fit_requests.get(cls.request)
            if fit is None:
                req = np.array(cls.request, dtype=np.int64) * self._fit_columns
                fit = self._fit_requests[cls.request] = (req, req.tobytes())
            cp = self.placements[cid] = ClassPlacement(
                cid, fit[0], fit[1], mask, passes, self.class_static_score(cls),
                [f for f in self.stateful_filters if f.filters(cid)], [f for f in self.stateful_scorers if f.scores(cid)])
            filters, scorers = cp.filters, cp.scorers
            # Most classes under inter-pod rules concern one rule: no set of them made.
            for rule in (filters or scorers) if len(filters) + len(scorers) == 1 else \
                    {id(r): r for r in (*filters, *scorers)}.values():
                self._placements_of_rule.setdefault(id(rule), []).append(cp)
            if len(filters) == 1 and not scorers:
                cp.unchanged = filters[0].unchanged_by_own(cid)
                cp.excludes_own = not cp.unchanged and filters[0].excludes_own_node(cid)
            elif filters and not scorers:
                cp.unchanged = all(f.unchanged_by_own(cid) for f in filters)
                cp.excludes_own = not cp.unchanged and all(
                    f.unchanged_by_own(cid) or f.excludes_own_node(cid) for f in filters)
            verdicts = cp.filters[0].domain_verdicts(cid) if len(cp.filters) == 1 and not cp.scorers \
                and not cp.unchanged else None
            if verdicts is not None:
                # Its one filter answers per topology domain (a hard zone spread): a placement
                # flipping a zone's verdict leaves out that zone's nodes, not re-codes and
                # re-keys each of them (place_by_domain).
                cp.by_domain = self._domain_tree(cp, verdicts[0])
            elif cp.filters and not cp.scorers and not cp.unchanged:
                key = (cp.req_key, id(mask), id(cp.static_score))      # class_mask's arrays are shared
                cp.shared = self.shared_trees.get(key)
                if cp.shared is None:
                    cp.shared = self.shared_trees[key] = SharedTree()
                cp.mask = cp.static_mask.copy()     # written where the rules answer (place_lazy, update)
                cp.view = self.k.MaskView(cp.mask)
                # Under inter-pod rules most classes are a replica group one pod short: one
                # placement, for which the rules are asked only where the shared tree looks
                # (place_lazy) rather than about every node (one whose placements exclude their
                # own node has no run to place in one call). A class of several pending tasks has
                # its codes on every node kept up to date instead (each placement changes few).
                cp.lazy = self.class_pending[cid] == 1
                # Its one placement asks first whether a filter passes few nodes (a zone spread
                # passing in one zone): their scan, not shared-tree rounds spent on failing nodes.
                cp.scans = cp.lazy
            elif not cp.filters and len(cp.scorers) == 1:
                by_domain = cp.scorers[0].domain_scores(cid)
                if by_domain is not None:
                    cp.by_domain = self._domain_tree(cp, by_domain[0])
        return cp

    def _domain_tree(self, cp: ClassPlacement, domains: Domains) -> SharedTree:
        """The DomainTree (made when first placed by) of class cp's request, static mask and
        scores over `domains`: shared by the classes alike."""
        key = (cp.req_key, id(cp.static_mask), id(cp.static_score), id(domains))   # class_mask's arrays are shared
        found = self.domain_trees.get(key)
        if found is None:
            found = self.domain_trees[key] = SharedTree()
        return found

    @property
    def class_pending(self) -> list[int]:
        """Per class, how many of its tasks are pending in the snapshot (made on first use)."""
        if self._class_pending is None:
            snap = self.snap
            self._class_pending = np.bincount(snap.task_class[snap.status == PENDING],
                                              minlength=len(snap.classes)).tolist()
        return self._class_pending

    def fresh_placement(self, cid: int) -> ClassPlacement:
        """Class cid's placement with its stateful answers and its tree up to date: the tree is
        built when new (or when many nodes changed since its last use), else re-keyed on the
        nodes the ledger logged since and those the stateful rules marked."""
        return self.refresh(self.placement(cid))

    def refresh(self, cp: ClassPlacement) -> ClassPlacement:
        """fresh_placement of a class whose placement the caller holds (the session keeps one
        ClassPlacement per class: `placement(cp.cid)` is cp)."""
        if cp.lazy:         # every node's codes from here on (a tree of its own, or a caller reading the mask)
            cp.lazy, cp.known, cp.dirty_all, cp.dirty, cp.dirty_code = False, set(), True, [], -1
        elif cp.by_domain is not None:      # every node's scores from here on, likewise
            cp.by_domain, cp.dirty_all, cp.dirty, cp.dirty_code = None, True, [], -1
        changed = cp.update() if cp.stateful else _EMPTY
        logged = self.ledger.log_n
        fits = self._fresh_fits(cp.req, logged, cp.req_key)
        if cp.shared is not None:
            self._fresh_shared(cp, logged, fits)
            return cp
        if cp.tree is None:     # stale until a placement needs its keys (runtime.engine.kernels.place)
            cp.tree = self.k.PlacementTree(self.snap.allocatable, self.used, self.releasing, self.pipelined, cp.req,
                                           cp.mask, cp.score, self.score_params, fits, self.tree_room)
        elif changed is not None and not len(changed):      # the log's nodes alone (most turns)
            cp.tree.catch_up(self.ledger.log_arr, cp.seen, logged, self.rebuild_over)
        elif cp.tree.stale:
            pass                # built afresh (or scanned) when next asked: nothing to re-key
        elif changed is None or logged - cp.seen + len(changed) > self.rebuild_over:
            cp.tree.build()
        else:
            if logged > cp.seen:
                cp.tree.refresh_log(self.ledger.log_arr, cp.seen, logged)
            if len(changed):
                cp.tree.refresh(changed.astype(np.int64, copy=False))
        cp.seen = logged
        return cp

    def _fresh_shared(self, cp: ClassPlacement, logged: int, fits) -> None:
        """Class cp's shared tree brought up to the ledger's log position (made when new)."""
        shared = cp.shared
        if shared.tree is None:
            shared.tree = self.k.PlacementTree(self.snap.allocatable, self.used, self.releasing, self.pipelined,
                                               cp.req, cp.static_mask, cp.static_score, self.score_params, fits,
                                               self.tree_room)
        self._bring_up(shared, logged)

    def _bring_up(self, shared: SharedTree, logged: int) -> None:
        """A shared tree (made) brought up to the ledger's log position: built afresh when many
        nodes changed since, else re-keyed on those."""
        shared.tree.catch_up(self.ledger.log_arr, shared.seen, logged, self.rebuild_over)
        shared.seen = logged

    def place_one(self, cp: ClassPlacement) -> Any:
        """One task of class cp (just brought up to date by fresh_placement) placed on its best
        node: the tree whose out_nodes[0] / out_kinds[0] say where, None when no node takes it.
        `placed_by` then takes the placement as seen. A class scored per domain (not brought up to
        date) places by its request's DomainTree (place_by_domain)."""
        if cp.by_domain is not None:
            return self.place_by_domain(cp)
        shared = cp.shared
        if shared is not None:
            if cp.scans:
                few = self.place_few(cp, shared.tree, cp.mask)
                if few is not False:
                    return few
            got = shared.tree.place_masked(cp.view, SHARED_BUDGET)
            if got >= 0:
                return shared.tree if got else None
            if not cp.scans:
                cp.scans = True
                few = self.place_few(cp, shared.tree, cp.mask)
                if few is not False:
                    return few
            cp.shared = None       # many of its nodes differ now: a tree of its own from here on
            cp = self.fresh_placement(cp.cid)
        return cp.tree if cp.tree.place(1) else None

    def place_by_domain(self, cp: ClassPlacement) -> Any:
        """place_one of a class scored or filtered per domain (ClassPlacement.by_domain), without
        fresh_placement: by its request's DomainTree, with its rule's scores (or verdicts, as 0 or
        -inf) per domain as they are now (DomainTree.place_scored: the node its own tree would
        give)."""
        logged = self.ledger.log_n
        fits = self._fresh_fits(cp.req, logged, cp.req_key)
        rule = cp.scorers[0] if cp.scorers else cp.filters[0]
        domains, scores = rule.domain_scores(cp.cid) if cp.scorers else rule.domain_verdicts(cp.cid)
        shared = cp.by_domain
        if shared.tree is None:
            shared.tree = self.k.DomainTree(self.used, self.pipelined, cp.static_mask, cp.static_score, fits,
                                            domains.of, domains.count)
        self._bring_up(shared, logged)
        return shared.tree if shared.tree.place_scored(scores) else None

    def place_lazy(self, cp: ClassPlacement) -> Any:
        """place_one for a lazy class (ClassPlacement.lazy), without fresh_placement: the rules
        are asked about the nodes its shared tree offers it, not about every node. The shared
        tree reads the class's codes where they are known and the static ones elsewhere; the
        rules' codes only take passes away (a failing or a releasing bit, never a pass the
        static predicates refused), so no node's key under them is above its key under the
        static codes: the first node offered, once its codes are known, is the node the class's
        own tree would give. Returns the tree that placed it, as place_one does (then `placed_by`)."""
        logged = self.ledger.log_n
        self._fresh_shared(cp, logged, self._fresh_fits(cp.req, logged, cp.req_key))
        mask, known, static, cid = cp.mask, cp.known, cp.static_mask, cp.cid
        if cp.dirty_all or cp.dirty:     # the rules' answers changed since they were asked: asked again
            for row in known:
                mask[row] = static[row]
            known.clear()
            cp.dirty_all, cp.dirty, cp.dirty_code = False, [], -1
        tree = cp.shared.tree
        if cp.scans:
            few = self.place_few(cp, tree, None)
            if few is not False:
                return few
        while True:
            # The nodes its placement would take, best first, as far as its codes are known.
            got = tree.place_masked(cp.view, SHARED_BUDGET, LAZY_ASK, False)
            offered = tree.out_nodes[:got if got >= 0 else -1 - got].tolist()
            if not offered:
                if got == 0:
                    return None
                if not cp.scans:
                    cp.scans = True
                    few = self.place_few(cp, tree, None)
                    if few is not False:
                        return few
                cp.shared = None    # many of its nodes differ: a tree of its own from here on
                cp = self.fresh_placement(cid)
                return cp.tree if cp.tree.place(1) else None
            if offered[0] in known:
                break
            rows = [row for row in offered if row not in known]
            known.update(rows)
            at = np.array(rows, dtype=np.int64)
            mask[at] = combine_few(static[at].tolist(), cp.filters, cid, at, rows)
        got = tree.place_masked(cp.view, SHARED_BUDGET)
        assert got == 1 and int(tree.out_nodes[0]) == offered[0], "the node offered is the node placed on"
        return tree

    def place_few(self, cp: ClassPlacement, tree: Any, mask: np.ndarray | None) -> Any:
        """place_one of class cp where one of its filters passes few nodes (at most a
        FEW_PASSING-th: StatefulRule.passing_nodes): a scan of those nodes alone by `tree` (its
        own tree, or the shared one: PlacementTree.place_among) under the class's codes there,
        read from `mask` where it is up to date there (None: asked of the rules). Returns the
        tree, None when none of them takes the task, False when no filter's passing nodes are few."""
        nodes = None
        most = self.snap.n_nodes // FEW_PASSING
        for rule in cp.filters:
            found = rule.passing_nodes(cp.cid, most)
            if found is not None and (nodes is None or len(found) < len(nodes)):
                nodes = found
        if nodes is None:
            return False
        codes = mask[nodes] if mask is not None else self.stateful_codes(cp.cid, nodes)
        return tree if tree.place_among(nodes, codes) else None

    def place_excluding(self, cp: ClassPlacement, limit: int) -> tuple[Any, int, bool]:
        """Up to `limit` tasks of class cp (excludes_own, fresh) placed in one call of its
        shared tree, or of its own (whose mask is the class's: no node differs), each
        placement's node keyed out for the next: (the tree whose out_nodes / out_kinds say
        where, how many, whether the class's differing nodes passed the shared tree's budget —
        then it has a tree of its own from here on, the rest placed after fresh_placement)."""
        if cp.shared is None:
            got = cp.tree.place_masked(cp.view, 0, limit)
            return cp.tree, got, False
        tree = cp.shared.tree
        got = tree.place_masked(cp.view, SHARED_BUDGET, limit)
        if got >= 0:
            return tree, got, False
        cp.shared = None
        return tree, -1 - got, True

    def placed_by(self, cp: ClassPlacement) -> None:
        """Class cp's tree placed (and re-keyed) the ledger's latest placements itself."""
        shared = cp.shared if cp.shared is not None else cp.by_domain
        if shared is not None:
            shared.seen = self.ledger.log_n
        else:
            cp.seen = self.ledger.log_n

    def _fresh_fits(self, req: np.ndarray, logged: int, key: bytes):
        """The NodeFits of request `req` (`key`: its bytes), brought up to the ledger's log
        position `logged`: every node afresh only when the log since its last use is longer than
        the nodes (a node costs the same either way; a tree's rebuild, cheaper per node than its
        re-keying, comes at rebuild_over)."""
        fits = self.node_fits.get(key)
        if fits is None:
            fits = self.node_fits[key] = self.k.NodeFits(self.snap.allocatable, self.used, self.releasing,
                                                         self.pipelined, req, self.score_params)
            fits.seen = logged
        else:
            fits.catch_up(self.ledger.log_arr, logged, self.fits_rebuild_over)
        return fits

    def stateful_codes(self, cid: int, nodes: np.ndarray) -> np.ndarray:
        """Class cid's mask codes on `nodes` as the rules answer now (not waiting for a refresh)."""
        cp = self.placement(cid)
        codes = cp.static_mask[nodes]
        for rule in cp.filters:
            combine_into(codes, rule.codes(cid, nodes))
        return codes

    def mark_dirty(self, cid: int, nodes: np.ndarray | None) -> None:
        """A stateful rule's answer for class cid changed on `nodes` (None: on any node). A class
        marked on every node already (one placing by a DomainTree stays so) needs no more."""
        cp = self.placements.get(cid)
        if cp is not None and cp.stateful and not cp.dirty_all:
            cp.mark(nodes)

    def mark_dirty_as(self, cid: int, nodes: np.ndarray, code: int, rule: StatefulRule) -> None:
        """mark_dirty, where `rule`'s answer for class cid is `code` on every one of `nodes`
        (ClassPlacement.mark_as)."""
        cp = self.placements.get(cid)
        if cp is not None and cp.stateful and not cp.dirty_all:
            cp.mark_as(nodes, code, rule)

    def mark_all_dirty(self, nodes: np.ndarray | None, rule: StatefulRule) -> None:
        """`rule`'s answer changed on `nodes` for every class it concerns (that has a placement:
        a class made later asks the rule afresh). A port or a device taken on one node marks the
        classes of that rule, not a walk over every class."""
        for cp in self._placements_of_rule.get(id(rule), ()):
            cp.mark(nodes)

    # --- placement notifications ---------------------------------------------------------
    def pending_classes(self) -> list[int]:
        """Per task, its class if it is pending in the snapshot, else -1 (made once, read only:
        the listeners' lookup and the counting rules' Reading share it)."""
        if self._pending_class is None:
            snap = self.snap
            self._pending_class = np.where(snap.status == PENDING, snap.task_class, -1).tolist()
        return self._pending_class

    def listeners_of(self, t: int) -> list[StatefulRule]:
        """The listeners a placement or undo of task t can concern: of a task pending in the
        snapshot, those listening to its class (StatefulRule.listens; under inter-pod rules most
        pods concern one rule or none, with delayed claims most concern none), else all."""
        cid = (self._pending_class or self.pending_classes())[t]
        if cid < 0:
            return self.listeners
        found = self._class_listeners.get(cid)
        if found is None:
            found = self._class_listeners[cid] = [rule for rule in self.listeners if rule.listens(cid)]
        return found

    def notify_placed(self, tasks, nodes) -> None:
        self._notify(tasks, nodes, False)

    def notify_unplaced(self, tasks, nodes) -> None:
        self._notify(tasks, nodes, True)

    def _notify(self, tasks, nodes, undo: bool) -> None:
        """Each listener told of the tasks' placements (or undos) in turn, of those concerning it."""
        if len(tasks) == 1:
            t = int(tasks[0])
            for rule in self.listeners_of(t):
                (rule.unplaced if undo else rule.placed)(t, int(nodes[0]))
            return
        ts = [int(t) for t in tasks]
        # A run (what place_run records: tasks of one class, pending in the snapshot) concerns
        # its class's listeners alike: found once, not task by task (a cycle placing 20,000
        # pods of which a tenth have claims asks about each otherwise).
        first = self.listeners_of(ts[0])
        pending_class = self.pending_classes()
        cid = pending_class[ts[0]]
        if cid >= 0 and len(set(map(pending_class.__getitem__, ts))) == 1:
            if first:
                at = nodes.tolist() if isinstance(nodes, np.ndarray) else [int(node) for node in nodes]
                for rule in first:          # in listener order, as below
                    tell = rule.unplaced if undo else rule.placed
                    for t, node in zip(ts, at):
                        tell(t, node)
            return
        concerned = [self.listeners_of(t) for t in ts]
        if not any(concerned):
            return
        listeners = self.listeners
        for rule in listeners:
            tell = rule.unplaced if undo else rule.placed
            for t, node, rules in zip(ts, nodes, concerned):
                if rules is listeners or any(r is rule for r in rules):
                    tell(t, int(node))

    def fit_request(self, t: int) -> np.ndarray:
        """The request the fit kernel checks: device-managed columns are the card check's."""
        return self.snap.request[t] * self._fit_columns

    def no_node_reason(self, t: int) -> d.Reason:
        """"0/5 nodes are available: 2 node(s) had untolerated taint {gpu: true}, 3 Insufficient cpu."
        in kube-scheduler's words and order (its "<count> <reason>" parts sorted as strings):
        each node counted under the first check it fails (static ones, resources, then the
        stateful rules'), a node short of several resources under each."""
        cid = int(self.snap.task_class[t])
        cls = self.snap.classes[cid]
        _, checks = self.class_mask(cls)
        extra = [(c.message, c.passing) for rule in self.placement(cid).filters for c in rule.checks(cid)]
        n = self.snap.n_nodes
        remaining = np.ones(n, dtype=bool)
        counts: dict[str, int] = {}
        for check in checks:
            failing = remaining & ~check.passing
            if failing.any():
                counts[check.message] = counts.get(check.message, 0) + int(failing.sum())
            remaining &= check.passing
        req = self.fit_request(t)
        free = self.snap.allocatable - self.used + self.releasing - self.pipelined
        short_any = np.zeros(n, dtype=bool)
        for r, name in enumerate(self.snap.resources):
            if req[r] == 0:
                continue
            short = remaining & (free[:, r] < req[r])
            if short.any():
                label = "Too many pods" if name == "pods" else f"Insufficient {name}"
                counts[label] = counts.get(label, 0) + int(short.sum())
                short_any |= short
        remaining &= ~short_any
        for message, passing in extra:
            failing = remaining & ~passing
            if failing.any():
                counts[message] = counts.get(message, 0) + int(failing.sum())
            remaining &= passing
        parts = sorted(f"{c} {m}" for m, c in counts.items())
        text = f"0/{n} nodes are available" + (": " + ", ".join(parts) if parts else "") + "."
        return d.Reason(d.NODES, text, {"nodes": n, "counts": dict(counts)})

    def add_reason(self, t: int, reason: d.Reason) -> None:
        reasons = self.task_reasons.setdefault(t, [])
        if reason not in reasons:
            reasons.append(reason)

    # --- readiness counts ----------------------------------------------------------------
    def role_counts(self, job: JobInfo, statuses: tuple[int, ...]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in job.tasks:
            if self.status[t] in statuses:
                role = self.snap.pods[t].task_role
                counts[role] = counts.get(role, 0) + 1
        return counts

    def zero_request(self, t: int) -> bool:
        return bool(self.zero[t])

    def pending_tasks(self, j: int) -> list[int]:
        job = self.snap.jobs[j]
        tasks = job.tasks[self.status[job.tasks] == PENDING].tolist()
        if self._custom_task_order:
            tasks.sort(key=self.task_key)
        return tasks

    def pending_runs(self, j: int, skip_zero: bool) -> list[list[int]]:
        """Job j's pending tasks in task order (without zero-request ones when asked), as runs
        of consecutive tasks of one class."""
        if not self._custom_task_order:
            return self.ledger.pending_runs(j, skip_zero)
        return self.runs_of([t for t in self.pending_tasks(j) if not (skip_zero and self.zero[t])])

    def runs_of(self, tasks: Iterable[int]) -> list[list[int]]:
        """`tasks`, in their order, as runs of consecutive tasks of one class."""
        runs: list[list[int]] = []
        classes = self.snap.task_class
        for t in tasks:
            if runs and classes[runs[-1][0]] == classes[t]:
                runs[-1].append(t)
            else:
                runs.append([t])
        return runs

    def new_statement(self) -> "Statement":
        return Statement(self)

    def close(self) -> None:
        """Drop the plugins and their callbacks. They are closures over the session, so an open
        session is a reference cycle: freed only by a full garbage collection, which must then
        walk and free the whole snapshot at a random later moment. Closed, it goes with its
        last reference. A closed session answers no plugin question; its arrays stay readable."""
        for plugin in self.plugins.values():
            plugin.on_session_close(self)
        self._unspecialize()
        self.callbacks = {}
        self._flat = {}
        self.order_columns = {}
        self.plugins = {}
        self.stateful_filters = []
        self.stateful_scorers = []
        self.listeners = []
        self._class_listeners = {}
        self.storage = None
        self.hypernode_rule = None
        self._rule_states = {}
        self.enqueue_listeners = []
        self.placements = {}
        self._placements_of_rule = {}
        self.tree_room.clear()
        self.shared_trees = {}
        self.node_fits = {}
        self._mask_cache = {}
        self._masks_alike = {}
        self._static_cache = {}
        self._mask_passes = {}
        self._fit_requests = {}


_PLACE, _EVICT, _UNPLACE = 0, 1, 2


class Statement:
    """A unit of change: placements and evictions applied to the session at once (through its
    ledger), undone by `discard()`. (Volcano's Statement.) Placements of identical tasks are
    kept as one batch."""

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.ops: list[tuple] = []     # (_PLACE, tasks) | (_EVICT, task, prior status, reason)

    def placed(self, tasks: list[int], nodes: np.ndarray, kinds: np.ndarray, n: int) -> None:
        """Record the first n placements a placement kernel made (its node arrays updated)."""
        if n == 1:      # most placements (a replica's, or under inter-pod rules): scalars
            ssn = self.ssn
            t, node = tasks[0], nodes.item(0)      # item: a Python int, no NumPy scalar made
            ssn.ledger.placed_one(t, node, kinds.item(0))
            self.ops.append((_PLACE, tasks[:1]))
            if ssn.listeners:       # _notify's one-task case inline, and listeners_of's lookup
                pending = ssn._pending_class
                found = ssn._class_listeners.get(pending[t]) if pending is not None else None
                for rule in found if found is not None else ssn.listeners_of(t):
                    rule.placed(t, node)
        elif n:
            ssn = self.ssn
            ssn.ledger.placed(tasks, nodes, kinds, n)
            self.ops.append((_PLACE, tasks[:n]))
            if ssn.listeners:
                ssn.notify_placed(tasks[:n], nodes[:n])

    def place(self, t: int, node: int, status: int) -> None:
        """Place t on node as ALLOCATED or PIPELINED without a kernel (node arrays included)."""
        self.ssn.ledger.occupy(t, node, status)
        self.ops.append((_PLACE, [t]))
        if self.ssn.listeners:
            self.ssn.notify_placed((t,), (node,))

    def unplace(self, t: int) -> None:
        """Take back t's placement of an earlier statement (pending again; the room is back)."""
        ssn = self.ssn
        node, status = int(ssn.task_node[t]), int(ssn.status[t])
        if ssn.listeners:
            ssn.notify_unplaced((t,), (node,))
        ssn.ledger.unplace([t])
        self.ops.append((_UNPLACE, t, node, status))

    def evict(self, t: int, reason: d.Reason) -> None:
        prior = self.ssn.ledger.evict(t)
        self.ops.append((_EVICT, t, prior, reason))
        node = int(self.ssn.task_node[t])
        for rule in self.ssn.listeners:
            rule.evicted(t, node)

    def commit(self) -> None:
        for op in self.ops:
            if op[0] == _EVICT:
                self.ssn.evictions.append(d.Eviction(self.ssn.snap.task_keys[op[1]], op[3]))
        self.ops = []

    def discard(self) -> None:
        self.rollback(0)

    def mark(self) -> int:
        """A point to roll back to (`rollback`)."""
        return len(self.ops)

    def evicted_since(self, mark: int) -> list[int]:
        """The tasks evicted since `mark`, in order."""
        return [op[1] for op in self.ops[mark:] if op[0] == _EVICT]

    def rollback(self, mark: int) -> None:
        """Undo the changes made since `mark`, latest first; the earlier ones stay."""
        ssn = self.ssn
        for op in reversed(self.ops[mark:]):
            if op[0] == _PLACE:
                if ssn.listeners:
                    ssn.notify_unplaced(op[1], ssn.task_node[op[1]].tolist())
                ssn.ledger.unplace(op[1])
            elif op[0] == _UNPLACE:
                _, t, node, status = op
                ssn.ledger.occupy(t, node, status)
                if ssn.listeners:
                    ssn.notify_placed((t,), (node,))
            else:
                ssn.ledger.unevict(op[1], op[2])
                node = int(ssn.task_node[op[1]])
                for rule in ssn.listeners:
                    rule.unevicted(op[1], node)
        del self.ops[mark:]

    def to_pipelined(self) -> None:
        """Keep the placements as reservations only: allocated become pipelined (no binding)."""
        for op in self.ops:
            if op[0] == _PLACE:
                self.ssn.ledger.pipeline(op[1])
