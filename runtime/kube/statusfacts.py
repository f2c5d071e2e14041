"""What a PodGroup's status says, compared fact by fact: its phase, its pod counts, and its
conditions' type, status, reason and message (transition times and IDs aside).

The status writer (runtime.kube.status) writes only when these differ from what a cycle
computed; the cache folds a settled gang (runtime.kube.settled) only while they match what a
cycle would compute for it. One comparison serves both, so a folded gang is one the writer
would leave alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtime.cluster.model import PG_PENDING, Condition


def condition_facts(conditions: Iterable[Any]) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of Condition objects or status dicts."""
    out = []
    for c in conditions:
        if isinstance(c, Condition):
            out.append((c.type, c.status, c.reason, c.message))
        elif isinstance(c, dict):
            out.append((str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "")),
                        str(c.get("message", ""))))
    return out


def same_phase_and_counts(current: Mapping[str, Any] | None, phase: str, counts: Mapping[str, int]) -> bool:
    """Whether a PodGroup status already has this phase and these pod counts (its conditions aside).
    No phase yet reads as Pending, what a PodGroup is until a scheduler says otherwise."""
    current = current or {}
    return (current.get("phase") or PG_PENDING) == phase and all(int(current.get(name) or 0) == value
                                                                 for name, value in counts.items())


def podgroup_says(current: Mapping[str, Any] | None, phase: str, conditions: tuple[Condition, ...],
                  counts: Mapping[str, int]) -> bool:
    """Whether a PodGroup status already says this; no conditions means the current ones stand."""
    # Cheapest checks first: a settled cluster asks this of every PodGroup in play every cycle.
    if not same_phase_and_counts(current, phase, counts):
        return False
    return not conditions or condition_facts((current or {}).get("conditions") or []) == condition_facts(conditions)
