"""Fit, score and placement kernels over the session's node arrays.

- `fit_states`: per node, whether a request fits idle room (IDLE), only once releasing pods
  leave (FUTURE), or not at all (NO_FIT);
- `score_nodes`: every node's score for a request (the terms of `params`, below) plus its
  static score;
- `place_batch`: scores every node once for a run of identical tasks, keeps the keys in a max
  segment tree (idle fit above future fit, then score, then lowest index), and after each
  placement re-keys only the node it changed: a gang of k tasks costs one scan plus k·log N;
- `PlacementTree`: place_batch's tree kept between uses by one task class;
- `DomainTree`: a shared tree's keys per topology domain, for classes scored per domain.

Score parameters (`params`, float64, runtime.engine.kernels.ScoreParams):
    [0] binpack weight   [1] least-requested weight   [2] most-requested weight
    [3] balanced-allocation weight
    [4 : 4+R]     binpack per-resource weights
    [4+R : 4+2R]  nodeorder per-resource weights (cpu and memory by default)

One source, compiled or interpreted (Cython's pure-Python mode: runtime/engine/kernels/__init__.py).
"""

import array
import math

import cython
import numpy as np
from cython.cimports.libc.math import sqrt

from runtime.engine import extension
from runtime.engine.kernels import codes

# Typed copies (C globals when compiled) of the node mask codes (bit 0: the node passes the
# class's filters; bit 1: only once releasing pods have left) and the placement kinds.
MASK_PASS = cython.declare(cython.uchar, extension.MASK_PASS)
MASK_RELEASING = cython.declare(cython.uchar, extension.MASK_RELEASING)
NO_FIT = cython.declare(cython.schar, codes.NO_FIT)
FUTURE = cython.declare(cython.schar, codes.FUTURE)
IDLE = cython.declare(cython.schar, codes.IDLE)
# Placement keys: idle-fitting nodes rank above future-fitting ones whatever their score.
IDLE_BONUS = cython.declare(cython.double, 2e12)
FUTURE_BONUS = cython.declare(cython.double, 1e12)
NEG_INF = cython.declare(cython.double, -math.inf)
# A kernel call releases the GIL (for the scheduler's other threads) only for a loop longer than
# this: a turn's refresh or placement touches a few nodes, and the release costs more than them.
LONG_RUN = cython.declare(cython.Py_ssize_t, 256)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def fit_state(alloc: cython.const[cython.longlong][:, ::1], used: cython.const[cython.longlong][:, ::1],
              releasing: cython.const[cython.longlong][:, ::1], pipelined: cython.const[cython.longlong][:, ::1],
              req: cython.const[cython.longlong][::1], n: cython.Py_ssize_t) -> cython.int:
    r: cython.Py_ssize_t
    q: cython.longlong
    free: cython.longlong
    held: cython.longlong
    idle: cython.bint = True
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
                return NO_FIT
    return IDLE if idle else FUTURE


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def score_node(alloc: cython.const[cython.longlong][:, ::1], used: cython.const[cython.longlong][:, ::1],
               req: cython.const[cython.longlong][::1], params: cython.const[cython.double][::1],
               n: cython.Py_ssize_t) -> cython.double:
    r: cython.Py_ssize_t
    r_n: cython.Py_ssize_t = req.shape[0]
    total: cython.double = 0.0
    s: cython.double = 0.0
    ws: cython.double = 0.0
    w: cython.double
    after: cython.double
    cap: cython.double
    least: cython.double = 0.0
    most: cython.double = 0.0
    fr_sum: cython.double = 0.0
    fr_sq: cython.double = 0.0
    f: cython.double
    mean: cython.double
    var: cython.double
    count: cython.int = 0
    over: cython.bint = False
    if params[0] > 0:
        for r in range(r_n):
            w = params[4 + r]
            if w <= 0 or req[r] == 0:
                continue
            if alloc[n, r] == 0:
                ws += w        # a resource the node does not offer scores 0, its weight still counts (Volcano)
                continue
            after = used[n, r] + req[r]
            if after > alloc[n, r]:
                over = True
                break
            s += after * w / alloc[n, r]
            ws += w
        if not over and ws > 0:
            total += s / ws * 100.0 * params[0]
    if params[1] > 0 or params[2] > 0 or params[3] > 0:
        ws = 0.0
        for r in range(r_n):
            w = params[4 + r_n + r]
            if w <= 0 or alloc[n, r] == 0:
                continue
            after = used[n, r] + req[r]
            cap = alloc[n, r]
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


def fit_states(alloc: cython.const[cython.longlong][:, ::1], used: cython.const[cython.longlong][:, ::1],
               releasing: cython.const[cython.longlong][:, ::1], pipelined: cython.const[cython.longlong][:, ::1],
               req: cython.const[cython.longlong][::1], mask: cython.const[cython.uchar][::1],
               out: cython.schar[::1]) -> None:
    n: cython.Py_ssize_t
    with cython.nogil:
        for n in range(alloc.shape[0]):
            out[n] = fit_state(alloc, used, releasing, pipelined, req, n) if mask[n] else NO_FIT


def score_nodes(alloc: cython.const[cython.longlong][:, ::1], used: cython.const[cython.longlong][:, ::1],
                req: cython.const[cython.longlong][::1], params: cython.const[cython.double][::1],
                static: cython.const[cython.double][::1], out: cython.double[::1]) -> None:
    n: cython.Py_ssize_t
    with cython.nogil:
        for n in range(alloc.shape[0]):
            out[n] = score_node(alloc, used, req, params, n) + static[n]


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def node_key(alloc: cython.const[cython.longlong][:, ::1], used: cython.const[cython.longlong][:, ::1],
             releasing: cython.const[cython.longlong][:, ::1], pipelined: cython.const[cython.longlong][:, ::1],
             req: cython.const[cython.longlong][::1], mask: cython.const[cython.uchar][::1],
             static: cython.const[cython.double][::1], params: cython.const[cython.double][::1],
             n: cython.Py_ssize_t) -> cython.double:
    """Node n's placement key: -inf where the request does not fit (or the node fails the
    class's filters), else its score plus the bonus of its fit."""
    state: cython.int
    if not (mask[n] & MASK_PASS):
        return NEG_INF
    state = fit_state(alloc, used, releasing, pipelined, req, n)
    if state == NO_FIT:
        return NEG_INF
    if state == IDLE and (mask[n] & MASK_RELEASING):
        state = FUTURE      # what the rule needs is held by pods that are leaving: a future fit
    return score_node(alloc, used, req, params, n) + static[n] + (IDLE_BONUS if state == IDLE else FUTURE_BONUS)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def pull(key: cython.double[::1], idx: cython.longlong[::1], i: cython.Py_ssize_t) -> cython.void:
    """Segment-tree node i takes the better of its children (ties go to the lower node index:
    the left child holds lower indexes)."""
    pull_from(key, idx, i, 2 * i)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def pull_from(key: cython.double[::1], idx: cython.longlong[::1], i: cython.Py_ssize_t,
              a: cython.Py_ssize_t) -> cython.void:
    """pull of a node i whose children are at a and a + 1 (a tree laid out at an offset)."""
    b: cython.Py_ssize_t = a + 1
    if key[b] > key[a]:
        key[i] = key[b]
        idx[i] = idx[b]
    else:
        key[i] = key[a]
        idx[i] = idx[a]


def place_batch(alloc: cython.const[cython.longlong][:, ::1], used: cython.longlong[:, ::1],
                releasing: cython.const[cython.longlong][:, ::1], pipelined: cython.longlong[:, ::1],
                req: cython.const[cython.longlong][::1], mask: cython.const[cython.uchar][::1],
                static: cython.const[cython.double][::1], params: cython.const[cython.double][::1],
                k: cython.Py_ssize_t, out_nodes: cython.longlong[::1], out_kind: cython.schar[::1]) -> cython.Py_ssize_t:
    """Place up to k identical tasks one by one on the best node (idle before future fit, then
    score, then lowest index). Updates used (allocated) or pipelined in place. Stops at the
    first task that fits nowhere; returns how many were placed."""
    tree: PlacementTree = PlacementTree(alloc, used, releasing, pipelined, req, mask, static, params)
    tree.build()
    placed: cython.Py_ssize_t = tree.place(k)
    nodes: cython.longlong[::1] = tree.out_nodes
    kinds: cython.schar[::1] = tree.out_kinds
    out_nodes[:placed] = nodes[:placed]
    out_kind[:placed] = kinds[:placed]
    return placed


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def shared_key(fit: cython.const[cython.schar][::1], dyn: cython.const[cython.double][::1],
               mask: cython.const[cython.uchar][::1], static: cython.const[cython.double][::1],
               n: cython.Py_ssize_t) -> cython.double:
    """node_key from a NodeFits' fit state and kernel score at n (the same float: the same sums
    in the same order)."""
    return code_key(fit, dyn, mask[n], static, n)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def code_key(fit: cython.const[cython.schar][::1], dyn: cython.const[cython.double][::1], code: cython.uchar,
             static: cython.const[cython.double][::1], n: cython.Py_ssize_t) -> cython.double:
    """shared_key of node n whose mask code is `code`."""
    return scored_key(fit, dyn, code, static[n], n)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def scored_key(fit: cython.const[cython.schar][::1], dyn: cython.const[cython.double][::1], code: cython.uchar,
               score: cython.double, n: cython.Py_ssize_t) -> cython.double:
    """code_key of node n whose static score is `score`."""
    state: cython.int
    if not (code & MASK_PASS):
        return NEG_INF
    state = fit[n]
    if state == NO_FIT:
        return NEG_INF
    if state == IDLE and (code & MASK_RELEASING):
        state = FUTURE
    return dyn[n] + score + (IDLE_BONUS if state == IDLE else FUTURE_BONUS)


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def charge_node(used: cython.longlong[:, ::1], pipelined: cython.longlong[:, ::1],
                req: cython.const[cython.longlong][::1], n: cython.Py_ssize_t, key: cython.double) -> cython.schar:
    """One task of request `req` placed on node n, whose key was `key`: charged to the node's
    used (idle room) or pipelined (room being freed); the kind of placement."""
    r: cython.Py_ssize_t
    idle: cython.bint = key >= (IDLE_BONUS + FUTURE_BONUS) / 2
    for r in range(req.shape[0]):
        if idle:
            used[n, r] += req[r]
        else:
            pipelined[n, r] += req[r]
    return IDLE if idle else FUTURE


@cython.cclass
class LogView:
    """The ledger's change log (its array, replaced as it grows) held as a typed view, taken
    again only when the array is another one: a tree or NodeFits brought up to date from the
    log on most placements would otherwise acquire its buffer on each (`refresh_log`)."""

    arr: object
    nodes: cython.const[cython.longlong][::1]

    def __init__(self):
        self.arr = None

    @cython.cfunc
    def of(self, log) -> cython.const[cython.longlong][::1]:
        """The typed view of `log`, taken when it is not the array held."""
        if log is not self.arr:
            self.nodes = log if cython.compiled else memoryview(log)
            self.arr = log
        return self.nodes


@cython.cclass
class NodeFits:
    """One request's fit state (fit_state) and kernel score (score_node) on every node: the part
    of a placement key no class's mask or static score changes, kept once for all the classes
    asking that request (under inter-pod rules a cluster's Deployment-like groups are each a
    class of its own, a few requests among them). `build` computes every node, `refresh` the
    nodes listed; `seen` is the session's to keep (the change-log position it is fresh at). A
    PlacementTree given it reads its keys from here, and re-computes here a node it places on."""

    n_nodes: cython.Py_ssize_t
    seen = cython.declare(cython.Py_ssize_t, visibility="public")
    fit_values = cython.declare(object, visibility="readonly")
    dyn_values = cython.declare(object, visibility="readonly")
    fit: cython.schar[::1]
    dyn: cython.double[::1]
    alloc: cython.const[cython.longlong][:, ::1]
    used: cython.const[cython.longlong][:, ::1]
    releasing: cython.const[cython.longlong][:, ::1]
    pipelined: cython.const[cython.longlong][:, ::1]
    req: cython.const[cython.longlong][::1]
    params: cython.const[cython.double][::1]
    log: LogView

    def __init__(self, alloc, used, releasing, pipelined, req, params):
        if not cython.compiled:        # as PlacementTree: memoryviews index faster than arrays interpreted
            alloc, used, releasing, pipelined, req, params = map(
                memoryview, (alloc, used, releasing, pipelined, req, params))
        self.alloc = alloc
        self.used = used
        self.releasing = releasing
        self.pipelined = pipelined
        self.req = req
        self.params = params
        self.n_nodes = alloc.shape[0]
        self.fit_values = array.array("b", [NO_FIT]) * max(self.n_nodes, 1)
        self.dyn_values = array.array("d", [0.0]) * max(self.n_nodes, 1)
        self.fit = self.fit_values if cython.compiled else memoryview(self.fit_values)
        self.dyn = self.dyn_values if cython.compiled else memoryview(self.dyn_values)
        self.seen = 0
        self.log = LogView()
        self.build()

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _update(self, n: cython.Py_ssize_t) -> cython.void:
        state: cython.int = fit_state(self.alloc, self.used, self.releasing, self.pipelined, self.req, n)
        self.fit[n] = state
        self.dyn[n] = score_node(self.alloc, self.used, self.req, self.params, n) if state != NO_FIT else 0.0

    def build(self) -> None:
        n: cython.Py_ssize_t
        with cython.nogil:
            for n in range(self.n_nodes):
                self._update(n)

    def refresh(self, nodes: cython.const[cython.longlong][::1]) -> None:
        self._refresh(nodes, 0, nodes.shape[0])

    def refresh_log(self, log, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> None:
        """refresh of the nodes log[start:end], `log` the ledger's change log array."""
        self._refresh(self.log.of(log), start, end)

    def catch_up(self, log, logged: cython.Py_ssize_t, rebuild_over: cython.Py_ssize_t) -> None:
        """Fresh at the change log's position `logged` (`seen` then is): the nodes logged since
        `seen` refreshed, or every node built afresh when they are more than `rebuild_over` (the
        session's one call a turn for what it would otherwise ask in three)."""
        if logged > self.seen:
            if logged - self.seen > rebuild_over:
                self.build()
            else:
                self._refresh(self.log.of(log), self.seen, logged)
        self.seen = logged

    @cython.cfunc
    def _refresh(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                 end: cython.Py_ssize_t) -> cython.void:
        if end - start > LONG_RUN:
            with cython.nogil:
                self._update_range(nodes, start, end)
        else:
            self._update_range(nodes, start, end)

    @cython.cfunc
    @cython.nogil
    @cython.exceptval(check=False)
    def _update_range(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                      end: cython.Py_ssize_t) -> cython.void:
        j: cython.Py_ssize_t
        for j in range(start, end):
            self._update(nodes[j])


@cython.cclass
class MaskView:
    """A class's node mask codes (its array, updated in place by its owner) held as a typed view
    once: a tree asked about the class on every placement would otherwise acquire the buffer
    each time (PlacementTree.place_masked)."""

    codes: cython.const[cython.uchar][::1]

    def __init__(self, codes):
        self.codes = codes if cython.compiled else memoryview(codes)


@cython.cclass
class TreeRoom:
    """Room for the keys of at most `limit` PlacementTrees at a time, shared by a session's trees.
    Under inter-pod rules each Deployment-like group is a task class of its own with a tree of its
    own; each keeping its keys for the whole cycle (some 300 KB at 5,000 nodes), a thousand trees
    are 300 MB of fresh memory a cycle, whose first touch cost a fifth of section 6's cycle. A tree
    that needs keys while `limit` trees hold them takes over the arrays of the one placed with
    longest ago, which goes stale (built afresh when next used: the same placements). `clear`
    lets the trees go (they refer to the room: a cycle otherwise)."""

    limit: cython.Py_ssize_t
    tick: cython.longlong
    holders: list

    def __init__(self, limit):
        self.limit = max(limit, 1)
        self.tick = 0
        self.holders = []

    def clear(self) -> None:
        self.holders = []


@cython.cclass
class LogKeyedTree:
    """What PlacementTree and DomainTree share: keys per node, brought up to date from the
    ledger's change log (`refresh_log`, `catch_up`) or from a list of nodes (`refresh`) by their
    own `_refresh`, or built afresh (`build`; nothing is re-keyed while stale)."""

    stale = cython.declare(cython.bint, visibility="readonly")   # keys not computed since the last build()
    log: LogView                    # the ledger's change log, as last read (refresh_log)

    def build(self) -> None:
        raise NotImplementedError

    @cython.cfunc
    def _refresh(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                 end: cython.Py_ssize_t) -> cython.void:
        """Re-keys nodes[start:end], each once however often listed (the subclass's)."""

    def refresh(self, nodes: cython.const[cython.longlong][::1]) -> None:
        if not self.stale:
            self._refresh(nodes, 0, nodes.shape[0])

    def refresh_log(self, log, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> None:
        """refresh of the nodes log[start:end], `log` the ledger's change log array."""
        if not self.stale:
            self._refresh(self.log.of(log), start, end)

    def catch_up(self, log, seen: cython.Py_ssize_t, logged: cython.Py_ssize_t,
                 rebuild_over: cython.Py_ssize_t) -> None:
        """Fresh at the change log's position `logged`, from `seen` (the caller keeps it): the
        nodes logged since re-keyed, or built afresh when next used if they are more than
        `rebuild_over` (nothing while stale)."""
        if self.stale or logged <= seen:
            return
        if logged - seen > rebuild_over:
            self.build()
        else:
            self._refresh(self.log.of(log), seen, logged)


@cython.cclass
class PlacementTree(LogKeyedTree):
    """place_batch's segment tree kept between uses by one task class, bound at construction to
    the session's node arrays and the class's request, mask and static scores (a call passes
    no arrays: acquiring a typed view of each argument costs more than a placement). `build`
    scores every node, `refresh` re-keys only the nodes changed since (by other classes'
    placements, evictions, discards; each node once however often it is listed), `place`
    places like place_batch, into `out_nodes` / `out_kinds`.

    The keys are computed when a placement needs them: `build` only marks the tree stale, and a
    stale tree asked for one placement finds the best node by a plain scan (the same node the
    built tree would give: highest key, lowest index among equals) without building; asked
    again while still stale it builds. A class placing a single task (most of a cluster's
    Deployment-like groups, each a class of its own under inter-pod rules) never allocates or
    builds its tree, and one whose rules change many nodes per placement (rebuilt after each)
    scans instead of building. `refresh` of a stale tree does nothing (the build recomputes all).
    Given `fits` (its request's NodeFits, fresh whenever the tree is used), the keys are read
    from it instead of computed: a scan or build then costs a few reads per node. Given `room`
    (a TreeRoom), its key arrays are taken from and given back to the room's."""

    size: cython.Py_ssize_t
    n_nodes: cython.Py_ssize_t
    epoch: cython.longlong
    key: cython.double[::1]
    idx: cython.longlong[::1]
    mark: cython.longlong[::1]
    scanned: cython.bint            # stale, and one placement found its node by a scan already
    grown: cython.bint              # key, idx and mark allocated
    out_nodes = cython.declare(object, visibility="readonly")
    out_kinds = cython.declare(object, visibility="readonly")
    # Typed views of out_nodes / out_kinds, taken when they are made: a placing call taking
    # them afresh would cost more than most of its placements.
    onodes: cython.longlong[::1]
    okinds: cython.schar[::1]
    alloc: cython.const[cython.longlong][:, ::1]
    used: cython.longlong[:, ::1]
    releasing: cython.const[cython.longlong][:, ::1]
    pipelined: cython.longlong[:, ::1]
    req: cython.const[cython.longlong][::1]
    mask: cython.const[cython.uchar][::1]
    static: cython.const[cython.double][::1]
    params: cython.const[cython.double][::1]
    shared: cython.bint             # keys read from a NodeFits' arrays (sfit, sdyn)
    sfit: cython.schar[::1]
    sdyn: cython.double[::1]
    room: TreeRoom                  # None: the tree's arrays are its own
    placed_at: cython.longlong      # the room's tick at this tree's last placement
    touched: cython.longlong[::1]   # place_masked's re-keyed nodes
    touched_n: cython.Py_ssize_t    # its capacity (0: not allocated)
    _kept: cython.Py_ssize_t        # a masked search's re-keyed nodes listed in `touched`
    _count: cython.Py_ssize_t       # those whose codes differ (against its budget)

    def __init__(self, alloc, used, releasing, pipelined, req, mask, static, params, fits=None, room=None):
        nf: NodeFits
        if not cython.compiled:
            # Interpreted, the tree indexes Python memoryviews of the arrays: a third of the cost
            # of indexing numpy arrays, and Python numbers (its own arrays are array.array for the
            # same reason). Compiled, the typed views below take the arrays' buffers.
            alloc, used, releasing, pipelined, req, mask, static, params = map(
                memoryview, (alloc, used, releasing, pipelined, req, mask, static, params))
        self.shared = fits is not None
        if self.shared:
            # The request's NodeFits holds the same node arrays, request and parameters: its views
            # are taken over (a class's tree is made per class, acquiring a buffer costs more).
            nf = fits
            self.sfit = nf.fit
            self.sdyn = nf.dyn
            self.alloc = nf.alloc
            self.releasing = nf.releasing
            self.req = nf.req
            self.params = nf.params
        else:
            self.alloc = alloc
            self.releasing = releasing
            self.req = req
            self.params = params
        self.used = used
        self.pipelined = pipelined
        self.mask = mask
        self.static = static
        self.n_nodes = self.alloc.shape[0]
        self.size = 1
        while self.size < self.n_nodes:
            self.size *= 2
        self.stale = True
        self.scanned = False
        self.grown = False
        self.epoch = 0
        self.room = room
        self.placed_at = 0
        self.touched_n = 0
        self._kept = 0
        self._count = 0
        self._outs(16)
        self.log = LogView()

    def _grow(self) -> None:
        if self.room is not None and self._take_over():
            return
        self.key = array.array("d", [NEG_INF]) * (2 * self.size)
        self.idx = array.array("q", [-1]) * (2 * self.size)
        # mark[n] == epoch: n was re-keyed in this refresh already (the change log repeats nodes).
        self.mark = array.array("q", [0]) * max(self.n_nodes, 1)
        self.grown = True

    def _take_over(self) -> cython.bint:
        """Take the arrays of the room's tree placed with longest ago when the room is full (that
        tree goes stale); else join the room's holders. Whether arrays were taken."""
        holders: list = self.room.holders
        victim: PlacementTree
        other: PlacementTree
        i: cython.Py_ssize_t
        oldest: cython.Py_ssize_t = 0
        if len(holders) < self.room.limit:
            holders.append(self)
            return False
        victim = holders[0]
        for i in range(1, len(holders)):
            other = holders[i]
            if other.placed_at < victim.placed_at:
                victim = other
                oldest = i
        holders[oldest] = self
        if victim.size != self.size or victim.n_nodes != self.n_nodes:
            return False
        self.key = victim.key
        self.idx = victim.idx
        self.mark = victim.mark
        # Padding leaves (past n_nodes) stay -inf in any tree of this size; the mark array holds
        # the victim's epochs: ours continue above them.
        if victim.epoch > self.epoch:
            self.epoch = victim.epoch
        victim.grown = False
        victim.stale = True
        victim.scanned = True        # used again, it will be used more: built at once, not scanned first
        self.grown = True
        return True

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _key(self, n: cython.Py_ssize_t) -> cython.double:
        if self.shared:
            return shared_key(self.sfit, self.sdyn, self.mask, self.static, n)
        return node_key(self.alloc, self.used, self.releasing, self.pipelined, self.req, self.mask, self.static,
                        self.params, n)

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _key_with(self, cmask: cython.const[cython.uchar][::1], n: cython.Py_ssize_t) -> cython.double:
        """Node n's key under another class's mask codes (same request and static scores)."""
        if self.shared:
            return shared_key(self.sfit, self.sdyn, cmask, self.static, n)
        return node_key(self.alloc, self.used, self.releasing, self.pipelined, self.req, cmask, self.static,
                        self.params, n)

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _took(self, n: cython.Py_ssize_t) -> cython.void:
        """This tree placed on node n: its NodeFits' entry afresh (what every tree of the request reads)."""
        state: cython.int
        if self.shared:
            state = fit_state(self.alloc, self.used, self.releasing, self.pipelined, self.req, n)
            self.sfit[n] = state
            self.sdyn[n] = score_node(self.alloc, self.used, self.req, self.params, n) if state != NO_FIT else 0.0

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _charge(self, n: cython.Py_ssize_t, key: cython.double) -> cython.schar:
        """One task placed on node n, whose key was `key`: its request charged to the node's used
        (idle room) or pipelined (room being freed), the NodeFits told; the kind of placement."""
        kind: cython.schar = charge_node(self.used, self.pipelined, self.req, n, key)
        self._took(n)
        return kind

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _rekey(self, n: cython.Py_ssize_t) -> cython.void:
        """Node n's key afresh, and its ancestors'."""
        i: cython.Py_ssize_t = self.size + n
        self.key[i] = self._key(n)
        i //= 2
        while i >= 1:
            pull(self.key, self.idx, i)
            i //= 2

    def build(self) -> None:
        """Every key afresh, when next needed (see the class's doc)."""
        self.stale = True
        self.scanned = False

    def _build(self) -> None:
        n: cython.Py_ssize_t
        i: cython.Py_ssize_t
        size: cython.Py_ssize_t = self.size
        if not self.grown:
            self._grow()
        self.stale = False
        with cython.nogil:
            for n in range(self.n_nodes):
                self.key[size + n] = self._key(n)
                self.idx[size + n] = n
            i = size - 1
            while i >= 1:
                pull(self.key, self.idx, i)
                i -= 1

    @cython.cfunc
    def _refresh(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                 end: cython.Py_ssize_t) -> cython.void:
        """Re-keys nodes[start:end], each once however often listed."""
        self.epoch += 1
        if end - start > LONG_RUN:
            with cython.nogil:
                self._rekey_range(nodes, start, end)
        else:
            self._rekey_range(nodes, start, end)

    @cython.cfunc
    @cython.nogil
    @cython.exceptval(check=False)
    def _rekey_range(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                     end: cython.Py_ssize_t) -> cython.void:
        j: cython.Py_ssize_t
        n: cython.Py_ssize_t
        epoch: cython.longlong = self.epoch
        for j in range(start, end):
            n = nodes[j]
            if self.mark[n] == epoch:
                continue
            self.mark[n] = epoch
            self._rekey(n)

    @cython.cfunc
    def _begin(self, k: cython.Py_ssize_t) -> cython.void:
        """A placing call's start: out_nodes / out_kinds hold k answers, and the call is the
        shared room's latest turn (placed_at)."""
        if self.onodes.shape[0] < k:
            self._outs(2 * k)
        if self.room is not None:
            self.room.tick += 1
            self.placed_at = self.room.tick

    @cython.cfunc
    def _outs(self, size: cython.Py_ssize_t) -> cython.void:
        self.out_nodes = np.empty(size, dtype=np.int64)
        self.out_kinds = np.empty(size, dtype=np.int8)
        self.onodes = self.out_nodes if cython.compiled else memoryview(self.out_nodes)
        self.okinds = self.out_kinds if cython.compiled else memoryview(self.out_kinds)

    def place(self, k: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Place up to k tasks; the first `placed` entries of out_nodes / out_kinds say where."""
        placed: cython.Py_ssize_t = 0
        best: cython.Py_ssize_t
        n: cython.Py_ssize_t
        best_key: cython.double
        key: cython.double
        if k <= 0:
            return 0
        self._begin(k)
        out_nodes: cython.longlong[::1] = self.onodes
        out_kind: cython.schar[::1] = self.okinds
        if self.stale:
            if k == 1 and not self.scanned:
                self.scanned = True
                best = -1
                best_key = NEG_INF
                with cython.nogil:
                    for n in range(self.n_nodes):
                        key = self._key(n)
                        if key > best_key:        # strictly: the lowest index among equals, as the tree
                            best_key = key
                            best = n
                    if best >= 0:
                        out_nodes[0] = best
                        out_kind[0] = self._charge(best, best_key)
                return 1 if best >= 0 else 0
            self._build()
        while placed < k:
            best_key = self.key[1]
            if best_key == NEG_INF:
                break
            best = self.idx[1]
            out_nodes[placed] = best
            out_kind[placed] = self._charge(best, best_key)
            placed += 1
            self._rekey(best)
        return placed

    @cython.cfunc
    @cython.nogil
    @cython.exceptval(check=False)
    def _masked_top(self, cmask: cython.const[cython.uchar][::1], budget: cython.Py_ssize_t,
                    epoch: cython.longlong) -> cython.Py_ssize_t:
        """The node on top of this tree under another class's codes `cmask` (place_masked's
        search): nodes on top whose codes differ from this tree's are re-keyed with the class's
        (marked with `epoch`, listed in `touched`, counted in `_count` against `budget`) until the
        top is a node whose codes do not differ or were re-keyed. Returns it, -1 when no node is
        left, -2 when more than `budget` differing nodes came on top."""
        best: cython.Py_ssize_t
        i: cython.Py_ssize_t
        while True:
            if self.key[1] == NEG_INF:
                return -1
            best = self.idx[1]
            if self.mark[best] == epoch or cmask[best] == self.mask[best]:
                return best
            if self._count >= budget:
                return -2
            self.mark[best] = epoch
            self.touched[self._kept] = best
            self._kept += 1
            self._count += 1
            i = self.size + best
            self.key[i] = self._key_with(cmask, best)
            i //= 2
            while i >= 1:
                pull(self.key, self.idx, i)
                i //= 2

    @cython.cfunc
    def _masked_begin(self, budget: cython.Py_ssize_t, k: cython.Py_ssize_t) -> cython.longlong:
        """A masked search's start: keys built, room to list the nodes it re-keys, a new epoch."""
        if self.stale:
            self._build()
        if self.touched_n < budget + k + 1:
            self.touched_n = budget + k + 1
            self.touched = array.array("q", [0]) * self.touched_n
        self._kept = 0
        self._count = 0
        self.epoch += 1
        return self.epoch

    @cython.cfunc
    @cython.nogil
    @cython.exceptval(check=False)
    def _masked_end(self) -> cython.void:
        """Every node a masked search re-keyed put back to this tree's own key."""
        j: cython.Py_ssize_t
        for j in range(self._kept):
            self._rekey(self.touched[j])

    def place_masked(self, view: MaskView, budget: cython.Py_ssize_t, k: cython.Py_ssize_t = 1,
                     charge: cython.bint = True) -> cython.Py_ssize_t:
        """Place up to k tasks of another class with this tree's request and static scores whose
        mask codes (`view`) differ from this tree's on few nodes (a class whose rules only
        exclude nodes: its pods' own hostnames under anti-affinity), by this tree's keys: the
        node the class's own tree would give (highest key, lowest index among equals). A node
        on top whose codes differ is re-keyed with the class's codes, until the top is a node
        whose codes do not differ or were re-keyed. With k > 1 the class's placement on a node
        excludes that node for the class (a local volume's only PV taken): it is keyed out for
        the rest of the call. Every node re-keyed is put back at the end. Returns how many were
        placed (out_nodes / out_kinds say where; fewer than k: no node for the next), or
        -1 - placed when more than `budget` differing nodes came on top (the class is better off
        with a tree of its own for the rest). With `charge` False nothing is placed: out_nodes
        lists the nodes the call would place on (the tree is as before the call). A caller that
        knows the class's codes only on some nodes (the rest read as this tree's) asks which
        nodes come first, corrects those it did not know and asks again: under codes that only
        take passes away, once the first node offered is known it is the class's own tree's
        answer."""
        cmask: cython.const[cython.uchar][::1] = view.codes
        best: cython.Py_ssize_t = -1
        placed: cython.Py_ssize_t = 0
        i: cython.Py_ssize_t
        if k <= 0:
            return 0
        self._begin(k)
        epoch: cython.longlong = self._masked_begin(budget, k)
        out_nodes: cython.longlong[::1] = self.onodes
        out_kind: cython.schar[::1] = self.okinds
        while placed < k:
            best = self._masked_top(cmask, budget, epoch)
            if best < 0:
                break
            out_nodes[placed] = best
            if charge:
                out_kind[placed] = self._charge(best, self.key[1])
            placed += 1
            if self.mark[best] != epoch:
                self.mark[best] = epoch
                self.touched[self._kept] = best
                self._kept += 1
            # Keyed out for the rest of the call (with k == 1 there is none: put back below).
            i = self.size + best
            self.key[i] = NEG_INF
            i //= 2
            while i >= 1:
                pull(self.key, self.idx, i)
                i //= 2
        self._masked_end()
        return placed if best != -2 else -1 - placed

    def place_among(self, nodes: cython.const[cython.longlong][::1],
                    codes: cython.const[cython.uchar][::1]) -> cython.Py_ssize_t:
        """Place one task of another class with this tree's request and static scores, whose
        mask codes fail every node but `nodes` (distinct) and are `codes` there (one per entry
        of `nodes`): the node the class's own tree would give (highest key, lowest index among
        equals), found by a scan of those nodes alone. A class most of whose nodes differ from
        this tree's (a hard zone spread passing in one zone or two) is better off scanning its
        few passing nodes than searching this tree or building a tree of its own. The tree's key
        of the node placed on is re-computed. Returns 1 (out_nodes[0] / out_kinds[0] say where)
        or 0 when none of them takes it. The tree must read its keys from a NodeFits."""
        j: cython.Py_ssize_t
        n: cython.Py_ssize_t
        best: cython.Py_ssize_t = -1
        best_key: cython.double = NEG_INF
        key: cython.double
        if not self.shared:
            raise ValueError("place_among needs the tree's NodeFits")
        self._begin(1)
        out_nodes: cython.longlong[::1] = self.onodes
        out_kind: cython.schar[::1] = self.okinds
        for j in range(nodes.shape[0]):
            n = nodes[j]
            key = code_key(self.sfit, self.sdyn, codes[j], self.static, n)
            # The lowest index among equals, as the tree (`nodes` in any order).
            if key > best_key or (key == best_key and n < best):
                best_key = key
                best = n
        if best >= 0:
            out_nodes[0] = best
            out_kind[0] = self._charge(best, best_key)
            if not self.stale:
                self._rekey(best)
        return 1 if best >= 0 else 0


# A class's key on a node and its static key plus the node's domain score differ by the rounding
# of their sums alone (a few units in the last place of keys above 1e12): a node further below its
# domain's top than this fraction of the top is below the top under the class's key too.
KEY_SLACK = cython.declare(cython.double, 1e-15)
DEPTH_MOST = 130                # DomainTree's search stack: two entries per level of a tree


@cython.cclass
class DomainTree(LogKeyedTree):
    """A shared PlacementTree's keys (a request's NodeFits, a static mask and static scores) kept
    per topology domain: a max segment tree over each domain's nodes (and one over the nodes
    lacking the key), side by side in one array. A class whose codes are the static ones and
    whose stateful score is one per domain (a ScheduleAnyway zone spread: the domains are a few,
    the nodes thousands) places by it (`place_scored`) instead of a score array over every node
    and a scan or a tree of its own per class: under its key each domain's best node is among the
    nodes at its domain's top under the static key (within the rounding of the sums, KEY_SLACK),
    those few are keyed with the class's score and the best taken (highest key, lowest index among
    equals: the node the class's own tree would give). `build` marks the keys stale (computed at
    the next placement), `refresh` re-keys the nodes listed (each once however often listed)."""

    n_nodes: cython.Py_ssize_t
    n_groups: cython.Py_ssize_t
    epoch: cython.longlong
    grown: cython.bint              # key, idx and mark allocated
    size: cython.Py_ssize_t         # the trees' nodes in all (key's and idx's length)
    key: cython.double[::1]
    idx: cython.longlong[::1]
    mark: cython.longlong[::1]
    group: cython.longlong[::1]     # per node its group: its domain, or n_groups - 1 lacking the key
    local: cython.longlong[::1]     # per node its leaf in its group's tree (that tree's own index)
    base: cython.longlong[::1]      # per group: its tree's node i is at base + i
    leaves: cython.longlong[::1]    # per group: its tree's leaf count (a power of two)
    order: cython.longlong[::1]     # the nodes by group, by index within one
    start: cython.longlong[::1]     # group g's nodes are order[start[g]:start[g + 1]]
    stack: cython.longlong[::1]
    fits: NodeFits
    sfit: cython.schar[::1]
    sdyn: cython.double[::1]
    used: cython.longlong[:, ::1]
    pipelined: cython.longlong[:, ::1]
    req: cython.const[cython.longlong][::1]
    mask: cython.const[cython.uchar][::1]
    static: cython.const[cython.double][::1]
    out_nodes = cython.declare(object, visibility="readonly")
    out_kinds = cython.declare(object, visibility="readonly")
    onodes: cython.longlong[::1]     # typed views of out_nodes / out_kinds (PlacementTree's)
    okinds: cython.schar[::1]

    def __init__(self, used, pipelined, mask, static, fits, domain_of, domains):
        nf: NodeFits = fits
        groups = np.where(domain_of >= 0, domain_of, domains).astype(np.int64)
        order = np.argsort(groups, kind="stable").astype(np.int64)
        counts = np.bincount(groups, minlength=domains + 1).astype(np.int64)
        start = np.zeros(domains + 2, dtype=np.int64)
        np.cumsum(counts, out=start[1:])
        leaves = np.ones(domains + 1, dtype=np.int64)
        while (leaves < counts).any():
            leaves = np.where(leaves < counts, leaves * 2, leaves)
        base = np.zeros(domains + 1, dtype=np.int64)
        np.cumsum(2 * leaves[:domains], out=base[1:])
        local = np.empty(len(groups), dtype=np.int64)
        local[order] = leaves[groups[order]] + np.arange(len(order), dtype=np.int64) - start[groups[order]]
        self.size = int(2 * leaves.sum())
        if not cython.compiled:        # as PlacementTree: memoryviews index faster than arrays interpreted
            used, pipelined, mask, static = map(memoryview, (used, pipelined, mask, static))
            groups, local, base, leaves, order, start = map(memoryview, (groups, local, base, leaves, order, start))
        self.fits = nf
        self.sfit = nf.fit
        self.sdyn = nf.dyn
        self.req = nf.req
        self.used = used
        self.pipelined = pipelined
        self.mask = mask
        self.static = static
        self.group = groups
        self.local = local
        self.base = base
        self.leaves = leaves
        self.order = order
        self.start = start
        self.n_nodes = len(groups)
        self.n_groups = domains + 1
        self.stack = array.array("q", [0]) * DEPTH_MOST
        self.stale = True
        self.grown = False
        self.epoch = 0
        self.out_nodes = np.empty(1, dtype=np.int64)
        self.out_kinds = np.empty(1, dtype=np.int8)
        self.onodes = self.out_nodes if cython.compiled else memoryview(self.out_nodes)
        self.okinds = self.out_kinds if cython.compiled else memoryview(self.out_kinds)
        self.log = LogView()

    @cython.cfunc
    @cython.inline
    @cython.nogil
    @cython.exceptval(check=False)
    def _rekey(self, n: cython.Py_ssize_t) -> cython.void:
        """Node n's key afresh, and its ancestors' in its group's tree."""
        b: cython.Py_ssize_t = self.base[self.group[n]]
        i: cython.Py_ssize_t = self.local[n]
        self.key[b + i] = shared_key(self.sfit, self.sdyn, self.mask, self.static, n)
        i //= 2
        while i >= 1:
            pull_from(self.key, self.idx, b + i, b + 2 * i)
            i //= 2

    def build(self) -> None:
        """Every key afresh, when next needed."""
        self.stale = True

    def _build(self) -> None:
        g: cython.Py_ssize_t
        p: cython.Py_ssize_t
        n: cython.Py_ssize_t
        i: cython.Py_ssize_t
        b: cython.Py_ssize_t
        leaves: cython.Py_ssize_t
        if not self.grown:
            # Padding leaves (past a group's nodes) stay -inf.
            self.key = array.array("d", [NEG_INF]) * self.size
            self.idx = array.array("q", [-1]) * self.size
            self.mark = array.array("q", [0]) * max(self.n_nodes, 1)
            self.grown = True
        self.stale = False
        with cython.nogil:
            for g in range(self.n_groups):
                b = self.base[g]
                leaves = self.leaves[g]
                for p in range(self.start[g + 1] - self.start[g]):
                    n = self.order[self.start[g] + p]
                    self.key[b + leaves + p] = shared_key(self.sfit, self.sdyn, self.mask, self.static, n)
                    self.idx[b + leaves + p] = n
                i = leaves - 1
                while i >= 1:
                    pull_from(self.key, self.idx, b + i, b + 2 * i)
                    i -= 1

    @cython.cfunc
    def _refresh(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                 end: cython.Py_ssize_t) -> cython.void:
        """Re-keys nodes[start:end], each once however often listed."""
        self.epoch += 1
        if end - start > LONG_RUN:
            with cython.nogil:
                self._rekey_range(nodes, start, end)
        else:
            self._rekey_range(nodes, start, end)

    @cython.cfunc
    @cython.nogil
    @cython.exceptval(check=False)
    def _rekey_range(self, nodes: cython.const[cython.longlong][::1], start: cython.Py_ssize_t,
                     end: cython.Py_ssize_t) -> cython.void:
        j: cython.Py_ssize_t
        n: cython.Py_ssize_t
        epoch: cython.longlong = self.epoch
        for j in range(start, end):
            n = nodes[j]
            if self.mark[n] == epoch:
                continue
            self.mark[n] = epoch
            self._rekey(n)

    def place_scored(self, scores: cython.const[cython.double][::1]) -> cython.Py_ssize_t:
        """Place one task of a class with this tree's request, mask codes and static scores plus
        `scores[g]` on every node of group g (its domain; the last group: the nodes lacking the
        key): the node the class's own tree would give, whose key there is the static score plus
        its domain's, summed as the session sums them (ClassPlacement.update); a group scored
        -inf fails the class (a domain a hard spread's verdict fails: StatefulRule.domain_verdicts).
        Returns 1 (out_nodes[0] / out_kinds[0] say where) or 0 when no node takes it."""
        g: cython.Py_ssize_t
        b: cython.Py_ssize_t
        i: cython.Py_ssize_t
        n: cython.Py_ssize_t
        depth: cython.Py_ssize_t
        leaves: cython.Py_ssize_t
        top: cython.double
        slack: cython.double
        floor: cython.double
        key: cython.double
        best: cython.Py_ssize_t = -1
        best_key: cython.double = NEG_INF
        if scores.shape[0] < self.n_groups:
            raise ValueError("place_scored needs a score per group")
        if self.stale:
            self._build()
        out_nodes: cython.longlong[::1] = self.onodes
        out_kind: cython.schar[::1] = self.okinds
        for g in range(self.n_groups):
            b = self.base[g]
            top = self.key[b + 1]
            if top == NEG_INF or scores[g] == NEG_INF:      # no node, or a domain failing the class
                continue
            if scores[g] == 0.0:
                # The class's key on each node of the group is the tree's own (the static score
                # plus 0, exactly): the group's top is its best, the lowest index among equals.
                n = self.idx[b + 1]
                if top > best_key or (top == best_key and n < best):
                    best_key = top
                    best = n
                continue
            slack = abs(top) * KEY_SLACK
            if top + scores[g] + slack < best_key:
                continue        # no node of the group comes near the best so far
            # The group's nodes keyed within `slack` of its top, each keyed as the class.
            floor = top - slack
            leaves = self.leaves[g]
            self.stack[0] = 1
            depth = 1
            while depth > 0:
                depth -= 1
                i = self.stack[depth]
                if self.key[b + i] < floor:
                    continue
                if i < leaves:
                    self.stack[depth] = 2 * i + 1
                    self.stack[depth + 1] = 2 * i
                    depth += 2
                    continue
                n = self.idx[b + i]
                key = scored_key(self.sfit, self.sdyn, self.mask[n], self.static[n] + scores[g], n)
                if key > best_key or (key == best_key and n < best):
                    best_key = key
                    best = n
        if best >= 0:
            out_nodes[0] = best
            out_kind[0] = charge_node(self.used, self.pipelined, self.req, best, best_key)
            self.fits._update(best)
            self._rekey(best)
        return 1 if best >= 0 else 0
