"""A miss on explain (`/api/v1/explain/NS/NAME`, `policydsl explain`) suggests only a name of
the asked namespace, after a bounded number of comparisons whatever the cluster's size
(runtime/engine/explanation.py resolve_target, policydsl/diagnostics.py Suggester)."""

from __future__ import annotations


import pytest

from policydsl.diagnostics import MAX_COMPARED
from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState, Pod, PodGroup
from runtime.engine.explanation import UnknownTarget, names_by_namespace, resolve_target
from runtime.service.views import CycleView


def crowded(others: int, mine: int = 3) -> ClusterState:
    state = ClusterState()
    for i in range(others):
        state.add_pod(Pod(f"tenant-{i % 50}", f"web-{i}", {"cpu": 100}, uid=f"u{i}"))
    for i in range(mine):
        state.add_pod(Pod("mine", f"api-{i}", {"cpu": 100}, uid=f"m{i}"))
    state.add_podgroup(PodGroup("mine", "batch", min_member=1))
    return state


def test_a_miss_never_names_another_namespace_and_compares_a_few(compared):
    state = crowded(50_000)
    # "tenant-7/web-7" is one letter away, in another namespace: never suggested
    for resolve in (lambda t: resolve_target(state, t), lambda t: resolve_target(state, t, lambda: names)):
        names = names_by_namespace(state)
        compared.clear()
        with pytest.raises(UnknownTarget) as miss:
            resolve("mine/web-7")
        assert miss.value.suggestion is None and "tenant" not in str(miss.value)
        assert len(compared) <= 4 and all(not c.startswith("web-") for c in compared)
        compared.clear()
        with pytest.raises(UnknownTarget) as miss:
            resolve("tenant/web-7")       # a namespace of no pod: nothing to suggest, nothing compared
        assert miss.value.suggestion is None and not compared
        with pytest.raises(UnknownTarget) as miss:
            resolve("mine/api-1x")
        assert miss.value.suggestion == "mine/api-1"
        with pytest.raises(UnknownTarget) as miss:
            resolve("mine/bacth")
        assert miss.value.suggestion == "mine/batch"


def test_a_crowded_namespace_costs_a_bounded_number_of_comparisons(compared):
    state = crowded(0, mine=50_000)
    view = CycleView(number=1, revision="r1", policy="p", at=0.0, seconds=0.0, scheduler_name="policydsl",
                     state=state, decisions=d.Decisions(), facts=None)
    for target in ("mine/api-4999x", "mine/zzzzzzzzzzzzzzz", "mine/" + "a" * 5000):
        compared.clear()
        with pytest.raises(UnknownTarget) as miss:
            view.explain(target)
        assert len(compared) <= MAX_COMPARED, (target, len(compared))
    assert view.names() is view.names()     # indexed once for the cycle
    with pytest.raises(UnknownTarget) as miss:
        view.explain("mine/api-4999x")
    assert miss.value.suggestion is not None and miss.value.suggestion.startswith("mine/api-")  # a near one: not every one is compared
