"""Integration tests against a real kube-apiserver + etcd (policydsl/cli/devcluster.py).

The binaries come from `bash .ci/install-kube.sh`. When they are missing the
`kube_cluster` fixture FAILS with the install instructions: an integration
test that silently skips tests nothing.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

# `runtime` lives at the repository root; make it importable however pytest
# was started (plain `pytest` only puts the test rootdir on sys.path).
_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from bench.e2e import binaries  # noqa: E402
from policydsl.cli import devcluster  # noqa: E402
from runtime.kube.api import KubeApi  # noqa: E402

from . import volcano_controller  # noqa: E402
from .kube_helpers import KubeCluster, create_fake_node  # noqa: E402
from .connector_helpers import in_process, kube_api, objects  # noqa: E402,F401 - fixtures of the connector tests


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real kube-apiserver + etcd (bash .ci/install-kube.sh)")


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """One dev cluster for the whole session, with the Volcano CRDs installed."""
    directory = tmp_path_factory.mktemp("devcluster")
    try:
        cluster = devcluster.up(directory)
    except devcluster.DevClusterError as exc:
        error = str(exc)
    else:
        error = ""
    if error:  # failed outside the except block, so pytest shows just the message
        pytest.fail(f"dev cluster unavailable: {error}", pytrace=False)
    api_client = cluster.api_client()
    try:
        yield KubeCluster(cluster=cluster, kubeconfig=cluster.kubeconfig, api_client=api_client)
    finally:
        api_client.close()
        devcluster.down(directory)


@pytest.fixture
def fake_nodes(kube_cluster: KubeCluster) -> Iterator[Callable[..., k8s_client.V1Node]]:
    """Factory `fake_nodes(name, cpu=..., memory=..., ...)`; the nodes are deleted after the test."""
    created: list[str] = []

    def make(name: str, **kwargs: object) -> k8s_client.V1Node:
        node = create_fake_node(kube_cluster.api_client, name, **kwargs)
        created.append(name)
        return node

    yield make
    core = k8s_client.CoreV1Api(kube_cluster.api_client)
    for name in created:
        core.delete_node(name)


@pytest.fixture(scope="module")
def vc_controller(kube_cluster: KubeCluster,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[volcano_controller.VolcanoController]:
    """Volcano's vc-controller-manager (job, PodGroup, Queue, GC controllers) running against the
    session's cluster, with Volcano's batch CRDs installed; `.scheduler_name` is a name of its
    own for the module's vcjobs. Fails, with how to build it, when the binary is missing."""
    try:
        binary = binaries.vc_controller_manager()
    except binaries.MissingBinary as exc:
        error = str(exc)
    else:
        error = ""
    if error:
        pytest.fail(f"vc-controller-manager unavailable: {error}", pytrace=False)
    volcano_controller.install_crds(kube_cluster.cluster)
    api = KubeApi(kube_cluster.api_client)
    made_root = volcano_controller.ensure_root_queue(api)
    name = f"policydsl-vc-{uuid.uuid4().hex[:6]}"
    log = tmp_path_factory.mktemp("vc-controller") / "vc-controller-manager.log"
    controller = volcano_controller.VolcanoController(binary, kube_cluster.kubeconfig, name, log)
    try:
        yield controller.start()
    finally:
        controller.stop()
        if made_root:
            api.delete(volcano_controller.ROOT_QUEUE_PATH)
