# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fit kernel: per node, whether a request fits idle room (2), only once releasing pods leave
(1), or not at all (0)."""

include "_core.pxi"


def fit_states(const long long[:, ::1] alloc, const long long[:, ::1] used, const long long[:, ::1] releasing,
               const long long[:, ::1] pipelined, const long long[::1] req, const unsigned char[::1] mask,
               signed char[::1] out):
    cdef Py_ssize_t n
    with nogil:
        for n in range(alloc.shape[0]):
            out[n] = c_fit_state(alloc, used, releasing, pipelined, req, n) if mask[n] else 0
