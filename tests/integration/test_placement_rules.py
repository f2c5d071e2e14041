"""Placement rules on a real API server: the same pods scheduled by kube-scheduler and by ours,
each placement read back and verified by the independent checker (tests/placement_checker.py).

The pods are what a platform team brings: a Deployment's replicas that repel each other per host
and spread over zones (more replicas than hosts, so two must wait), a gang whose members repel
each other, two pods asking for one host port, two pods with a native sidecar (their requests as
the kubelet counts them), and a pod held by a scheduling gate. Twelve nodes in three zones take
them, tainted and labelled for this run so that no other test's pod lands there and no pod of
this run lands elsewhere. kube-scheduler (the dev cluster's binary) must keep every rule and bind
exactly what fits; ours must keep every rule too and bind at least as many.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from placement_checker import Violation, read_placement
from polling import wait_for

from bench.e2e.run import Child, two_free_ports
from bench.e2e.schedulers import Launch, by_key
from runtime.kube.api import KubeApi

from .connector_helpers import GANG_POLICY, AssignmentRecorder, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
RUN_LABEL = "policydsl.test/placement"  # on this run's nodes: the pods' nodeSelector and the taint they tolerate
ZONES = ("zone-a", "zone-b", "zone-c")
NODES_PER_ZONE = 4
WEB_REPLICAS = 14  # two more than there are hosts: hostname anti-affinity leaves two waiting
GANG = "train"
GANG_SIZE = 4
# What fits: 12 replicas (one per host), the gang, both host-port pods (on two hosts), both
# sidecar pods; the gated pod never. The requests are sized so that this holds whatever order
# the pods are placed in (a sidecar pod, a gang member, a host-port pod and a replica together
# take exactly 8 CPUs): a scheduler that packs (binpack) may put any of them together and still
# leave each host room for its replica, so "binds as many as kube-scheduler" is about the rules.
EXPECTED_BOUND = {"web": 12, GANG: GANG_SIZE, "port": 2, "sidecar": 2, "gated": 0}
BIND_TIMEOUT_S = 30.0
SETTLE_S = 1.5  # after the expected binds, for any bind beyond them to show


def _pod(name: str, scheduler: str, run: str, kind: str, *, cpu: str = "1", labels: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", None) or [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]
    annotations = spec.pop("annotations", {})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"kind": kind, **(labels or {})}, "annotations": annotations},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0, "containers": containers,
                 "nodeSelector": {RUN_LABEL: run},
                 "tolerations": [{"key": RUN_LABEL, "operator": "Equal", "value": run, "effect": "NoSchedule"}],
                 **spec},
    }


def _hostname_anti_affinity(**labels: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": HOST, "labelSelector": {"matchLabels": labels}}]}}


def workload(scheduler: str, run: str) -> list[dict[str, Any]]:
    """The pods, in the order they are created."""
    pods = []
    for i in range(WEB_REPLICAS):
        pods.append(_pod(f"web-{i}", scheduler, run, "web", labels={"app": "web", "pod-template-hash": "5d4f8c"},
                         affinity=_hostname_anti_affinity(app="web"),
                         topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": ZONE,
                                                     "whenUnsatisfiable": "DoNotSchedule",
                                                     "labelSelector": {"matchLabels": {"app": "web"}},
                                                     "matchLabelKeys": ["pod-template-hash"]}]))
    for i in range(GANG_SIZE):
        pods.append(_pod(f"{GANG}-{i}", scheduler, run, GANG, cpu="1500m", labels={"gang": GANG},
                         annotations={"scheduling.k8s.io/group-name": GANG},
                         affinity=_hostname_anti_affinity(gang=GANG)))
    for i in range(2):
        pods.append(_pod(f"port-{i}", scheduler, run, "port", containers=[
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "500m"}},
             "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}]))
    for i in range(2):
        # 2.5 + 2.5 CPUs: the sidecar keeps running next to the main container, so 5 of a node's 8
        # (two do not fit on one node; counted as the larger container alone, they would).
        pods.append(_pod(f"sidecar-{i}", scheduler, run, "sidecar",
                         initContainers=[{"name": "proxy", "image": "busybox", "restartPolicy": "Always",
                                          "resources": {"requests": {"cpu": "2500m"}}}],
                         containers=[{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2500m"}}}]))
    pods.append(_pod("gated", scheduler, run, "gated", schedulingGates=[{"name": "policydsl.test/hold"}]))
    return pods


@dataclass(frozen=True)
class Outcome:
    bound: dict[str, str]  # pod name -> node
    kinds: dict[str, int]  # pod kind -> how many bound
    violations: list[Violation]

    def describe(self) -> str:
        lines = [f"bound {len(self.bound)}: {self.kinds}"] + [f"  {v}" for v in self.violations]
        return "\n".join(lines)


def _setup(objects: Objects, scheduler: str) -> None:
    run = objects.namespace
    for zone in ZONES:
        for i in range(NODES_PER_ZONE):
            objects.node(f"{run}-{zone}-{i}", cpu="8", memory="32Gi", labels={ZONE: zone, RUN_LABEL: run},
                         taints=[{"key": RUN_LABEL, "value": run, "effect": "NoSchedule"}])
    objects.podgroup(GANG, GANG_SIZE)
    for body in workload(scheduler, run):
        objects.api.post(f"/api/v1/namespaces/{run}/pods", body)


def _outcome(objects: Objects, recorder: AssignmentRecorder, expected: int) -> Outcome:
    def enough() -> bool:
        return len(objects.bound()) >= expected

    try:
        wait_for(enough, f"{expected} pods bound", BIND_TIMEOUT_S, interval=0.2)
    except AssertionError:
        pass  # fewer is an outcome too: the caller compares
    time.sleep(SETTLE_S)
    placement = read_placement(objects.api.get, node_selector=f"{RUN_LABEL}={objects.namespace}",
                               namespace=objects.namespace)
    pods = {p["metadata"]["name"]: p for p in placement.pods if p["metadata"]["namespace"] == objects.namespace}
    bound = {name: p["spec"]["nodeName"] for name, p in pods.items() if p["spec"].get("nodeName")}
    kinds = {kind: sum(1 for name in bound if pods[name]["metadata"]["labels"]["kind"] == kind)
             for kind in EXPECTED_BOUND}
    history = {f"{objects.namespace}/{name}": nodes for name, nodes in recorder.nodes.items()}
    return Outcome(bound, kinds, placement.check(history))


def _fresh_objects(api: KubeApi) -> Objects:
    namespace = f"pl-{uuid.uuid4().hex[:8]}"
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return Objects(api, namespace)


@pytest.fixture(scope="module")
def kube_scheduler_outcome(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    """The workload scheduled by kube-scheduler (as the benchmark starts it, as default-scheduler)."""
    workdir = tmp_path_factory.mktemp("kube-scheduler")
    cluster = kube_cluster.cluster
    objects = _fresh_objects(KubeApi(kube_cluster.api_client))
    launch = Launch(server=cluster.server, ca_cert=cluster.ca_cert, kubeconfig=cluster.kubeconfig,
                    scheduler_name="default-scheduler", workdir=workdir, ports=two_free_ports(), token=cluster.token,
                    variant=None)
    command = by_key("kube-scheduler").command(launch)
    try:
        _setup(objects, "default-scheduler")
        with AssignmentRecorder(objects.api, objects.namespace) as recorder:
            scheduler = Child(command.argv, workdir / "kube-scheduler.log", env=command.env)
            try:
                outcome = _outcome(objects, recorder, sum(EXPECTED_BOUND.values()))
                assert scheduler.alive(), f"kube-scheduler exited:\n{scheduler.log_tail()}"
            finally:
                scheduler.stop()
    finally:
        objects.cleanup()
    yield outcome


def test_kube_scheduler_keeps_every_rule_and_binds_what_fits(kube_scheduler_outcome: Outcome) -> None:
    outcome = kube_scheduler_outcome
    assert outcome.violations == [], outcome.describe()
    assert outcome.kinds == EXPECTED_BOUND, outcome.describe()
    # One replica per host, four per zone: the anti-affinity and the spread both held.
    web = [node for name, node in outcome.bound.items() if name.startswith("web-")]
    assert len(set(web)) == len(web) == 12
    assert sorted(sum(1 for node in web if zone in node) for zone in ZONES) == [4, 4, 4]
    assert outcome.bound[f"{GANG}-0"] != outcome.bound[f"{GANG}-1"]
    assert outcome.bound["port-0"] != outcome.bound["port-1"]
    assert "gated" not in outcome.bound


def test_policydsl_keeps_every_rule_and_binds_as_many_as_kube_scheduler(
        kube_cluster: KubeCluster, kube_scheduler_outcome: Outcome, tmp_path: Path) -> None:
    objects = _fresh_objects(KubeApi(kube_cluster.api_client))
    name = unique_scheduler_name()
    try:
        _setup(objects, name)
        with AssignmentRecorder(objects.api, objects.namespace) as recorder, \
                SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name) as scheduler:
            outcome = _outcome(objects, recorder, len(kube_scheduler_outcome.bound))
            assert scheduler.proc is not None and scheduler.proc.poll() is None, scheduler.log()[-3000:]
            # A Binding the API server refused: the gated pod's (it refuses those), or a pod's
            # that is not ours to place. Binding only what may be bound leaves none.
            dropped = scheduler.metric("policydsl_bind_refused_total")
    finally:
        objects.cleanup()
    report = (f"policydsl: {outcome.describe()}\n  binds the API server refused: {dropped:.0f}\n"
              f"kube-scheduler: bound {len(kube_scheduler_outcome.bound)}: {kube_scheduler_outcome.kinds}")
    assert outcome.violations == [] and len(outcome.bound) >= len(kube_scheduler_outcome.bound) and not dropped, report
