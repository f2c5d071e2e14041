"""Two replicas with leader election: only the leader binds; kill it and the other takes over;
a replica that stops cleanly hands the Lease back at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from polling import wait_for

from .connector_helpers import GANG_POLICY, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

LEASE_DURATION = 3.0


def test_only_the_leader_binds_and_a_standby_takes_over(
    objects: Objects, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    name = unique_scheduler_name()
    for i in range(4):
        objects.node(f"{objects.namespace}-n{i}", cpu="8", memory="64Gi")
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{objects.namespace}/leases/{name}"

    def holder() -> str:
        return objects.api.get(lease)["spec"].get("holderIdentity") or ""

    def replica(identity: str) -> SchedulerProcess:
        return SchedulerProcess(
            tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name, "--leader-elect",
            "--lease-namespace", objects.namespace, "--lease-name", name, "--identity", identity,
            "--lease-duration", f"{LEASE_DURATION}s", "--renew-deadline", "2s", "--retry-period", "0.5s",
            label=identity)

    with replica("first") as first:
        wait_for(lambda: _holder_or_none(objects, lease) == "first", "the first replica to take the lease", 30)
        with replica("second") as second:
            second.wait_ready()
            objects.gang("one", 4, name, cpu="1")
            wait_for(lambda: len(objects.bound()) == 4, "the first gang bound", 30)
            assert first.metric("policydsl_pods_scheduled_total") == 4
            assert second.metric("policydsl_pods_scheduled_total") == 0
            assert (first.metric("policydsl_is_leader"), second.metric("policydsl_is_leader")) == (1, 0)

            first.kill()  # no release: the standby must wait for the lease to expire
            killed = time.monotonic()
            objects.gang("two", 4, name, cpu="1")
            wait_for(lambda: len(objects.bound()) == 8, "the standby to bind the second gang", LEASE_DURATION + 30)
            took = time.monotonic() - killed
            assert holder() == "second"
            assert second.metric("policydsl_pods_scheduled_total") == 4
            print(f"standby bound the second gang {took:.1f}s after the leader was killed "
                  f"(lease duration {LEASE_DURATION:.0f}s)")

            assert second.terminate() == 0
            # A clean stop releases the lease: nobody has to wait for it to expire.
            assert holder() == ""
            assert "released lease" in second.log()


def _holder_or_none(objects: Objects, lease: str) -> str | None:
    from runtime.kube.api import ApiError

    try:
        return objects.api.get(lease)["spec"].get("holderIdentity")
    except ApiError:
        return None
