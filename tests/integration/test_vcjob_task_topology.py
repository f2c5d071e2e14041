"""A vcjob with task topology end to end: Volcano's job controller (vc-controller-manager) copies the
vcjob's annotations `volcano.sh/task-topology-*` to the PodGroup it creates and names each pod's
task in its `volcano.sh/task-spec` annotation; ours, with the task-topology plugin on (the
policy of Volcano's docs/user-guide/how_to_use_task_topology_plugin.md), reads them there.

The placement is read back from the API server and checked without the scheduler's code: the two
`ps` pods (self anti-affinity) on different nodes, each `worker` (affinity with ps) on a node
with a `ps`, though a third empty node would win nodeorder's least-requested spreading. A vcjob
whose annotation names a task it does not have stays Pending, its PodGroup naming the annotation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from .connector_helpers import FakeKubelet, Objects, SchedulerProcess
from .kube_helpers import KubeCluster
from .test_vcjob import (  # noqa: F401 - vcjobs is the fixture this file shares
    NODE_LABEL, POLICY, TIMEOUT, Task, VcJobs, bound, vcjob_body, vcjobs, wait_admitted, wait_bound, wait_podgroup,
)
from .volcano_controller import VolcanoController

pytestmark = pytest.mark.integration

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"


@pytest.fixture
def ours(vc_controller: VolcanoController, kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[SchedulerProcess]:
    """`policydsl run` with Volcano's default policy plus task-topology at weight 10 (as the user guide)."""
    text = POLICY.read_text()
    assert text.count("  plugin proportion\n") == 1
    text = text.replace("  plugin proportion\n", "  plugin task-topology weight 10\n  plugin proportion\n")
    with SchedulerProcess(tmp_path, text, kube_cluster.kubeconfig, vc_controller.scheduler_name,
                          "--min-interval", "100ms") as scheduler:
        scheduler.wait_ready()
        yield scheduler


def annotated(body: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    body["metadata"]["annotations"] = annotations
    return body


def test_ps_apart_and_workers_beside_them(vc_controller: VolcanoController, ours: SchedulerProcess,
                                          objects: Objects, vcjobs: VcJobs) -> None:
    queue = f"tt-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    for i in range(3):
        objects.node(f"{objects.namespace}-n{i}", cpu="8", memory="64Gi", labels={NODE_LABEL: objects.namespace})
    tasks = [Task("ps", 2, 2), Task("worker", 4, 4)]
    body = vcjob_body("tf", vc_controller.scheduler_name, queue, 6, tasks, objects.namespace)
    vcjobs.create(annotated(body, {AFFINITY: "ps,worker", ANTI_AFFINITY: "ps", TASK_ORDER: "ps,worker"}))

    group = wait_podgroup(vcjobs, "tf", vc_controller)
    copied = group["metadata"].get("annotations") or {}
    assert (copied.get(AFFINITY), copied.get(ANTI_AFFINITY), copied.get(TASK_ORDER)) == \
        ("ps,worker", "ps", "ps,worker"), copied

    with FakeKubelet(objects.api, objects.namespace):
        wait_admitted(vcjobs, "tf", ours)
        pods = wait_bound(vcjobs, "tf", 6, "the 6 pods of the vcjob bound")
    where = bound(pods)
    role = {name: pod["metadata"]["annotations"]["volcano.sh/task-spec"] for name, pod in pods.items()}
    ps_nodes = [where[name] for name in where if role[name] == "ps"]
    assert len(ps_nodes) == 2 and len(set(ps_nodes)) == 2, where
    assert all(where[name] in ps_nodes for name in where if role[name] == "worker"), where


def test_an_annotation_naming_no_task_holds_the_job_saying_so(vc_controller: VolcanoController,
                                                              ours: SchedulerProcess, objects: Objects,
                                                              vcjobs: VcJobs) -> None:
    queue = f"ttbad-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="64Gi", labels={NODE_LABEL: objects.namespace})
    body = vcjob_body("bad", vc_controller.scheduler_name, queue, 2, [Task("ps", 1, 1), Task("worker", 1, 1)],
                      objects.namespace)
    vcjobs.create(annotated(body, {AFFINITY: "ps,chief"}))
    wait_podgroup(vcjobs, "bad", vc_controller)

    with FakeKubelet(objects.api, objects.namespace):
        wait_admitted(vcjobs, "bad", ours)
        # Its pods exist (the PodGroup is Inqueue) and none is bound; the PodGroup says why.
        wait_for(lambda: len(vcjobs.pods("bad")) == 2, "the controller to create the 2 pods", TIMEOUT, interval=0.2)

        def refused() -> dict[str, Any] | None:
            conditions = ((vcjobs.podgroup("bad") or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c.get("type") == "Unschedulable" and c.get("status") == "True"
                         and AFFINITY in (c.get("message") or "")), None)
        try:
            condition = wait_for(refused, "an Unschedulable condition naming the annotation", TIMEOUT, interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; status: {(vcjobs.podgroup('bad') or {}).get('status')}\n"
                                 f"--- scheduler log (tail)\n{ours.log()[-3000:]}") from None
        assert "`chief`" in condition["message"], condition
        assert bound(vcjobs.pods("bad")) == {}
