"""Hot reload against a real API server: a bad edit is an Event on the scheduler's Lease and
scheduling goes on under the last good policy; a queue the new policy removes holds its jobs
(InvalidPodGroup Event, nothing bound) until a later policy brings it back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from polling import wait_for

from .connector_helpers import GANG_POLICY, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

QUEUES = "queue team_a { weight = 1 }\nqueue team_b { weight = 1 }\n"


def write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    temp.replace(path)


def revision(scheduler: SchedulerProcess) -> str:
    status, body = scheduler.get("/policy")
    assert status == 200, body
    return json.loads(body)["revision"]


def lease_events(objects: Objects, lease: str, reason: str) -> list[dict]:
    return [e for e in objects.events_for(lease, kind="Lease") if e["reason"] == reason]


@pytest.mark.integration
def test_reload_in_connected_mode(objects: Objects, kube_cluster: KubeCluster, tmp_path: Path) -> None:
    name = unique_scheduler_name()
    lease = f"lease-{name}"
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="32Gi")
    with SchedulerProcess(tmp_path, GANG_POLICY + QUEUES, kube_cluster.kubeconfig, name, "--leader-elect",
                          "--lease-namespace", objects.namespace, "--lease-name", lease,
                          "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms") as sched:
        sched.wait_ready()
        first = revision(sched)
        objects.gang("a1", 2, name, queue="team_a", cpu="1")
        wait_for(lambda: {"a1-0", "a1-1"} <= set(objects.bound()), "a1 bound", 30)

        # A bad edit: logged located, an Event on the Lease, the last good policy goes on scheduling.
        write(sched.policy, GANG_POLICY.replace("plugin gang", "plugin gnag") + QUEUES)
        failed = wait_for(lambda: lease_events(objects, lease, "PolicyReloadFailed"), "the failure Event", 30)
        assert failed[0]["type"] == "Warning"
        assert f"{sched.policy}:5:10: error[PD102] unknown plugin `gnag`" in failed[0]["message"]
        assert f"revision {first} keeps running" in failed[0]["message"]
        assert failed[0]["involvedObject"]["uid"]  # the Lease exists (leader election): kubectl describe finds it
        assert sched.metric("policydsl_policy_reload_total", result="error") == 1
        objects.gang("a2", 2, name, queue="team_a", cpu="1")
        wait_for(lambda: {"a2-0", "a2-1"} <= set(objects.bound()), "a2 bound under the last good policy", 30)
        assert revision(sched) == first

        # team_a removed: its new gang waits, reported on its PodGroup; team_b goes on.
        write(sched.policy, GANG_POLICY + "queue team_b { weight = 1 }\n")
        wait_for(lambda: lease_events(objects, lease, "PolicyReloaded"), "the reload Event", 30)
        second = revision(sched)
        assert second != first
        objects.gang("a3", 2, name, queue="team_a", cpu="1")
        objects.gang("b1", 2, name, queue="team_b", cpu="1")
        wait_for(lambda: {"b1-0", "b1-1"} <= set(objects.bound()), "b1 bound", 30)
        invalid = wait_for(lambda: objects.events_for("a3", kind="PodGroup"), "a3's InvalidPodGroup Event", 30)
        assert invalid[0]["reason"] == "InvalidPodGroup"
        assert "names queue `team_a`, which does not exist" in invalid[0]["message"]
        cycles = sched.metric("policydsl_policy_cycles_total", revision=second)
        wait_for(lambda: sched.metric("policydsl_policy_cycles_total", revision=second) > cycles + 5, "cycles", 30)
        bound = objects.bound()
        assert "a3-0" not in bound and "a3-1" not in bound
        assert {"a1-0", "a1-1", "a2-0", "a2-1"} <= set(bound)  # running jobs of the removed queue untouched

        # team_a back, moved under a new parent: a3 is placed.
        write(sched.policy, GANG_POLICY + "queue org { weight = 1\n  queue team_a { weight = 1 }\n}\n"
                                          "queue team_b { weight = 1 }\n")
        wait_for(lambda: {"a3-0", "a3-1"} <= set(objects.bound()), "a3 bound once its queue is back", 30)
        assert sched.terminate() == 0
        log = sched.log()
    assert "Traceback" not in log
    assert re.search(r"policy connector-test revision \w+ active from cycle \d+ on", log)
