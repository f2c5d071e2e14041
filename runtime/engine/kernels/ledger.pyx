# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The session's ledger: every placement, undo and eviction of a cycle, applied to the node
arrays (used, pipelined, releasing), the task arrays (status, node) and the job and queue
accounting (allocated, ready, pipelined, pending) in one call, and the log of changed nodes
that placement trees re-key from. Same semantics as reference.Ledger (the parity tests).

A task's request counts in full for its job and queues; on its node only the columns `held`
says (the device plugin checks card columns itself). A queue's allocated includes its
descendants' (each job updates its queue's chain of ancestors, and root).
"""

import numpy as np

# Task status codes (runtime.engine.snapshot), and the placement kernel's kind for an idle fit.
cdef enum:
    PENDING = 0
    ALLOCATED = 1
    PIPELINED = 2
    RELEASING = 4
    IDLE = 2


cdef class Ledger:
    cdef const long long[:, ::1] request
    cdef const long long[::1] task_job
    cdef const long long[::1] task_class
    cdef const unsigned char[::1] zero
    cdef signed char[::1] status
    cdef long long[::1] task_node
    cdef long long[:, ::1] used
    cdef long long[:, ::1] pipelined
    cdef long long[:, ::1] releasing
    cdef const long long[::1] job_first
    cdef long long[:, ::1] job_allocated
    cdef long long[::1] job_ready
    cdef long long[::1] job_pipelined
    cdef long long[::1] job_pending
    cdef const long long[::1] job_queue
    cdef long long[:, ::1] queue_allocated
    cdef const long long[::1] chain_ptr
    cdef const long long[::1] chains
    cdef long long[::1] held
    cdef object log_arr
    cdef long long[::1] log
    cdef readonly Py_ssize_t log_n

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

    def set_held(self, const unsigned char[::1] held):
        """Columns a task holds on its node (1) or not (0: the device plugin's)."""
        cdef Py_ssize_t r
        for r in range(self.held.shape[0]):
            self.held[r] = held[r]

    cdef void _log(self, long long node) noexcept:
        cdef Py_ssize_t n = self.log.shape[0]
        if self.log_n == n:
            grown = np.empty(2 * n, dtype=np.int64)
            grown[:n] = self.log_arr
            self.log_arr = grown
            self.log = grown
        self.log[self.log_n] = node
        self.log_n += 1

    def log_since(self, Py_ssize_t seen):
        """Nodes changed since the log had `seen` entries (a view; may repeat nodes)."""
        return self.log_arr[seen:self.log_n]

    cdef void _account(self, Py_ssize_t t, long long sign, bint ready) noexcept:
        cdef Py_ssize_t j = self.task_job[t], q, k, c, r, r_n = self.request.shape[1]
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

    cdef void _hold(self, long long[:, ::1] arr, Py_ssize_t node, Py_ssize_t t, long long sign) noexcept:
        cdef Py_ssize_t r
        for r in range(self.request.shape[1]):
            arr[node, r] += sign * self.request[t, r] * self.held[r]

    def placed(self, list tasks, const long long[::1] nodes, const signed char[::1] kinds, Py_ssize_t n):
        """Record the first n placements of a placement kernel (which already added them to used
        or pipelined): an idle fit is ALLOCATED, a future fit PIPELINED."""
        cdef Py_ssize_t i, t
        cdef bint idle
        if n > len(tasks) or n > nodes.shape[0] or n > kinds.shape[0]:
            raise ValueError(f"{n} placements recorded for {len(tasks)} tasks")
        for i in range(n):
            t = tasks[i]
            idle = kinds[i] == IDLE
            self.status[t] = ALLOCATED if idle else PIPELINED
            self.task_node[t] = nodes[i]
            self.job_pending[self.task_job[t]] -= 1
            self._account(t, 1, idle)
            self._log(nodes[i])

    def occupy(self, Py_ssize_t t, Py_ssize_t node, int status):
        """Place t on node as `status` (ALLOCATED or PIPELINED), node arrays included."""
        self._hold(self.used if status == ALLOCATED else self.pipelined, node, t, 1)
        self.status[t] = status
        self.task_node[t] = node
        self.job_pending[self.task_job[t]] -= 1
        self._account(t, 1, status == ALLOCATED)
        self._log(node)

    def unplace(self, list tasks):
        """Undo placements: the tasks are pending again and their nodes' room is back."""
        cdef Py_ssize_t i, t, node
        cdef bint ready
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

    def pipeline(self, list tasks):
        """Turn the tasks' ALLOCATED placements into PIPELINED ones (reservations, no
        binding). Returns how many changed."""
        cdef Py_ssize_t i, t, node, changed = 0
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

    def evict(self, Py_ssize_t t):
        """t (running) starts releasing: its room counts as releasing, its job loses a ready
        task. Returns its prior status."""
        cdef int prior = self.status[t]
        cdef Py_ssize_t node = self.task_node[t]
        self._hold(self.releasing, node, t, 1)
        self.status[t] = RELEASING
        self._account(t, -1, True)
        self._log(node)
        return prior

    def unevict(self, Py_ssize_t t, int prior):
        cdef Py_ssize_t node = self.task_node[t]
        self._hold(self.releasing, node, t, -1)
        self.status[t] = prior
        self._account(t, 1, True)
        self._log(node)

    def pending_runs(self, Py_ssize_t j, bint skip_zero):
        """Job j's pending tasks in snapshot order (zero-request ones left out when asked), as
        runs of consecutive tasks of one class: [[t, ...], ...]."""
        cdef Py_ssize_t t, last = -1
        cdef list out = []
        cdef list run = None
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
