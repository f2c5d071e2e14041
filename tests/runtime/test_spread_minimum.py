"""PodTopologySpread's global minimum, kept incrementally (runtime.engine.rules.spread._Spread.step):
after any sequence of placements and undos it equals the minimum recomputed from the counts over
the domains with an eligible node (0 while fewer than minDomains), as kube-scheduler computes it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from runtime.cluster.model import SpreadConstraint
from runtime.engine.rules.spread import _Spread


def recomputed(count: np.ndarray, present: np.ndarray, min_domains: int | None) -> int:
    domains = int(present.sum())
    if not domains or (min_domains and domains < min_domains):
        return 0
    return int(count[present].min())


@pytest.mark.parametrize("seed", range(40))
def test_incremental_minimum_equals_the_recomputed_one(seed: int) -> None:
    rng = random.Random(seed)
    n_domains = rng.randint(1, 6)
    present = np.array([rng.random() < 0.8 for _ in range(n_domains)], dtype=bool)
    min_domains = rng.choice([None, 1, n_domains, n_domains + 1])
    constraint = SpreadConstraint(1, "zone", "DoNotSchedule", None, min_domains=min_domains)
    spread = _Spread(0, constraint, None, np.ones(1, dtype=bool), present, np.zeros(n_domains, dtype=np.int64), 0)
    spread.reset_low()
    placed: list[int] = []
    for _ in range(60):
        eligible = [d for d in range(n_domains) if present[d]]
        if not eligible:
            break
        if placed and rng.random() < 0.4:      # an undo or eviction of a pod counted earlier
            d = placed.pop(rng.randrange(len(placed)))
            before, _ = spread.step(d, -1)
            assert before == spread.count[d] + 1
        else:
            d = rng.choice(eligible)
            placed.append(d)
            before, _ = spread.step(d, 1)
            assert before == spread.count[d] - 1
        assert spread.low == recomputed(spread.count, present, min_domains)
        if not spread.floored():
            assert spread.at_low == int((spread.count[present] == spread.low).sum())
