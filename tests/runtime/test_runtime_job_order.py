"""Session.job_order: the plugins' job_order columns, compared as arrays, give the order of a
heap of (job_key, index) — the per-job callbacks — on random clusters, in both kernel paths."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.engine.cycle import open_session
from runtime.cluster.model import ClusterState
from runtime.engine.session import Options
from runtime_helpers import GiB, STANDARD_TIERS, gang, node, pod, policy

TIER_SHAPES = {
    "standard": STANDARD_TIERS,
    "drf first": "tier { plugin drf }\ntier { plugin priority\n plugin gang\n plugin predicates }",
    "gang only": "tier { plugin gang\n plugin predicates }",
}


def random_state(rng) -> ClusterState:
    """Gangs of random priority, size and creation (many ties: uid decides), some partly
    running (drf shares differ), some with role minimums or pending zero-request pods (gang
    answers those one by one), and lone pods (implicit jobs)."""
    state = ClusterState()
    for n in range(4):
        node(state, f"n{n}", cpu=64000, memory=256 * GiB)
    for g in range(int(rng.integers(5, 25))):
        size = int(rng.integers(1, 5))
        running = int(rng.integers(0, size + 1))
        group = gang(state, f"g{g}", size=size, min_member=int(rng.integers(1, size + 1)),
                     cpu=500 * int(rng.integers(1, 4)), priority=int(rng.integers(0, 3)),
                     creation=float(rng.integers(0, 3)), nodes=[f"n{i % 4}" for i in range(running)])
        if rng.random() < 0.2:
            group.min_task_member = {"worker": 1}
        if rng.random() < 0.2:
            pod(state, f"g{g}-zero", cpu=0, memory=0, group=f"g{g}")
    for p in range(int(rng.integers(0, 5))):
        pod(state, f"lone{p}", priority=int(rng.integers(0, 3)), creation=float(rng.integers(0, 3)))
    return state


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("shape", sorted(TIER_SHAPES))
@pytest.mark.parametrize("seed", range(12))
def test_job_order_columns_match_the_per_job_keys(pure, shape, seed):
    rng = np.random.default_rng(2100 + seed)
    state = random_state(rng)
    ssn = open_session(policy(TIER_SHAPES[shape]), state, Options(pure_python=pure))
    assert all(fn in ssn.order_columns for fn in ssn.flat("job_order"))     # the fast path is taken
    js = [j for j in range(len(ssn.snap.jobs)) if rng.random() < 0.8]
    expected = sorted(js, key=lambda j: (ssn.job_key(j), j))
    assert ssn.job_order(js) == expected
    # Still after some allocation changed the drf shares.
    from runtime.engine.actions import registry
    registry()["allocate"](ssn)
    assert ssn.job_order(js) == sorted(js, key=lambda j: (ssn.job_key(j), j))


def test_a_callback_without_a_column_falls_back_to_the_keys():
    state = ClusterState()
    node(state, "n0")
    for g, (prio, creation) in enumerate([(1, 2.0), (3, 1.0), (3, 0.0), (1, 2.0)]):
        gang(state, f"g{g}", size=1, priority=prio, creation=creation)
    ssn = open_session(policy(STANDARD_TIERS), state)
    ssn.register("job_order", "test", lambda j: -j)        # a plugin that offers no column
    js = list(range(4))
    assert ssn.job_order(js) == sorted(js, key=lambda j: (ssn.job_key(j), j))
    assert ssn.job_order(js)[:2] == [2, 1]                # priority 3 first; between them -j decides


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("seed", range(8))
def test_jobs_not_asked_for_validity_are_valid(pure, seed):
    """Session.jobs_to_validate: a job the job_valid columns leave out is valid by every
    plugin's per-job answer; gangs short of pods are among those asked (and found invalid)."""
    rng = np.random.default_rng(2300 + seed)
    state = random_state(rng)
    for g in range(int(rng.integers(1, 4))):          # gangs whose minMember exceeds their pods
        gang(state, f"short{g}", size=1, min_member=3, cpu=500)
    pod(state, "alone")
    ssn = open_session(policy(STANDARD_TIERS), state, Options(pure_python=pure))
    ask = ssn.jobs_to_validate()
    assert ask is not None       # every job_valid plugin of the standard tiers offers a column
    invalid = [j for j in range(len(ssn.snap.jobs)) if ssn.job_valid(j) is not None]
    assert invalid and all(ask[j] for j in invalid)
    assert not all(ask)          # lone pods are not asked


def test_a_validity_callback_without_a_column_asks_every_job():
    state = random_state(np.random.default_rng(2400))
    ssn = open_session(policy(STANDARD_TIERS), state, Options())
    ssn.register("job_valid", "mine", lambda j: None)
    assert ssn.jobs_to_validate() is None
