"""Actions: each a module with `run(ssn)`; `REGISTRY` maps the Plan's action names to them."""

from __future__ import annotations

from typing import Callable


def registry() -> dict[str, Callable]:
    from runtime.engine.actions import allocate, backfill, enqueue, preempt, reclaim
    return {"enqueue": enqueue.run, "allocate": allocate.run, "backfill": backfill.run,
            "preempt": preempt.run, "reclaim": reclaim.run}
