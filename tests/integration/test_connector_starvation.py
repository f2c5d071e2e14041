"""Starvation and broken objects named, on the dev cluster (issue 20): a Queue guaranteeing
1,000 CPUs on a 32-CPU cluster, a PodGroup with a negative minResources, Queues of weight 0 or
in a parent cycle, and a pod left bound to a deleted node. Each case: the reason on the pods,
an Event on the object at fault, one log line (not one per cycle), and the metric."""

from __future__ import annotations

import logging
import uuid

import pytest

from polling import wait_for

from runtime.kube.api import KubeApi

from .connector_helpers import VOLCANO, InProcess, Objects, pod_body, unique_scheduler_name

pytestmark = pytest.mark.integration


def reasons_of(cycle, namespace: str) -> dict[str, list[str]]:
    return {item.pod.split("/", 1)[1]: [r.message for r in item.reasons] for item in cycle.decisions.unschedulable
            if item.pod.startswith(namespace + "/")}


def queue_events(api: KubeApi, queue: str, reason: str) -> list[dict]:
    """Events of a cluster-scoped Queue live in namespace default."""
    items = api.get("/api/v1/namespaces/default/events")["items"]
    return [e for e in items if e["involvedObject"]["kind"] == "Queue" and e["involvedObject"]["name"] == queue
            and e["reason"] == reason]


def logged(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_guarantee_larger_than_the_cluster_is_named_on_the_queue_the_pods_and_the_metrics(
        objects: Objects, kube_api: KubeApi, in_process, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="policydsl")
    name = unique_scheduler_name()
    ns = objects.namespace
    big, offline = f"big-{uuid.uuid4().hex[:6]}", f"offline-{uuid.uuid4().hex[:6]}"
    for i in range(4):
        objects.node(f"{ns}-n{i}", cpu="8", memory="32Gi")
    objects.queue(big, {"weight": 1, "guarantee": {"resource": {"cpu": "1000"}}})   # empty, and never used
    objects.queue(offline, {"weight": 1})
    objects.gang("job", 2, name, queue=offline)
    objects.pod("lone", name)
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(ns, 3) and {big, offline} <= set(scheduler.cluster.cache.queue_objects_by_name()),
             "the cache", 10)

    for _ in range(4):
        cycle = scheduler.cycle()
        assert cycle.decisions.bindings == []
    reasons = reasons_of(cycle, ns)
    assert set(reasons) == {"job-0", "job-1", "lone"}
    for pod in reasons:
        assert "guaranteed to other queues 32 (" + big + " 1000)" in reasons[pod][0], reasons[pod]
    promise = (f"guarantee of cpu 1000 ({big} 1000) cannot be met: the cluster has 32; "
               "the other queues under root get no cpu")
    assert logged(caplog, promise) == [promise]       # once, not once per cycle

    metrics = scheduler.scheduler.metrics.registry
    assert metrics.get_sample_value("policydsl_pods_waiting") == 3
    assert metrics.get_sample_value("policydsl_queue_unmet_promise",
                                    {"queue": big, "resource": "cpu", "kind": "guarantee"}) == 968
    wait_for(lambda: queue_events(kube_api, big, "GuaranteeUnmet"), "the Queue's Event", 10)
    assert queue_events(kube_api, big, "GuaranteeUnmet")[0]["message"] == promise
    wait_for(lambda: any(big in e["message"] for e in objects.events_for("lone")
                         if e["reason"] == "FailedScheduling"), "the pod's Event", 10)
    def unschedulable() -> dict | None:
        status = scheduler.cluster.cache.podgroup_status(f"{ns}/job") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "Unschedulable"), None)

    condition = scheduler.cycle_until(unschedulable, 10, "the PodGroup's condition")
    assert condition is not None and f"({big} 1000)" in condition["message"]

    # The guarantee cut to what the cluster holds: the pods bind, the end of it is logged.
    kube_api.merge_patch(f"{VOLCANO}/queues/{big}", {"spec": {"guarantee": {"resource": {"cpu": "8"}}}})
    scheduler.cycle_until(lambda: len([p for p in objects.bound() if p in reasons]) == 3, 15, "the pods bound")
    assert logged(caplog, f"resolved: {promise}") == [f"resolved: {promise}"]
    assert metrics.get_sample_value("policydsl_queue_unmet_promise",
                                    {"queue": big, "resource": "cpu", "kind": "guarantee"}) is None


def test_an_invalid_podgroup_is_named_on_itself_and_on_its_pods(
        objects: Objects, kube_api: KubeApi, in_process, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="policydsl")
    name = unique_scheduler_name()
    ns = objects.namespace
    objects.node(f"{ns}-n0", cpu="8")
    objects.gang("bad", 2, name, min_resources={"cpu": "-1"})
    objects.pod("fine", name)
    # A member placed before its PodGroup went bad keeps its room and counts in no queue.
    objects.podgroup("was-good", 1, min_resources={"cpu": "-2"})
    placed = pod_body("was-good-0", name, cpu="3", group="was-good")
    placed["spec"]["nodeName"] = f"{ns}-n0"
    kube_api.post(f"/api/v1/namespaces/{ns}/pods", placed)
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(ns, 4), "the cache", 10)

    for _ in range(3):
        cycle = scheduler.cycle()
    assert objects.bound() == {"fine": f"{ns}-n0", "was-good-0": f"{ns}-n0"}
    assert scheduler.scheduler.metrics.registry.get_sample_value("policydsl_queue_allocated_cpu_cores",
                                                                 {"queue": "default"}) == 1
    reasons = reasons_of(cycle, ns)
    assert set(reasons) == {"bad-0", "bad-1"}
    for why in reasons.values():
        assert len(why) == 1 and why[0].startswith(f"PodGroup {ns}/bad is invalid: ") and "minResources" in why[0]
        assert "does not exist" not in why[0]
    said = logged(caplog, f"PodGroup {ns}/bad is invalid (")
    assert len(said) == 1 and "its pods wait until it is fixed" in said[0]
    wait_for(lambda: [e for e in objects.events_for("bad", "PodGroup") if e["reason"] == "InvalidPodGroup"],
             "the PodGroup's Event", 10)
    wait_for(lambda: [e for e in objects.events_for("bad-0") if e["reason"] == "FailedScheduling"
                      and "is invalid" in e["message"]], "the pod's Event", 10)

    # Fixed: its pods bind.
    kube_api.merge_patch(f"{VOLCANO}/namespaces/{ns}/podgroups/bad", {"spec": {"minResources": {"cpu": "2"}}})
    scheduler.cycle_until(lambda: {"bad-0", "bad-1"} <= set(objects.bound()), 15, "the gang bound")


def test_queues_of_weight_0_or_in_a_parent_cycle_make_their_jobs_wait_saying_so(
        objects: Objects, kube_api: KubeApi, in_process, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="policydsl")
    name = unique_scheduler_name()
    ns = objects.namespace
    tag = uuid.uuid4().hex[:6]
    zero, a, b = f"zero-{tag}", f"a-{tag}", f"b-{tag}"
    objects.node(f"{ns}-n0", cpu="8")
    objects.queue(zero, {"weight": 0})
    objects.queue(a, {"weight": 1, "parent": b})
    objects.queue(b, {"weight": 1, "parent": a})
    objects.gang("in-zero", 1, name, queue=zero)
    objects.gang("in-a", 1, name, queue=a)
    objects.pod("fine", name)
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(ns, 3) and {zero, a, b} <= set(scheduler.cluster.cache.queue_objects_by_name()),
             "the cache", 10)

    for _ in range(3):
        cycle = scheduler.cycle()
    assert objects.bound() == {"fine": f"{ns}-n0"}
    # Weight 0 is taken, as Volcano's scheduler takes it: shared nothing, its figures say why.
    weight = (f"queue {zero} has weight 0: it is shared nothing beyond its guarantee (Volcano's Queue CRD "
              f"requires a weight of at least 1)")
    loop = f"queue {a} cannot be used: its parents form a cycle ({a} → {b} → {a})"
    reasons = reasons_of(cycle, ns)
    assert reasons["in-a-0"] == [loop]
    assert len(reasons["in-zero-0"]) == 1 and "deserved 0 (weight 0)" in reasons["in-zero-0"][0], reasons
    assert logged(caplog, weight) == [weight] and logged(caplog, loop) == [loop]
    for queue, reason, message in ((zero, "ZeroWeight", weight), (a, "InvalidQueue", loop)):
        wait_for(lambda: queue_events(kube_api, queue, reason), f"the Event on Queue {queue}", 10)
        assert queue_events(kube_api, queue, reason)[0]["message"] == message


def test_a_pod_on_a_deleted_node_no_longer_counts_against_its_queue(
        objects: Objects, kube_api: KubeApi, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    capped = f"capped-{uuid.uuid4().hex[:6]}"
    objects.queue(capped, {"weight": 1, "capability": {"cpu": "4"}})
    objects.node(f"{ns}-old", cpu="4")
    objects.node(f"{ns}-new", cpu="4")
    in_queue = {"scheduling.volcano.sh/queue-name": capped}
    old = pod_body("old", name, cpu="4")
    old["metadata"]["annotations"] = in_queue
    old["spec"]["nodeName"] = f"{ns}-old"          # bound (no kubelet here: it stays Pending)
    kube_api.post(f"/api/v1/namespaces/{ns}/pods", old)
    new = pod_body("new", name, cpu="4")
    new["metadata"]["annotations"] = in_queue
    kube_api.post(f"/api/v1/namespaces/{ns}/pods", new)
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(ns, 2), "the cache", 10)

    cycle = scheduler.cycle()
    assert cycle.decisions.bindings == []      # the queue is at its capability
    assert f"queue {capped} may allocate 0 more" in reasons_of(cycle, ns)["new"][0]
    kube_api.delete(f"/api/v1/nodes/{ns}-old")   # no pod garbage collector here: the pod stays
    objects.nodes.remove(f"{ns}-old")
    scheduler.cycle_until(lambda: objects.bound().get("new") == f"{ns}-new", 15, "the new pod bound")
