"""Actions: each a module with `run(ssn)`; `registry()` maps the Plan's action names to them.
Helpers that several actions share live beside them (common, eviction, reservations), as
Volcano's actions/utils."""

from __future__ import annotations

from typing import Callable

from runtime.engine.actions import allocate, backfill, enqueue, preempt, reclaim, shuffle


def registry() -> dict[str, Callable]:
    return {"enqueue": enqueue.run, "allocate": allocate.run, "backfill": backfill.run,
            "preempt": preempt.run, "reclaim": reclaim.run,
            "gang_preempt": preempt.run_by_bundles, "gang_reclaim": reclaim.run_by_bundles, "shuffle": shuffle.run}
