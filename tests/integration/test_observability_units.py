"""The autoscaler contract's and the queue publisher's logic that needs no API server: which pods
get which PodScheduled message, only on change, after the delay, within the budget; the Queue
spec a policy queue becomes, created, corrected, or a shadowing object told."""

from __future__ import annotations

from typing import Any

import pytest

from compiler.pipeline import compile_text
from runtime.cluster import decisions as d
from runtime.kube.api import ApiError
from runtime.kube.podconditions import POD_SCHEDULED, STRATEGIC_MERGE_PATCH, PodConditionWriter, waiting_messages
from runtime.kube.queuesync import MANAGED_BY, SHADOWED, QueuePublisher, queue_spec
from runtime.cluster.model import ClusterState, Condition, Pod, PodGroup


class FakeApi:
    def __init__(self, objects: dict[str, dict] | None = None) -> None:
        self.calls: list[tuple[str, str, Any, str]] = []
        self.objects = objects or {}

    def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                **_: Any) -> Any:
        self.calls.append((method, path, body, content_type))
        if method == "GET":
            if path not in self.objects:
                raise ApiError(404, "Not Found", "not found")
            return self.objects[path]
        return {}

    def get(self, path: str, query: Any = None, timeout: float = 0) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[Any, str, str, str]] = []

    def record(self, obj: Any, type_: str, reason: str, message: str) -> bool:
        self.recorded.append((obj, type_, reason, message))
        return True


def gang_state() -> ClusterState:
    state = ClusterState()
    state.podgroups["ns/g"] = PodGroup("ns", "g", min_member=3, queue="default")
    state.podgroups["ns/p"] = PodGroup("ns", "p", min_member=4, queue="default")
    for i in range(3):
        state.pods[f"ns/g-{i}"] = Pod("ns", f"g-{i}", {"cpu": 2000}, uid=f"uid-g{i}", group="g")
    state.pods["ns/p-0"] = Pod("ns", "p-0", {"cpu": 1000}, uid="uid-p0", group="p")
    state.pods["ns/gated"] = Pod("ns", "gated", {"cpu": 1000}, uid="uid-gated", scheduling_gates=("wait",))
    state.pods["ns/preemptor"] = Pod("ns", "preemptor", {"cpu": 1000}, uid="uid-pre")
    return state


GANG = "3/3 tasks in gang unschedulable: 0/2 nodes are available: 2 Insufficient cpu."


def gang_decisions() -> d.Decisions:
    nodes = d.Reason(d.NODES, "0/2 nodes are available: 2 Insufficient cpu.")
    gang = d.Reason(d.GANG, "gang short by 3 (0/3)")
    return d.Decisions(
        unschedulable=[d.Unschedulable("ns/g-0", (nodes, gang)), d.Unschedulable("ns/g-1", (gang,)),
                       d.Unschedulable("ns/g-2", (gang,)),
                       d.Unschedulable("ns/p-0", (d.Reason(d.MEMBERS, "gang has 1 of 4 pods (minMember)"),)),
                       d.Unschedulable("ns/gated", (d.Reason(d.GATED, "waiting for scheduling gates: [wait]"),))],
        podgroups=[d.PodGroupStatus("ns/g", "Inqueue", (Condition("Unschedulable", "True", "NotEnoughResources",
                                                                  GANG),))],
        pipelined={"ns/preemptor": "n1"})


def test_every_waiting_pod_of_a_gang_says_the_gang_waits() -> None:
    messages = waiting_messages(gang_decisions(), gang_state())
    assert messages["ns/g-0"] == f"{GANG}; gang short by 3 (0/3)"
    # Pods the cycle never tried carry the gang's figures too, not just "gang short".
    assert messages["ns/g-1"] == messages["ns/g-2"] == f"{GANG}; gang short by 3 (0/3)"
    assert messages["ns/p-0"] == ("waiting for the other pods of its gang to be created: gang has 1 of 4 pods "
                                  "(minMember)")
    assert "ns/gated" not in messages     # SchedulingGated: the API server's, left alone
    assert "node n1" in messages["ns/preemptor"] and "nominatedNodeName" in messages["ns/preemptor"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_conditions_are_written_after_the_delay_once_per_message_and_within_the_budget() -> None:
    api, clock = FakeApi(), Clock()
    writer = PodConditionWriter(api, delay_s=1.0, rate=1.0, burst=3, clock=clock)
    state, decisions = gang_state(), gang_decisions()
    assert writer.due(decisions, state, lambda key: False) == []        # waited 0 s: a bind may come
    clock.now += 1.0
    due = writer.due(decisions, state, lambda key: False)
    assert len(due) == 3                                                 # the burst; the rest stay due
    for condition in due:
        assert writer.write(condition)
    method, path, body, content_type = api.calls[0]
    assert (method, content_type) == ("PATCH", STRATEGIC_MERGE_PATCH)
    assert path == f"/api/v1/namespaces/ns/pods/{due[0].pod.split('/')[1]}/status"
    (condition,) = body["status"]["conditions"]
    assert condition["type"] == POD_SCHEDULED and condition["status"] == "False"
    assert condition["reason"] == "Unschedulable" and body["metadata"]["uid"] == due[0].uid
    clock.now += 2.0                                                     # two more tokens
    later = writer.due(decisions, state, lambda key: False)
    assert {c.pod for c in later}.isdisjoint({c.pod for c in due}) and len(later) == 2
    for condition in later:
        writer.write(condition)
    clock.now += 10.0
    assert writer.due(decisions, state, lambda key: False) == []         # nothing changed: nothing written
    changed = gang_decisions()
    changed.unschedulable[0] = d.Unschedulable("ns/g-0", (d.Reason(d.NODES, "0/3 nodes are available"),))
    again = writer.due(changed, state, lambda key: False)
    assert [c.pod for c in again] == ["ns/g-0"]                          # a new message is news


def test_pods_that_stop_waiting_are_forgotten() -> None:
    api, clock = FakeApi(), Clock()
    writer = PodConditionWriter(api, delay_s=0.0, clock=clock)
    state = gang_state()
    for condition in writer.due(gang_decisions(), state, lambda key: False):
        writer.write(condition)
    assert len(writer.written()) == 5
    writer.due(d.Decisions(), state, lambda key: False)                   # all bound
    assert writer.written() == {}


def test_a_replaced_pod_is_not_written_and_not_logged_as_an_error() -> None:
    class Refusing(FakeApi):
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            raise ApiError(422, "Unprocessable Entity", "metadata.uid: field is immutable")

    writer = PodConditionWriter(Refusing(), delay_s=0.0, clock=Clock())
    (first, *_) = writer.due(gang_decisions(), gang_state(), lambda key: False)
    assert writer.write(first) is False and writer.written() == {}


def test_failed_writes_during_an_outage_are_a_line_not_one_per_pod(caplog) -> None:
    import logging

    from runtime.kube.outages import OutageLog

    class Down(FakeApi):
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            raise ApiError(0, "", "connection refused")

    clock = Clock()
    outage = OutageLog("PodScheduled writes", logging.getLogger("policydsl.kube"), clock=clock)
    writer = PodConditionWriter(Down(), delay_s=0.0, clock=clock, outage=outage)
    with caplog.at_level(logging.WARNING):
        for condition in writer.due(gang_decisions(), gang_state(), lambda key: False):
            assert writer.write(condition) is False
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith("PodScheduled writes failing: no answer"), warned
    assert outage.active and writer.written() == {}


# --- queues ---------------------------------------------------------------------------------------

POLICY = """policy "teams" version 1
actions [enqueue, allocate]
tier {
  plugin gang
  plugin proportion
  plugin predicates
}
queue teama { weight = 3  capability = { cpu: 8, memory: 16Gi }  guarantee = { cpu: 2 } }
queue teamb {
  weight = 1
  state = closed
  queue nested { weight = 2 }
}
"""


def plan():
    compilation = compile_text(POLICY, "teams.policy")
    assert compilation.plan is not None, [str(x) for x in compilation.diagnostics]
    return compilation.plan


def test_a_policy_queue_becomes_a_volcano_queue_spec() -> None:
    queues = {q.name: q for q in plan().queues}
    assert queue_spec(queues["teama"]) == {"weight": 3, "reclaimable": True,
                                            "capability": {"cpu": 8, "memory": "16Gi"},
                                            "guarantee": {"resource": {"cpu": 2}}}
    assert queue_spec(queues["nested"])["parent"] == "teamb"


def test_absent_queues_are_created_and_a_shadowing_object_is_told() -> None:
    user_made = {"metadata": {"name": "teamb", "uid": "u-1", "labels": {}}, "spec": {"weight": 9}}
    api = FakeApi({"/apis/scheduling.volcano.sh/v1beta1/queues/teamb": user_made})
    events = FakeEvents()
    cached = ["teamb", "default"]
    publisher = QueuePublisher(api, events, lambda: cached)
    publisher.sync(plan())
    created = [(path, body) for method, path, body, _ in api.calls if method == "POST"]
    assert [body["metadata"]["name"] for _, body in created] == ["teama", "nested"]
    assert created[0][1]["metadata"]["labels"] == {MANAGED_BY: "policydsl"}
    assert created[0][1]["spec"]["weight"] == 3
    states = {path: body for method, path, body, _ in api.calls if method == "PATCH" and path.endswith("/status")}
    assert states["/apis/scheduling.volcano.sh/v1beta1/queues/teama/status"] == {"status": {"state": "Open"}}
    (event,) = events.recorded
    obj, type_, reason, message = event
    assert (obj.kind, obj.name, obj.namespace, obj.uid, type_, reason) == ("Queue", "teamb", "", "u-1",
                                                                            "Warning", SHADOWED)
    assert "policy teams declares queue teamb" in message and "weight 1" in message and "closed" in message
    assert publisher.shadowed == ["teamb"] and publisher.created == ["teama", "nested"]
    # The same revision again, the cache showing what was created: nothing asked, nothing told.
    cached += ["teama", "nested"]
    calls, told = len(api.calls), len(events.recorded)
    publisher.sync(plan())
    assert api.calls[calls:] == [] and len(events.recorded) == told


def test_a_managed_queue_whose_spec_drifted_is_set_back() -> None:
    ours = {"metadata": {"name": "teama", "labels": {MANAGED_BY: "policydsl"}},
            "spec": {"weight": 1, "reclaimable": True, "capability": {"cpu": 8, "memory": "16Gi"},
                     "guarantee": {"resource": {"cpu": 2}}, "parent": "elsewhere"},
            "status": {"state": "Open"}}
    api = FakeApi({"/apis/scheduling.volcano.sh/v1beta1/queues/teama": ours})
    publisher = QueuePublisher(api, FakeEvents(), lambda: ["teama", "teamb", "nested"])
    publisher.sync(plan())
    patches = [body for method, path, body, _ in api.calls
               if method == "PATCH" and path == "/apis/scheduling.volcano.sh/v1beta1/queues/teama"]
    assert patches == [{"spec": {"weight": 3, "reclaimable": True, "capability": {"cpu": 8, "memory": "16Gi"},
                                 "guarantee": {"resource": {"cpu": 2}}, "parent": None}}]


def test_a_queue_we_made_that_the_policy_drops_goes_back_to_volcanos_defaults() -> None:
    # A reload that takes `state = closed` off `default` (no longer declared) must not leave the
    # Queue we wrote Closed: undeclared, the scheduler reads its state from the object.
    path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    ours = {"metadata": {"name": "default", "labels": {MANAGED_BY: "policydsl"}},
            "spec": {"weight": 4, "reclaimable": False, "capability": {"cpu": 2}}, "status": {"state": "Closed"}}
    users = {"metadata": {"name": "legacy", "labels": {}}, "spec": {"weight": 7}, "status": {"state": "Closed"}}
    plain = {"metadata": {"name": "plain", "labels": {MANAGED_BY: "policydsl"}},
             "spec": {"weight": 1, "reclaimable": True}, "status": {"state": "Open"}}
    api = FakeApi({f"{path}/default": ours, f"{path}/legacy": users, f"{path}/plain": plain})
    publisher = QueuePublisher(api, FakeEvents(), lambda: ["teama", "teamb", "nested", "default", "legacy", "plain",
                                                          "gone"])
    publisher.sync(plan())
    writes = [(path_, body) for method, path_, body, _ in api.calls if method == "PATCH" and "/teama" not in path_
              and "/teamb" not in path_ and "/nested" not in path_]
    assert writes == [(f"{path}/default", {"spec": {"weight": 1, "reclaimable": True, "capability": None}}),
                      (f"{path}/default/status", {"status": {"state": "Open"}})]
    calls = len(api.calls)
    publisher.sync(plan())          # the same revision: nothing asked again of the undeclared ones
    assert [c for c in api.calls[calls:] if not any(q in c[1] for q in ("/teama", "/teamb", "/nested"))] == []


def test_a_queue_whose_name_no_object_can_have_is_not_published() -> None:
    api = FakeApi()
    text = POLICY.replace("queue teama", "queue team_a")
    compilation = compile_text(text, "teams.policy")
    QueuePublisher(api, FakeEvents(), lambda: ["teamb", "nested"]).sync(compilation.plan)
    assert not [c for c in api.calls if "team_a" in c[1] or "team_a" in str(c[2])]


@pytest.mark.parametrize("may_write", [False])
def test_a_standby_publishes_nothing(may_write: bool) -> None:
    api = FakeApi()
    QueuePublisher(api, FakeEvents(), lambda: [], may_write=lambda: may_write).sync(plan())
    assert api.calls == []
