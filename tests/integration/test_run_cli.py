"""`policydsl run` and `policydsl dev-cluster` as a user meets them: exit codes, messages,
signals, the metrics endpoint, the embedded cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from polling import wait_for

from .connector_helpers import GANG_POLICY, REPO, Objects, SchedulerProcess, unique_scheduler_name
from .kube_helpers import KubeCluster


def policydsl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policydsl", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "ok.policy"
    path.write_text(GANG_POLICY)
    return path


def assert_clean_failure(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def test_invalid_policy_exits_2_with_located_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.policy"
    bad.write_text('policy "bad" version 1\nactions [allocate]\ntier {\n  plugin gnag\n}\n')
    result = policydsl("run", "--policy", str(bad), "--cluster", f"embedded:{REPO / 'examples'}")
    assert_clean_failure(result, f"{bad}:4:10", "gnag", "the policy has errors, not starting")


@pytest.mark.parametrize("content, expected", [
    (None, "argument --kubeconfig: "),  # checked as the flag is parsed
    ("this: [is not a kubeconfig", "invalid kubeconfig"),
    ("apiVersion: v1\nkind: Config\nclusters: []\n", "invalid kubeconfig"),
])
def test_bad_kubeconfig_exits_2(tmp_path: Path, policy: Path, content: str | None, expected: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    if content is not None:
        kubeconfig.write_text(content)
    assert_clean_failure(policydsl("run", "--policy", str(policy), "--kubeconfig", str(kubeconfig)), expected)


def test_unreachable_api_server_exits_2(tmp_path: Path, policy: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    result = policydsl("run", "--policy", str(policy), "--kubeconfig", str(kubeconfig))
    assert_clean_failure(result, "cannot reach the API server at https://127.0.0.1:1")


@pytest.mark.parametrize("args, expected", [
    (["--cluster", "kind:foo"], "argument --cluster: `kind:foo` is not embedded:SNAPSHOT"),
    (["--cluster", "embedded:/no/such/dir"], "argument --cluster: `/no/such/dir`: no such file or folder"),
    (["--schedule-period", "soon"], "is not a positive duration"),
])
def test_bad_options_exit_2(policy: Path, args: list[str], expected: str) -> None:
    assert_clean_failure(policydsl("run", "--policy", str(policy), *args), expected)


def test_embedded_cluster_runs_the_same_loop(tmp_path: Path, policy: Path) -> None:
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}} for i in range(4)]
    objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "job", "namespace": "ns"}, "spec": {"minMember": 8},
                    "status": {"phase": "Inqueue"}})
    objects += [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"job-{i}", "namespace": "ns",
                              "annotations": {"scheduling.k8s.io/group-name": "job"}},
                 "spec": {"schedulerName": "volcano",
                          "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
                for i in range(8)]
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(objects))
    result = policydsl("run", "--policy", str(policy), "--cluster", f"embedded:{snapshot}", "--cycles", "2",
                       "--schedule-period", "100ms", "--metrics-addr", "off")
    assert result.returncode == 0, result.stderr
    assert "cycle 1: 8 bound" in result.stderr
    assert "cycle 2" not in result.stderr  # nothing left to do: no log line for it
    assert "stopped after 2 cycles" in result.stderr


@pytest.mark.integration
def test_sigterm_stops_cleanly_and_endpoints_answer(
    objects: Objects, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    name = unique_scheduler_name()
    objects.node(f"{objects.namespace}-n0", cpu="8", memory="64Gi")
    objects.gang("job", 2, name, cpu="1")
    with SchedulerProcess(tmp_path, GANG_POLICY, kube_cluster.kubeconfig, name) as scheduler:
        scheduler.wait_ready()
        wait_for(lambda: len(objects.bound()) == 2, "the gang bound", 30)
        group = wait_for(lambda: objects.read_podgroup("job").get("status", {}).get("phase") == "Running"
                         and objects.read_podgroup("job"), "the PodGroup Running", 30)
        # Our writes carry our user agent, so the API server names us as their field manager.
        assert "policydsl" in {f.get("manager") for f in group["metadata"]["managedFields"]}
        assert scheduler.get("/healthz") == (200, "ok")
        assert scheduler.get("/readyz") == (200, "ok")
        assert scheduler.get("/nope")[0] == 404
        status, text = scheduler.get("/metrics")
        assert status == 200
        for metric in ("policydsl_e2e_scheduling_duration_seconds_bucket",
                       'policydsl_action_duration_seconds_count{action="allocate"}',
                       "policydsl_pods_scheduled_total 2.0", 'policydsl_queue_allocated_cpu_cores{queue="default"} 2.0',
                       'policydsl_queue_share_ratio{queue="default"}', "policydsl_bind_errors_total 0.0"):
            assert metric in text, metric
        assert scheduler.terminate() == 0
        log = scheduler.log()
    assert "SIGTERM: finishing the current cycle, then stopping" in log
    assert "Traceback" not in log


@pytest.mark.integration
def test_dev_cluster_command_up_and_down(tmp_path: Path) -> None:
    directory = tmp_path / "dc"
    up = policydsl("dev-cluster", "up", "--dir", str(directory), timeout=180)
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = Path(up.stdout.strip())
        assert kubeconfig == directory / "kubeconfig" and kubeconfig.is_file()
        from runtime.kube.api import connect

        api = connect(str(kubeconfig))
        try:
            assert api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.volcano.sh")
        finally:
            api.close()
    finally:
        down = policydsl("dev-cluster", "down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert not (directory / "devcluster.json").exists()
