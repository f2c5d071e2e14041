"""vcjobs end to end: Volcano's own job controller (vc-controller-manager) with ours as the only
scheduler, as a cluster runs once policydsl has replaced vc-scheduler.

The handshake under test: the controller creates a vcjob's PodGroup first, with no pods; the
scheduler admits it (PodGroup Pending -> Inqueue) on its minResources and minMember; only then
does the controller create the pods, which the scheduler binds as a gang; the test plays the
kubelet (pods Running, then Succeeded), and the controller moves the vcjob Pending -> Running ->
Completed. A job its queue cannot hold stays Pending, its PodGroup saying why, and gets no pods.

No admission webhook runs (see volcano_controller.py), so every vcjob spells out what Volcano's
webhook would fill in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.utils import parse_quantity
from polling import wait_for

from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import REPO, VOLCANO, FakeKubelet, Objects, SchedulerProcess
from .kube_helpers import KubeCluster
from .volcano_controller import VolcanoController

pytestmark = pytest.mark.integration

BATCH = "/apis/batch.volcano.sh/v1alpha1"
POLICY = REPO / "policies" / "volcano-default.policy"
# The vcjobs' pods go only to this test's nodes, whatever other nodes the shared cluster has.
NODE_LABEL = "vcjob-test"
TIMEOUT = 60.0   # a loaded 2-core CI machine runs the controller, the API server and ours at once


@dataclass(frozen=True)
class Task:
    name: str
    replicas: int
    min_available: int
    cpu: str = "1"
    memory: str = "1Gi"


def vcjob_body(name: str, scheduler: str, queue: str, min_available: int, tasks: list[Task], node_group: str,
               plugins: dict[str, list[str]] | None = None) -> dict[str, Any]:
    def template(task: Task) -> dict[str, Any]:
        return {
            "metadata": {"labels": {"role": task.name}},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {NODE_LABEL: node_group},
                "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"],
                                "resources": {"requests": {"cpu": task.cpu, "memory": task.memory}}}],
            },
        }

    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "queue": queue,
        "minAvailable": min_available,
        "maxRetry": 3,
        "tasks": [{"name": t.name, "replicas": t.replicas, "minAvailable": t.min_available, "maxRetry": 3,
                   "template": template(t)} for t in tasks],
    }
    if plugins is not None:
        spec["plugins"] = plugins
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


class VcJobs:
    """vcjobs of one namespace and what the controller made for them."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.api: KubeApi = objects.api
        self.namespace = objects.namespace
        self.path = f"{BATCH}/namespaces/{self.namespace}/jobs"

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.api.post(self.path, body)

    def phase(self, name: str) -> str:
        return ((self.api.get(f"{self.path}/{name}").get("status") or {}).get("state") or {}).get("phase", "")

    def podgroup(self, job: str) -> dict[str, Any] | None:
        """The PodGroup the controller made for `job` (named `<job>-<uid>`, owned by the job)."""
        for group in self.api.get(f"{VOLCANO}/namespaces/{self.namespace}/podgroups")["items"]:
            owners = group["metadata"].get("ownerReferences", [])
            if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
                return group
        return None

    def pods(self, job: str) -> dict[str, dict[str, Any]]:
        return {name: pod for name, pod in self.objects.pods().items()
                if (pod["metadata"].get("annotations") or {}).get("volcano.sh/job-name") == job}

    def succeed(self, pods: list[str]) -> None:
        """The kubelet's report that the pods' containers exited 0."""
        for name in pods:
            self.api.merge_patch(f"/api/v1/namespaces/{self.namespace}/pods/{name}/status",
                                 {"status": {"phase": "Succeeded"}})

    def cleanup(self) -> None:
        try:
            self.api.request("DELETE", self.path)
        except ApiError:
            pass


@pytest.fixture
def vcjobs(objects: Objects) -> Iterator[VcJobs]:
    made = VcJobs(objects)
    try:
        yield made
    finally:
        made.cleanup()  # before `objects` removes the pods, so the controller makes no new ones


@pytest.fixture
def ours(vc_controller: VolcanoController, kube_cluster: KubeCluster,
         tmp_path: Path) -> Iterator[SchedulerProcess]:
    """`policydsl run` with Volcano's default policy, under the controller's scheduler name."""
    with SchedulerProcess(tmp_path, POLICY.read_text(), kube_cluster.kubeconfig, vc_controller.scheduler_name,
                          "--min-interval", "100ms") as scheduler:
        scheduler.wait_ready()
        yield scheduler


def quantities(resources: dict[str, Any]) -> dict[str, float]:
    return {name: float(parse_quantity(value)) for name, value in resources.items()}


def wait_podgroup(vcjobs: VcJobs, job: str, controller: VolcanoController) -> dict[str, Any]:
    def made() -> dict[str, Any] | None:
        return vcjobs.podgroup(job)
    try:
        return wait_for(made, f"vc-controller-manager to create the PodGroup of vcjob {job}", TIMEOUT, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- vc-controller-manager log (tail)\n{controller.log()[-3000:]}") from None


def wait_admitted(vcjobs: VcJobs, job: str, scheduler: SchedulerProcess) -> dict[str, Any]:
    """The PodGroup once the scheduler moved it out of Pending (vcjob's pods exist only after)."""
    def admitted() -> dict[str, Any] | None:
        group = vcjobs.podgroup(job)
        return group if group and (group.get("status") or {}).get("phase") not in (None, "", "Pending") else None
    try:
        return wait_for(admitted, f"the scheduler to admit the PodGroup of vcjob {job} (Pending -> Inqueue)",
                        TIMEOUT, interval=0.2)
    except AssertionError as exc:
        group = vcjobs.podgroup(job) or {}
        raise AssertionError(f"{exc}; its status: {group.get('status')}\n--- scheduler log (tail)\n"
                             f"{scheduler.log()[-3000:]}") from None


def bound(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: pod["spec"]["nodeName"] for name, pod in pods.items() if pod["spec"].get("nodeName")}


def wait_bound(vcjobs: VcJobs, job: str, count: int, what: str,
               scheduler: SchedulerProcess | None = None) -> dict[str, dict[str, Any]]:
    """The job's pods once `count` of them are bound; on a timeout, what was bound, the
    PodGroup's status and the scheduler's log say why not."""
    def enough() -> dict[str, dict[str, Any]] | None:
        pods = vcjobs.pods(job)
        return pods if len(bound(pods)) == count else None
    try:
        return wait_for(enough, what, TIMEOUT, interval=0.2)
    except AssertionError as exc:
        pods = vcjobs.pods(job)
        group = vcjobs.podgroup(job) or {}
        log = f"\n--- scheduler log (tail)\n{scheduler.log()[-3000:]}" if scheduler is not None else ""
        raise AssertionError(f"{exc}; {len(pods)} pods, bound: {bound(pods)}; PodGroup status: "
                             f"{group.get('status')}{log}") from None


def nodes(objects: Objects, count: int, cpu: str) -> None:
    for i in range(count):
        objects.node(f"{objects.namespace}-n{i}", cpu=cpu, memory="64Gi", labels={NODE_LABEL: objects.namespace})


def queue_status(objects: Objects, queue: str) -> dict[str, Any]:
    return objects.api.get(f"{VOLCANO}/queues/{queue}").get("status") or {}


def test_mpi_job_runs_to_completion(vc_controller: VolcanoController, ours: SchedulerProcess, objects: Objects,
                                    vcjobs: VcJobs) -> None:
    """(a) An MPI-style vcjob: 1 master + 3 workers, minAvailable 4, on exactly 4 cpus."""
    queue = f"mpi-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    # Volcano's queue controller opens a new queue (its webhook admits vcjobs only into Open ones).
    wait_for(lambda: queue_status(objects, queue).get("state") == "Open", "Volcano to open the queue", TIMEOUT,
             interval=0.2)
    nodes(objects, 2, cpu="2")
    tasks = [Task("mpimaster", 1, 1), Task("mpiworker", 3, 3)]
    # mpi needs svc (hostnames, a hostfile ConfigMap) and ssh (a key Secret); the webhook would add them.
    plugins = {"mpi": ["--master=mpimaster", "--worker=mpiworker", "--port=22"], "svc": [], "ssh": []}
    vcjobs.create(vcjob_body("mpi", vc_controller.scheduler_name, queue, 4, tasks, objects.namespace, plugins))

    group = wait_podgroup(vcjobs, "mpi", vc_controller)
    spec = group["spec"]
    assert (spec["minMember"], spec["queue"], spec["minTaskMember"]) == (4, queue, {"mpimaster": 1, "mpiworker": 3})
    assert quantities(spec["minResources"])["cpu"] == 4 and quantities(spec["minResources"])["memory"] == 4 * 2**30
    assert vcjobs.phase("mpi") == "Pending"

    with FakeKubelet(objects.api, objects.namespace):
        wait_admitted(vcjobs, "mpi", ours)
        pods = wait_bound(vcjobs, "mpi", 4, "the 4 pods created by the controller and all bound", ours)
        group_name = group["metadata"]["name"]
        for pod in pods.values():
            assert pod["spec"]["schedulerName"] == vc_controller.scheduler_name
            assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group_name
        # Exactly the 4 cpus there are: 2 pods per node.
        assert sorted(Counter(bound(pods).values()).values()) == [2, 2]
        wait_for(lambda: vcjobs.phase("mpi") == "Running", "the vcjob Running", TIMEOUT, interval=0.2)
        wait_for(lambda: (vcjobs.podgroup("mpi") or {}).get("status", {}).get("phase") == "Running",
                 "the PodGroup Running", TIMEOUT, interval=0.2)
        wait_for(lambda: queue_status(objects, queue).get("running") == 1,
                 "the Queue status to count the running PodGroup", TIMEOUT, interval=0.2)
        assert quantities(queue_status(objects, queue)["allocated"])["cpu"] == 4

        # The controller's plugins made what an MPI job needs (removed again when it finishes).
        assert objects.api.get(f"/api/v1/namespaces/{objects.namespace}/services/mpi")["spec"]["clusterIP"] == "None"
        assert all(p["spec"].get("subdomain") == "mpi" for p in pods.values())

        vcjobs.succeed(list(pods))
        wait_for(lambda: vcjobs.phase("mpi") == "Completed", "the vcjob Completed", TIMEOUT, interval=0.2)


def test_two_roles_with_their_own_minimums(vc_controller: VolcanoController, ours: SchedulerProcess,
                                           objects: Objects, vcjobs: VcJobs) -> None:
    """(b) ps x2 (at least 1) and worker x4 (at least 2), minAvailable 3, with room for 4 pods: the
    gang starts with 4 that keep both minimums, the other 2 run when the first ones finish."""
    queue = f"roles-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    nodes(objects, 2, cpu="2")
    tasks = [Task("ps", 2, 1), Task("worker", 4, 2)]
    vcjobs.create(vcjob_body("roles", vc_controller.scheduler_name, queue, 3, tasks, objects.namespace))

    spec = wait_podgroup(vcjobs, "roles", vc_controller)["spec"]
    assert (spec["minMember"], spec["minTaskMember"]) == (3, {"ps": 1, "worker": 2})
    assert quantities(spec["minResources"])["cpu"] == 3

    with FakeKubelet(objects.api, objects.namespace):
        wait_admitted(vcjobs, "roles", ours)
        first = bound(wait_bound(vcjobs, "roles", 4, "4 of the 6 pods bound (all the room there is)", ours))
        pods = wait_for(lambda: (made if len(made := vcjobs.pods("roles")) == 6 else None),
                        "the controller to create all 6 pods", TIMEOUT, interval=0.2)
        assert bound(pods) == first  # the other two wait for room
        roles = [pods[name]["metadata"]["annotations"]["volcano.sh/task-spec"] for name in first]
        assert roles.count("ps") >= 1 and roles.count("worker") >= 2, roles
        wait_for(lambda: vcjobs.phase("roles") == "Running", "the vcjob Running", TIMEOUT, interval=0.2)

        vcjobs.succeed(list(first))
        wait_bound(vcjobs, "roles", 6, "the last 2 pods bound once the first 4 finished", ours)
        vcjobs.succeed([name for name in pods if name not in first])
        wait_for(lambda: vcjobs.phase("roles") == "Completed", "the vcjob Completed", TIMEOUT, interval=0.2)


def test_job_of_a_full_queue_stays_pending_with_its_reason(vc_controller: VolcanoController,
                                                           ours: SchedulerProcess, objects: Objects,
                                                           vcjobs: VcJobs) -> None:
    """(c) The queue may hold 1 cpu, the job needs 2 at once: Pending, the PodGroup says which
    queue and resource, and the controller creates no pods."""
    queue = f"full-{objects.namespace}"
    objects.queue(queue, {"weight": 1, "capability": {"cpu": "1", "memory": "64Gi"}})
    nodes(objects, 2, cpu="4")
    vcjobs.create(vcjob_body("big", vc_controller.scheduler_name, queue, 2, [Task("worker", 2, 2)], objects.namespace))
    wait_podgroup(vcjobs, "big", vc_controller)

    def refused() -> dict[str, Any] | None:
        group = vcjobs.podgroup("big") or {}
        conditions = (group.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Unschedulable" and c.get("status") == "True"), None)
    try:
        condition = wait_for(refused, "an Unschedulable condition on the PodGroup", TIMEOUT, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its status: {(vcjobs.podgroup('big') or {}).get('status')}\n"
                             f"--- scheduler log (tail)\n{ours.log()[-3000:]}") from None
    assert queue in condition["message"] and "cpu" in condition["message"], condition
    # Three more cycles of ours: still refused, still no pods.
    scheduled = ours.metric("policydsl_e2e_scheduling_duration_seconds_count")
    wait_for(lambda: ours.metric("policydsl_e2e_scheduling_duration_seconds_count") >= scheduled + 3,
             "three more scheduling cycles", TIMEOUT, interval=0.2)
    assert (vcjobs.podgroup("big") or {}).get("status", {}).get("phase") == "Pending"
    assert vcjobs.phase("big") == "Pending"
    assert vcjobs.pods("big") == {}
