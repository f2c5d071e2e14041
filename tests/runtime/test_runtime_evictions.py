"""The eviction audit (runtime.evictions), table-driven: cycles of decisions in, bought / wasted /
repeats / exchanges out."""

from __future__ import annotations

import pytest

from runtime import decisions as d
from runtime.evictions import EvictionAudit

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
