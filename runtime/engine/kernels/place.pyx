# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Score and placement kernels.

place_batch scores every node once for a run of identical tasks, keeps the keys in a max
segment tree (idle fit above future fit, then score, then lowest index), and after each
placement re-keys only the node it changed: a gang of k tasks costs one scan plus k·log N.
"""

import numpy as np
cimport numpy as cnp

include "_core.pxi"

# Node mask codes (runtime.engine.session): bit 0 the node passes the class's predicates; bit 1 it
# passes only once releasing pods have left (a stateful rule's room is held by them).
cdef enum:
    MASK_PASS = 1
    MASK_RELEASING = 2


def score_nodes(const long long[:, ::1] alloc, const long long[:, ::1] used, const long long[::1] req,
                const double[::1] params, const double[::1] static, double[::1] out):
    cdef Py_ssize_t n
    with nogil:
        for n in range(alloc.shape[0]):
            out[n] = c_score(alloc, used, req, params, n) + static[n]


cdef inline double c_key(const long long[:, ::1] alloc, const long long[:, ::1] used,
                         const long long[:, ::1] releasing, const long long[:, ::1] pipelined,
                         const long long[::1] req, const unsigned char[::1] mask, const double[::1] static,
                         const double[::1] params, Py_ssize_t n) noexcept nogil:
    cdef int state
    if not (mask[n] & MASK_PASS):
        return -INFINITY
    state = c_fit_state(alloc, used, releasing, pipelined, req, n)
    if state == 0:
        return -INFINITY
    if state == 2 and (mask[n] & MASK_RELEASING):
        state = 1       # what the rule needs is held by pods that are leaving: a future fit
    return c_score(alloc, used, req, params, n) + static[n] + (IDLE_BONUS if state == 2 else FUTURE_BONUS)


cdef inline void c_pull(double* key, long long* idx, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t a = 2 * i, b = 2 * i + 1
    # Ties go to the lower node index (the left child holds lower indexes).
    if key[b] > key[a]:
        key[i] = key[b]
        idx[i] = idx[b]
    else:
        key[i] = key[a]
        idx[i] = idx[a]


def place_batch(const long long[:, ::1] alloc, long long[:, ::1] used, const long long[:, ::1] releasing,
                long long[:, ::1] pipelined, const long long[::1] req, const unsigned char[::1] mask,
                const double[::1] static, const double[::1] params, Py_ssize_t k,
                long long[::1] out_nodes, signed char[::1] out_kind):
    cdef Py_ssize_t n_nodes = alloc.shape[0], r_n = req.shape[0]
    cdef Py_ssize_t size = 1, i, n, r, placed = 0, best
    cdef double best_key
    cdef bint idle
    while size < n_nodes:
        size *= 2
    cdef cnp.ndarray[cnp.float64_t, ndim=1] key_arr = np.full(2 * size, -np.inf)
    cdef cnp.ndarray[cnp.int64_t, ndim=1] idx_arr = np.full(2 * size, -1, dtype=np.int64)
    cdef double* key = <double*>key_arr.data
    cdef long long* idx = <long long*>idx_arr.data
    if n_nodes == 0:
        return 0
    with nogil:
        for n in range(n_nodes):
            key[size + n] = c_key(alloc, used, releasing, pipelined, req, mask, static, params, n)
            idx[size + n] = n
        i = size - 1
        while i >= 1:
            c_pull(key, idx, i)
            i -= 1
        while placed < k:
            best_key = key[1]
            if best_key == -INFINITY:
                break
            best = idx[1]
            idle = best_key >= (IDLE_BONUS + FUTURE_BONUS) / 2
            for r in range(r_n):
                if idle:
                    used[best, r] += req[r]
                else:
                    pipelined[best, r] += req[r]
            out_nodes[placed] = best
            out_kind[placed] = 2 if idle else 1
            placed += 1
            i = size + best
            key[i] = c_key(alloc, used, releasing, pipelined, req, mask, static, params, best)
            i //= 2
            while i >= 1:
                c_pull(key, idx, i)
                i //= 2
    return placed


cdef class PlacementTree:
    """place_batch's segment tree kept between uses by one task class, bound at construction to
    the session's node arrays and the class's request, mask and static scores (a call passes
    no arrays: acquiring a typed view of each argument costs more than a placement). `build`
    scores every node, `refresh` re-keys only the nodes changed since (by other classes'
    placements, evictions, discards; each node once however often it is listed), `place`
    places like place_batch, into `out_nodes` / `out_kinds`."""

    cdef Py_ssize_t size, n_nodes
    cdef long long epoch
    cdef object key_arr, idx_arr, mark_arr
    cdef readonly object out_nodes, out_kinds
    cdef const long long[:, ::1] alloc
    cdef long long[:, ::1] used
    cdef const long long[:, ::1] releasing
    cdef long long[:, ::1] pipelined
    cdef const long long[::1] req
    cdef const unsigned char[::1] mask
    cdef const double[::1] static
    cdef const double[::1] params

    def __init__(self, const long long[:, ::1] alloc, long long[:, ::1] used, const long long[:, ::1] releasing,
                 long long[:, ::1] pipelined, const long long[::1] req, const unsigned char[::1] mask,
                 const double[::1] static, const double[::1] params):
        self.alloc = alloc
        self.used = used
        self.releasing = releasing
        self.pipelined = pipelined
        self.req = req
        self.mask = mask
        self.static = static
        self.params = params
        self.n_nodes = alloc.shape[0]
        self.size = 1
        while self.size < self.n_nodes:
            self.size *= 2
        self.key_arr = np.full(2 * self.size, -np.inf)
        self.idx_arr = np.full(2 * self.size, -1, dtype=np.int64)
        # mark[n] == epoch: n was re-keyed in this refresh already (the change log repeats nodes).
        self.mark_arr = np.zeros(max(self.n_nodes, 1), dtype=np.int64)
        self.epoch = 0
        self.out_nodes = np.empty(16, dtype=np.int64)
        self.out_kinds = np.empty(16, dtype=np.int8)

    cdef inline double _key(self, Py_ssize_t n) noexcept nogil:
        return c_key(self.alloc, self.used, self.releasing, self.pipelined, self.req, self.mask, self.static,
                     self.params, n)

    def build(self):
        cdef double[::1] kv = self.key_arr
        cdef long long[::1] iv = self.idx_arr
        cdef double* key = &kv[0]
        cdef long long* idx = &iv[0]
        cdef Py_ssize_t n, i, size = self.size
        with nogil:
            for n in range(self.n_nodes):
                key[size + n] = self._key(n)
                idx[size + n] = n
            i = size - 1
            while i >= 1:
                c_pull(key, idx, i)
                i -= 1

    def refresh(self, const long long[::1] nodes):
        cdef double[::1] kv = self.key_arr
        cdef long long[::1] iv = self.idx_arr
        cdef long long[::1] mark = self.mark_arr
        cdef double* key = &kv[0]
        cdef long long* idx = &iv[0]
        cdef Py_ssize_t j, n, i, size = self.size
        self.epoch += 1
        cdef long long epoch = self.epoch
        with nogil:
            for j in range(nodes.shape[0]):
                n = nodes[j]
                if mark[n] == epoch:
                    continue
                mark[n] = epoch
                i = size + n
                key[i] = self._key(n)
                i //= 2
                while i >= 1:
                    c_pull(key, idx, i)
                    i //= 2

    def place(self, Py_ssize_t k):
        """Place up to k tasks; the first `placed` entries of out_nodes / out_kinds say where."""
        if self.out_nodes.shape[0] < k:
            self.out_nodes = np.empty(2 * k, dtype=np.int64)
            self.out_kinds = np.empty(2 * k, dtype=np.int8)
        cdef long long[::1] out_nodes = self.out_nodes
        cdef signed char[::1] out_kind = self.out_kinds
        cdef double[::1] kv = self.key_arr
        cdef long long[::1] iv = self.idx_arr
        cdef double* key = &kv[0]
        cdef long long* idx = &iv[0]
        cdef Py_ssize_t size = self.size, r_n = self.req.shape[0], placed = 0, best, i, r
        cdef double best_key
        cdef bint idle
        with nogil:
            while placed < k:
                best_key = key[1]
                if best_key == -INFINITY:
                    break
                best = idx[1]
                idle = best_key >= (IDLE_BONUS + FUTURE_BONUS) / 2
                for r in range(r_n):
                    if idle:
                        self.used[best, r] += self.req[r]
                    else:
                        self.pipelined[best, r] += self.req[r]
                out_nodes[placed] = best
                out_kind[placed] = 2 if idle else 1
                placed += 1
                i = size + best
                key[i] = self._key(best)
                i //= 2
                while i >= 1:
                    c_pull(key, idx, i)
                    i //= 2
        return placed
