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


# --- one row at a time (per job or queue turn), without numpy's per-call cost ---------------

cdef long long UNLIMITED = 9223372036854775807 // 4


def row_share(const long long[:, ::1] allocated, Py_ssize_t row, const double[::1] total):
    """max over resources with total > 0 of allocated[row] / total (drf's dominant share)."""
    cdef Py_ssize_t r
    cdef double best = 0.0, s
    for r in range(allocated.shape[1]):
        if total[r] > 0:
            s = allocated[row, r] / total[r]
            if s > best:
                best = s
    return best


def queue_share(const long long[:, ::1] allocated, Py_ssize_t row, const long long[:, ::1] deserved,
                const long long[::1] columns):
    """max over columns of allocated / deserved (a resource deserved 0 but used counts 1)."""
    cdef Py_ssize_t i, r
    cdef double best = 0.0, s
    for i in range(columns.shape[0]):
        r = columns[i]
        if deserved[row, r] > 0:
            s = <double>allocated[row, r] / <double>deserved[row, r]
            if s > best:
                best = s
        elif allocated[row, r] > 0 and best < 1.0:
            best = 1.0
    return best


def at_limit(const long long[:, ::1] allocated, Py_ssize_t row, const long long[:, ::1] limit,
             const long long[::1] columns):
    """Whether allocated[row] has reached limit[row] on every column."""
    cdef Py_ssize_t i, r
    for i in range(columns.shape[0]):
        r = columns[i]
        if limit[row, r] > allocated[row, r]:
            return False
    return True


def count_within(const long long[:, ::1] limit, const long long[:, ::1] allocated, Py_ssize_t row,
                 const long long[::1] request, const long long[::1] columns, long long count):
    """How many tasks of `request` fit under limit[row] − allocated[row] on the requested
    columns, and the first column that binds (-1 when all `count` fit)."""
    cdef Py_ssize_t i, r, binding = -1
    cdef long long allowed = count, room, n
    for i in range(columns.shape[0]):
        r = columns[i]
        if request[r] == 0 or limit[row, r] >= UNLIMITED:
            continue
        room = limit[row, r] - allocated[row, r]
        n = room // request[r] if room >= 0 else 0
        if n < allowed:
            allowed = n if n > 0 else 0
            binding = r
    return allowed, binding
