"""Why a job waits and what a queue uses, on a real API server, as a person following
docs/observability.md sees it: the waiting gang's reason with its figures in its pods'
PodScheduled condition (the autoscaler contract), in Events, in `policydsl explain` (live and
offline), in the queue views and the Volcano-named metrics; the policy's queues as Queue
objects, a user's Queue the policy shadows told so."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from polling import wait_for

from .connector_helpers import REPO, VOLCANO, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration


def policy(team: str, other: str) -> str:
    return f"""policy "observability" version 1
actions [enqueue, allocate, backfill]
tier {{
  plugin priority
  plugin gang
}}
tier {{
  plugin drf
  plugin predicates
  plugin capacity
  plugin nodeorder
}}
queue {team} {{ weight = 1  capability = {{ cpu: 4 }} }}
queue {other} {{ weight = 1 }}
"""


def policydsl(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policydsl", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def pod_scheduled(pod: dict) -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


def ca_unschedulable(pod: dict) -> bool:
    """Cluster Autoscaler's filter (utils/kubernetes/listers.go, isUnschedulable): not bound, and
    PodScheduled False with reason Unschedulable. Karpenter reads the same."""
    condition = pod_scheduled(pod)
    return not (pod.get("spec") or {}).get("nodeName") and condition is not None and \
        condition["status"] == "False" and condition["reason"] == "Unschedulable"


def test_a_waiting_gang_says_why_everywhere(tmp_path: Path, objects: Objects, kube_cluster: KubeCluster) -> None:
    name = unique_scheduler_name()
    suffix = uuid.uuid4().hex[:6]
    team, other = f"obsteam{suffix}", f"obsother{suffix}"
    api = objects.api
    # A Queue a user made under the name of a policy queue, before the scheduler starts.
    objects.queue(other, {"weight": 9})
    objects.cluster_objects.append(f"{VOLCANO}/queues/{team}")
    for i in range(3):
        objects.node(f"{objects.namespace}-n{i}", cpu="4", memory="16Gi")
    # 3 x 2 cpu: more than the queue's capability of 4 (the cluster has 12).
    objects.gang("big", 3, name, queue=team, cpu="2", memory="1Gi")
    # A gang of 3 whose job controller has created one pod so far.
    objects.podgroup("partial", 3, team)
    objects.pod("partial-0", name, group="partial", cpu="100m", memory="64Mi")
    objects.pod("lone", name, cpu="500m", memory="64Mi")
    # 6 cpu in a queue with room: no node has it, a new node would.
    objects.gang("wide", 1, name, queue=other, cpu="6", memory="64Mi")

    with SchedulerProcess(tmp_path, policy(team, other), kube_cluster.kubeconfig, name) as scheduler:
        scheduler.wait_ready()

        # The autoscaler contract: every waiting pod of ours carries PodScheduled False, reason
        # Unschedulable only where a new node would help (issue 30).
        def conditions() -> dict[str, dict] | None:
            pods = objects.pods()
            found = {n: pod_scheduled(p) for n, p in pods.items()}
            waiting = ["big-0", "big-1", "big-2", "partial-0", "wide-0"]
            if all(found[n] and found[n]["status"] == "False" for n in waiting) and found["lone"] and \
                    found["lone"]["status"] == "True":
                return found
            return None

        found = wait_for(conditions, "PodScheduled on every pod", 30)
        for pod in ("big-0", "big-1", "big-2"):
            condition = found[pod]
            # Its queue's capability holds it: was Unschedulable (the bug: autoscalers bought nodes
            # no queue could use), now WaitingForQueue, which they leave alone.
            assert condition["reason"] == "WaitingForQueue", condition
            assert "3/3 tasks in gang unschedulable" in condition["message"], condition
            assert f"queue {team} may allocate 4 more (capability 4" in condition["message"], condition
        assert found["partial-0"]["reason"] == "Unschedulable"
        assert found["wide-0"]["reason"] == "Unschedulable" and "Insufficient cpu" in found["wide-0"]["message"]
        # What Cluster Autoscaler would scale up for: the pod a node would help, not the gang its
        # queue holds (partial-0 fits an existing node, so CA's own simulation drops it).
        assert sorted(n for n, p in objects.pods().items() if ca_unschedulable(p)) == ["partial-0", "wide-0"]
        assert found["partial-0"]["message"].startswith("waiting for the other pods of its gang to be created: "
                                                        "gang has 1 of 3 pods"), found["partial-0"]
        assert objects.bound().keys() == {"lone"}      # the API server set PodScheduled True on bind

        # Written once: another few cycles write nothing new.
        versions = {n: p["metadata"]["resourceVersion"] for n, p in objects.pods().items() if n.startswith("big")}
        written = scheduler.metric("policydsl_status_writes_total", kind="Pod")
        wait_for(lambda: scheduler.metric("policydsl_e2e_scheduling_duration_seconds_count") >= 5, "cycles", 20)
        assert {n: p["metadata"]["resourceVersion"] for n, p in objects.pods().items() if n.startswith("big")} \
            == versions
        assert scheduler.metric("policydsl_status_writes_total", kind="Pod") == written

        # Events: the gang's Warning on its PodGroup, FailedScheduling on its pods.
        group_events = wait_for(lambda: objects.events_for("big", "PodGroup"), "the PodGroup's Warning", 20)
        assert any(f"queue {team} may allocate 4" in e["message"] for e in group_events)
        assert any(e["reason"] == "FailedScheduling" for e in objects.events_for("big-0"))

        # Live explain: the running scheduler's reasons, the same text as offline.
        url = scheduler.metrics_url()
        live = policydsl("explain", f"{objects.namespace}/big", "--scheduler", url)
        assert live.returncode == 0, live.stderr
        assert "gang unschedulable" in live.stdout and "capability 4" in live.stdout, live.stdout
        assert "from the scheduler" in live.stderr
        policy_file = tmp_path / "scheduler.policy"
        offline = policydsl("explain", f"{objects.namespace}/big", "--kubeconfig", str(kube_cluster.kubeconfig),
                            "--policy", str(policy_file), "--scheduler-name", name)
        assert offline.returncode == 0, offline.stderr
        assert "did not answer" in offline.stderr and "offline cycle" in offline.stderr
        assert offline.stdout == live.stdout

        # Queue views.
        listed = policydsl("queues", "--scheduler", url, "-o", "json")
        assert listed.returncode == 0, listed.stderr
        queues = {q["name"]: q for q in json.loads(listed.stdout)["queues"]}
        assert queues[team]["capability"] == {"cpu": "4"} and queues[team]["pendingJobs"] == 2
        assert queues[team]["allocated"]["cpu"] == "0"
        pending = policydsl("pending", team, "--scheduler", url, "-o", "json")
        assert pending.returncode == 0, pending.stderr
        jobs = {j["name"]: j for j in json.loads(pending.stdout)["jobs"]}
        assert jobs[f"{objects.namespace}/big"]["minMember"] == 3
        assert sorted(j["position"] for j in jobs.values()) == [1, 2]
        assert f"queue {team} may allocate 4" in jobs[f"{objects.namespace}/big"]["reason"]
        table = policydsl("queues", "--scheduler", url)
        assert table.returncode == 0 and team in table.stdout

        # The policy's queues as Queue objects; the user's one left alone, and told.
        made = wait_for(lambda: _get(api, f"{VOLCANO}/queues/{team}"), "the policy's queue created", 20)
        assert made["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "policydsl"
        assert made["spec"]["capability"] == {"cpu": 4} or made["spec"]["capability"] == {"cpu": "4"}
        wait_for(lambda: (_get(api, f"{VOLCANO}/queues/{team}") or {}).get("status", {}).get("state") == "Open",
                 "its state", 20)
        shadowed = wait_for(lambda: [e for e in api.get("/api/v1/namespaces/default/events")["items"]
                                     if e["involvedObject"]["name"] == other and e["reason"] == "ShadowedByPolicy"],
                            "the shadowed Queue's Event", 20)
        assert "the scheduler uses the policy's settings (weight 1)" in shadowed[0]["message"]
        assert _get(api, f"{VOLCANO}/queues/{other}")["spec"]["weight"] == 9

        # Volcano-named metrics.
        assert scheduler.metric("volcano_unschedule_task_count", job_id="big") == 3
        assert scheduler.metric("volcano_queue_capacity_milli_cpu", queue_name=team) == 4000
        assert scheduler.metric("volcano_queue_pod_group_inqueue_count", queue_name=team) >= 1
        assert scheduler.metric("volcano_e2e_scheduling_latency_milliseconds_count") > 0
        assert scheduler.metric("policydsl_is_leader") == 1
        assert scheduler.metric("policydsl_queue_pending_jobs", queue=team) == 2

        # The dashboard shows it.
        status, page = scheduler.get("/ui")
        assert status == 200 and f'data-queue="{team}"' in page and f"queue {team} may allocate 4" in page


def _get(api, path: str) -> dict | None:
    from runtime.kube.api import ApiError

    try:
        return api.get(path)
    except ApiError:
        return None
