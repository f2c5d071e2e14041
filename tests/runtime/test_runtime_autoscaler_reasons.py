"""Pods that wait on quota do not ask for nodes (issue 30): the PodScheduled reason each waiting
pod gets (runtime/kube/podconditions.py, `scheduled_reason`), and a cycle's conditions read the
way Cluster Autoscaler's documented filter reads them (`kube_util.isUnschedulable`: PodScheduled
False with reason Unschedulable; anything else is left alone)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.cluster import decisions as d
from runtime.cluster.model import ClusterState
from runtime.kube.podconditions import (POD_SCHEDULED, SCHEDULER_ERROR, UNSCHEDULABLE, WAITING_FOR_QUEUE,
                                        PodConditionWriter, scheduled_reason, waiting_messages, waiting_pods,
                                        waiting_reasons)
from runtime_helpers import STANDARD_TIERS, cycle, gang, node, placements, policy

NODES = d.Reason(d.NODES, "0/2 nodes are available: 2 Insufficient cpu.")
DEVICE = d.Reason(d.DEVICE, "no card fits")
VOLUME = d.Reason(d.VOLUME, "0/2 nodes are available: 2 node(s) had volume node affinity conflict.")
GANG = d.Reason(d.GANG, "gang short by 1 (2/3)")
TOPOLOGY = d.Reason(d.GANG, "gang needs 4 task(s) within one HyperNode of tier 1", {"topology": True})
MEMBERS = d.Reason(d.MEMBERS, "gang has 1 of 3 pods (minMember)")
CAPABILITY = d.Reason(d.QUEUE, "pod needs cpu 1; queue a may allocate 0 more (capability 2, ...)", {"fixed": True})
SHARE = d.Reason(d.QUEUE, "pod needs cpu 1; queue a may allocate 0 more (deserved 4, ...)", {"fixed": False})
OVERUSED = d.Reason(d.QUEUE, "queue a is overused (at its deserved share)", {"queue": "a", "fixed": False})
CLOSED = d.Reason(d.QUEUE, "queue a is closed", {"queue": "a"})               # no `fixed`: the queue holds it
ENQUEUE = d.Reason(d.ENQUEUE, "job ns/j is not admitted yet (Pending)")
INVALID = d.Reason(d.JOB, "queue nope does not exist")
UNREACHED = d.Reason(d.JOB, "not reached this cycle", {"unreached": True})
BIND = d.Reason(d.BIND, "Binding refused: forbidden")
UNSUPPORTED = d.Reason(d.UNSUPPORTED, "pod sets spec.resourceClaims, which this scheduler does not evaluate")


@pytest.mark.parametrize("reasons, expected", [
    # Room a new node would give.
    ((NODES,), UNSCHEDULABLE),
    ((DEVICE,), UNSCHEDULABLE),
    ((VOLUME,), UNSCHEDULABLE),
    ((GANG,), UNSCHEDULABLE),
    ((TOPOLOGY,), UNSCHEDULABLE),
    ((NODES, GANG), UNSCHEDULABLE),
    ((MEMBERS,), UNSCHEDULABLE),
    ((SHARE,), UNSCHEDULABLE),                 # a share of the cluster: a node raises it
    ((OVERUSED,), UNSCHEDULABLE),
    ((SHARE, NODES), UNSCHEDULABLE),
    ((NODES, UNREACHED), UNSCHEDULABLE),       # not reached: no verdict, the other reason decides
    # The queue or admission holds it, whatever the nodes.
    ((CAPABILITY,), WAITING_FOR_QUEUE),
    ((CLOSED,), WAITING_FOR_QUEUE),
    ((ENQUEUE,), WAITING_FOR_QUEUE),
    ((INVALID,), WAITING_FOR_QUEUE),
    ((UNREACHED,), WAITING_FOR_QUEUE),
    # Mixed: node-related, but the queue would not admit it anyway.
    ((NODES, CAPABILITY), WAITING_FOR_QUEUE),
    ((CAPABILITY, GANG), WAITING_FOR_QUEUE),
    ((NODES, GANG, ENQUEUE), WAITING_FOR_QUEUE),
    ((DEVICE, CLOSED), WAITING_FOR_QUEUE),
    ((VOLUME, INVALID), WAITING_FOR_QUEUE),
    ((SHARE, CAPABILITY), WAITING_FOR_QUEUE),
    # Neither: a node would not help.
    ((BIND,), SCHEDULER_ERROR),
    ((UNSUPPORTED,), SCHEDULER_ERROR),
    ((BIND, NODES), UNSCHEDULABLE),
    ((UNSUPPORTED, CAPABILITY), WAITING_FOR_QUEUE),
], ids=lambda v: "+".join(r.kind + ("" if r.details.get("fixed", True) else "(share)") for r in v)
   if isinstance(v, tuple) else v)
def test_the_podscheduled_reason_of_each_mix_of_engine_reasons(reasons, expected) -> None:
    assert scheduled_reason(reasons) == expected


def test_only_unschedulable_is_what_autoscalers_act_on() -> None:
    # kube-scheduler's reasons that Cluster Autoscaler and Karpenter skip, and ours.
    assert {WAITING_FOR_QUEUE, SCHEDULER_ERROR} & {UNSCHEDULABLE} == set()
    assert WAITING_FOR_QUEUE not in ("", "Unschedulable", "SchedulingGated") and SCHEDULER_ERROR == "SchedulerError"


# --- a cycle, its conditions, read as Cluster Autoscaler reads them --------------------------

class FakeApi:
    def __init__(self) -> None:
        self.status: dict[str, dict] = {}

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        assert method == "PATCH" and path.endswith("/status")
        parts = path.split("/")
        self.status[f"{parts[4]}/{parts[6]}"] = body["status"]
        return {}


def ca_unschedulable(status: dict) -> bool:
    """Cluster Autoscaler's filter (utils/kubernetes/listers.go, isUnschedulable): a pod not
    scheduled whose PodScheduled condition is False with reason Unschedulable."""
    condition = next((c for c in status.get("conditions", ()) if c["type"] == POD_SCHEDULED), None)
    return condition is not None and condition["status"] == "False" and condition["reason"] == UNSCHEDULABLE


def conditions_after(plan, state: ClusterState, pure: bool) -> tuple[dict[str, dict], Any]:
    decisions = cycle(plan, state, pure)
    api = FakeApi()
    writer = PodConditionWriter(api, delay_s=0.0)   # type: ignore[arg-type]
    for condition in writer.due(decisions, state, lambda _: False):
        assert writer.write(condition)
    return api.status, decisions


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


PLAN = policy(STANDARD_TIERS + "\nqueue small { capability = { cpu: 2 } }\nqueue big { weight = 1 }")


def test_autoscaler_picks_the_pod_a_node_would_help_not_the_one_its_queue_holds(pure) -> None:
    state = ClusterState()
    node(state, "n1", cpu=4000)
    node(state, "n2", cpu=4000)
    gang(state, "held", 1, queue="small", cpu=2000, nodes=["n1"], phase="Running")   # small is at its 2 cpu
    gang(state, "quota", 1, queue="small", cpu=1000)       # fits n1 or n2: only its queue holds it
    gang(state, "wide", 1, queue="big", cpu=5000)          # no node has 5 cpu: a new node would help
    status, decisions = conditions_after(PLAN, state, pure)
    assert placements(decisions) == {}
    assert [r.kind for r in decisions.reasons_for("ns/quota-0")] == [d.QUEUE]
    assert d.NODES in [r.kind for r in decisions.reasons_for("ns/wide-0")]
    assert sorted(status) == ["ns/quota-0", "ns/wide-0"]
    assert [pod for pod, s in sorted(status.items()) if ca_unschedulable(s)] == ["ns/wide-0"]
    (quota,) = status["ns/quota-0"]["conditions"]
    assert (quota["status"], quota["reason"]) == ("False", WAITING_FOR_QUEUE)
    assert "queue small may allocate 0 more" in quota["message"]


def test_a_gang_its_queue_cannot_take_whole_asks_for_no_node_on_any_of_its_pods(pure) -> None:
    state = ClusterState()
    node(state, "n1", cpu=1000)
    gang(state, "g", 3, queue="small", cpu=1000)      # 3 cpu: small allows 2, and only one fits a node
    status, _ = conditions_after(PLAN, state, pure)
    assert sorted(status) == ["ns/g-0", "ns/g-1", "ns/g-2"]
    assert not any(ca_unschedulable(s) for s in status.values())
    assert {s["conditions"][0]["reason"] for s in status.values()} == {WAITING_FOR_QUEUE}


def test_a_gang_no_current_node_set_holds_asks_for_nodes_on_all_its_pods(pure) -> None:
    state = ClusterState()
    node(state, "n1", cpu=2000)
    gang(state, "g", 3, queue="big", cpu=1000)        # 3 cpu within big's share, 2 on the nodes
    status, _ = conditions_after(PLAN, state, pure)
    assert sorted(status) == ["ns/g-0", "ns/g-1", "ns/g-2"]
    assert all(ca_unschedulable(s) for s in status.values())


def test_a_reason_that_changes_kind_is_written_again() -> None:
    state = ClusterState()
    node(state, "n1", cpu=4000)
    gang(state, "p", 1, queue="big", cpu=1000)
    api = FakeApi()
    writer = PodConditionWriter(api, delay_s=0.0)   # type: ignore[arg-type]
    message = "same text"
    for reason, expected in ((d.Reason(d.QUEUE, message), WAITING_FOR_QUEUE),
                             (d.Reason(d.NODES, message), UNSCHEDULABLE)):
        decisions = d.Decisions(unschedulable=[d.Unschedulable("ns/p-0", (reason,))])
        assert waiting_reasons(decisions, state) == {"ns/p-0": expected}
        (condition,) = writer.due(decisions, state, lambda _: False)
        assert writer.write(condition)
        assert api.status["ns/p-0"]["conditions"][0]["reason"] == expected


def test_only_pods_that_waited_long_enough_get_a_condition_and_a_gated_one_is_forgotten() -> None:
    """Messages are made only for pods past the delay; which pods wait is the same set whose
    messages would be made (a gated pod is not one: the API server writes its condition)."""
    state = ClusterState()
    node(state, "n1", cpu=4000)
    for name in ("a", "b", "g"):
        gang(state, name, 1, queue="big", cpu=1000)
    clock = [0.0]
    api = FakeApi()
    writer = PodConditionWriter(api, delay_s=1.0, clock=lambda: clock[0])   # type: ignore[arg-type]
    early = d.Decisions(unschedulable=[d.Unschedulable("ns/a-0", (d.Reason(d.NODES, "no room"),)),
                                       d.Unschedulable("ns/g-0", (d.Reason(d.NODES, "no room"),))])
    assert writer.due(early, state, lambda _: False) == []
    clock[0] = 0.5
    later = d.Decisions(unschedulable=[*early.unschedulable,
                                       d.Unschedulable("ns/b-0", (d.Reason(d.NODES, "no room"),))])
    assert writer.due(later, state, lambda _: False) == []
    clock[0] = 1.2
    assert sorted(c.pod for c in writer.due(later, state, lambda _: False)) == ["ns/a-0", "ns/g-0"]
    for condition in writer.due(later, state, lambda _: False):
        assert writer.write(condition)
    assert sorted(writer.written()) == ["ns/a-0", "ns/g-0"]
    gated = d.Decisions(unschedulable=[d.Unschedulable("ns/a-0", (d.Reason(d.NODES, "no room"),)),
                                       d.Unschedulable("ns/g-0", (d.Reason(d.GATED, "gated"),))])
    assert set(waiting_pods(gated, state)) == set(waiting_messages(gated, state)) == {"ns/a-0"}
    writer.due(gated, state, lambda _: False)
    assert sorted(writer.written()) == ["ns/a-0"]    # g's condition is the API server's now: ours is forgotten
