"""run_cycle holds the cyclic garbage collector off while it runs and leaves it as it found it
(enabled or not), also when the cycle fails; pauses nest (the connector's reflectors pause it too)."""

from __future__ import annotations

import gc

import pytest

from runtime.engine import cycle as cycle_module
from runtime.engine.cycle import collector_paused, run_cycle
from runtime.cluster.model import ClusterState
from tests.runtime.runtime_helpers import STANDARD_TIERS, node, placements, pod, policy


@pytest.fixture
def restore_collector():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_a_cycle_runs_without_the_collector_and_gives_it_back(restore_collector, monkeypatch):
    gc.enable()
    seen = []
    real = cycle_module.open_session

    def spying(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(cycle_module, "open_session", spying)
    state = ClusterState()
    node(state, "n1")
    pod(state, "p1")
    decisions = run_cycle(policy(STANDARD_TIERS), state)
    assert placements(decisions) == {"ns/p1": "n1"}
    assert seen == [False] and gc.isenabled()


def test_a_disabled_collector_stays_disabled(restore_collector):
    gc.disable()
    state = ClusterState()
    node(state, "n1")
    pod(state, "p1")
    run_cycle(policy(STANDARD_TIERS), state)
    assert not gc.isenabled()


def test_a_failing_cycle_gives_the_collector_back(restore_collector, monkeypatch):
    gc.enable()

    def failing(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cycle_module, "open_session", failing)
    with pytest.raises(RuntimeError):
        run_cycle(policy(STANDARD_TIERS), ClusterState())
    assert gc.isenabled()


def test_pauses_nest(restore_collector):
    gc.enable()
    with collector_paused:
        with collector_paused:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
