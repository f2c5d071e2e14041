"""The dev cluster is a real API server: readiness, Volcano CRDs, fake nodes."""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.rest import ApiException

from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"


def test_apiserver_answers_readyz(kube_cluster: KubeCluster) -> None:
    cluster = kube_cluster.cluster
    request = urllib.request.Request(f"{cluster.server}/readyz", headers={"Authorization": f"Bearer {cluster.token}"})
    tls = ssl.create_default_context(cafile=str(cluster.ca_cert))  # verified, not skip-verify
    with urllib.request.urlopen(request, timeout=5, context=tls) as response:
        assert response.status == 200
        assert response.read() == b"ok"
    version = k8s_client.VersionApi(kube_cluster.api_client).get_code()
    assert version.git_version == cluster.kube_version


def test_kubeconfig_is_usable(kube_cluster: KubeCluster) -> None:
    from kubernetes import config as k8s_config

    api_client = k8s_config.new_client_from_config(config_file=str(kube_cluster.kubeconfig))
    with api_client:
        names = {ns.metadata.name for ns in k8s_client.CoreV1Api(api_client).list_namespace().items}
    assert {"default", "kube-system"} <= names


def test_volcano_crds_are_established(kube_cluster: KubeCluster) -> None:
    api = k8s_client.ApiextensionsV1Api(kube_cluster.api_client)
    for name, scope, short in (("podgroups", "Namespaced", "pg"), ("queues", "Cluster", "q")):
        crd = api.read_custom_resource_definition(f"{name}.{GROUP}")
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
        assert crd.spec.scope == scope
        assert short in crd.spec.names.short_names


def test_podgroup_roundtrip(kube_cluster: KubeCluster) -> None:
    api = k8s_client.CustomObjectsApi(kube_cluster.api_client)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "pg-roundtrip"},
        "spec": {
            "minMember": 3,
            "minTaskMember": {"worker": 2, "ps": 1},
            "minResources": {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": 2},
            "priorityClassName": "high",
            # A field only newer Volcano releases know: kept, not rejected.
            "subGroupPolicy": [{"name": "workers", "subGroupSize": 2}],
        },
    }
    created = api.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", body)
    try:
        assert created["spec"]["queue"] == "default"  # Volcano's default
        assert created["spec"]["minResources"] == {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": 2}
        assert created["spec"]["subGroupPolicy"] == [{"name": "workers", "subGroupSize": 2}]

        # Like Volcano's CRD, PodGroup has no status subresource: status is
        # written with the object itself (that is how vc-scheduler writes it).
        created["status"] = {
            "phase": "Inqueue",
            "running": 1,
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": "2/3 tasks in gang unschedulable",
                    "transitionID": "7f1c",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ],
        }
        api.replace_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "pg-roundtrip", created)
        read = api.get_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "pg-roundtrip")
        assert read["status"]["phase"] == "Inqueue"
        assert read["status"]["running"] == 1
        assert read["status"]["conditions"][0]["reason"] == "NotEnoughResources"
        with pytest.raises(ApiException) as excinfo:
            api.get_namespaced_custom_object_status(GROUP, VERSION, "default", "podgroups", "pg-roundtrip")
        assert excinfo.value.status == 404

        bad = {**body, "metadata": {"name": "pg-bad"}, "spec": {"minMember": "three"}}
        with pytest.raises(ApiException) as excinfo:
            api.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", bad)
        assert excinfo.value.status == 422
    finally:
        api.delete_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "pg-roundtrip")


def test_queue_roundtrip_with_status_subresource(kube_cluster: KubeCluster) -> None:
    api = k8s_client.CustomObjectsApi(kube_cluster.api_client)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": "q-roundtrip"},
        "spec": {
            "weight": 4,
            "reclaimable": True,
            "priority": 10,
            "parent": "root",
            "capability": {"cpu": "64", "memory": "256Gi"},
            "deserved": {"cpu": 16},
            "guarantee": {"resource": {"cpu": "8"}},
            "affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g1"]}},
        },
    }
    created = api.create_cluster_custom_object(GROUP, VERSION, "queues", body)
    try:
        assert created["spec"]["weight"] == 4
        assert created["spec"]["guarantee"] == {"resource": {"cpu": "8"}}
        assert created["spec"]["affinity"]["nodeGroupAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == ["g1"]

        created["status"] = {"state": "Open", "allocated": {"cpu": "2"}, "running": 1, "pending": 2, "inqueue": 1}
        api.replace_cluster_custom_object_status(GROUP, VERSION, "queues", "q-roundtrip", created)
        read = api.get_cluster_custom_object(GROUP, VERSION, "queues", "q-roundtrip")
        assert read["status"] == {"state": "Open", "allocated": {"cpu": "2"}, "running": 1, "pending": 2, "inqueue": 1}

        # With a status subresource, status written through the main resource is ignored.
        read["spec"]["weight"] = 5
        read["status"]["state"] = "Closed"
        api.replace_cluster_custom_object(GROUP, VERSION, "queues", "q-roundtrip", read)
        read = api.get_cluster_custom_object(GROUP, VERSION, "queues", "q-roundtrip")
        assert read["spec"]["weight"] == 5
        assert read["status"]["state"] == "Open"
    finally:
        api.delete_cluster_custom_object(GROUP, VERSION, "queues", "q-roundtrip")


def test_fake_node_is_created_and_listed(
    kube_cluster: KubeCluster, fake_nodes: Callable[..., k8s_client.V1Node]
) -> None:
    fake_nodes("node-a", cpu="16", memory="64Gi", extra_resources={"nvidia.com/gpu": "4"}, labels={"zone": "z1"})
    fake_nodes("node-b")
    nodes = {n.metadata.name: n for n in k8s_client.CoreV1Api(kube_cluster.api_client).list_node().items}
    assert {"node-a", "node-b"} <= set(nodes)
    node_a = nodes["node-a"]
    assert node_a.status.capacity == {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"}
    assert node_a.status.allocatable == node_a.status.capacity
    assert node_a.metadata.labels["zone"] == "z1"
    assert [(c.type, c.status) for c in node_a.status.conditions] == [("Ready", "True")]
    # TaintNodesByCondition is disabled: no not-ready taint on kubelet-less nodes.
    assert not node_a.spec.taints


def test_pod_can_be_created_without_service_account_controller(kube_cluster: KubeCluster) -> None:
    core = k8s_client.CoreV1Api(kube_cluster.api_client)
    pod = k8s_client.V1Pod(
        metadata=k8s_client.V1ObjectMeta(name="p1"),
        spec=k8s_client.V1PodSpec(
            scheduler_name="policydsl",
            containers=[
                k8s_client.V1Container(
                    name="c", image="busybox", resources=k8s_client.V1ResourceRequirements(requests={"cpu": "1"})
                )
            ],
        ),
    )
    core.create_namespaced_pod("default", pod)
    try:
        assert core.read_namespaced_pod("p1", "default").status.phase == "Pending"
    finally:
        core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)


def test_compacting_storage_drops_old_revisions_and_keeps_the_objects(kube_cluster: KubeCluster) -> None:
    from policydsl.cli import devcluster

    core = k8s_client.CoreV1Api(kube_cluster.api_client)
    name = "compaction-probe"
    first = core.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": {"n": "1"}})
    try:
        core.patch_namespaced_config_map(name, "default", {"data": {"n": "2"}})
        old = first.metadata.resource_version

        def read_as_of(revision: str) -> k8s_client.V1ConfigMapList:
            return core.list_namespaced_config_map("default", field_selector=f"metadata.name={name}",
                                                   resource_version=revision, resource_version_match="Exact")

        assert read_as_of(old).items[0].data == {"n": "1"}  # history is there before
        compacted = devcluster.compact_storage(kube_cluster.cluster)
        assert compacted >= int(old)
        with pytest.raises(ApiException) as gone:
            read_as_of(old)
        assert gone.value.status == 410  # "too old resource version": compacted away
        assert core.read_namespaced_config_map(name, "default").data == {"n": "2"}  # the present is kept
        assert devcluster.compact_storage(kube_cluster.cluster) >= compacted  # again: nothing to drop, no error
    finally:
        core.delete_namespaced_config_map(name, "default")
