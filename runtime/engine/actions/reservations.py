"""Reservations held across cycles: each session opens by placing every waiting task nominated
to a node (a preemptor or reclaimer whose victims are leaving, a task pipelined there before)
on that node as a reservation, before any action runs; allocate binds them once their room is
there. runtime/README.md, "Reservations", says when one ends."""

from __future__ import annotations

from itertools import compress
from operator import attrgetter

import numpy as np

from runtime.cluster import decisions as d
from runtime.engine.evictions import reservation_seconds
from runtime.engine.extension import MASK_PASS
from runtime.engine.session import Session
from runtime.engine.snapshot import PENDING, PIPELINED

_NOMINATED = attrgetter("nominated_node")


def hold_reservations(ssn: Session, now: float | None) -> None:
    """Hold the room of every waiting pod nominated to a node (a preemptor or reclaimer whose
    victims are leaving, a task pipelined there before): placed there as a reservation
    (PIPELINED) before any action runs, so that no other pod takes the room. A reservation
    ends — `released` says why — when its node is gone, its room was taken, a rule no
    longer lets it there, its queue may no longer allocate it, or it outlived
    `reservation_seconds`; a gang's end together (every member's or none)."""
    ssn.now = now
    snap = ssn.snap
    pods = snap.pods
    # Every waiting pod's nominated node read in C loops (thousands of pods, most nominated nowhere).
    waiting = np.flatnonzero(ssn.status == PENDING).tolist()
    names = list(map(_NOMINATED, map(pods.__getitem__, waiting)))
    nominated = list(compress(zip(waiting, names), names))
    if not nominated:
        return
    rows = {name: i for i, name in enumerate(snap.node_names)}
    limit = reservation_seconds(ssn.plan)
    keep: dict[int, list[tuple[int, int]]] = {}
    ended: dict[int, d.Reason] = {}
    for t, name in nominated:
        j = int(snap.task_job[t])
        node = rows.get(name, -1)
        why = _reservation_ends(ssn, t, node, name, now, limit)
        if why is not None:
            ended[j] = ended.get(j) or why
        keep.setdefault(j, []).append((t, node))
    _end_beyond_queue(ssn, keep, ended)
    stmt = ssn.new_statement()
    for j, held in keep.items():
        if j in ended:
            for t, _ in held:
                ssn.released[t] = ended[j]
                ssn.add_reason(t, ended[j])
            continue
        for t, node in held:
            stmt.place(t, node, PIPELINED)
            ssn.held[t] = node
    stmt.commit()

def _end_beyond_queue(ssn: Session, keep: dict[int, list[tuple[int, int]]], ended: dict[int, d.Reason]) -> None:
    """End the reservations of the jobs (in job order) that their queue may not allocate
    together with the reservations kept before them: each was checked alone, and pipelined
    room does not count in the queue's allocation, so two gangs pipelined by one preempt
    would otherwise both bind above the queue's capability."""
    snap = ssn.snap
    kept: dict[int, np.ndarray] = {}
    for j in sorted((j for j in keep if j not in ended), key=ssn.job_key):
        q = snap.jobs[j].queue
        if q < 0:
            continue
        tasks = [t for t, _ in keep[j]]
        total = snap.request[tasks].sum(axis=0) + kept.get(q, 0)
        if ssn.allocatable_count(q, total, 1, reserving=True)[0] < 1:
            name = snap.node_names[keep[j][0][1]]
            ended[j] = d.Reason(d.RESERVATION, f"reservation on {name} released: queue "
                                f"{snap.jobs[j].queue_name} may no longer allocate it", {"node": name})
        else:
            kept[q] = total

def _reservation_ends(ssn: Session, t: int, node: int, name: str, now: float | None, limit: float) -> d.Reason | None:
    snap = ssn.snap
    pod = snap.pods[t]
    def ended(text: str) -> d.Reason:
        return d.Reason(d.RESERVATION, f"reservation on {name} released: {text}", {"node": name})
    if node < 0:
        return ended("the node is gone")
    if now is not None and pod.nominated_at is not None and now - pod.nominated_at > limit:
        return ended(f"held {now - pod.nominated_at:.0f}s, longer than {limit:g}s")
    job = snap.jobs[snap.task_job[t]]
    if job.queue < 0 or ssn.allocatable_count(job.queue, snap.request[t], 1, reserving=True)[0] < 1:
        return ended(f"queue {job.queue_name} may no longer allocate it")
    cid = int(snap.task_class[t])
    if not ssn.stateful_codes(cid, np.array([node], dtype=np.int64))[0] & MASK_PASS:
        return ended("the node no longer passes its predicates")
    req = ssn.fit_request(t)
    room = snap.allocatable[node] - ssn.used[node] + ssn.releasing[node] - ssn.pipelined[node]
    if (room < req).any():
        return ended("its room was taken")
    return None
