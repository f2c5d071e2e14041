"""Starvation named, invalid objects named, pods of deleted nodes counted nowhere (issue 20).

A queue guarantee larger than the cluster starves every other queue: the waiting pods say whose
guarantee holds their room, `unmet_promises` names the promise, the scheduler logs it once, sets
the gauge and (on a cluster) records Events. A Queue the cache could not read, or one whose
parent is missing or in a cycle, makes its jobs wait with that reason, not "does not exist"
or "not a leaf queue". A pod bound to a node that no longer exists counts in no queue.
"""

from __future__ import annotations

import logging

import pytest

from runtime.engine.cycle import Options, open_session, run_cycle
from runtime.kube.cache import NODES, PODGROUPS, PODS, QUEUES, ClusterCache
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.kube.metrics import Metrics
from runtime.cluster.model import QUEUE_ANNOTATION, ClusterState, Pod, QueueObject
from runtime.engine.queueshare import overused_reason, unmet_promises
from tests.runtime.runtime_helpers import STANDARD_TIERS, gang, node, pod, policy

PLAN = policy(STANDARD_TIERS)
CAPACITY_PLAN = policy(STANDARD_TIERS.replace("plugin proportion", "plugin capacity"))
NO_SHARES_PLAN = policy(STANDARD_TIERS.replace("  plugin proportion\n", ""))
KERNELS = [False, True]   # compiled, pure Python


def starved_cluster() -> ClusterState:
    """The issue's repro: an empty Queue guaranteeing 1,000 CPUs on a 32-CPU cluster."""
    state = ClusterState()
    for i in range(4):
        node(state, f"n{i}", cpu=8000)
    state.add_queue(QueueObject("big", guarantee={"cpu": 1_000_000}))
    state.add_queue(QueueObject("offline"))
    return state


@pytest.mark.parametrize("queues, cpu, expected, shortfalls", [
    # (name, parent, guarantee cpu, deserved cpu), cluster cpu (cores)
    ([("big", None, 1000, None)], 32,
     ["guarantee of cpu 1000 (big 1000) cannot be met: the cluster has 32; the other queues under root get no cpu"],
     {"big": 968}),
    ([("a", None, 20, None), ("b", None, 20, None)], 32,
     ["guarantees of cpu 40 (a 20, b 20) cannot be met: the cluster has 32; the other queues under root get no cpu"],
     {"a": 8, "b": 8}),
    ([("a", None, 16, None), ("b", None, 16, None)], 32, [], {}),
    # A parent without capability has the cluster less its siblings' guarantees as its room.
    ([("p", None, 8, None), ("c1", "p", 6, None), ("c2", "p", 6, None)], 32, [], {}),
    ([("p", None, 8, None), ("c1", "p", 12, None), ("c2", "p", 12, None), ("s", None, 10, None)], 32,
     ["guarantees of cpu 24 (c1 12, c2 12) cannot be met: queue p has 22; the other queues under p get no cpu"],
     {"c1": 2, "c2": 2}),
    ([("d", None, None, 40)], 32,
     ["deserved of cpu 40 (d 40) cannot be met: the cluster has 32; the other queues under root get no cpu"],
     {"d": 8}),
    ([("d", None, None, 40)], 32, [], {}),      # deserved means nothing to proportion (PD212)
])
def test_unmet_promises_name_the_queues_and_the_room(queues, cpu, expected, shortfalls) -> None:
    state = ClusterState()
    node(state, "n0", cpu=cpu * 1000, memory=2**40)
    for name, parent, guarantee, deserved in queues:
        state.add_queue(QueueObject(name, parent=parent, guarantee={"cpu": guarantee * 1000} if guarantee else None,
                                    deserved={"cpu": deserved * 1000} if deserved else None))
    plan = CAPACITY_PLAN if expected and expected[0].startswith("deserved") else PLAN
    unmet = unmet_promises(open_session(plan, state).snap)
    assert [p.describe() for p in unmet] == expected
    got = {name: p.shortfall(amount) // 1000 for p in unmet for name, amount in p.queues}
    assert got == shortfalls


def test_without_a_queue_share_plugin_guarantees_promise_nothing() -> None:
    assert unmet_promises(open_session(NO_SHARES_PLAN, starved_cluster()).snap) == []


@pytest.mark.parametrize("pure", KERNELS)
def test_a_pod_starved_by_another_queues_guarantee_says_whose_with_figures(pure: bool) -> None:
    state = starved_cluster()
    gang(state, "job", 2, queue="offline", phase="Pending")
    pod(state, "lone")
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert decisions.bindings == []
    reasons = {u.pod: u.reasons[0].message for u in decisions.unschedulable}
    assert set(reasons) == {"ns/job-0", "ns/job-1", "ns/lone"}
    assert "queue offline may allocate 0 more" in reasons["ns/job-0"]
    assert "guaranteed to other queues 32 (big 1000)" in reasons["ns/job-0"]
    assert "guaranteed to other queues 32 (big 1000)" in reasons["ns/lone"]
    condition = next(pg for pg in decisions.podgroups if pg.name == "ns/job").conditions[0]
    assert "(big 1000)" in condition.message


def test_an_overused_queue_with_nothing_allocated_gives_the_figures() -> None:
    ssn = open_session(PLAN, starved_cluster())
    q = ssn.snap.queue_index["offline"]
    text = overused_reason(ssn, q).message
    assert text == ("queue offline is overused (at its deserved share): cpu: capability unlimited, cluster 32, "
                    "guaranteed to other queues 32 (big 1000), deserved 0, allocated 0")


@pytest.mark.parametrize("queues, queue, expected", [
    ([QueueObject("a", parent="b"), QueueObject("b", parent="a")], "a",
     "queue a cannot be used: its parents form a cycle (a → b → a)"),
    ([QueueObject("a", parent="a")], "a", "queue a cannot be used: its parents form a cycle (a → a)"),
    ([QueueObject("c", parent="ghost")], "c", "queue c cannot be used: its parent ghost does not exist"),
    ([QueueObject("p", parent="ghost"), QueueObject("c", parent="p")], "c",
     "queue c cannot be used: its ancestor p's parent ghost does not exist"),
    ([QueueObject("w", problem="`spec.weight` must be 0..65535, found 70000")], "w",
     "queue w is invalid: `spec.weight` must be 0..65535, found 70000"),
])
@pytest.mark.parametrize("pure", KERNELS)
@pytest.mark.parametrize("phase", ["Pending", "Inqueue"])
def test_jobs_of_a_broken_queue_wait_naming_the_problem(queues, queue, expected, pure, phase) -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    for q in queues:
        state.add_queue(q)
    gang(state, "job", 1, queue=queue, phase=phase)
    pod(state, "fine")
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert [b.pod for b in decisions.bindings] == ["ns/fine"]
    assert [(u.pod, [r.message for r in u.reasons]) for u in decisions.unschedulable] == [("ns/job-0", [expected])]


def test_a_broken_queues_guarantee_holds_no_room() -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    state.add_queue(QueueObject("lost", parent="ghost", guarantee={"cpu": 100_000}))
    pod(state, "fine")
    assert [b.pod for b in run_cycle(PLAN, state).bindings] == ["ns/fine"]


@pytest.mark.parametrize("pure", KERNELS)
@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("node_name, binds", [("gone", True), ("n0", False)])
def test_a_pod_on_a_deleted_node_counts_in_no_queue(pure: bool, fold: bool, node_name: str, binds: bool) -> None:
    plan = policy(STANDARD_TIERS + "\nqueue a {\n  capability = { cpu: 4 }\n}\n")
    state = ClusterState()
    node(state, "n0", cpu=8000)
    state.add_pod(Pod("ns", "old", {"cpu": 4000}, uid="old", node_name=node_name, phase="Running",
                      scheduler_name="volcano", annotations={QUEUE_ANNOTATION: "a"}))
    state.add_pod(Pod("ns", "new", {"cpu": 2000}, uid="new", scheduler_name="volcano",
                      annotations={QUEUE_ANNOTATION: "a"}))
    decisions = run_cycle(plan, state, Options(pure_python=pure, fold_settled=fold))
    assert [b.pod for b in decisions.bindings] == (["ns/new"] if binds else [])


def test_the_scheduler_names_starvation_once_and_sets_the_gauge(caplog) -> None:
    state = starved_cluster()
    pod(state, "lone")
    metrics = Metrics(volcano=True)
    scheduler = Scheduler(PLAN, EmbeddedCluster(state), metrics=metrics)
    with caplog.at_level(logging.INFO, logger="policydsl.scheduler"):
        for _ in range(3):
            scheduler.run_once()
    lines = [r.getMessage() for r in caplog.records if "cannot be met" in r.getMessage()]
    assert lines == ["guarantee of cpu 1000 (big 1000) cannot be met: the cluster has 32; "
                     "the other queues under root get no cpu"]
    gauge = metrics.registry.get_sample_value("policydsl_queue_unmet_promise",
                                              {"queue": "big", "resource": "cpu", "kind": "guarantee"})
    assert gauge == 968
    # None of the waiting-pod figures reads 0 while the pod waits.
    for metric, labels in (("policydsl_pods_waiting", {}), ("policydsl_queue_pending_jobs", {"queue": "default"}),
                           ("policydsl_queue_unschedulable_jobs", {"queue": "default"}),
                           ("volcano_unschedule_task_count", {"job_id": "lone"}), ("volcano_unschedule_job_count", {})):
        assert metrics.registry.get_sample_value(metric, labels) == 1, metric
    # The guarantee lowered to what the cluster holds: said so, and the series goes.
    state.queues["big"] = QueueObject("big", guarantee={"cpu": 16_000})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="policydsl.scheduler"):
        scheduler.run_once()
    assert any(r.getMessage().startswith("resolved: guarantee of cpu 1000") for r in caplog.records)
    assert metrics.registry.get_sample_value("policydsl_queue_unmet_promise",
                                             {"queue": "big", "resource": "cpu", "kind": "guarantee"}) is None


@pytest.mark.parametrize("broken, fixed, line", [
    (QueueObject("a", parent="b"), QueueObject("a"), "queue a cannot be used: its parents form a cycle (a → b → a)"),
    (QueueObject("a", parent="ghost"), QueueObject("a"), "queue a cannot be used: its parent ghost does not exist"),
    (QueueObject("a", problem="`spec.weight` must be 0..65535, found 70000"), QueueObject("a"),
     "queue a is invalid: `spec.weight` must be 0..65535, found 70000"),
])
def test_the_scheduler_logs_a_broken_queue_once_and_when_it_is_fixed(broken, fixed, line, caplog) -> None:
    state = ClusterState()
    node(state, "n0", cpu=8000)
    state.add_queue(broken)
    state.add_queue(QueueObject("b", parent="a"))
    gang(state, "job", 1, queue="a")
    scheduler = Scheduler(PLAN, EmbeddedCluster(state))
    with caplog.at_level(logging.INFO, logger="policydsl.scheduler"):
        for _ in range(3):
            scheduler.run_once()
        assert [r.getMessage() for r in caplog.records if r.getMessage() == line] == [line]
        state.queues["a"], state.queues["b"] = fixed, QueueObject("b")
        scheduler.run_once()
    assert f"resolved: {line}" in [r.getMessage() for r in caplog.records]
    assert state.pods["ns/job-0"].node_name == "n0"


@pytest.mark.parametrize("pure", KERNELS)
def test_a_queue_of_weight_0_is_shared_nothing_and_says_so(pure, caplog) -> None:
    # Volcano's scheduler takes weight 0 (its tests build such queues; its CRD refuses them on a
    # cluster): proportion shares it nothing beyond its guarantee. Its jobs wait with the weight
    # among the figures, and the scheduler says once what the weight means.
    state = ClusterState()
    node(state, "n0", cpu=8000)
    state.add_queue(QueueObject("w", weight=0))
    state.add_queue(QueueObject("kept", weight=0, guarantee={"cpu": 2000, "memory": 2 << 30}))
    gang(state, "job", 1, queue="w")
    gang(state, "held", 1, queue="kept")
    decisions = run_cycle(PLAN, state, Options(pure_python=pure))
    assert [b.pod for b in decisions.bindings] == ["ns/held-0"]      # its guarantee still holds
    [(waiting, reasons)] = [(u.pod, [r.message for r in u.reasons]) for u in decisions.unschedulable]
    assert waiting == "ns/job-0" and "deserved 0 (weight 0)" in reasons[0], reasons
    # Without a plugin that shares by weight the weight means nothing: the job runs, nothing is said.
    assert [b.pod for b in run_cycle(NO_SHARES_PLAN, state, Options(pure_python=pure)).bindings] == \
        ["ns/held-0", "ns/job-0"]
    line = "queue w has weight 0: it is shared nothing beyond its guarantee (Volcano's Queue CRD requires a weight " \
           "of at least 1)"
    scheduler = Scheduler(PLAN, EmbeddedCluster(state))
    with caplog.at_level(logging.INFO, logger="policydsl.scheduler"):
        for _ in range(3):
            scheduler.run_once()
    assert [r.getMessage() for r in caplog.records if r.getMessage() == line] == [line]


# --- the connector's cache --------------------------------------------------------------

def _cache() -> ClusterCache:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]  # never started
    with cache._lock:
        cache._upsert(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}})
    return cache


def _pod(name: str, node_name: str | None = None, group: str | None = None) -> dict:
    meta = {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": "1",
            "annotations": {"scheduling.k8s.io/group-name": group} if group else {}}
    spec = {"schedulerName": "volcano", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


@pytest.mark.parametrize("obj, kind, key, message", [
    ({"apiVersion": "scheduling.volcano.sh/v1beta1", "metadata": {"name": "w", "uid": "qu", "resourceVersion": "5"},
      "spec": {"weight": 70000}}, "Queue", "w", "`spec.weight` must be 0..65535, found 70000"),
    ({"apiVersion": "scheduling.volcano.sh/v1beta1",
      "metadata": {"name": "g", "namespace": "ns", "uid": "gu", "resourceVersion": "5"},
      "spec": {"minMember": 1, "minResources": {"cpu": "-1"}}}, "PodGroup", "ns/g", "cpu"),
])
def test_the_cache_keeps_invalid_objects_named(obj, kind, key, message, caplog) -> None:
    cache = _cache()
    resource = {"Queue": QUEUES, "PodGroup": PODGROUPS}[kind]
    with caplog.at_level(logging.WARNING, logger="policydsl.kube.cache"):
        for _ in range(2):   # the same version twice: one line
            with cache._lock:
                cache._upsert(resource, obj)
    [invalid] = cache.invalid_objects()
    assert (invalid.kind, invalid.key, invalid.version) == (kind, key, "5")
    assert message in invalid.message
    assert len([r for r in caplog.records if f"{kind} {key} is invalid" in r.getMessage()]) == 1
    state = cache.snapshot()
    if kind == "Queue":   # a placeholder saying what is wrong: PodGroups naming it are told so
        assert state.queues["w"].problem == invalid.message
    else:
        assert key not in state.podgroups
    fixed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "6"},
             "spec": {"weight": 2} if kind == "Queue" else {"minMember": 1}}
    with cache._lock:
        cache._upsert(resource, fixed)
    assert cache.invalid_objects() == []


def test_pods_of_a_deleted_node_leave_the_settled_counts() -> None:
    cache = _cache()
    with cache._lock:
        cache._upsert(PODS, _pod("p", "n0"))
    assert "ns/p" not in cache.snapshot(fold_settled=True).pods    # settled: counted, not listed
    with cache._lock:
        cache._delete(NODES, {"metadata": {"name": "n0"}})
    assert "ns/p" in cache.snapshot(fold_settled=True).pods        # in play: the scan counts it nowhere
    with cache._lock:   # the node back (a late listing): settled again
        cache._upsert(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}})
    assert "ns/p" not in cache.snapshot(fold_settled=True).pods


def test_a_pod_listed_before_its_node_settles_once_the_node_arrives() -> None:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]
    with cache._lock:
        cache._upsert(PODS, _pod("p", "n0"))
    assert "ns/p" in cache.snapshot(fold_settled=True).pods
    with cache._lock:
        cache._upsert(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}})
    assert "ns/p" not in cache.snapshot(fold_settled=True).pods

