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


class _Domains:
    """What _Spread reads of runtime.engine.snapshot.Domains here: the domain count."""

    def __init__(self, count: int) -> None:
        self.count = count


@pytest.mark.parametrize("seed", range(60))
def test_a_new_constraint_started_sparse_equals_the_dense_pass(seed: int) -> None:
    """_Spread.start (the nonzero counts per domain) sets the counts, minimum, domains at it and
    a hard constraint's codes as the passes over every domain (reset_low, refresh_codes) do."""
    rng = random.Random(seed)
    n_domains = rng.randint(0, 7)
    present = np.array([rng.random() < 0.8 for _ in range(n_domains)], dtype=bool)
    min_domains = rng.choice([None, 1, n_domains, n_domains + 1])
    hard = rng.random() < 0.7
    constraint = SpreadConstraint(rng.randint(1, 3), "zone", "DoNotSchedule" if hard else "ScheduleAnyway", None,
                                  min_domains=min_domains)
    by_domain = {d: rng.randint(1, 4) for d in range(n_domains) if present[d] and rng.random() < 0.6}
    self_match = rng.randint(0, 1)

    def made() -> _Spread:
        return _Spread(0, constraint, _Domains(n_domains), np.ones(1, dtype=bool), present,
                       np.zeros(n_domains, dtype=np.int64), self_match)

    sparse, dense = made(), made()
    sparse.start(by_domain)
    for d, v in by_domain.items():
        dense.count[d] = v
    dense.reset_low()
    if hard:
        dense.refresh_codes()
    assert sparse.count.tolist() == dense.count.tolist()
    assert (sparse.low, sparse.at_low) == (dense.low, dense.at_low)
    if hard:
        assert sparse.codes.tolist() == dense.codes.tolist()
    else:
        assert sparse.codes is None
