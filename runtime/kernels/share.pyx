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
