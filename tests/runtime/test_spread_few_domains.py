"""PodTopologySpread's bookkeeping over a few domains (a zone key: at most FEW_DOMAINS) runs on
Python lists; over more (a hostname key) on arrays. Both paths give the same minimum, codes,
starting counts and per-domain scores, on random counts and moves."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.cluster.model import SpreadConstraint
from runtime.cluster.selectors import LabelSelector
from runtime.engine.rules import spread
from runtime.engine.snapshot import Domains


def domains_of(count: int) -> Domains:
    of = np.arange(count, dtype=np.int64)
    return Domains("zone", of, count, of.copy(), np.arange(count + 1, dtype=np.int64), [str(d) for d in range(count)])


def constraint(rng, hard: bool) -> SpreadConstraint:
    return SpreadConstraint(int(rng.integers(1, 4)), "zone", "DoNotSchedule" if hard else "ScheduleAnyway",
                            LabelSelector((("app", "a"),)), min_domains=int(rng.choice([0, 0, 3, 40])) or None)


def fresh(rng, d_n: int, hard: bool, by_domain: dict[int, int]) -> spread._Spread:
    present = rng.random(d_n) < 0.9
    present[0] = True
    s = spread._Spread(0, constraint(rng, hard), domains_of(d_n), np.ones(d_n, dtype=bool), present,
                       np.zeros(d_n, dtype=np.int64), int(rng.integers(0, 2)))
    s.start({d: v for d, v in by_domain.items() if present[d]})
    return s


def state(s: spread._Spread) -> tuple:
    return (s.count.tolist(), s.low, s.at_low, None if s.codes is None else s.codes.tolist())


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("d_n", [1, 3, 10, 64])
def test_lists_and_arrays_agree(seed, d_n, monkeypatch):
    answers = []
    for few in (spread.FEW_DOMAINS, 0):      # 0: every constraint takes the array path
        monkeypatch.setattr(spread, "FEW_DOMAINS", few)
        rng = np.random.default_rng(seed)
        hard = bool(rng.integers(0, 2))
        by_domain = {int(d): int(rng.integers(1, 4)) for d in rng.choice(d_n, size=int(rng.integers(0, d_n + 1)),
                                                                          replace=False)}
        s = fresh(rng, d_n, hard, by_domain)
        scores = spread._DomainScores(s, np.zeros(0))
        scores.recount()
        seen = [state(s), (scores.raw.tolist(), scores.high, scores.low)]
        for _ in range(30):
            d = int(rng.choice(np.flatnonzero(s.present)))
            step = 1 if rng.random() < 0.7 or s.count[d] == 0 else -1
            s.step(d, step)
            if rng.random() < 0.3:
                s.refresh_codes()
            scores.moved(d)
            seen.append(state(s))
            seen.append((scores.raw.tolist(), scores.high, scores.low))
            s.reset_low()
            seen.append((s.low, s.at_low))
        answers.append(seen)
    assert answers[0] == answers[1]
