# Shared inline kernels (textually included by fit.pyx and place.pyx). Same semantics as
# runtime/engine/kernels/reference.py, which the parity tests hold them to.
from libc.math cimport sqrt, INFINITY

cdef double IDLE_BONUS = 2e12
cdef double FUTURE_BONUS = 1e12


cdef inline int c_fit_state(const long long[:, ::1] alloc, const long long[:, ::1] used,
                            const long long[:, ::1] releasing, const long long[:, ::1] pipelined,
                            const long long[::1] req, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t r
    cdef long long q, free, held
    cdef bint idle = True
    for r in range(req.shape[0]):
        q = req[r]
        if q == 0:
            continue
        free = alloc[n, r] - used[n, r]
        # Reservations (pipelined) beyond what releasing pods will free hold idle room too.
        held = pipelined[n, r] - releasing[n, r]
        if q > (free - held if held > 0 else free):
            idle = False
            if q > free + releasing[n, r] - pipelined[n, r]:
                return 0
    return 2 if idle else 1


cdef inline double c_score(const long long[:, ::1] alloc, const long long[:, ::1] used,
                           const long long[::1] req, const double[::1] params, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t r, r_n = req.shape[0]
    cdef double total = 0.0, s = 0.0, ws = 0.0, w, after, cap, least = 0.0, most = 0.0
    cdef double fr_sum = 0.0, fr_sq = 0.0, f, mean, var
    cdef int count = 0
    cdef bint over = False
    if params[0] > 0:
        for r in range(r_n):
            w = params[4 + r]
            if w <= 0 or req[r] == 0:
                continue
            if alloc[n, r] == 0:
                ws += w        # a resource the node does not offer scores 0, its weight still counts (Volcano)
                continue
            after = <double>(used[n, r] + req[r])
            if after > alloc[n, r]:
                over = True
                break
            s += after * w / <double>alloc[n, r]
            ws += w
        if not over and ws > 0:
            total += s / ws * 100.0 * params[0]
    if params[1] > 0 or params[2] > 0 or params[3] > 0:
        ws = 0.0
        for r in range(r_n):
            w = params[4 + r_n + r]
            if w <= 0 or alloc[n, r] == 0:
                continue
            after = <double>(used[n, r] + req[r])
            cap = <double>alloc[n, r]
            if after <= cap:
                least += (cap - after) * 100.0 / cap * w
                most += after * 100.0 / cap * w
            f = after / cap
            if f > 1.0:
                f = 1.0
            fr_sum += f
            fr_sq += f * f
            count += 1
            ws += w
        if ws > 0:
            total += params[1] * least / ws + params[2] * most / ws
        if count > 0:
            mean = fr_sum / count
            var = fr_sq / count - mean * mean
            if var < 0.0:
                var = 0.0
            total += params[3] * (1.0 - sqrt(var)) * 100.0
    return total
