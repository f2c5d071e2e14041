"""Restarts: of the scheduler in the middle of binding, and of the API server under it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from policydsl.cli import devcluster

from .connector_helpers import (
    GANG_POLICY, AssignmentRecorder, Objects, SchedulerProcess, node_usage_within_capacity, unique_scheduler_name, wait_for,
)
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration


def all_gangs_whole(objects: Objects, gangs: dict[str, list[str]]) -> None:
    bound = objects.bound()
    partial = {g: [p for p in pods if p not in bound] for g, pods in gangs.items()
               if any(p in bound for p in pods) and not all(p in bound for p in pods)}
    assert not partial, f"gangs bound in part: {partial}"


def test_scheduler_killed_mid_run_binds_no_pod_twice_and_loses_none(
    objects: Objects, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    name = unique_scheduler_name()
    nodes = {f"{objects.namespace}-n{i}": 8000 for i in range(8)}
    for node in nodes:
        objects.node(node, cpu="8", memory="64Gi")
    gangs = {f"g{i}": objects.gang(f"g{i}", 4, name, cpu="250m", memory="256Mi") for i in range(40)}
    with AssignmentRecorder(objects.api, objects.namespace) as recorder:
        first = SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name, label="first")
        with first:
            wait_for(lambda: len(recorder.nodes) >= 30, "the first binds", 60, interval=0.005)
            first.kill()  # SIGKILL: no chance to finish the cycle
        at_kill = len(objects.bound())
        # More work arrives while no scheduler runs.
        gangs.update({f"late{i}": objects.gang(f"late{i}", 4, name, cpu="250m", memory="256Mi") for i in range(10)})
        with SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name, label="second"):
            wait_for(lambda: len(objects.bound()) == 200, "all 200 pods bound after the restart", 60)
        time.sleep(0.5)  # let the recorder see the last events
        assert recorder.twice() == {}
    print(f"bound when the first scheduler was killed: {at_kill}/160")
    assert set(recorder.nodes) == {p for pods in gangs.values() for p in pods}
    all_gangs_whole(objects, gangs)
    node_usage_within_capacity(objects, nodes)


def test_scheduler_resumes_after_the_api_server_restarts(
    objects: Objects, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    name = unique_scheduler_name()
    for i in range(4):
        objects.node(f"{objects.namespace}-n{i}", cpu="8", memory="64Gi")
    objects.gang("before", 4, name, cpu="1")
    with SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name) as scheduler:
        wait_for(lambda: len(objects.bound()) == 4, "the first gang bound", 30)
        directory = kube_cluster.cluster.directory
        devcluster.stop_apiserver(directory)
        time.sleep(1.0)  # the scheduler's watches and cycles now fail
        devcluster.start_apiserver(directory)
        objects.gang("after", 4, name, cpu="1")

        wait_for(lambda: len(objects.bound()) == 8, "the second gang bound after the restart", 60)

        assert scheduler.proc is not None and scheduler.proc.poll() is None
        restarts = scheduler.metric("policydsl_watch_restarts_total")
        assert restarts >= 5, "every watch (5 resources) restarted"
        assert scheduler.terminate() == 0
