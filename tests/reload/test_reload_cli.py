"""`policydsl run --cluster embedded:SNAPSHOT` as a process: reload on file changes and SIGHUP,
the /policy and /readyz endpoints, metrics, and exit 2 for a policy that starts out invalid."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from polling import wait_for
from reload_helpers import policy_text, revision_of, write

REPO = Path(__file__).resolve().parents[2]


def snapshot(path: Path) -> Path:
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}} for i in range(2)]
    objects += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns"},
                 "spec": {"schedulerName": "volcano",
                          "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
                for i in range(3)]
    path.write_text(yaml.safe_dump_all(objects))
    return path


class RunProcess:
    def __init__(self, tmp: Path, policy: Path, *extra: str) -> None:
        self.log_path = tmp / "run.log"
        argv = [sys.executable, "-m", "policydsl", "run", "--policy", str(policy),
                "--cluster", f"embedded:{snapshot(tmp / 'cluster.yaml')}", "--schedule-period", "100ms",
                "--metrics-addr", "127.0.0.1:0", *extra]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        self._url: str | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self) -> str:
        def find() -> str | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited with {self.proc.returncode}:\n{self.log()}")
            found = re.findall(r"metrics on (http://\S+)/metrics", self.log())
            return found[-1] if found else None
        if self._url is None:
            self._url = wait_for(find, "the metrics address")
        return self._url

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url() + path, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def policy(self) -> dict:
        status, body = self.get("/policy")
        assert status == 200, body
        return json.loads(body)

    def metric(self, name: str, **labels: str) -> float:
        total = 0.0
        for family in text_string_to_metric_families(self.get("/metrics")[1]):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def run_process(tmp_path: Path) -> Iterator:
    started: list[RunProcess] = []

    def start(policy: Path, *extra: str) -> RunProcess:
        started.append(RunProcess(tmp_path, policy, *extra))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def test_run_reloads_a_policy_folder_and_shows_it(tmp_path: Path, run_process) -> None:
    folder = tmp_path / "policy"
    write(folder / "queues.policy", 'policy "queues" version 1\nqueue team { weight = 1 }\n')
    write(folder / "main.policy", policy_text(includes=("queues.policy",)))
    first = revision_of(folder)
    run = run_process(folder)
    wait_for(lambda: run.get("/readyz") == (200, "ok"), "ready")
    shown = run.policy()
    assert shown["revision"] == first and shown["name"] == "reload-test"
    # Named from the policy's folder, not by path: the port tells no file system layout (issue 30).
    assert shown["sources"] == ["queues.policy", "main.policy"] and shown["main"] == "main.policy"
    assert {q["name"] for q in shown["plan"]["queues"]} == {"team", "default"}
    assert run.metric("policydsl_policy_active_info", revision=first) == 1

    write(folder / "queues.policy", 'policy "queues" version 1\nqueue team { weight = -1 }\n')
    wait_for(lambda: run.metric("policydsl_policy_reload_total", result="error") == 1, "the failed reload counted")
    log = run.log()
    assert re.search(rf"{re.escape(str(folder / 'queues.policy'))}:2:\d+: error\[PD\d+\]", log), log
    assert f"revision {first} keeps running" in log
    shown = run.policy()
    assert shown["revision"] == first and shown["last_reload"]["result"] == "error"
    assert run.get("/readyz") == (200, "ok")  # the last good policy is still active

    write(folder / "queues.policy", 'policy "queues" version 1\nqueue team { weight = 4 }\n')
    second = revision_of(folder)
    wait_for(lambda: run.policy()["revision"] == second, "the fixed policy active")
    assert run.metric("policydsl_policy_active_info", revision=second) == 1
    assert run.metric("policydsl_policy_active_info", revision=first) == 0
    wait_for(lambda: run.metric("policydsl_policy_cycles_total", revision=second) > 0, "cycles under the new policy")
    assert run.terminate() == 0
    log = run.log()
    assert "Traceback" not in log
    assert f"policy reload-test revision {second} active from cycle" in log


def test_sighup_reloads_when_not_watching(tmp_path: Path, run_process) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = revision_of(policy)
    run = run_process(policy, "--no-watch")
    wait_for(lambda: run.get("/readyz")[0] == 200, "ready")
    write(policy, policy_text(binpack_weight=2))
    second = revision_of(policy)
    wait_for(lambda: run.metric("policydsl_policy_cycles_total", revision=first) > 3, "cycles")
    assert run.policy()["revision"] == first  # not watching: the edit waits for SIGHUP
    run.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: run.policy()["revision"] == second, "the policy reloaded on SIGHUP")
    assert run.policy()["last_reload"]["trigger"] == "SIGHUP"
    assert run.terminate() == 0


def test_an_invalid_policy_at_start_exits_2_before_anything_runs(tmp_path: Path) -> None:
    folder = tmp_path / "policy"
    write(folder / "main.policy", policy_text(includes=("teams.policy",)))
    write(folder / "teams.policy", 'policy "teams" version 1\nqueue team { weight = -1 }\n')
    result = subprocess.run([sys.executable, "-m", "policydsl", "run", "--policy", str(folder),
                             "--cluster", f"embedded:{snapshot(tmp_path / 'cluster.yaml')}",
                             "--metrics-addr", "127.0.0.1:0"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2, result.stderr
    assert re.search(rf"{re.escape(str(folder / 'teams.policy'))}:2:\d+: error\[PD\d+\]", result.stderr)
    assert "the policy has errors, not starting" in result.stderr
    assert "metrics on" not in result.stderr and "Traceback" not in result.stderr
