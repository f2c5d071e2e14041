"""Gangs on a real API server: all-or-nothing binding, and why a gang waits."""

from __future__ import annotations

import pytest

from polling import wait_for

from .connector_helpers import InProcess, Objects, unique_scheduler_name

pytestmark = pytest.mark.integration


def test_gang_of_eight_on_four_nodes_is_bound_whole(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    nodes = [f"{objects.namespace}-n{i}" for i in range(4)]
    for node in nodes:
        objects.node(node, cpu="4", memory="16Gi")
    pods = objects.gang("train", 8, name, cpu="2", memory="1Gi")
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 8, nodes=4), "the cache to see the gang and the nodes", 10)

    report = scheduler.cycle()

    assert report.binds.bound == 8
    bound = wait_for(lambda: len(objects.bound()) == 8 and objects.bound(), "all 8 pods bound", 10)
    assert sorted(bound) == sorted(pods)
    # 2 cpu each on 4-cpu nodes: exactly two per node.
    assert sorted(list(bound.values()).count(n) for n in nodes) == [2, 2, 2, 2]
    group = wait_for(lambda: objects.read_podgroup("train").get("status", {}).get("phase") == "Running"
                     and objects.read_podgroup("train"), "PodGroup phase Running", 10)
    assert [c["type"] for c in group["status"]["conditions"]] == ["Scheduled"]


def test_gang_that_cannot_fit_leaves_every_pod_unbound_and_says_why(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    for i in range(4):
        objects.node(f"{objects.namespace}-n{i}", cpu="4", memory="16Gi")
    # 3 cpu each: one pod per node, 4 of the 8 would fit — a gang of 8 takes none.
    pods = objects.gang("too-big", 8, name, cpu="3", memory="1Gi")
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 8, nodes=4), "the cache to see the gang and the nodes", 10)

    first = scheduler.cycle()
    second = scheduler.cycle()

    assert first.binds.bound == second.binds.bound == 0
    assert objects.bound() == {}
    waiting = {u.pod for u in second.decisions.unschedulable}
    assert waiting == {f"{objects.namespace}/{p}" for p in pods}

    # A waiting condition is written once it held for a second (cluster.CONDITION_DELAY_S).
    group = scheduler.cycle_until(lambda: objects.read_podgroup("too-big").get("status", {}).get("conditions")
                                  and objects.read_podgroup("too-big"), 10, "a PodGroup condition")
    condition = group["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Unschedulable", "True",
                                                                              "NotEnoughResources")
    assert condition["message"].startswith("8/8 tasks in gang unschedulable")
    assert "4 Insufficient cpu" in condition["message"]
    assert group["status"]["phase"] in ("Pending", "Inqueue")

    events = wait_for(lambda: all(objects.events_for(p) for p in pods) and
                      {p: objects.events_for(p) for p in pods}, "an Event on every waiting pod", 10)
    assert all(e["reason"] == "FailedScheduling" and e["type"] == "Warning" for es in events.values() for e in es)
    messages = {es[0]["message"] for es in events.values()}
    # Pods beyond the four that fit say why no node takes them; the others that the gang waits.
    assert any("0/4 nodes are available: 4 Insufficient cpu" in m for m in messages), messages
    assert all("Insufficient cpu" in m or "gang" in m for m in messages), messages
    # The PodGroup carries the gang's reason too, as vc-scheduler's Unschedulable Event.
    group_events = wait_for(lambda: objects.events_for("too-big", "PodGroup"), "an Event on the PodGroup", 10)
    assert [(e["type"], e["reason"]) for e in group_events] == [("Warning", "Unschedulable")]
    assert group_events[0]["message"].startswith("8/8 tasks in gang unschedulable")
    # Later cycles find the same reasons: no second Event, no second status write.
    assert all(len(es) == 1 for es in events.values())
    assert scheduler.cycle().applied.status_writes == 0
    assert len(objects.events_for("too-big", "PodGroup")) == 1


def test_gang_short_of_pods_says_so_on_its_podgroup_not_with_an_event_per_pod(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="16Gi")
    pods = objects.gang("partial", 2, name, min_member=3, cpu="1", memory="1Gi")
    scheduler: InProcess = in_process(name)
    wait_for(lambda: scheduler.sees(objects.namespace, 2), "the cache to see the gang", 10)

    report = scheduler.cycle()

    assert report.binds.bound == 0
    assert {u.pod for u in report.decisions.unschedulable} == {f"{objects.namespace}/{p}" for p in pods}
    assert report.applied.events == 0  # none queued for the pods
    # Admitted while short of pods, as Volcano's enqueue does (its controller creates a vcjob's
    # pods only once the PodGroup is Inqueue): the phase is written once it has held for
    # ADMISSION_DELAY_S (pods created right after their PodGroup make it Running instead).
    assert objects.read_podgroup("partial").get("status", {}).get("phase") in (None, "Pending")
    scheduler.cycle_until(lambda: objects.read_podgroup("partial").get("status", {}).get("phase") == "Inqueue",
                          10, "the PodGroup Inqueue")
    group = scheduler.cycle_until(lambda: objects.read_podgroup("partial").get("status", {}).get("conditions")
                                  and objects.read_podgroup("partial"), 10, "a PodGroup condition")
    assert "gang has 2 of 3 pods" in group["status"]["conditions"][0]["message"]
    assert all(objects.events_for(p) == [] for p in pods)
    assert objects.events_for("partial", "PodGroup") == []   # waiting for its pods is no failure

    objects.pod("partial-2", name, group="partial", cpu="1", memory="1Gi")
    wait_for(lambda: scheduler.sees(objects.namespace, 3), "the third pod", 10)
    assert scheduler.cycle().binds.bound == 3
