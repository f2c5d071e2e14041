"""A job with sub-groups preempts on a real API server (issue 27; runtime/engine/actions/bundles.py
`within_sub_groups`): low pods fill two tier-1 switches; a high PodGroup whose `spec.subGroupPolicy`
asks each sub-group of 2 to stay within tier 1 evicts the two low pods of one switch through the
Eviction API, is reserved there, and binds there once the kubelet stand-in has removed them. The
placement is checked from what the API server holds (pods, nodes, HyperNodes), and the scheduler's
eviction audit counts both evictions bought."""

from __future__ import annotations

import pytest
from runtime_helpers import STANDARD_TIERS

from .connector_helpers import VOLCANO, FakeKubelet, InProcess, Objects, unique_scheduler_name, wait_for
from .test_connector_hypernodes import create_hypernode, within_one

pytestmark = pytest.mark.integration

POLICY = 'policy "sub-group-preempt" version 1\nactions [enqueue, allocate, preempt, backfill]\n' + STANDARD_TIERS
PARTITION = "volcano.sh/partition-id"


def test_a_sub_group_preempts_within_one_switch(objects: Objects, in_process) -> None:
    ns, name = objects.namespace, unique_scheduler_name()
    objects.priority_class(f"{ns}-low", 10)
    objects.priority_class(f"{ns}-high", 1000)
    nodes = [f"{ns}-n{i}" for i in range(1, 5)]
    for node in nodes:
        objects.node(node, cpu="2", memory="8Gi")
    create_hypernode(objects, f"{ns}-s1", 1, nodes[:2])
    create_hypernode(objects, f"{ns}-s2", 1, nodes[2:])
    create_hypernode(objects, f"{ns}-spine", 2, [f"{ns}-s1", f"{ns}-s2"], "HyperNode")
    for i in range(4):
        objects.podgroup(f"low{i}", 1)
        objects.pod(f"low{i}", name, cpu="2", group=f"low{i}", priority_class=f"{ns}-low")
    scheduler: InProcess = in_process(name, POLICY)
    wait_for(lambda: scheduler.sees(ns, 4, nodes=4), "the cache to see the low pods", 10)
    with FakeKubelet(objects.api, ns) as kubelet:
        scheduler.cycle_until(lambda: len(objects.bound()) == 4, 15, "the low pods to be bound")
        wait_for(lambda: all(p["status"]["phase"] == "Running" for p in objects.pods().values()),
                 "the low pods to run", 10)
        objects.api.post(f"{VOLCANO}/namespaces/{ns}/podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "high"},
            "spec": {"minMember": 2, "queue": "default", "priorityClassName": f"{ns}-high",
                     "subGroupPolicy": [{"name": "part", "subGroupSize": 2, "matchLabelKeys": [PARTITION],
                                         "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]}})
        high = ["high-0", "high-1"]
        for pod in high:
            objects.pod(pod, name, cpu="2", group="high", priority_class=f"{ns}-high", labels={PARTITION: "0"})
        wait_for(lambda: scheduler.sees(ns, 6), "the cache to see the high pods", 10)

        def preempted() -> bool:
            return bool(scheduler.cycle().decisions.evictions)

        try:
            wait_for(preempted, "the high job to preempt", 20, interval=0.2)
        except AssertionError as exc:       # say why: the pods' reasons
            reasons = {u.pod: [r.message for r in u.reasons] for u in scheduler.cycle().decisions.unschedulable}
            raise AssertionError(f"{exc}: {reasons}") from None
        scheduler.cycle_until(lambda: all(objects.bound().get(p) for p in high), 30, "the high pods to be bound")
        switch = within_one(objects.api, objects.pods(), high, 1)
        assert switch in (f"{ns}-s1", f"{ns}-s2"), {p: objects.bound().get(p) for p in high}
        assert len(kubelet.deleted) == 2
    audit = scheduler.scheduler.audit
    assert (audit.bought, audit.wasted, audit.repeats, audit.exchanges) == (2, 0, 0, 0)
