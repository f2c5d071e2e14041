"""The cache's settled-pod counts (runtime.kube.settled) follow every kind of change the watch
and the scheduler's own overlays make: a snapshot that counts settled pods schedules exactly
as one that lists every pod. No API server: events go into the cache as its watch would
hand them over."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_helpers import STANDARD_TIERS, policy

from runtime.cycle import Options, run_cycle
from runtime.kernels import load as load_kernels
from runtime.kube.cache import NODES, PODGROUPS, PODS, ClusterCache
from runtime.model import GPU_INDEX_ANNOTATION, QUEUE_ANNOTATION
from runtime.snapshot import SnapshotCache, build_snapshot

from .connector_helpers import pod_body

OURS = "volcano"
PLAN = policy(STANDARD_TIERS + "queue q1 { weight = 2 }\nqueue q2 { weight = 1 capability = { cpu: 6 } }\n")
NODE_NAMES = ("n0", "n1")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pod_object(index: int, *, scheduler: str, node: str | None, phase: str, group: str | None, queue: str | None,
               cpu: str, releasing: bool, cards: bool) -> dict:
    body = pod_body(f"p{index}", scheduler, cpu=cpu, group=group)
    meta = body["metadata"]
    meta.update(namespace="ns", uid=f"uid-{index}", creationTimestamp=f"2026-11-29T10:00:{index % 60:02d}Z")
    if queue:
        meta["annotations"][QUEUE_ANNOTATION] = queue
    if cards:
        meta["annotations"][GPU_INDEX_ANNOTATION] = "0"
    if releasing:
        meta["deletionTimestamp"] = "2026-11-29T11:00:00Z"
    if node:
        body["spec"]["nodeName"] = node
    body["status"] = {"phase": phase}
    return body


def upserts(index: int):
    objects = st.builds(
        partial(pod_object, index),
        scheduler=st.sampled_from([OURS, OURS, "someone-else"]),
        node=st.sampled_from([None, None, "n0", "n1", "gone-node"]),
        phase=st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]),
        group=st.sampled_from([None, None, None, "g"]),
        queue=st.sampled_from([None, "q1", "q2", "nowhere"]),
        cpu=st.sampled_from(["500m", "1", "2"]),
        releasing=st.sampled_from([False, False, True]),
        cards=st.sampled_from([False, False, False, True]),
    )
    return objects.map(lambda obj: ("upsert", index, obj))


steps = st.lists(st.one_of(
    st.integers(0, 5).flatmap(upserts),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("assume_bound"), st.integers(0, 5), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("assume_releasing"), st.integers(0, 5)),
    st.tuples(st.just("forget_assumed"), st.integers(0, 5)),
    st.tuples(st.just("relist")),
), max_size=40)


def new_cache() -> ClusterCache:
    cache = ClusterCache(api=None, scheduler_name=OURS)  # type: ignore[arg-type]  # never started
    with cache._lock:
        for name in NODE_NAMES:
            cache._upsert(NODES, {"metadata": {"name": name},
                                  "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
        cache._upsert(PODGROUPS, {"metadata": {"name": "g", "namespace": "ns", "uid": "pg-g"},
                                  "spec": {"minMember": 2, "queue": "q1"}})
    return cache


def play(cache: ClusterCache, script: list[tuple], after_each=lambda: None) -> None:
    server: dict[str, dict] = {}   # what a relist would return
    for step in script:
        kind = step[0]
        key = f"ns/p{step[1]}" if kind != "relist" else ""
        if kind == "upsert":
            server[key] = step[2]
            with cache._lock:
                cache._upsert(PODS, step[2])
        elif kind == "delete" and key in server:
            with cache._lock:
                cache._delete(PODS, server.pop(key))
        elif kind == "assume_bound":
            cache.assume_bound(key, step[2], {})
        elif kind == "assume_releasing":
            cache.assume_releasing(key)
        elif kind == "forget_assumed":
            cache.forget_assumed(key)
        elif kind == "relist":
            cache._replace(PODS, list(server.values()))
        after_each()


def same_snapshot(counted, listed) -> None:
    assert counted.resources == listed.resources
    for field in ("used", "releasing", "request", "status", "task_node", "total"):
        assert np.array_equal(getattr(counted, field), getattr(listed, field)), field
    assert counted.task_keys == listed.task_keys
    assert counted.foreign_pods == listed.foreign_pods
    assert counted.settled_pods == listed.settled_pods
    assert (counted.settled is None) == (listed.settled is None)
    if counted.settled is not None:
        assert np.array_equal(counted.settled, listed.settled)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@SETTINGS
@given(script=steps)
def test_counted_and_listed_snapshots_schedule_alike(pure: bool, script: list[tuple]) -> None:
    cache = new_cache()
    kernels = load_kernels(pure)

    def compare() -> None:
        counted_state, listed_state = cache.snapshot(fold_settled=True), cache.snapshot()
        assert set(counted_state.pods) <= set(listed_state.pods)
        same_snapshot(build_snapshot(counted_state, PLAN, OURS, SnapshotCache(), kernels, True),
                      build_snapshot(listed_state, PLAN, OURS, SnapshotCache(), kernels, True))

    play(cache, script, after_each=compare)
    options = Options(pure_python=pure, fold_settled=True)
    assert run_cycle(PLAN, cache.snapshot(fold_settled=True), options) == run_cycle(PLAN, cache.snapshot(), options)


def test_a_settled_pod_leaves_the_listed_pods_and_comes_back_when_it_changes() -> None:
    cache = new_cache()
    bound = pod_object(1, scheduler=OURS, node="n0", phase="Running", group=None, queue="q1", cpu="1",
                       releasing=False, cards=False)
    waiting = pod_object(2, scheduler=OURS, node=None, phase="Pending", group=None, queue="q1", cpu="1",
                         releasing=False, cards=False)
    play(cache, [("upsert", 1, bound), ("upsert", 2, waiting)])
    state = cache.snapshot(fold_settled=True)
    assert list(state.pods) == ["ns/p2"]
    assert state.settled.by_queue == {("q1", (("cpu", 1000), ("memory", 2**30))): 1}
    assert state.settled.by_node == {("n0", (("cpu", 1000), ("memory", 2**30)), True): 1}
    # An eviction the watch has not shown yet keeps the pod in play, overlaid as releasing.
    cache.assume_releasing("ns/p1")
    state = cache.snapshot(fold_settled=True)
    assert state.pods["ns/p1"].releasing and state.settled.by_node == {}
    # Deleted: counted nowhere.
    play(cache, [("delete", 1)])
    assert cache.snapshot(fold_settled=True).settled.by_queue == {}


def test_a_counted_state_needs_a_plan_that_folds() -> None:
    cache = new_cache()
    state = cache.snapshot(fold_settled=True)
    with pytest.raises(ValueError, match="only a plan that folds them"):
        build_snapshot(state, PLAN, OURS, SnapshotCache(), fold_settled=False)
