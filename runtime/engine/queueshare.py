"""Queue arithmetic shared by proportion and capacity: shares, the resources queues count,
enqueue admission against capability, hierarchical water-filling of deserved shares. (The
per-row share and allocatable helpers the session calls are kernels: runtime.engine.kernels.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from compiler.quantities import readable_base_units
from runtime.cluster import decisions as d
from runtime.engine.session import Verdict
from runtime.engine.extension import PERMIT, REJECT
from runtime.engine.snapshot import UNLIMITED


def share(allocated: np.ndarray, deserved: np.ndarray, columns: np.ndarray) -> float:
    """max over resources of allocated / deserved (a resource deserved 0 but used counts 1)."""
    best = 0.0
    for r in columns:
        a, s = allocated[r], deserved[r]
        if s > 0:
            best = max(best, a / s)
        elif a > 0:
            best = max(best, 1.0)
    return best


def shared_columns(ssn) -> np.ndarray:
    """The resources queue arithmetic (shares, allocatable limits, admission, overcommit) counts:
    those some schedulable node offers, the pod count aside. A device-managed resource without
    node capacity (a card-memory request the device plugin checks per card) has a cluster
    total of 0, so any cap derived from the cluster would refuse it outright."""
    snap = ssn.snap
    pods_col = snap.resource_index["pods"]
    return np.array([r for r in range(snap.n_resources) if r != pods_col and ssn.total[r] > 0], dtype=np.int64)


def real_capability(ssn, q: int) -> np.ndarray:
    """min(capability, parent's real capability − Σ guarantees of the siblings)."""
    snap = ssn.snap
    chain = []
    while q > 0:   # up to root (at most MAX_QUEUE_DEPTH levels), then down
        chain.append(q)
        q = snap.queues[q].parent
    cap = snap.capability[0]
    for c in reversed(chain):
        cap = _within(snap, c, cap)
    return cap


def real_capabilities(ssn) -> np.ndarray:
    """real_capability of every queue, top down, each from its parent's."""
    snap = ssn.snap
    caps = np.array(snap.capability, dtype=np.int64, copy=True)
    order = [0]
    for parent in order:
        children = snap.queues[parent].children
        order.extend(children)
        if children:
            promised = snap.guarantee[children].sum(axis=0, dtype=object)   # exact: no int64 wrap
            for c in children:
                caps[c] = _within(snap, c, caps[parent], promised - snap.guarantee[c])
    return caps


def _within(snap, q: int, parent_cap: np.ndarray, others=None) -> np.ndarray:
    """Queue q's real capability given its parent's; `others` its siblings' guarantees."""
    if others is None:
        siblings = [s for s in snap.queues[snap.queues[q].parent].children if s != q]
        others = snap.guarantee[siblings].sum(axis=0, dtype=object) if siblings else 0
    others = np.minimum(others, UNLIMITED).astype(np.int64)   # summed exactly, then bounded
    room = np.maximum(np.where(parent_cap >= UNLIMITED, UNLIMITED, parent_cap - others), 0)
    return np.minimum(snap.capability[q], room)


def enqueue_check(ssn, j: int, caps: np.ndarray, columns: np.ndarray):
    """Volcano's admission: queue open and minResources + allocated + inqueue − elastic ≤ real
    capability, for the queue and every ancestor, on the shared `columns` only (see `shared_columns`).
    Returns None when admitted, else a Reason naming the binding limit with its figures."""
    job = ssn.snap.jobs[j]
    queue = ssn.snap.queues[job.queue]
    if not queue.open:
        return d.Reason(d.QUEUE, f"queue {queue.name} is closed", {"queue": queue.name})
    if job.min_resources is None:
        return None
    req = job.min_resources
    cols = [int(r) for r in columns if req[r] > 0]
    for q in ssn.queue_chain[job.queue]:
        taken = ssn.queue_allocated[q] + ssn.queue_inqueue[q] - ssn.queue_elastic[q]
        over = [r for r in cols if req[r] + taken[r] > caps[q][r]]
        if over:
            r = over[0]
            name, res = ssn.snap.queues[q].name, ssn.snap.resources[r]
            figures = [f"inqueue {figure(ssn, r, ssn.queue_inqueue[q][r])}",
                       f"elastic {figure(ssn, r, ssn.queue_elastic[q][r])}"]
            room = max(caps[q][r] - taken[r], 0)
            text = (f"job needs {res} {figure(ssn, r, req[r])} (minResources); queue {name} may admit "
                    f"{figure(ssn, r, room)} more ({', '.join(queue_figures(ssn, q, r, caps) + figures)})")
            return d.Reason(d.QUEUE, text, {"queue": name, "resources": [ssn.snap.resources[x] for x in over],
                                            "need": int(req[r]), "limit": int(caps[q][r]),
                                            "fixed": fixed_limit(ssn, q, r, caps[q][r], req[r] + taken[r])})
    return None


def figure(ssn, r: int, amount: float) -> str:
    """An amount of resource r as a waiting reason shows it (`9`, `1125m`, `12.5Gi`, `unlimited`)."""
    return "unlimited" if amount >= UNLIMITED else readable_base_units(ssn.snap.resources[r], amount)


def queue_figures(ssn, q: int, r: int, caps: np.ndarray | None = None) -> list[str]:
    """What bounds queue q on resource r, as a waiting reason shows it: its capability, the
    cluster, what other queues' guarantees take off its real capability (`caps`, naming the
    largest), its deserved share (where a plugin computes one), guarantee and borrow limit
    where set, and what it holds."""
    snap = ssn.snap
    out = [f"capability {figure(ssn, r, snap.capability[q][r])}", f"cluster {figure(ssn, r, snap.total[r])}"]
    if caps is not None:
        others = min(snap.capability[q][r], snap.total[r]) - caps[q][r]
        if others > 0:
            named = guarantees_against(snap, q, r)
            whose = ", ".join(f"{name} {figure(ssn, r, amount)}" for name, amount in named[:3]) + \
                (f" and {len(named) - 3} more" if len(named) > 3 else "")
            out.append(f"guaranteed to other queues {figure(ssn, r, others)}" + (f" ({whose})" if whose else ""))
    if ssn.queue_deserved is not None:
        weightless = " (weight 0)" if snap.queues[q].weight == 0 else ""
        out.append(f"deserved {figure(ssn, r, ssn.queue_deserved[q][r])}{weightless}")
    if snap.guarantee[q][r] > 0:
        out.append(f"guarantee {figure(ssn, r, snap.guarantee[q][r])}")
    if snap.borrow_limit[q][r] < UNLIMITED:
        out.append(f"borrow limit {figure(ssn, r, snap.borrow_limit[q][r])}")
    held = ssn.held_counted.get(q)
    of_it = f" with {figure(ssn, r, held[r])} held for reservations" if held is not None and held[r] > 0 else ""
    out.append(f"allocated {figure(ssn, r, ssn.queue_allocated[q][r])}{of_it}")
    return out


def overused_reason(ssn, q: int) -> d.Reason:
    """Why queue q allocates nothing more: at its deserved share, with the figures of the first
    resource it is at (or an ancestor is at), as `limit_reason` gives them."""
    name = ssn.snap.queues[q].name
    text = f"queue {name} is overused (at its deserved share)"
    deserved = ssn.queue_deserved
    fixed = True
    if deserved is not None:
        columns = shared_columns(ssn)
        for c in ssn.queue_chain[q]:
            at = [int(r) for r in columns if ssn.queue_allocated[c][r] >= deserved[c][r]]
            if at and len(at) == len(columns):
                who = "" if c == q else f"queue {ssn.snap.queues[c].name}, "
                # With what other queues' guarantees take off its room: a queue overused with
                # nothing allocated is one whose deserved share those guarantees took.
                caps = {c: real_capability(ssn, c)}
                text += f": {who}{ssn.snap.resources[at[0]]}: {', '.join(queue_figures(ssn, c, at[0], caps))}"
                fixed = all(fixed_limit(ssn, c, r, deserved[c][r]) for r in at)
                break
    return d.Reason(d.QUEUE, text, {"queue": name, "fixed": fixed})


def fixed_limit(ssn, q: int, r: int, limit: float, total: float | None = None) -> bool:
    """Whether queue q would still refuse on resource r however many nodes were added: its
    binding limit is its capability (a figure of its spec), or what it would hold with the
    request (`total`) passes that capability. A limit below the capability was derived from the
    cluster (proportion's deserved share, a real capability bounded by the cluster total less
    other queues' guarantees), and a new node raises it: such a wait is room a node would give,
    which is what the autoscaler contract tells apart (runtime/kube/podconditions.py)."""
    capability = ssn.snap.capability[q][r]
    return bool(limit >= capability or (total is not None and total > capability))


def guarantees_against(snap, q: int, r: int) -> list[tuple[str, int]]:
    """The guarantees on resource r that queue q's room gives way to (its siblings', and its
    ancestors' siblings'), largest first: (queue, amount)."""
    out = []
    c = q
    while c > 0:
        parent = snap.queues[c].parent
        out.extend((snap.queues[s].name, int(snap.guarantee[s][r])) for s in snap.queues[parent].children
                   if s != c and snap.guarantee[s][r] > 0)
        c = parent
    return sorted(out, key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class UnmetPromise:
    """Guarantees (or explicit deserved shares) of the children of `parent` that its room
    cannot hold on `resource`: every other child of it gets nothing of that resource, and
    the promise itself is not kept."""

    kind: str                          # "guarantee" | "deserved"
    parent: str
    resource: str
    promised: int                      # their sum, base units
    room: int                          # what the parent has: the cluster for root, else its real capability
    queues: tuple[tuple[str, int], ...]    # (queue, amount), largest first

    def shortfall(self, amount: int) -> int:
        """What a queue promised `amount` misses when its siblings take their promises."""
        return max(0, amount - max(0, self.room - (self.promised - amount)))

    def describe(self) -> str:
        def fig(amount: int) -> str:
            return readable_base_units(self.resource, amount)

        whose = ", ".join(f"{name} {fig(amount)}" for name, amount in self.queues)
        where = "the cluster has" if self.parent == "root" else f"queue {self.parent} has"
        plural = "s" if len(self.queues) > 1 else ""
        return (f"{self.kind}{plural} of {self.resource} {fig(self.promised)} ({whose}) cannot be met: {where} "
                f"{fig(self.room)}; the other queues under {self.parent} get no {self.resource}")


def unmet_promises(snap) -> list[UnmetPromise]:
    """Each parent whose children's guarantees, or explicit deserved shares, add up to more of
    a resource than the parent has (the cluster, for root; else its real capability: its
    capability less its siblings' guarantees), on the resources some node offers."""
    # Guarantees take room only where a queue-share plugin computes shares; explicit deserved
    # shares mean something only to capacity (lint's PD212 says so of the policy's).
    kinds = [(kind, promises) for kind, promises, plugins in (
        ("guarantee", snap.guarantee, ("proportion", "capacity")), ("deserved", snap.deserved, ("capacity",)))
        if any(snap.plan.has_plugin(p) for p in plugins)]
    if not kinds:
        return []
    columns = [r for r, name in enumerate(snap.resources) if name != "pods" and snap.total[r] > 0]
    q_n = len(snap.queues)
    room = np.zeros((q_n, snap.n_resources), dtype=np.int64)
    room[0] = np.minimum(snap.capability[0], snap.total)
    out: list[UnmetPromise] = []
    order = [0]
    for parent in order:    # top down: a parent's room is known before its children's
        children = snap.queues[parent].children
        order.extend(children)
        for kind, promises in kinds:
            for r in columns:
                given = [(snap.queues[c].name, int(promises[c][r])) for c in children
                         if 0 < promises[c][r] < UNLIMITED]
                promised = sum(amount for _, amount in given)
                if promised > room[parent][r]:
                    out.append(UnmetPromise(kind, snap.queues[parent].name, snap.resources[r], promised,
                                            int(room[parent][r]), tuple(sorted(given, key=lambda g: (-g[1], g[0])))))
        promised = snap.guarantee[children].sum(axis=0, dtype=object) if children else 0   # exact
        for c in children:
            siblings = np.minimum(promised - snap.guarantee[c], UNLIMITED).astype(np.int64)
            room[c] = np.maximum(np.minimum(snap.capability[c], room[parent] - siblings), 0)
    return out


def limit_reason(ssn, q: int, r: int, request: np.ndarray, count: int, limit: float,
                 caps: np.ndarray | None = None) -> d.Reason:
    """`count` tasks of `request` each would take queue q (or the ancestor q) past `limit` on
    resource r: "3 pods need cpu 3 (3 × 1); queue a may allocate 2 more (capability ..., ...)"."""
    name, res = ssn.snap.queues[q].name, ssn.snap.resources[r]
    need = figure(ssn, r, request[r] * count)
    needs = f"pod needs {res} {need}" if count == 1 else \
        f"{count} pods need {res} {need} ({count} × {figure(ssn, r, request[r])})"
    room = max(limit - ssn.queue_allocated[q][r], 0)
    text = (f"{needs}; queue {name} may allocate {figure(ssn, r, room)} more "
            f"({', '.join(queue_figures(ssn, q, r, caps))})")
    return d.Reason(d.QUEUE, text, {"queue": name, "resource": res, "need": int(request[r] * count),
                                    "limit": int(min(limit, UNLIMITED)), "fixed": fixed_limit(ssn, q, r, limit,
                                                                        ssn.queue_allocated[q][r] + request[r] * count)})


def register_queue_answers(plugin, ssn, *, deserved: np.ndarray, limit: np.ndarray, caps: np.ndarray,
                           columns: np.ndarray, reserve: np.ndarray | None = None,
                           queue_order: Callable | None = None, preemptive: Callable | None = None,
                           reclaimable: Callable | None = None) -> None:
    """The extension points proportion and capacity answer alike. `deserved` orders queues and
    bounds preemptive and reclaim; `limit` is what allocation may not cross (proportion: the
    deserved share itself; capacity: the real capability) and what makes a queue overused;
    `caps` bounds admission; `reserve` (default `limit`) what a reservation held across cycles
    may not cross. A wait reason names the binding limit with its figures (`limit_reason`). A
    plugin whose queue order, preemptive or reclaimable answer is its own passes it instead."""
    snap = ssn.snap
    share = ssn.k.QueueShare(ssn.queue_allocated, deserved, columns).of
    # Each walks a queue's chain (itself, then its ancestors) in one call.
    within = ssn.k.CountWithin(limit, ssn.queue_allocated, columns, ssn.chain_ptr, ssn.chains, snap.request).chain
    reserve = limit if reserve is None else reserve
    within_reserve = within if reserve is limit else \
        ssn.k.CountWithin(reserve, ssn.queue_allocated, columns, ssn.chain_ptr, ssn.chains, snap.request).chain

    def by_share(q: int) -> tuple:
        return (-snap.queues[q].priority, share(q))

    def allocatable(q: int, request: np.ndarray | int, count: int, reserving: bool = False):
        queue = snap.queues[q]
        if not queue.open:     # Volcano's proportion and capacity: a queue not Open allocates nothing
            return 0, d.Reason(d.QUEUE, f"queue {queue.name} is closed", {"queue": queue.name})
        bound, counter = (reserve, within_reserve) if reserving else (limit, within)
        allowed, c, binding, asked = counter(q, request, count)
        if c < 0:
            return allowed, None
        # The reason names the last queue of the chain that lowered what was allowed.
        vector = snap.request[request] if isinstance(request, int) else request
        return allowed, limit_reason(ssn, c, binding, vector, asked, bound[c][binding], caps)

    def within_deserved(q: int, t: int) -> bool:
        if not snap.queues[q].open:    # nor does it reclaim
            return False
        after = ssn.queue_allocated[q] + snap.request[t]
        return all(after[r] <= deserved[q][r] for r in columns if snap.request[t][r] > 0)

    def over_deserved(reclaimer: int, candidates: list[int]) -> list[int]:
        return victims_over_limit(ssn, candidates, deserved, columns)

    def enqueueable(j: int) -> Verdict:
        reason = enqueue_check(ssn, j, caps, columns)
        return Verdict(PERMIT) if reason is None else Verdict(REJECT, reason)

    by_share.fixed_width = True       # Session.queue_key: its tuples are of one length
    plugin.register(ssn, "queue_order", queue_order or by_share)
    # Overused: the queue or an ancestor at its limit on every resource.
    plugin.register(ssn, "overused", ssn.k.AtLimit(ssn.queue_allocated, limit, columns, ssn.chain_ptr,
                                                   ssn.chains).chain)
    plugin.register(ssn, "allocatable", allocatable)
    plugin.register(ssn, "preemptive", preemptive or within_deserved)
    plugin.register(ssn, "reclaimable", reclaimable or over_deserved)
    plugin.register(ssn, "job_enqueued", enqueueable)


def victims_over_limit(ssn, candidates: list[int], limit: np.ndarray, columns: np.ndarray) -> list[int]:
    """Reclaim victims, as proportion and capacity pick them: a task helps only while its queue
    is over `limit` on some resource and the task holds some of that resource; the queue's
    usage drops with each victim taken, so no queue is taken below its limit."""
    snap = ssn.snap
    left: dict[int, np.ndarray] = {}
    out = []
    for c in candidates:
        q = snap.jobs[snap.task_job[c]].queue
        if q not in left:
            left[q] = ssn.queue_allocated[q].copy()
        alloc = left[q]
        over = alloc[columns] > limit[q][columns]
        if over.any() and (snap.request[c][columns][over] > 0).any():
            alloc -= snap.request[c]
            out.append(c)
    return out


def hierarchical_deserved(ssn, caps: np.ndarray) -> np.ndarray:
    """Deserved shares, top-down: each parent's deserved is water-filled among its children by
    weight, capped by real capability and request, raised to guarantee. A queue that may not
    borrow is capped at its fair share (its weight's part of the parent, raised to guarantee);
    `borrow_limit` caps what it may take above that fair share."""
    snap = ssn.snap
    q_n, r_n = len(snap.queues), snap.n_resources
    deserved = np.zeros((q_n, r_n), dtype=np.float64)
    deserved[0] = snap.total
    request = ssn.queue_request.astype(np.float64)
    order = [0]
    i = 0
    while i < len(order):
        parent = order[i]
        i += 1
        children = snap.queues[parent].children
        if not children:
            continue
        order.extend(children)
        budget = deserved[parent]
        weights = np.array([snap.queues[c].weight for c in children], dtype=np.float64)
        # A weight of 0 shares nothing out to its queue (all 0: nobody gets a fair part).
        fair = budget[None, :] * (weights / weights.sum())[:, None] if weights.sum() > 0 else \
            np.zeros((len(children), r_n))
        guarantee = snap.guarantee[children].astype(np.float64)
        fair = np.maximum(fair, guarantee)
        cap = caps[children].astype(np.float64)
        for k, c in enumerate(children):
            info = snap.queues[c]
            if not info.borrow:
                cap[k] = np.minimum(cap[k], fair[k])
            else:
                limit = snap.borrow_limit[c]
                cap[k] = np.where(limit >= UNLIMITED, cap[k], np.minimum(cap[k], fair[k] + limit))
        out = np.zeros((len(children), r_n), dtype=np.float64)
        ssn.k.water_fill(budget.astype(np.float64), weights, np.ascontiguousarray(request[children]),
                         np.ascontiguousarray(cap), np.ascontiguousarray(guarantee), out)
        deserved[children] = np.maximum(out, guarantee)   # a guarantee holds whatever the weights
    deserved[:, snap.resource_index["pods"]] = UNLIMITED
    return deserved
