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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from compiler.plan import Plan
from runtime import decisions as d
from runtime.kernels import Kernels
from runtime.snapshot import ALLOCATED, BOUND, PENDING, RELEASING, SUCCEEDED, JobInfo, Snapshot, TaskClass

ORDER_POINTS = ("job_order", "queue_order", "task_order")
_NONE: list = []          # the callbacks of a point nobody registered at (never appended to)
PERMIT, REJECT, ABSTAIN = True, False, None


@dataclass(frozen=True)
class Check:
    """One static predicate over all nodes for a task class: `passing[n]` and the message for
    the nodes that fail it ("node(s) didn't match Pod's node affinity/selector")."""

    message: str
    passing: np.ndarray


@dataclass(frozen=True)
class Verdict:
    vote: bool | None              # PERMIT, REJECT or ABSTAIN
    reason: d.Reason | None = None


@dataclass
class Options:
    scheduler_name: str = "volcano"
    pure_python: bool | None = None          # None: POLICYDSL_PURE_PYTHON decides
    fold_settled: bool | None = None         # None: runtime.snapshot.folds_settled(plan) decides


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
        self.job_phase = [job.phase for job in snap.jobs]
        pods_col = snap.resource_index["pods"]
        # Zero-request (best-effort) tasks: nothing requested but the pod slot.
        self.zero = ~np.delete(snap.request, pods_col, axis=1).any(axis=1) if len(snap.request) else \
            np.zeros(0, dtype=bool)
        self.queue_chain = [self._chain(q) for q in range(q_n)]
        self._init_accounting()
        # The chains as arrays for kernels: queue q's are chains[chain_ptr[q]:chain_ptr[q + 1]].
        self.chain_ptr = np.zeros(q_n + 1, dtype=np.int64)
        self.chain_ptr[1:] = np.cumsum([len(c) for c in self.queue_chain]) if q_n else 0
        self.chains = np.array([c for chain in self.queue_chain for c in chain], dtype=np.int64)
        job_queue = np.array([job.queue for job in snap.jobs], dtype=np.int64)
        self.ledger = kernels.Ledger(
            snap.request, snap.task_job, snap.task_class, self.zero.view(np.uint8), self.status, self.task_node,
            self.used, self.pipelined, self.releasing, snap.job_first, self.job_allocated, self.job_ready,
            self.job_pipelined, self.job_pending, job_queue, self.queue_allocated, self.chain_ptr, self.chains)
        self._fit_columns = np.ones(r, dtype=np.int64)
        self._custom_task_order = False
        # Callbacks per point: a list of tiers, each a list of (plugin name, fn).
        self.callbacks: dict[str, list[list[tuple[str, Callable]]]] = {}
        self.score_params = np.zeros(4 + 2 * r, dtype=np.float64)
        self.static_scorers: list[Callable[[TaskClass], np.ndarray | None]] = []
        self.device_hooks: Any = None       # set by the deviceshare plugin
        self.enqueue_listeners: list[Callable[[int], None]] = []   # told when a job is admitted
        self.queue_deserved: np.ndarray | None = None   # set by proportion / capacity
        self.plugins: dict[str, Any] = {}
        self._mask_cache: dict[int, tuple[np.ndarray, list[Check]]] = {}
        self._static_cache: dict[int, np.ndarray] = {}
        self._class_inputs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # A class's placement tree and the ledger's log length when it was last used: it
        # re-keys only the nodes logged since.
        self.trees: dict[int, tuple[Any, int]] = {}
        # Outcome
        self.evictions: list[d.Eviction] = []
        self.task_reasons: dict[int, list[d.Reason]] = {}
        self.job_reasons: dict[int, list[d.Reason]] = {}
        self.attempted: set[int] = set()     # jobs an action tried to place
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
        live = (st != SUCCEEDED) & (st != RELEASING)
        if j_n:
            # Each job's tasks are one range (snap.job_first): per-job sums are range sums.
            starts = snap.job_first[:-1]
            self.job_allocated[:] = np.add.reduceat(req * ready[:, None], starts, axis=0)
            self.job_request[:] = np.add.reduceat(req * live[:, None], starts, axis=0)
        job_queue = np.array([job.queue for job in snap.jobs], dtype=np.int64)
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
        for job in snap.jobs:
            if job.queue >= 0 and job.min_resources is not None and job.phase != "Pending":
                short = np.maximum(job.min_resources - self.job_allocated[job.index], 0)
                if job.phase == "Inqueue" or short.any():
                    for q in self.queue_chain[job.queue]:
                        self.queue_inqueue[q] += short
        children = self.snap.queues[0].children
        self.queue_allocated[0] = self.queue_allocated[children].sum(axis=0) if children else 0
        self.queue_request[0] = self.queue_request[children].sum(axis=0) if children else 0

    # --- registration --------------------------------------------------------------------
    def register(self, point: str, plugin: str, fn: Callable, column: Callable[[], np.ndarray] | None = None) -> None:
        """`column`, for an order point: fn's answers for all rows at once, an array (job_order)."""
        if column is not None:
            self.order_columns[fn] = column
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
        for point, tiers in self.callbacks.items():
            self.callbacks[point] = [t for t in tiers if t]
        if self.device_hooks is not None and self.snap.device_managed.any():
            # Card columns are the device plugin's check, not the node's.
            self._fit_columns = (~self.snap.device_managed).astype(np.int64)
            self.ledger.set_held(self._fit_columns.astype(np.uint8))
        # The snapshot lists a job's tasks by (priority desc, creation, uid): exactly the order
        # the priority plugin alone gives, so only other task orders need a sort.
        self._custom_task_order = any(name != "priority" for tier in self.fns("task_order") for name, _ in tier)

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
        return (*[fn(j) for fn in self.flat("job_order")], job.creation, job.uid)

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
            creation = np.array([job.creation for job in jobs], dtype=np.float64)
            uid = np.array([job.uid for job in jobs], dtype=str)
            rank = np.empty(len(jobs), dtype=np.int64)
            rank[np.lexsort((uid, creation))] = np.arange(len(jobs))
            self._job_tie_rank = rank
        return self._job_tie_rank

    def queue_key(self, q: int) -> tuple:
        return (*[fn(q) for fn in self.flat("queue_order")], self.snap.queues[q].name)

    def task_key(self, t: int) -> tuple:
        pod = self.snap.pods[t]
        return (*[fn(t) for fn in self.flat("task_order")], pod.creation, pod.uid)

    def job_ready_ok(self, j: int) -> bool:
        for fn in self.flat("job_ready"):
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
        for fn in self.flat("job_valid"):
            reason = fn(j)
            if reason is not None:
                return reason
        return None

    def overused(self, q: int) -> bool:
        for fn in self.flat("overused"):
            if fn(q):
                return True
        return False

    def allocatable_count(self, q: int, request: np.ndarray, count: int) -> tuple[int, d.Reason | None]:
        reason = None
        for fn in self.flat("allocatable"):
            allowed, why = fn(q, request, count)
            if allowed < count:
                count, reason = allowed, why
        return count, reason

    def preemptive(self, q: int, t: int) -> bool:
        return all(fn(q, t) for tier in self.fns("preemptive") for _, fn in tier)

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
        """Nodes passing every static predicate (all but resources and devices), cached."""
        cached = self._mask_cache.get(cls.index)
        if cached is None:
            checks = [Check("node(s) were unschedulable", self.snap.schedulable)]
            for tier in self.fns("predicate"):
                for _, fn in tier:
                    checks.extend(fn(cls))
            mask = np.ones(self.snap.n_nodes, dtype=bool)
            for check in checks:
                mask &= check.passing
            cached = self._mask_cache[cls.index] = (mask.view(np.uint8), checks)
        return cached

    def class_static_score(self, cls: TaskClass) -> np.ndarray:
        cached = self._static_cache.get(cls.index)
        if cached is None:
            cached = np.zeros(self.snap.n_nodes, dtype=np.float64)
            for scorer in self.static_scorers:
                extra = scorer(cls)
                if extra is not None:
                    cached += extra
            self._static_cache[cls.index] = cached
        return cached

    def class_inputs(self, cid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the placement kernels take for a task class: node mask (uint8), static scores,
        fit request. Cached for the session."""
        cached = self._class_inputs.get(cid)
        if cached is None:
            cls = self.snap.classes[cid]
            mask, _ = self.class_mask(cls)
            req = np.array(cls.request, dtype=np.int64) * self._fit_columns
            cached = self._class_inputs[cid] = (mask, self.class_static_score(cls), req)
        return cached

    def fit_request(self, t: int) -> np.ndarray:
        """The request the fit kernel checks: device-managed columns are the card check's."""
        return self.snap.request[t] * self._fit_columns

    def no_node_reason(self, t: int, extra: Iterable[tuple[str, np.ndarray]] = ()) -> d.Reason:
        """"0/5 nodes are available: 3 insufficient cpu, 2 node(s) had untolerated taint {gpu: true}"."""
        cls = self.snap.classes[self.snap.task_class[t]]
        _, checks = self.class_mask(cls)
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
                label = "too many pods" if name == "pods" else f"insufficient {name}"
                counts[label] = counts.get(label, 0) + int(short.sum())
                short_any |= short
        remaining &= ~short_any
        for message, passing in extra:
            failing = remaining & ~passing
            if failing.any():
                counts[message] = counts.get(message, 0) + int(failing.sum())
            remaining &= passing
        parts = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        text = f"0/{n} nodes are available"
        if parts:
            text += ": " + ", ".join(f"{c} {m}" for m, c in parts)
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
        runs: list[list[int]] = []
        classes = self.snap.task_class
        for t in self.pending_tasks(j):
            if skip_zero and self.zero[t]:
                continue
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
        self.callbacks = {}
        self._flat = {}
        self.order_columns = {}
        self.plugins = {}
        self.static_scorers = []
        self.enqueue_listeners = []
        self.device_hooks = None
        self.trees = {}
        self._mask_cache = {}
        self._static_cache = {}
        self._class_inputs = {}


_PLACE, _EVICT = 0, 1


class Statement:
    """A unit of change: placements and evictions applied to the session at once (through its
    ledger), undone by `discard()`. (Volcano's Statement.) Placements of identical tasks are
    kept as one batch."""

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.ops: list[tuple] = []     # (_PLACE, tasks) | (_EVICT, task, prior status, reason)

    def placed(self, tasks: list[int], nodes: np.ndarray, kinds: np.ndarray, n: int) -> None:
        """Record the first n placements a placement kernel made (its node arrays updated)."""
        if n:
            self.ssn.ledger.placed(tasks, nodes, kinds, n)
            self.ops.append((_PLACE, tasks[:n]))

    def place(self, t: int, node: int, status: int, devices: dict | None = None) -> None:
        """Place t on node as ALLOCATED or PIPELINED without a kernel (node arrays included)."""
        if devices:
            self.ssn.task_devices[t] = devices
        self.ssn.ledger.occupy(t, node, status)
        self.ops.append((_PLACE, [t]))

    def evict(self, t: int, reason: d.Reason) -> None:
        prior = self.ssn.ledger.evict(t)
        self.ops.append((_EVICT, t, prior, reason))

    def commit(self) -> None:
        keys = self.ssn.snap.task_keys
        for op in self.ops:
            if op[0] == _EVICT:
                self.ssn.evictions.append(d.Eviction(keys[op[1]], op[3]))
        self.ops = []

    def discard(self) -> None:
        self.rollback(0)

    def mark(self) -> int:
        """A point to roll back to (`rollback`)."""
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Undo the changes made since `mark`, latest first; the earlier ones stay."""
        ssn = self.ssn
        for op in reversed(self.ops[mark:]):
            if op[0] == _PLACE:
                if ssn.task_devices:
                    for t in op[1]:
                        devices = ssn.task_devices.pop(t, None)
                        if devices and ssn.device_hooks is not None:
                            ssn.device_hooks.release(t, int(ssn.task_node[t]), devices)
                ssn.ledger.unplace(op[1])
            else:
                ssn.ledger.unevict(op[1], op[2])
        del self.ops[mark:]

    def to_pipelined(self) -> None:
        """Keep the placements as reservations only: allocated become pipelined (no binding)."""
        for op in self.ops:
            if op[0] == _PLACE:
                self.ssn.ledger.pipeline(op[1])
