"""The session's ledger: every placement, undo and eviction of a cycle, applied to the node
arrays (used, pipelined, releasing), the task arrays (status, node) and the job and queue
accounting (allocated, ready, pipelined, pending) in one call, and the log of changed nodes
that placement trees re-key from.

A task's request counts in full for its job and queues; on its node only the columns `held`
says (the device plugin checks card columns itself). A queue's allocated includes its
descendants' (each job updates its queue's chain of ancestors, and root).

One source, compiled or interpreted (Cython's pure-Python mode: runtime/engine/kernels/__init__.py).
"""

import cython
import numpy as np

from runtime.engine.kernels import codes

# Typed copies (C globals when compiled) of the task statuses and the idle placement kind.
PENDING = cython.declare(cython.schar, codes.PENDING)
ALLOCATED = cython.declare(cython.schar, codes.ALLOCATED)
PIPELINED = cython.declare(cython.schar, codes.PIPELINED)
RELEASING = cython.declare(cython.schar, codes.RELEASING)
IDLE = cython.declare(cython.schar, codes.IDLE)


@cython.cclass
class Ledger:
    request: cython.const[cython.longlong][:, ::1]
    task_job: cython.const[cython.longlong][::1]
    task_class: cython.const[cython.longlong][::1]
    zero: cython.const[cython.uchar][::1]
    status: cython.schar[::1]
    task_node: cython.longlong[::1]
    used: cython.longlong[:, ::1]
    pipelined: cython.longlong[:, ::1]
    releasing: cython.longlong[:, ::1]
    job_first: cython.const[cython.longlong][::1]
    job_allocated: cython.longlong[:, ::1]
    job_ready: cython.longlong[::1]
    job_pipelined: cython.longlong[::1]
    job_pending: cython.longlong[::1]
    job_queue: cython.const[cython.longlong][::1]
    queue_allocated: cython.longlong[:, ::1]
    chain_ptr: cython.const[cython.longlong][::1]
    chains: cython.const[cython.longlong][::1]
    held: cython.longlong[::1]
    log_arr = cython.declare(object, visibility="readonly")     # read whole by place's refresh_log
    log: cython.longlong[::1]
    log_n = cython.declare(cython.Py_ssize_t, visibility="readonly")

    def __init__(self, request, task_job, task_class, zero, status, task_node, used, pipelined, releasing,
                 job_first, job_allocated, job_ready, job_pipelined, job_pending, job_queue, queue_allocated,
                 chain_ptr, chains):
        self.request = request
        self.task_job = task_job
        self.task_class = task_class
        self.zero = zero
        self.status = status
        self.task_node = task_node
        self.used = used
        self.pipelined = pipelined
        self.releasing = releasing
        self.job_first = job_first
        self.job_allocated = job_allocated
        self.job_ready = job_ready
        self.job_pipelined = job_pipelined
        self.job_pending = job_pending
        self.job_queue = job_queue
        self.queue_allocated = queue_allocated
        self.chain_ptr = chain_ptr
        self.chains = chains
        self.held = np.ones(request.shape[1], dtype=np.int64)
        self.log_arr = np.empty(4096, dtype=np.int64)
        self.log = self.log_arr
        self.log_n = 0

    def set_held(self, held: cython.const[cython.uchar][::1]) -> None:
        """Columns a task holds on its node (1) or not (0: the device plugin's)."""
        r: cython.Py_ssize_t
        for r in range(self.held.shape[0]):
            self.held[r] = held[r]

    @cython.cfunc
    @cython.exceptval(check=False)
    def _log(self, node: cython.longlong) -> cython.void:
        n: cython.Py_ssize_t = self.log.shape[0]
        if self.log_n == n:
            grown = np.empty(2 * n, dtype=np.int64)
            grown[:n] = self.log_arr
            self.log_arr = grown
            self.log = grown
        self.log[self.log_n] = node
        self.log_n += 1

    def log_since(self, seen: cython.Py_ssize_t):
        """Nodes changed since the log had `seen` entries (a view; may repeat nodes)."""
        return self.log_arr[seen:self.log_n]

    @cython.cfunc
    @cython.exceptval(check=False)
    def _account(self, t: cython.Py_ssize_t, sign: cython.longlong, ready: cython.bint) -> cython.void:
        j: cython.Py_ssize_t = self.task_job[t]
        q: cython.Py_ssize_t
        k: cython.Py_ssize_t
        c: cython.Py_ssize_t
        r: cython.Py_ssize_t
        r_n: cython.Py_ssize_t = self.request.shape[1]
        if not ready:
            self.job_pipelined[j] += sign
            return
        self.job_ready[j] += sign
        for r in range(r_n):
            self.job_allocated[j, r] += sign * self.request[t, r]
        q = self.job_queue[j]
        if q < 0:
            return
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            c = self.chains[k]
            for r in range(r_n):
                self.queue_allocated[c, r] += sign * self.request[t, r]
        for r in range(r_n):
            self.queue_allocated[0, r] += sign * self.request[t, r]

    @cython.cfunc
    @cython.exceptval(check=False)
    def _hold(self, arr: cython.longlong[:, ::1], node: cython.Py_ssize_t, t: cython.Py_ssize_t,
              sign: cython.longlong) -> cython.void:
        r: cython.Py_ssize_t
        for r in range(self.request.shape[1]):
            arr[node, r] += sign * self.request[t, r] * self.held[r]

    def placed(self, tasks: list, nodes: cython.const[cython.longlong][::1], kinds: cython.const[cython.schar][::1],
               n: cython.Py_ssize_t) -> None:
        """Record the first n placements of a placement kernel (which already added them to used
        or pipelined): an idle fit is ALLOCATED, a future fit PIPELINED."""
        i: cython.Py_ssize_t
        t: cython.Py_ssize_t
        idle: cython.bint
        if n > len(tasks) or n > nodes.shape[0] or n > kinds.shape[0]:
            raise ValueError(f"{n} placements recorded for {len(tasks)} tasks")
        for i in range(n):
            self._placed(tasks[i], nodes[i], kinds[i] == IDLE)

    def placed_one(self, t: cython.Py_ssize_t, node: cython.Py_ssize_t, kind: cython.int) -> None:
        """`placed` of one task (most placements under inter-pod rules): no arrays to take views of."""
        self._placed(t, node, kind == IDLE)

    @cython.cfunc
    @cython.exceptval(check=False)
    def _placed(self, t: cython.Py_ssize_t, node: cython.Py_ssize_t, idle: cython.bint) -> cython.void:
        self.status[t] = ALLOCATED if idle else PIPELINED
        self.task_node[t] = node
        self.job_pending[self.task_job[t]] -= 1
        self._account(t, 1, idle)
        self._log(node)

    def occupy(self, t: cython.Py_ssize_t, node: cython.Py_ssize_t, status: cython.int) -> None:
        """Place t on node as `status` (ALLOCATED or PIPELINED), node arrays included."""
        self._hold(self.used if status == ALLOCATED else self.pipelined, node, t, 1)
        self.status[t] = status
        self.task_node[t] = node
        self.job_pending[self.task_job[t]] -= 1
        self._account(t, 1, status == ALLOCATED)
        self._log(node)

    def unplace(self, tasks: list) -> None:
        """Undo placements: the tasks are pending again and their nodes' room is back."""
        i: cython.Py_ssize_t
        t: cython.Py_ssize_t
        node: cython.Py_ssize_t
        ready: cython.bint
        for i in range(len(tasks)):
            t = tasks[i]
            node = self.task_node[t]
            ready = self.status[t] == ALLOCATED
            self._hold(self.used if ready else self.pipelined, node, t, -1)
            self._account(t, -1, ready)
            self.status[t] = PENDING
            self.task_node[t] = -1
            self.job_pending[self.task_job[t]] += 1
            self._log(node)

    def pipeline(self, tasks: list) -> cython.Py_ssize_t:
        """Turn the tasks' ALLOCATED placements into PIPELINED ones (reservations, no
        binding). Returns how many changed."""
        i: cython.Py_ssize_t
        t: cython.Py_ssize_t
        node: cython.Py_ssize_t
        changed: cython.Py_ssize_t = 0
        for i in range(len(tasks)):
            t = tasks[i]
            if self.status[t] != ALLOCATED:
                continue
            node = self.task_node[t]
            self._hold(self.used, node, t, -1)
            self._hold(self.pipelined, node, t, 1)
            self._account(t, -1, True)
            self._account(t, 1, False)
            self.status[t] = PIPELINED
            self._log(node)
            changed += 1
        return changed

    def evict(self, t: cython.Py_ssize_t) -> int:
        """t (running) starts releasing: its room counts as releasing, its job loses a ready
        task. Returns its prior status."""
        prior: cython.int = self.status[t]
        node: cython.Py_ssize_t = self.task_node[t]
        self._hold(self.releasing, node, t, 1)
        self.status[t] = RELEASING
        self._account(t, -1, True)
        self._log(node)
        return int(prior)

    def unevict(self, t: cython.Py_ssize_t, prior: cython.int) -> None:
        node: cython.Py_ssize_t = self.task_node[t]
        self._hold(self.releasing, node, t, -1)
        self.status[t] = prior
        self._account(t, 1, True)
        self._log(node)

    def one_pending(self, j: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Job j's one pending task that requests something, or -1 when it has none or several
        (pending_runs' answer [[t]], without the lists: most allocate turns are such a job's)."""
        t: cython.Py_ssize_t
        found: cython.Py_ssize_t = -1
        for t in range(self.job_first[j], self.job_first[j + 1]):
            if self.status[t] != PENDING or self.zero[t]:
                continue
            if found >= 0:
                return -1
            found = t
        return found

    def pending_runs(self, j: cython.Py_ssize_t, skip_zero: cython.bint) -> list:
        """Job j's pending tasks in snapshot order (zero-request ones left out when asked), as
        runs of consecutive tasks of one class: [[t, ...], ...]."""
        t: cython.Py_ssize_t
        last: cython.Py_ssize_t = -1
        out: list = []
        run: list = None
        for t in range(self.job_first[j], self.job_first[j + 1]):
            if self.status[t] != PENDING or (skip_zero and self.zero[t]):
                continue
            if run is not None and self.task_class[t] == last:
                run.append(t)
            else:
                run = [t]
                out.append(run)
                last = self.task_class[t]
        return out
