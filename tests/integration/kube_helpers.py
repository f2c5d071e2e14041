"""Helpers for integration tests against the dev cluster (policydsl/cli/devcluster.py).

There is no kubelet, so nodes are plain Node objects whose status we write
ourselves: capacity, allocatable and a Ready condition. Nothing ever updates
them again, and with no node-lifecycle controller running nothing marks them
NotReady either.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s_client

from policydsl.cli.devcluster import DevCluster


@dataclass(frozen=True)
class KubeCluster:
    """What the `kube_cluster` fixture yields."""

    cluster: DevCluster  # server URL, admin token, pids, ports
    kubeconfig: Path  # admin token, verified TLS against cluster.ca_cert
    api_client: k8s_client.ApiClient  # shared by the session; do not close it


def fake_node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    extra_resources: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: list[k8s_client.V1Taint] | None = None,
    unschedulable: bool = False,
) -> k8s_client.V1Node:
    """A Node object as a kubelet would register it: allocatable == capacity, Ready=True."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extra_resources or {})}
    now = dt.datetime.now(dt.timezone.utc)
    return k8s_client.V1Node(
        metadata=k8s_client.V1ObjectMeta(
            name=name,
            labels={"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
        ),
        spec=k8s_client.V1NodeSpec(taints=taints, unschedulable=unschedulable or None),
        status=k8s_client.V1NodeStatus(
            capacity=dict(resources),
            allocatable=dict(resources),
            conditions=[
                k8s_client.V1NodeCondition(
                    type="Ready",
                    status="True",
                    reason="KubeletReady",
                    message="fake node (no kubelet)",
                    last_heartbeat_time=now,
                    last_transition_time=now,
                )
            ],
        ),
    )


def create_fake_node(api_client: k8s_client.ApiClient, name: str, **kwargs: object) -> k8s_client.V1Node:
    """Create a fake node (see `fake_node` for the keyword arguments) and return it as stored.

    The status is written again through the status subresource in case the
    apiserver dropped it on create, so the returned node always has it.
    """
    core = k8s_client.CoreV1Api(api_client)
    node = fake_node(name, **kwargs)  # type: ignore[arg-type]
    created = core.create_node(node)
    if not (created.status and created.status.allocatable):
        created = core.replace_node_status(name, k8s_client.V1Node(metadata=created.metadata, status=node.status))
    return created
