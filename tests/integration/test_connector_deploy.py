"""deploy/: the manifests are complete and consistent, and the scheduler runs as the
ServiceAccount of deploy/rbac.yaml — least privilege that is still enough."""

from __future__ import annotations

import re

from pathlib import Path

import pytest
import yaml

from polling import wait_for

from compiler.pipeline import compile_text
from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import REPO, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster

DEPLOY = REPO / "deploy"
NAMESPACE = "policydsl-system"
ACCOUNT = "policydsl-scheduler"


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


# Which manifests each kustomization lists: tests/integration/test_packaging.py.


def test_configmap_policy_is_the_volcano_default_and_compiles_clean() -> None:
    configmap = documents("configmap.yaml")[0]
    text = configmap["data"]["policy.policy"]
    assert text == (REPO / "policies" / "volcano-default.policy").read_text()
    result = compile_text(text, "configmap.policy")
    assert result.plan is not None and not result.errors


def test_deployment_runs_two_leader_elected_replicas_of_the_configmap_policy() -> None:
    deployment = documents("deployment.yaml")[0]
    spec = deployment["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in args and f"--lease-namespace={NAMESPACE}" in args
    mount = spec["containers"][0]["volumeMounts"][0]
    assert f"--policy={mount['mountPath']}/policy.policy" in args
    assert spec["volumes"][0]["configMap"]["name"] == documents("configmap.yaml")[0]["metadata"]["name"]
    assert spec["serviceAccountName"] == ACCOUNT
    lease_rule = next(r for d in documents("rbac.yaml") if d["kind"] == "Role" for r in d["rules"]
                      if "resourceNames" in r)
    assert f"--lease-name={lease_rule['resourceNames'][0]}" in args


def test_rbac_grants_no_wildcards_and_nothing_destructive() -> None:
    rules = [r for d in documents("rbac.yaml") if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    for rule in rules:
        # nonResourceURLs: the roles that read the port (/metrics, /policy), get only
        assert "*" not in rule["verbs"] + rule.get("resources", []) + rule.get("apiGroups", []) \
            + rule.get("nonResourceURLs", [])
        assert "nonResourceURLs" not in rule or rule["verbs"] == ["get"], rule
        assert not set(rule["verbs"]) & {"delete", "deletecollection", "update", "escalate", "bind", "impersonate"} \
            or rule.get("resourceNames"), rule
        assert not {"secrets", "configmaps"} & set(rule.get("resources", []))


PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
    "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
}


@pytest.fixture
def service_account_kubeconfig(kube_api: KubeApi, kube_cluster: KubeCluster, tmp_path: Path):
    created = []
    for doc in documents("namespace.yaml") + documents("rbac.yaml"):
        try:
            kube_api.post(PATHS[doc["kind"]], doc)
            created.append(f"{PATHS[doc['kind']]}/{doc['metadata']['name']}")
        except ApiError as err:
            assert err.status == 409, err  # left by an earlier run in this cluster
    token = kube_api.post(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": 3600}})["status"]["token"]
    config = yaml.safe_load(kube_cluster.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    path = tmp_path / "scheduler.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield path
    for object_path in reversed(created):
        if not object_path.startswith("/api/v1/namespaces/policydsl-system") or "serviceaccounts" in object_path:
            try:
                kube_api.delete(object_path)
            except ApiError:
                pass


@pytest.mark.integration
def test_scheduler_works_with_exactly_the_deployed_permissions(
    objects: Objects, service_account_kubeconfig: Path, tmp_path: Path
) -> None:
    from runtime.kube.api import connect

    scoped = connect(str(service_account_kubeconfig))
    try:
        for verb, resource, namespace in (("delete", "pods", objects.namespace), ("update", "nodes", ""),
                                          ("list", "secrets", objects.namespace), ("update", "queues", "")):
            review = scoped.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}})
            assert review["status"]["allowed"] is False, (verb, resource)
    finally:
        scoped.close()

    name = unique_scheduler_name()
    queue = f"q-{objects.namespace}"
    objects.queue(queue, {"weight": 1})
    for i in range(2):
        objects.node(f"{objects.namespace}-n{i}", cpu="4", memory="16Gi")
    objects.gang("fits", 4, name, queue=queue, cpu="1")
    objects.gang("waits", 4, name, queue=queue, cpu="3")  # 3 cpu pods: only 2 of 4 nodes' worth
    policy = documents("configmap.yaml")[0]["data"]["policy.policy"]
    with SchedulerProcess(tmp_path, policy, service_account_kubeconfig, name, "--leader-elect",
                          "--lease-namespace", NAMESPACE) as scheduler:
        wait_for(lambda: len(objects.bound()) == 4, "the fitting gang bound", 30)
        wait_for(lambda: objects.events_for("waits-0"), "an Event on a waiting pod", 30)
        wait_for(lambda: objects.read_podgroup("waits").get("status", {}).get("conditions"), "the PodGroup status",
                 30)
        wait_for(lambda: objects.api.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")
                 .get("status", {}).get("allocated"), "the Queue status", 30)
        assert scheduler.terminate() == 0
        log = scheduler.log()
    # A refused request logs "403 Forbidden: ..."; a port number may hold the digits 403.
    assert not re.search(r"\b403\b", log) and "orbidden" not in log, log
    assert "released lease" in log
