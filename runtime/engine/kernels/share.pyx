# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Share kernels: dominant resource shares (drf) and weighted water-filling (proportion)."""

from libc.math cimport fmin, fmax


def dominant_shares(const long long[:, ::1] allocated, const double[::1] total, double[::1] out):
    cdef Py_ssize_t j, r
    cdef double best, s
    with nogil:
        for j in range(allocated.shape[0]):
            best = 0.0
            for r in range(allocated.shape[1]):
                if total[r] > 0:
                    s = allocated[j, r] / total[r]
                    if s > best:
                        best = s
            out[j] = best


def water_fill(const double[::1] total, const double[::1] weights, const double[:, ::1] request,
               const double[:, ::1] cap, const double[:, ::1] guarantee, double[:, ::1] out):
    cdef Py_ssize_t q_n = request.shape[0], r_n = request.shape[1], q, r
    cdef int rounds = 0
    cdef double wsum, used, old, v
    cdef bint changed, covered, nothing_left
    met = bytearray(q_n)
    cdef unsigned char[::1] m = met
    remaining_arr = bytearray(8 * r_n)
    cdef double[::1] remaining = memoryview(remaining_arr).cast("d")
    for q in range(q_n):
        for r in range(r_n):
            out[q, r] = 0.0
    while True:
        rounds += 1
        nothing_left = True
        for r in range(r_n):
            used = 0.0
            for q in range(q_n):
                used += out[q, r]
            remaining[r] = fmax(0.0, total[r] - used)
            if remaining[r] > 0:
                nothing_left = False
        wsum = 0.0
        for q in range(q_n):
            if not m[q]:
                wsum += weights[q]
        if wsum <= 0 or (nothing_left and rounds > 1):
            break
        changed = False
        for q in range(q_n):
            if m[q]:
                continue
            covered = True
            for r in range(r_n):
                old = out[q, r]
                v = old + remaining[r] * weights[q] / wsum
                v = fmin(fmin(v, cap[q, r]), request[q, r])
                v = fmax(v, guarantee[q, r])
                if v != old:
                    changed = True
                out[q, r] = v
                if request[q, r] > v:
                    covered = False
            if covered:
                m[q] = 1
                changed = True
        if not changed or rounds > 1000:
            break
    return rounds


# --- one row at a time (per job or queue turn) -------------------------------------------------
# Bound to the session's arrays once: a call passes only the row, because acquiring a typed
# view of each array argument would cost more than the arithmetic.

cdef long long UNLIMITED = 9223372036854775807 // 4


cdef class RowShare:
    """drf's dominant share of a row: max over resources with total > 0 of allocated[row] / total."""

    cdef const long long[:, ::1] allocated
    cdef const double[::1] total

    def __init__(self, const long long[:, ::1] allocated, const double[::1] total):
        self.allocated = allocated
        self.total = total

    def of(self, Py_ssize_t row):
        cdef Py_ssize_t r
        cdef double best = 0.0, s
        for r in range(self.allocated.shape[1]):
            if self.total[r] > 0:
                s = self.allocated[row, r] / self.total[r]
                if s > best:
                    best = s
        return best


cdef class QueueShare:
    """max over columns of allocated[row] / deserved[row] (a resource deserved 0 but used counts 1)."""

    cdef const long long[:, ::1] allocated
    cdef const long long[:, ::1] deserved
    cdef const long long[::1] columns

    def __init__(self, const long long[:, ::1] allocated, const long long[:, ::1] deserved,
                 const long long[::1] columns):
        self.allocated = allocated
        self.deserved = deserved
        self.columns = columns

    def of(self, Py_ssize_t row):
        cdef Py_ssize_t i, r
        cdef double best = 0.0, s
        for i in range(self.columns.shape[0]):
            r = self.columns[i]
            if self.deserved[row, r] > 0:
                s = <double>self.allocated[row, r] / <double>self.deserved[row, r]
                if s > best:
                    best = s
            elif self.allocated[row, r] > 0 and best < 1.0:
                best = 1.0
        return best


cdef class AtLimit:
    """Whether a queue, or any of its ancestors, has reached its limit on every column
    (`chain_ptr`/`chains`: each queue's chain of itself and its ancestors below root)."""

    cdef const long long[:, ::1] allocated
    cdef const long long[:, ::1] limit
    cdef const long long[::1] columns
    cdef const long long[::1] chain_ptr
    cdef const long long[::1] chains

    def __init__(self, const long long[:, ::1] allocated, const long long[:, ::1] limit,
                 const long long[::1] columns, const long long[::1] chain_ptr, const long long[::1] chains):
        self.allocated = allocated
        self.limit = limit
        self.columns = columns
        self.chain_ptr = chain_ptr
        self.chains = chains

    cdef bint _row(self, Py_ssize_t row) noexcept:
        cdef Py_ssize_t i, r
        for i in range(self.columns.shape[0]):
            r = self.columns[i]
            if self.limit[row, r] > self.allocated[row, r]:
                return False
        return True

    def row(self, Py_ssize_t row):
        return self._row(row)

    def chain(self, Py_ssize_t q):
        cdef Py_ssize_t k
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            if self._row(self.chains[k]):
                return True
        return False


cdef class CountWithin:
    """How many tasks of a request fit under limit[row] − allocated[row] on the requested
    columns, and the first column that binds (-1 when all `count` fit)."""

    cdef const long long[:, ::1] limit
    cdef const long long[:, ::1] allocated
    cdef const long long[::1] columns

    def __init__(self, const long long[:, ::1] limit, const long long[:, ::1] allocated,
                 const long long[::1] columns):
        self.limit = limit
        self.allocated = allocated
        self.columns = columns

    def count(self, Py_ssize_t row, const long long[::1] request, long long count):
        cdef Py_ssize_t i, r, binding = -1
        cdef long long allowed = count, room, n
        for i in range(self.columns.shape[0]):
            r = self.columns[i]
            if request[r] == 0 or self.limit[row, r] >= UNLIMITED:
                continue
            room = self.limit[row, r] - self.allocated[row, r]
            n = room // request[r] if room >= 0 else 0
            if n < allowed:
                allowed = n if n > 0 else 0
                binding = r
        return allowed, binding
