"""Share kernels: dominant resource shares (drf) and weighted water-filling (proportion), and the
per-row share helpers the session binds to its arrays once.

One source, compiled or interpreted (Cython's pure-Python mode: runtime/engine/kernels/__init__.py).
"""

import cython

from runtime.engine.kernels import codes

UNLIMITED = cython.declare(cython.longlong, codes.UNLIMITED)


def dominant_shares(allocated: cython.const[cython.longlong][:, ::1], total: cython.const[cython.double][::1],
                    out: cython.double[::1]) -> None:
    j: cython.Py_ssize_t
    r: cython.Py_ssize_t
    best: cython.double
    s: cython.double
    with cython.nogil:
        for j in range(allocated.shape[0]):
            best = 0.0
            for r in range(allocated.shape[1]):
                if total[r] > 0:
                    s = allocated[j, r] / total[r]
                    if s > best:
                        best = s
            out[j] = best


def water_fill(total: cython.const[cython.double][::1], weights: cython.const[cython.double][::1],
               request: cython.const[cython.double][:, ::1], cap: cython.const[cython.double][:, ::1],
               guarantee: cython.const[cython.double][:, ::1], out: cython.double[:, ::1]) -> cython.int:
    """Deserved shares of sibling queues (Volcano's proportion loop, per-resource clamp).

    Each round every unmet queue gets remaining × weight / Σ unmet weights, clamped to its cap
    and its request, raised to its guarantee; a queue whose request is covered is met. Stops
    when nothing remains or nothing changed. Returns the number of rounds."""
    q_n: cython.Py_ssize_t = request.shape[0]
    r_n: cython.Py_ssize_t = request.shape[1]
    q: cython.Py_ssize_t
    r: cython.Py_ssize_t
    rounds: cython.int = 0
    wsum: cython.double
    used: cython.double
    old: cython.double
    v: cython.double
    changed: cython.bint
    covered: cython.bint
    nothing_left: cython.bint
    met: cython.uchar[::1] = bytearray(q_n)
    remaining: cython.double[::1] = memoryview(bytearray(8 * r_n)).cast("d")
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
            remaining[r] = max(0.0, total[r] - used)
            if remaining[r] > 0:
                nothing_left = False
        wsum = 0.0
        for q in range(q_n):
            if not met[q]:
                wsum += weights[q]
        if wsum <= 0 or (nothing_left and rounds > 1):
            break
        changed = False
        for q in range(q_n):
            if met[q]:
                continue
            covered = True
            for r in range(r_n):
                old = out[q, r]
                v = old + remaining[r] * weights[q] / wsum
                v = min(v, cap[q, r], request[q, r])
                v = max(v, guarantee[q, r])
                if v != old:
                    changed = True
                out[q, r] = v
                if request[q, r] > v:
                    covered = False
            if covered:
                met[q] = 1
                changed = True
        if not changed or rounds > 1000:
            break
    return rounds


# --- one row at a time (per job or queue turn) -------------------------------------------------
# Bound to the session's arrays once: a call passes only the row, because acquiring a typed
# view of each array argument would cost more than the arithmetic.

@cython.cclass
class RowShare:
    """drf's dominant share of a row: max over resources with total > 0 of allocated[row] / total."""

    allocated: cython.const[cython.longlong][:, ::1]
    total: cython.const[cython.double][::1]

    def __init__(self, allocated: cython.const[cython.longlong][:, ::1], total: cython.const[cython.double][::1]):
        self.allocated = allocated
        self.total = total

    def of(self, row: cython.Py_ssize_t) -> cython.double:
        r: cython.Py_ssize_t
        best: cython.double = 0.0
        s: cython.double
        for r in range(self.allocated.shape[1]):
            if self.total[r] > 0:
                s = self.allocated[row, r] / self.total[r]
                if s > best:
                    best = s
        return best


@cython.cfunc
@cython.exceptval(check=False)
def _most_used(allocated: cython.const[cython.longlong][:, ::1], amount: cython.const[cython.longlong][:, ::1],
               row: cython.Py_ssize_t, cols: cython.const[cython.longlong][::1], lo: cython.Py_ssize_t,
               hi: cython.Py_ssize_t) -> cython.double:
    """max over the columns cols[lo:hi] of allocated[row] / amount[row] (a column of amount 0
    counts 1 when used, else 0); 0.0 over no column."""
    k: cython.Py_ssize_t
    r: cython.Py_ssize_t
    best: cython.double = 0.0
    d: cython.double
    s: cython.double
    for k in range(lo, hi):
        r = cols[k]
        d = amount[row, r]
        if d > 0:
            s = allocated[row, r] / d
            if s > best:
                best = s
        elif allocated[row, r] > 0 and best < 1.0:
            best = 1.0
    return best


@cython.cclass
class QueueShare:
    """max over columns of allocated[row] / deserved[row] (a resource deserved 0 but used counts 1)."""

    allocated: cython.const[cython.longlong][:, ::1]
    deserved: cython.const[cython.longlong][:, ::1]
    columns: cython.const[cython.longlong][::1]

    def __init__(self, allocated: cython.const[cython.longlong][:, ::1],
                 deserved: cython.const[cython.longlong][:, ::1], columns: cython.const[cython.longlong][::1]):
        self.allocated = allocated
        self.deserved = deserved
        self.columns = columns

    def of(self, row: cython.Py_ssize_t) -> cython.double:
        return _most_used(self.allocated, self.deserved, row, self.columns, 0, self.columns.shape[0])


@cython.cclass
class NamedShare:
    """max over the columns row `row` names (cols[col_ptr[row]:col_ptr[row + 1]]) of
    allocated[row] / amount[row] (an amount of 0 counts 1 when used, else 0); 1.0 for a row
    naming none (capacity's queue share over the resources its deserved names)."""

    allocated: cython.const[cython.longlong][:, ::1]
    amount: cython.const[cython.longlong][:, ::1]
    col_ptr: cython.const[cython.longlong][::1]
    cols: cython.const[cython.longlong][::1]

    def __init__(self, allocated: cython.const[cython.longlong][:, ::1], amount: cython.const[cython.longlong][:, ::1],
                 col_ptr: cython.const[cython.longlong][::1], cols: cython.const[cython.longlong][::1]):
        self.allocated = allocated
        self.amount = amount
        self.col_ptr = col_ptr
        self.cols = cols

    def of(self, row: cython.Py_ssize_t) -> cython.double:
        if self.col_ptr[row] == self.col_ptr[row + 1]:
            return 1.0
        return _most_used(self.allocated, self.amount, row, self.cols, self.col_ptr[row], self.col_ptr[row + 1])


@cython.cclass
class AtLimit:
    """Whether a queue, or any of its ancestors, has reached its limit on every column
    (`chain_ptr`/`chains`: each queue's chain of itself and its ancestors below root)."""

    allocated: cython.const[cython.longlong][:, ::1]
    limit: cython.const[cython.longlong][:, ::1]
    columns: cython.const[cython.longlong][::1]
    chain_ptr: cython.const[cython.longlong][::1]
    chains: cython.const[cython.longlong][::1]

    def __init__(self, allocated: cython.const[cython.longlong][:, ::1], limit: cython.const[cython.longlong][:, ::1],
                 columns: cython.const[cython.longlong][::1], chain_ptr: cython.const[cython.longlong][::1],
                 chains: cython.const[cython.longlong][::1]):
        self.allocated = allocated
        self.limit = limit
        self.columns = columns
        self.chain_ptr = chain_ptr
        self.chains = chains

    @cython.cfunc
    @cython.exceptval(check=False)
    def _row(self, row: cython.Py_ssize_t) -> cython.bint:
        i: cython.Py_ssize_t
        r: cython.Py_ssize_t
        for i in range(self.columns.shape[0]):
            r = self.columns[i]
            if self.limit[row, r] > self.allocated[row, r]:
                return False
        return True

    def row(self, row: cython.Py_ssize_t) -> bool:
        return self._row(row)

    def chain(self, q: cython.Py_ssize_t) -> bool:
        k: cython.Py_ssize_t
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            if self._row(self.chains[k]):
                return True
        return False


@cython.cclass
class CountWithin:
    """How many tasks of a request fit under limit − allocated on the requested columns of a
    queue and of each ancestor in its chain (`chain_ptr`/`chains`, as AtLimit's), and where that
    was bound."""

    limit: cython.const[cython.longlong][:, ::1]
    allocated: cython.const[cython.longlong][:, ::1]
    columns: cython.const[cython.longlong][::1]
    chain_ptr: cython.const[cython.longlong][::1]
    chains: cython.const[cython.longlong][::1]
    requests: cython.const[cython.longlong][:, ::1]    # the tasks' requests (a row per task), when given
    binding: cython.Py_ssize_t        # the column that bound in the last _count (-1: none)

    def __init__(self, limit: cython.const[cython.longlong][:, ::1], allocated: cython.const[cython.longlong][:, ::1],
                 columns: cython.const[cython.longlong][::1], chain_ptr: cython.const[cython.longlong][::1],
                 chains: cython.const[cython.longlong][::1], requests=None):
        self.limit = limit
        self.allocated = allocated
        self.columns = columns
        self.chain_ptr = chain_ptr
        self.chains = chains
        if requests is not None:
            self.requests = requests
        self.binding = -1

    @cython.cfunc
    @cython.exceptval(check=False)
    def _count(self, row: cython.Py_ssize_t, request: cython.const[cython.longlong][::1],
               count: cython.longlong) -> cython.longlong:
        i: cython.Py_ssize_t
        r: cython.Py_ssize_t
        allowed: cython.longlong = count
        room: cython.longlong
        n: cython.longlong
        self.binding = -1
        for i in range(self.columns.shape[0]):
            r = self.columns[i]
            if request[r] == 0 or self.limit[row, r] >= UNLIMITED:
                continue
            room = self.limit[row, r] - self.allocated[row, r]
            n = room // request[r] if room >= 0 else 0
            if n < allowed:
                allowed = n if n > 0 else 0
                self.binding = r
        return allowed

    def chain(self, q: cython.Py_ssize_t, request, count: cython.longlong) -> tuple:
        """How many of `count` tasks of `request` fit on queue q and then each ancestor in its
        chain, each bounding what the one before allowed: (allowed; the last queue of the chain that
        lowered it, the column that bound there and how many it was asked for; -1, -1, 0 when
        all `count` fit). `request`: a vector over the columns, or a task (an int: its row of
        `requests`, read in place; allocate asks every turn)."""
        k: cython.Py_ssize_t
        row: cython.Py_ssize_t
        allowed: cython.longlong = count
        asked: cython.longlong = 0
        n: cython.longlong
        where: cython.Py_ssize_t = -1
        column: cython.Py_ssize_t = -1
        asking: cython.const[cython.longlong][::1]
        if isinstance(request, int):
            asking = self.requests[request]
        else:
            asking = request
        for k in range(self.chain_ptr[q], self.chain_ptr[q + 1]):
            row = self.chains[k]
            n = self._count(row, asking, allowed)
            if n < allowed:
                asked = allowed
                allowed = n
                where = row
                column = self.binding
        if cython.compiled:     # C integers, made Python ints on return (int() would call the builtin)
            return allowed, where, column, asked
        return int(allowed), int(where), int(column), int(asked)     # interpreted: maybe NumPy's
