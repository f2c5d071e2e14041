"""The eviction audit (runtime.engine.evictions), table-driven: cycles of decisions in, bought / wasted /
repeats / exchanges out."""

from __future__ import annotations

import pytest

from runtime.cluster import decisions as d
from runtime.engine.evictions import EvictionAudit

QUEUE_OF = {"a/v1": "qa", "a/v2": "qa", "b/r1": "qb", "b/r2": "qb"}


def evict(victim: str, beneficiary: str) -> d.Eviction:
    return d.Eviction(victim, d.Reason(d.RECLAIM, f"reclaimed for {beneficiary}", {"for": beneficiary}))


def cycle(evictions=(), bindings=()) -> d.Decisions:
    decisions = d.Decisions()
    decisions.evictions.extend(evictions)
    decisions.bindings.extend(d.Binding(pod, "n1") for pod in bindings)
    return decisions


CASES = [
    # (name, cycles as (cycle number, decisions), expected audit figures)
    ("bought: the beneficiary binds the next cycle",
     [(1, cycle([evict("a/v1", "b/r1")])), (2, cycle(bindings=["b/r1"]))],
     {"bought": 1, "wasted": 0, "open": 0, "repeats": 0, "exchanges": 0}),
    ("open: not bound yet, within the window",
     [(1, cycle([evict("a/v1", "b/r1")])), (5, cycle())],
     {"bought": 0, "wasted": 0, "open": 1}),
    ("wasted: not bound within the window",
     [(1, cycle([evict("a/v1", "b/r1"), evict("a/v2", "b/r1")])), (11, cycle()), (12, cycle(bindings=["b/r1"]))],
     {"bought": 0, "wasted": 2, "open": 0}),
    ("repeat: the same pod evicted twice within the window",
     [(1, cycle([evict("a/v1", "b/r1")])), (2, cycle(bindings=["b/r1"])), (4, cycle([evict("a/v1", "b/r2")]))],
     {"repeats": 1}),
    ("no repeat: evicted again after the window",
     [(1, cycle([evict("a/v1", "b/r1")])), (2, cycle(bindings=["b/r1"])), (20, cycle([evict("a/v1", "b/r2")]))],
     {"repeats": 0}),
    ("exchange: the beneficiary's side takes back what was taken from it",
     [(1, cycle([evict("b/r1", "a/v1")])), (2, cycle([evict("a/v2", "b/r1")], bindings=["a/v1"]))],
     {"exchanges": 1}),
    ("no exchange: the other queue reclaims for a pod that lost nothing",
     [(1, cycle([evict("b/r1", "a/v1")])), (2, cycle([evict("a/v2", "b/r2")], bindings=["a/v1"]))],
     {"exchanges": 0}),
    ("no exchange: taken back after the window",
     [(1, cycle([evict("b/r1", "a/v1")])), (2, cycle(bindings=["a/v1"])), (15, cycle([evict("a/v2", "b/r1")]))],
     {"exchanges": 0}),
    ("evictions without a beneficiary are not audited",
     [(1, cycle([d.Eviction("a/v1", d.Reason(d.RECLAIM, "drained", {}))])), (20, cycle())],
     {"bought": 0, "wasted": 0, "open": 0}),
]


@pytest.mark.parametrize("cycles, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_audit(cycles, expected):
    audit = EvictionAudit()
    for number, decisions in cycles:
        audit.record(number, decisions, QUEUE_OF)
    got = audit.to_dict()
    assert {k: got[k] for k in expected} == expected
    assert audit.thrashing == bool(got["wasted"] or got["repeats"] or got["exchanges"])


JOB_OF = {"a/v1": "a/job-v", "a/v2": "a/job-v", "b/r1": "b/job-r", "b/r2": "b/job-r2"}


@pytest.mark.parametrize("cycles, at, expected", [
    ([(1, cycle([evict("b/r1", "a/v1")]))], 2, {"b/job-r": {"qa"}}),
    ([(1, cycle([evict("b/r1", "a/v1")]))], 11, {"b/job-r": {"qa"}}),           # the window's last cycle
    ([(1, cycle([evict("b/r1", "a/v1")]))], 12, {}),                            # past it
    ([(1, cycle([evict("b/r1", "a/v1")])), (20, cycle([evict("a/v1", "b/r2")]))], 21, {"a/job-v": {"qb"}}),
    ([(1, cycle([evict("a/v1", "a/v2")]))], 2, {}),                             # within a queue: no queue lost to
], ids=["just lost", "window's end", "after the window", "only the recent", "same queue"])
def test_lost_to_names_the_queues_a_job_lost_pods_to_within_the_window(cycles, at, expected):
    audit = EvictionAudit()
    queue_of = {**QUEUE_OF, "a/v2": "qa"}
    for number, decisions in cycles:
        audit.record(number, decisions, queue_of, JOB_OF)
    assert {job: set(queues) for job, queues in audit.lost_to(at).items()} == expected


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("lost_to, evicts", [
    (None, True),
    ({"ns/back": frozenset({"qa"})}, False),       # it lost pods to qa lately: taking room back is a trade
    ({"ns/back": frozenset({"qc"})}, True),        # lost to another queue: qa's room is fair game
    ({"ns/other": frozenset({"qa"})}, True),       # another job lost to qa, not this one
], ids=["no record", "lost to the victim's queue", "lost to another queue", "another job's loss"])
def test_reclaim_does_not_take_back_from_a_queue_the_job_lost_pods_to(pure, lost_to, evicts):
    from runtime.engine.cycle import run_cycle
    from runtime.cluster.model import ClusterState
    from runtime.engine.session import Options
    from runtime_helpers import STANDARD_TIERS, gang, node, policy

    plan = policy(STANDARD_TIERS + "queue qa { weight = 1 }\nqueue qb { weight = 1 }\nqueue qc { weight = 1 }",
                  actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    node(state, "n", cpu=6000)
    gang(state, "hog", 6, min_member=1, queue="qa", nodes=["n"] * 6)    # qa holds 6 of 6, deserved 3
    gang(state, "back", 1, queue="qb")
    decisions = run_cycle(plan, state, Options(pure_python=pure, lost_to=lost_to))
    assert bool(decisions.evictions) == evicts, decisions.evictions
    assert all(e.pod.startswith("ns/hog-") for e in decisions.evictions)


def test_the_scheduler_tells_the_next_cycles_what_each_job_lost_and_to_whom(monkeypatch):
    # On a cluster the audit's record reaches the session (Options.lost_to), clocked as the
    # audit is, so reclaim in a later cycle knows which queue took a job's pods.
    from runtime.service import loop as connector
    from runtime.service.embedded import EmbeddedCluster
    from runtime.cluster.model import ClusterState
    from runtime_helpers import STANDARD_TIERS, gang, node, policy

    plan = policy(STANDARD_TIERS + "queue qa { weight = 1 }\nqueue qb { weight = 1 }",
                  actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    node(state, "n", cpu=4000)
    gang(state, "hog", 4, min_member=1, queue="qb", nodes=["n"] * 4)
    gang(state, "taker", 1, queue="qa")
    seen = []
    real = connector.run_cycle

    def spy(plan, state, options, *args, **kwargs):
        seen.append(options.lost_to)
        return real(plan, state, options, *args, **kwargs)

    monkeypatch.setattr(connector, "run_cycle", spy)
    scheduler = connector.Scheduler(plan, EmbeddedCluster(state))
    first = scheduler.run_once()
    assert first.decisions.evictions and all(e.pod.startswith("ns/hog-") for e in first.decisions.evictions)
    scheduler.run_once()
    assert seen[0] == {}
    assert seen[-1] == {"ns/hog": frozenset({"qa"})}
