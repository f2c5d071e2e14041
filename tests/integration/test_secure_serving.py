"""Secure serving on the dev cluster (issue 30): the scheduler with --secure-serving reviews real
ServiceAccount tokens (TokenRequest) through the API server. Without credentials 401; a
ServiceAccount without the right 403; Prometheus' role (deploy/rbac.yaml's policydsl-metrics-reader)
reads /metrics; a tenant allowed `get/list pods` in its namespace explains its pods and sees its
pending jobs, nothing of another namespace's; probes open; `policydsl dashboard` forwards with the
caller's token and the page shows what the caller may see."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from polling import wait_for
from runtime.kube.api import ApiError, KubeApi

from .connector_helpers import REPO, Objects, SchedulerProcess, unique_scheduler_name
from .test_dashboard_browser import browser
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration

RBAC = "/apis/rbac.authorization.k8s.io/v1"
POLICY = """policy "secure" version 1
actions [enqueue, allocate]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin predicates
  plugin proportion
}
"""


def deployed_cluster_role(name: str) -> dict:
    return next(d for d in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text())
                if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == name)


class Accounts:
    """ServiceAccounts in one namespace, their bindings and tokens; everything removed after."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api, self.namespace, self.made = api, namespace, []

    def make(self, path: str, body: dict) -> None:
        try:
            self.api.post(path, body)
        except ApiError as err:
            assert err.status == 409, err
        self.made.append(f"{path}/{body['metadata']['name']}")

    def account(self, name: str) -> str:
        self.make(f"/api/v1/namespaces/{self.namespace}/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        return self.api.post(f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
                             {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                              "spec": {"expirationSeconds": 3600}})["status"]["token"]

    def bind(self, account: str, role_kind: str, role: str, namespace: str | None = None) -> None:
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1",
                   "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
                   "metadata": {"name": f"{account}-{role}-{uuid.uuid4().hex[:4]}"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}]}
        self.make(f"{RBAC}/namespaces/{namespace}/rolebindings" if namespace else f"{RBAC}/clusterrolebindings",
                  binding)

    def cleanup(self) -> None:
        for path in reversed(self.made):
            try:
                self.api.delete(path)
            except ApiError:
                pass


def kubeconfig_with(kube_cluster: KubeCluster, token: str, path: Path) -> Path:
    config = yaml.safe_load(kube_cluster.kubeconfig.read_text())
    config["users"] = [{"name": u["name"], "user": {"token": token}} for u in config["users"]]
    path.write_text(yaml.safe_dump(config))
    return path


def secure_url(scheduler: SchedulerProcess) -> str:
    def find() -> str | None:
        assert scheduler.proc is not None
        if scheduler.proc.poll() is not None:
            raise AssertionError(f"scheduler exited with {scheduler.proc.returncode}:\n{scheduler.log()}")
        found = re.findall(r"metrics on (https://\S+)/metrics", scheduler.log())
        return found[-1] if found else None
    return wait_for(find, "the scheduler's https address", 30)


def get(url: str, context: ssl.SSLContext, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_secure_serving_with_real_service_accounts(tmp_path: Path, objects: Objects, kube_api: KubeApi,
                                                   kube_cluster: KubeCluster) -> None:
    other = Objects(kube_api, f"t-{uuid.uuid4().hex[:8]}")
    kube_api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": other.namespace}})
    accounts = Accounts(kube_api, objects.namespace)
    try:
        for role in ("policydsl-metrics-reader", "policydsl-queue-viewer"):
            accounts.make(f"{RBAC}/clusterroles", deployed_cluster_role(role))
        accounts.make(f"{RBAC}/namespaces/{objects.namespace}/roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        tenant, nobody, prometheus = accounts.account("tenant"), accounts.account("nobody"), \
            accounts.account("prometheus")
        accounts.bind("tenant", "Role", "pod-reader", objects.namespace)
        accounts.bind("tenant", "ClusterRole", "policydsl-queue-viewer")
        accounts.bind("prometheus", "ClusterRole", "policydsl-metrics-reader")

        name = unique_scheduler_name()
        objects.node(f"{objects.namespace}-n0", cpu="2", memory="4Gi")
        objects.gang("mine", 1, name, cpu="8")      # waits: no node has 8 cpu
        other.gang("theirs", 1, name, cpu="8")
        certs = tmp_path / "certs"
        with SchedulerProcess(tmp_path, POLICY, kube_cluster.kubeconfig, name, "--secure-serving",
                              "--cert-dir", str(certs)) as scheduler:
            url = secure_url(scheduler)
            context = ssl.create_default_context(cafile=str(certs / "policydsl.crt"))   # verified, by SAN
            wait_for(lambda: get(url + "/readyz", context)[0] == 200, "/readyz, open", 30)
            assert get(url + "/healthz", context)[0] == 200 and get(url + "/livez", context)[0] == 200

            assert get(url + "/metrics", context)[0] == 401
            assert get(url + "/metrics", context, "not-a-token")[0] == 401
            assert get(url + "/metrics", context, nobody)[0] == 403
            status, text = get(url + "/metrics", context, prometheus)
            assert status == 200 and "policydsl_" in text
            assert get(url + "/api/v1/queues", context, prometheus)[0] == 403

            mine = f"/api/v1/explain/{objects.namespace}/mine"
            wait_for(lambda: get(url + mine, context, tenant)[0] == 200, "the tenant's explain", 30)
            assert "mine" in get(url + mine, context, tenant)[1]
            status, text = get(url + f"/api/v1/explain/{other.namespace}/theirs", context, tenant)
            assert status == 403 and "theirs" not in text
            assert get(url + mine, context, nobody)[0] == 403

            def pending() -> dict:
                return json.loads(get(url + "/api/v1/queues/default/pending", context, tenant)[1])
            wait_for(lambda: pending().get("hidden") == 1, "the other namespace's job counted, not listed", 30)
            document = pending()
            assert [j["name"] for j in document["jobs"]] == [f"{objects.namespace}/mine"]
            assert other.namespace not in json.dumps(document)

            # The documented way in for a person: `policydsl dashboard` forwarding with their token.
            forwarder = subprocess.Popen(
                [sys.executable, "-m", "policydsl", "dashboard", "--kubeconfig",
                 str(kubeconfig_with(kube_cluster, tenant, tmp_path / "tenant.kubeconfig")), "--scheduler", url,
                 "--certificate-authority", str(certs / "policydsl.crt"), "--address", "127.0.0.1:0"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, text=True)
            try:
                line = forwarder.stdout.readline()
                local = re.search(r"dashboard on (http://\S+)/ui", line)
                assert local, line
                with urllib.request.urlopen(local.group(1) + "/ui", timeout=10) as response:
                    page = response.read().decode()
                assert f'data-job="{objects.namespace}/mine"' in page and other.namespace not in page
                # And in a real browser (tests/integration/test_dashboard_browser.py's headless chromium).
                driver = browser()
                try:
                    driver.get(local.group(1) + "/ui")
                    from selenium.webdriver.common.by import By

                    job = driver.find_element(By.CSS_SELECTOR, f'tr.pending-job[data-job="{objects.namespace}/mine"]')
                    assert job.find_element(By.CSS_SELECTOR, "td.reason").text
                    assert driver.find_element(By.ID, "queue-tree") and driver.find_element(By.ID, "filtered")
                    assert other.namespace not in driver.page_source
                finally:
                    driver.quit()
            finally:
                forwarder.terminate()
                forwarder.wait(timeout=10)
    finally:
        accounts.cleanup()
        other.cleanup()

