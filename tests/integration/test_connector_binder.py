"""Binding on a real API server: races with deletions and other schedulers, failed binds in a
gang, device cards as annotations."""

from __future__ import annotations

import pytest

from polling import wait_for

from runtime.engine.cycle import run_cycle
from runtime.kube.api import ApiError

from .connector_helpers import GANG_POLICY, InProcess, Objects, unique_scheduler_name

pytestmark = pytest.mark.integration


def test_pod_deleted_or_bound_elsewhere_meanwhile_is_dropped(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    for i in range(2):
        objects.node(f"{objects.namespace}-n{i}", cpu="8", memory="16Gi")
    for pod in ("a", "b", "c"):
        objects.pod(pod, name)
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 3), "the cache to see the pods", 10)
    state = scheduler.cluster.snapshot()
    decisions = run_cycle(scheduler.scheduler.plan, state, scheduler.scheduler.options)
    assert len(decisions.bindings) == 3

    # Between the decision and the binds: `a` is deleted, `b` is bound by somebody else.
    ns = objects.namespace
    objects.api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/a", query={"gracePeriodSeconds": "0"})
    elsewhere = f"{ns}-n1" if decisions.binding_of(f"{ns}/b").node == f"{ns}-n0" else f"{ns}-n0"
    objects.api.post(f"/api/v1/namespaces/{ns}/pods/b/binding",
                     {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": elsewhere}})

    assert scheduler.cluster.apply(decisions, state, {}).binding == 3
    binds = scheduler.cluster.drain(timeout=30)

    assert (binds.bound, binds.refused, binds.failed) == (1, 2, 0)
    assert objects.bound() == {"b": elsewhere, "c": decisions.binding_of(f"{ns}/c").node}
    # The next cycle has nothing left to do and binds nothing twice.
    wait_for(lambda: scheduler.cluster.cache.pod(f"{ns}/b").node_name == elsewhere, "the watch to show b bound", 10)
    assert scheduler.cycle().decisions.bindings == []


class FailingBinds:
    """Stands in for the API the binder uses: Binding posts for the named pods fail with 500."""

    def __init__(self, api, pods: set[str]) -> None:
        self.api, self.pods, self.attempts = api, pods, 0

    def post(self, path: str, body):
        if path.endswith("/binding") and body["metadata"]["name"] in self.pods:
            self.attempts += 1
            raise ApiError(500, "Internal Server Error", "injected failure")
        return self.api.post(path, body)

    def post_many(self, requests: list[tuple[str, dict]], allowed=None) -> list | None:
        if allowed is not None and not allowed():
            return None
        failing = [path.endswith("/binding") and body["metadata"]["name"] in self.pods for path, body in requests]
        self.attempts += sum(failing)
        answers = iter(self.api.post_many([r for r, fails in zip(requests, failing) if not fails]))
        return [ApiError(500, "Internal Server Error", "injected failure") if fails else next(answers)
                for fails in failing]


def test_failed_bind_in_a_gang_is_reported_and_repaired_next_cycle(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    for i in range(4):
        objects.node(f"{objects.namespace}-n{i}", cpu="4", memory="16Gi")
    pods = objects.gang("job", 8, name, cpu="2", memory="1Gi")
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 8), "the cache to see the gang", 10)
    failing = FailingBinds(scheduler.cluster.binder.api, {pods[3]})
    scheduler.cluster.binder.api = failing

    first = scheduler.cycle()

    assert (first.binds.bound, first.binds.failed) == (7, 1)
    assert failing.attempts == scheduler.cluster.binder.attempts  # transient: retried, then given up
    assert pods[3] not in objects.bound() and len(objects.bound()) == 7
    status = objects.read_podgroup("job")["status"]
    assert status["phase"] == "Inqueue"
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [("Unschedulable", "BindFailed")]
    assert "1/8 binds of the gang failed" in status["conditions"][0]["message"]
    assert "injected failure" in status["conditions"][0]["message"]
    wait_for(lambda: objects.events_for(pods[3]), "a FailedBinding Event", 10)
    assert objects.events_for(pods[3])[0]["reason"] == "FailedBinding"

    scheduler.cluster.binder.api = failing.api
    second = scheduler.cycle()

    assert [b.pod for b in second.decisions.bindings] == [f"{objects.namespace}/{pods[3]}"]
    assert second.binds.bound == 1
    assert len(objects.bound()) == 8
    status = objects.read_podgroup("job")["status"]
    assert status["phase"] == "Running"
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [("Scheduled", "Scheduled")]


DEVICE_POLICY = GANG_POLICY.replace("plugin binpack", "plugin binpack\n  plugin deviceshare") + \
    'device "nvidia.com/gpu" { }\n'


def test_device_cards_are_on_the_pod_when_it_is_bound(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    node = f"{objects.namespace}-gpu"
    objects.node(node, cpu="16", memory="64Gi", **{"nvidia.com/gpu": "4"})
    objects.pod("two-cards", name, cpu="1", extra={"nvidia.com/gpu": "2"})
    scheduler: InProcess = in_process(name, DEVICE_POLICY)
    wait_for(lambda: scheduler.sees(objects.namespace, 1), "the cache to see the pod", 10)

    first = scheduler.cycle()

    assert first.binds.bound == 1
    pod = objects.pods()["two-cards"]
    assert pod["spec"]["nodeName"] == node
    first_cards = set(pod["metadata"]["annotations"]["volcano.sh/gpu-index"].split(","))
    assert len(first_cards) == 2

    # The cards in use come back through the watch (annotation): the next pod gets the others.
    objects.pod("two-more", name, cpu="1", extra={"nvidia.com/gpu": "2"})
    wait_for(lambda: scheduler.sees(objects.namespace, 2), "the cache to see the second pod", 10)
    wait_for(lambda: scheduler.cluster.cache.pod(f"{objects.namespace}/two-cards").node_name,
             "the watch to show the first pod bound", 10)
    second = scheduler.cycle()
    assert second.binds.bound == 1
    cards = set(objects.pods()["two-more"]["metadata"]["annotations"]["volcano.sh/gpu-index"].split(","))
    assert len(cards) == 2 and not cards & first_cards


REGISTER = "volcano.sh/node-vgpu-register"


def test_device_plugin_annotations_are_on_the_pod_as_volcano_writes_them(objects: Objects, in_process) -> None:
    """GPU share: volcano.sh/gpu-index with volcano.sh/predicate-time; HAMi vGPU: vgpu-ids-new,
    devices-to-allocate, vgpu-node, vgpu-time, bind-time, bind-phase (the node's register read from
    the connector's cache). All ride on the Binding, so the API server puts them on the pod as it
    binds it (issue 28)."""
    name = unique_scheduler_name()
    share, vgpu = f"{objects.namespace}-share", f"{objects.namespace}-vgpu"
    objects.node(share, cpu="16", memory="64Gi", **{"volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "32768"})
    objects.node(vgpu, cpu="16", memory="64Gi", **{"volcano.sh/vgpu-number": "8", "volcano.sh/vgpu-memory": "32768",
                                                   "volcano.sh/vgpu-cores": "200"})
    objects.api.merge_patch(f"/api/v1/nodes/{vgpu}", {"metadata": {"annotations": {
        REGISTER: "GPU-a,4,16384,NVIDIA-A100,true,hami-core:GPU-b,4,16384,NVIDIA-A100,true,hami-core:"}}})
    objects.pod("shared", name, cpu="1", extra={"volcano.sh/gpu-memory": "10000"})
    objects.pod("virtual", name, cpu="1", extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000",
                                                 "volcano.sh/vgpu-cores": "30"})
    policy = GANG_POLICY.replace("plugin binpack", "plugin binpack\n  plugin deviceshare { gpu_number = false }")
    for mode, pod, node in (("gpu_sharing", "shared", share), ("vgpu", "virtual", vgpu)):
        scheduler: InProcess = in_process(name, policy.replace("gpu_number = false", f"{mode} = true"))
        wait_for(lambda: scheduler.sees(objects.namespace, 2, nodes=2), "the cache to see the pods", 10)
        wait_for(lambda: REGISTER in getattr(scheduler.cluster.cache.node(vgpu), "annotations", {}),
                 "the cache to see the vGPU register", 10)
        assert scheduler.cycle().binds.bound >= 1
        body = objects.pods()[pod]
        assert body["spec"]["nodeName"] == node
        notes = body["metadata"]["annotations"]
        if mode == "gpu_sharing":
            assert notes["volcano.sh/gpu-index"] == "0"
            assert int(notes["volcano.sh/predicate-time"]) > 1_700_000_000 * 10**9
        else:
            assert notes["volcano.sh/vgpu-ids-new"] == notes["volcano.sh/devices-to-allocate"] == "GPU-a,NVIDIA,3000,30:"
            assert notes["volcano.sh/vgpu-node"] == vgpu and notes["volcano.sh/bind-phase"] == "allocating"
            assert int(notes["volcano.sh/vgpu-time"]) > 1_700_000_000 and "volcano.sh/gpu-index" not in notes
        scheduler.close()
