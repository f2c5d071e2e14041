"""Session._specialize: where one plugin answers queue_order, overused or job_ready, the
combinators allocate asks every turn are that answer itself; a callback registered later is
heard again, and a closed session keeps none of them (they are closures over it)."""

from __future__ import annotations

import numpy as np

from runtime.engine.cycle import open_session
from runtime.engine.session import Options, Session
from runtime_helpers import STANDARD_TIERS, policy
from test_runtime_job_order import random_state


def generic(ssn: Session, name: str, arg: int):
    """The combinator's own answer (the class's method, not the instance's shadow)."""
    return getattr(Session, name)(ssn, arg)


def test_specialized_answers_are_the_combinators() -> None:
    state = random_state(np.random.default_rng(2500))
    ssn = open_session(policy(STANDARD_TIERS), state, Options())
    assert {"queue_key", "overused", "job_ready_ok", "allocatable_count"} <= set(vars(ssn))   # one plugin each
    from runtime.engine.actions import registry
    for step in range(2):       # before and after allocate moved the shares and readiness
        for q in range(len(ssn.snap.queues)):
            assert ssn.queue_key(q) == generic(ssn, "queue_key", q)
            assert ssn.overused(q) == generic(ssn, "overused", q)
            for count in (0, 1, 3, 1000):
                for t in range(0, len(ssn.snap.pods), 7):
                    request = ssn.snap.request[t]
                    assert ssn.allocatable_count(q, request, count) == \
                        Session.allocatable_count(ssn, q, request, count)
        for j in range(len(ssn.snap.jobs)):
            assert bool(ssn.job_ready_ok(j)) == generic(ssn, "job_ready_ok", j)
        registry()["allocate"](ssn)


def test_a_callback_registered_later_is_heard() -> None:
    state = random_state(np.random.default_rng(2600))
    ssn = open_session(policy(STANDARD_TIERS), state, Options())
    ready = [j for j in range(len(ssn.snap.jobs)) if ssn.job_ready_ok(j)]
    ssn.register("job_ready", "mine", lambda j: False)
    assert "job_ready_ok" not in vars(ssn)
    assert not any(ssn.job_ready_ok(j) for j in ready)


def test_a_closed_session_keeps_no_specialized_answer() -> None:
    ssn = open_session(policy(STANDARD_TIERS), random_state(np.random.default_rng(2700)), Options())
    ssn.close()
    assert not {"queue_key", "overused", "job_ready_ok", "allocatable_count"} & set(vars(ssn))
