"""The Event on an evicted pod names nothing of another namespace: its preemptor by UID, as
kube-scheduler's "Preempted by pod <uid> on node <node>" (runtime/kube/events.py,
victim_message); the engine's reason, an operator's view, still names it by namespace/name."""

from __future__ import annotations

from runtime.cluster.model import ClusterState
from runtime.kube.api import KubeApi
from runtime.kube.cluster import KubeCluster
from runtime.kube.evictor import EVICTED, EvictOutcome
from runtime_helpers import GiB, STANDARD_TIERS, cycle, gang, node, policy


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def record(self, obj, type_, reason, message) -> bool:
        self.events.append((obj.namespace, obj.name, reason, message))
        return True


def _apply_evictions(decisions, state: ClusterState) -> list[tuple]:
    kube = KubeCluster(KubeApi.__new__(KubeApi), "policydsl", identity="test")
    try:
        kube.events = recorder = Recorder()
        kube.evictor.evict_all = lambda evictions, pods: [EvictOutcome(e.pod, EVICTED) for e in evictions]
        kube.cache.assume_releasing = lambda key: None
        kube._evict(decisions.evictions, state.pods, type("Report", (), {"evicted": 0})())
    finally:
        kube.binds.shutdown(wait=False)
        kube.writes.shutdown(wait=False)
    return recorder.events


def test_a_preempted_pod_learns_its_preemptors_uid_not_its_name():
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate, preempt, backfill")
    state = ClusterState()
    node(state, "b", cpu=4000, memory=64 * GiB)
    gang(state, "big", size=1, cpu=4000, priority=2, nodes=["b"], ns="tenant-a")
    gang(state, "secret-project", size=1, cpu=3000, priority=100, ns="tenant-b")
    decisions = cycle(plan, state)
    assert [e.pod for e in decisions.evictions] == ["tenant-a/big-0"]
    # the operator's view keeps the name
    assert decisions.evictions[0].reason.message == "preempted by tenant-b/secret-project-0 (priority 100)"
    events = _apply_evictions(decisions, state)
    assert events == [("tenant-a", "big-0", "Preempted", "Preempted by pod uid-tenant-b-secret-project-0 on node b")]
    assert all("tenant-b" not in str(e).replace("uid-tenant-b", "") and "secret" not in str(e).replace(
        "uid-tenant-b-secret", "") for e in events)


def test_a_reclaimed_pod_learns_the_queue_and_its_reclaimers_uid():
    plan = policy(STANDARD_TIERS + "queue a { weight = 1 }\nqueue b { weight = 1 }",
                  actions="enqueue, allocate, reclaim, backfill")
    state = ClusterState()
    node(state, "n", cpu=4000, memory=64 * GiB)
    for i in range(4):
        gang(state, f"hog{i}", size=1, cpu=1000, queue="a", nodes=["n"], ns="tenant-a")
    gang(state, "secret-project", size=1, cpu=1000, queue="b", ns="tenant-b")
    decisions = cycle(plan, state)
    assert decisions.evictions and all(e.reason.message.endswith("for tenant-b/secret-project-0") for e in decisions.evictions)
    events = _apply_evictions(decisions, state)
    assert events and all(e[2] == "Reclaimed" and e[3] == "Reclaimed by queue b for pod uid-tenant-b-secret-project-0 on node n"
                          for e in events)
