"""A condition-only PodGroup change is budgeted: a restart that finds thousands of running
PodGroups without the condition the scheduler writes sends at most a burst of writes per cycle,
and the rest stay due for later cycles (runtime/kube/cluster.py, CONDITION_WRITES_PER_S); phase
changes are not held by that budget. And stopping drops status writes still queued instead of
waiting for them (KubeCluster.stop)."""

from __future__ import annotations

import threading
import time

from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState
from runtime.kube import cluster as kc
from runtime.kube.api import KubeApi
from runtime.kube.cluster import KubeCluster

SCHEDULED = (d.Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", ""),)
N = 1000


def connector() -> tuple[KubeCluster, list[str]]:
    kube = KubeCluster(KubeApi.__new__(KubeApi), "policydsl", identity="test")
    submitted: list[str] = []
    kube.writes.submit = lambda fn, key, *args: submitted.append(key)   # type: ignore[method-assign]
    return kube, submitted


def running_without_condition(kube: KubeCluster, names: list[str]) -> None:
    statuses = {name: {"phase": "Running", "running": 8, "succeeded": 0} for name in names}
    kube.cache.podgroup_statuses = lambda: statuses       # type: ignore[method-assign]
    kube.cache.queue_objects = lambda: []                 # type: ignore[method-assign]


def test_a_restart_finding_many_running_podgroups_writes_a_burst_per_cycle_not_all() -> None:
    kube, submitted = connector()
    try:
        names = [f"ns/pg-{i}" for i in range(N)]
        running_without_condition(kube, names)
        decisions = d.Decisions(podgroups=[d.PodGroupStatus(name, "Running", SCHEDULED) for name in names])
        counts = {name: {"running": 8, "succeeded": 0} for name in names}
        kube._condition_due = {name: time.monotonic() - 10 for name in names}     # due long ago
        kube._write_status(decisions, ClusterState(), {}, counts, {})
        first = len(submitted)
        assert 0 < first <= kc.CONDITION_WRITE_BURST + 1
        assert len(kube._condition_due) == N - first       # the others stay due, none forgotten
        kube._busy.clear()
        kube._write_status(decisions, ClusterState(), {}, counts, {})
        assert len(submitted) - first < 10                 # the budget refills at its rate, not at once
    finally:
        kube.binds.shutdown(wait=False)
        kube.writes.shutdown(wait=False)


def test_a_phase_change_is_not_held_by_the_condition_budget() -> None:
    kube, submitted = connector()
    try:
        names = [f"ns/pg-{i}" for i in range(N)]
        running_without_condition(kube, names)
        kube._condition_writes.tokens = 0                  # the budget spent
        decisions = d.Decisions(podgroups=[d.PodGroupStatus(name, "Completed", ()) for name in names])
        counts = {name: {"running": 0, "succeeded": 8} for name in names}
        kube._write_status(decisions, ClusterState(), {}, counts, {})
        assert len(submitted) == N
    finally:
        kube.binds.shutdown(wait=False)
        kube.writes.shutdown(wait=False)


def test_stop_drops_queued_status_writes_instead_of_waiting_for_them() -> None:
    kube = KubeCluster(KubeApi.__new__(KubeApi), "policydsl", identity="test")
    gate = threading.Event()
    ran: list[int] = []
    for _ in range(kc.WRITE_WORKERS):
        kube.writes.submit(gate.wait)                      # every worker busy until released
    for i in range(500):
        kube.writes.submit(ran.append, i)                  # queued behind them
    kube.drain = lambda timeout=None: None                 # type: ignore[method-assign]  # nothing in flight to wait for
    kube.volumes.stop = lambda: None                       # type: ignore[method-assign]
    kube.events.stop = lambda: None                        # type: ignore[method-assign]
    kube.cache.stop = lambda: None                         # type: ignore[method-assign]
    threading.Timer(0.2, gate.set).start()
    started = time.monotonic()
    kube.stop()
    assert time.monotonic() - started < 5
    assert ran == []                                       # the queued writes were dropped
