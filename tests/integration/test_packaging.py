"""Packaging an operator expects: the Helm chart renders deploy/'s kustomize manifests (same RBAC,
same Deployment, Service, PodDisruptionBudget, ConfigMap), its copies (CRDs, policy, Grafana
dashboard) are deploy/'s, the dashboard queries only metrics the scheduler exports, and every
manifest is accepted by a real API server (`kubectl apply --server-side --dry-run=server`, as
server-side apply requests with dryRun=All)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import REPO

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "policydsl"
NAMESPACE = "policydsl-system"
HELM_VERSION = "v3.16.4"   # .ci/install-helm.sh


def helm() -> str:
    cached = Path(os.environ.get("POLICYDSL_CACHE", Path.home() / ".cache" / "policydsl")) / "helm" / HELM_VERSION / \
        "bin" / "helm"
    for candidate in (shutil.which("helm"), str(cached), str(Path.home() / "go" / "bin" / "helm")):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("helm is missing: run `bash .ci/install-helm.sh` (builds it with the Go toolchain)")


def kustomize_documents(folder: Path) -> list[dict]:
    """The resources a kustomization lists (ours have no patches or generators but monitoring's)."""
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    return [d for name in listed for d in yaml.safe_load_all((folder / name).read_text()) if d]


def helm_documents(*values: str) -> list[dict]:
    argv = [helm(), "template", "policydsl", str(CHART), "--namespace", NAMESPACE]
    for value in values:
        argv += ["--set", value]
    rendered = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


def by_kind_and_name(documents: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


# --- no API server ---------------------------------------------------------------------------------

def test_kustomizations_list_every_manifest() -> None:
    for folder, skip in ((DEPLOY, {"crds", "monitoring", "helm"}), (DEPLOY / "crds", set()),
                         (DEPLOY / "monitoring", set())):
        listed = set(yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"])
        on_disk = {p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml"}
        assert listed == on_disk - skip, folder


def test_the_chart_copies_are_deploys() -> None:
    for crd in (DEPLOY / "crds").glob("*.volcano.sh_*.yaml"):
        assert (CHART / "crds" / crd.name).read_text() == crd.read_text(), crd.name
    assert (CHART / "files" / "policy.policy").read_text() == (REPO / "policies" / "volcano-default.policy").read_text()
    assert (CHART / "files" / "grafana-dashboard.json").read_text() == \
        (DEPLOY / "monitoring" / "grafana-dashboard.json").read_text()


def test_the_grafana_dashboard_queries_only_metrics_the_scheduler_exports(tmp_path: Path) -> None:
    from compiler.pipeline import compile_text
    from runtime.service.embedded import EmbeddedCluster
    from runtime.service.loop import Scheduler
    from runtime.kube.metrics import Metrics
    from runtime.cluster.model import ClusterState, Node, Pod

    metrics = Metrics(volcano=True)
    state = ClusterState()
    state.nodes["n"] = Node("n", {"cpu": 1000, "memory": 2**30, "pods": 10})
    state.pods["ns/p"] = Pod("ns", "p", {"cpu": 2000}, uid="u")
    plan = compile_text((REPO / "policies" / "volcano-default.policy").read_text(), "p.policy").plan
    Scheduler(plan, EmbeddedCluster(state), metrics=metrics).run_once()
    text = metrics.render().decode()
    families = set(re.findall(r"^# TYPE (\S+) (\w+)", text, re.M))
    exported = set()
    for name, kind in families:
        exported |= {name} | ({f"{name}_total"} if kind == "counter" else set()) | \
            ({f"{name}_bucket", f"{name}_count", f"{name}_sum"} if kind == "histogram" else set())
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    queried = {m for panel in dashboard["panels"] for target in panel["targets"]
               for m in re.findall(r"\b((?:volcano|policydsl)_[a-z0-9_]+)", target["expr"])}
    assert queried and queried <= exported, queried - exported


# --- helm ------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_helm_template_renders_the_kustomize_manifests() -> None:
    kustomize = by_kind_and_name([d for d in kustomize_documents(DEPLOY) if d["kind"] != "Namespace"])
    chart = by_kind_and_name(helm_documents())
    assert set(chart) == set(kustomize)
    for key, document in kustomize.items():
        assert chart[key] == document, key


@pytest.mark.integration
def test_helm_values_change_what_they_say() -> None:
    chart = by_kind_and_name(helm_documents("replicas=1", "leaderElect=false", "volcanoMetrics=false",
                                            "podDisruptionBudget.enabled=false", "serviceMonitor.enabled=true",
                                            "grafanaDashboard.enabled=true", "schedulerName=custom"))
    deployment = chart[("Deployment", "policydsl-scheduler")]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["spec"]["replicas"] == 1
    assert "--leader-elect" not in args and "--no-volcano-metrics" in args and "--scheduler-name=custom" in args
    assert ("PodDisruptionBudget", "policydsl-scheduler") not in chart
    assert ("ServiceMonitor", "policydsl-scheduler") in chart
    dashboard = chart[("ConfigMap", "policydsl-grafana-dashboard")]
    assert json.loads(dashboard["data"]["grafana-dashboard.json"])["uid"] == "policydsl-scheduler"


def test_the_lease_namespace_default_is_deploys() -> None:
    from policydsl.cli import build_parser

    args = build_parser().parse_args(["run", "--policy", str(REPO / "policies" / "volcano-default.policy")])
    deployment = next(d for d in kustomize_documents(DEPLOY) if d["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == args.lease_namespace == NAMESPACE


# --- the API server accepts them --------------------------------------------------------------------

PLURALS = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ConfigMap": "configmaps",
           "Service": "services", "Deployment": "deployments", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "PodDisruptionBudget": "poddisruptionbudgets", "CustomResourceDefinition": "customresourcedefinitions",
           "ServiceMonitor": "servicemonitors"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
# Just enough of the Prometheus operator's CRD for the API server to take a ServiceMonitor.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def path_of(document: dict) -> str:
    group_version = document["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    kind = document["kind"]
    namespace = "" if kind in CLUSTER_SCOPED else f"/namespaces/{document['metadata'].get('namespace', NAMESPACE)}"
    return f"{base}{namespace}/{PLURALS[kind]}/{document['metadata']['name']}"


def server_dry_run(api: KubeApi, document: dict) -> None:
    api.request("PATCH", path_of(document), body=document, content_type="application/apply-patch+yaml",
                query={"dryRun": "All", "fieldManager": "policydsl-test", "force": "true"})


@pytest.mark.integration
def test_every_manifest_is_accepted_by_the_api_server(kube_api: KubeApi) -> None:
    # Namespaced objects need their namespace to exist, dry run or not.
    try:
        kube_api.post("/api/v1/namespaces", yaml.safe_load((DEPLOY / "namespace.yaml").read_text()))
    except ApiError as err:
        assert err.status == 409, err
    try:
        kube_api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", SERVICE_MONITOR_CRD)
    except ApiError as err:
        assert err.status == 409, err
    import time

    from polling import wait_for

    def established() -> bool:
        crd = kube_api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                           "servicemonitors.monitoring.coreos.com")
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for(established, "the ServiceMonitor CRD", 20)
    time.sleep(1)   # discovery of the new resource
    monitoring = [d for d in yaml.safe_load_all((DEPLOY / "monitoring" / "servicemonitor.yaml").read_text()) if d]
    documents = kustomize_documents(DEPLOY / "crds") + kustomize_documents(DEPLOY) + monitoring
    documents += helm_documents("serviceMonitor.enabled=true", "grafanaDashboard.enabled=true")
    refused = []
    for document in documents:
        try:
            server_dry_run(kube_api, document)
        except ApiError as err:
            refused.append(f"{document['kind']} {document['metadata']['name']}: {err}")
    assert not refused, "\n".join(refused)
    # A bad one is refused: the check can fail.
    broken = json.loads(json.dumps(next(d for d in documents if d["kind"] == "Deployment")))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(ApiError):
        server_dry_run(kube_api, broken)
