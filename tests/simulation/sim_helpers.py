"""Builders for simulator tests: Kubernetes objects as dicts, written to YAML files, and the
CLI run through `policydsl.cli.main`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from policydsl.cli import main

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
GROUP = "scheduling.k8s.io/group-name"
ARRIVAL = "simulation.policydsl.io/arrival"
DURATION = "simulation.policydsl.io/duration"

# Two tiers every test policy shares; the scoring plugin varies.
JOB_TIER = "tier {\n  plugin priority\n  plugin gang\n  plugin conformance\n}\n"


def policy_text(name: str, actions: str, node_tier: str, extra: str = "") -> str:
    return f'policy "{name}" version 1\nactions [{actions}]\n{JOB_TIER}tier {{\n{node_tier}\n}}\n{extra}'


def node(name: str, cpu: str = "4", memory: str = "8Gi", labels: dict | None = None, taints: list | None = None,
         **extra: str) -> dict:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
                           "status": {"allocatable": {"cpu": cpu, "memory": memory, **extra}}}
    if taints:
        obj["spec"] = {"taints": taints}
    return obj


def pod(name: str, ns: str = "ns", cpu: str = "1", memory: str = "1Gi", group: str | None = None,
        node_name: str | None = None, priority: int | None = None, arrival: str | None = None,
        duration: str | None = None, tolerations: list | None = None, node_selector: dict | None = None,
        **extra: str) -> dict:
    annotations = {}
    if group:
        annotations[GROUP] = group
    if arrival:
        annotations[ARRIVAL] = arrival
    if duration:
        annotations[DURATION] = duration
    spec: dict[str, Any] = {"schedulerName": "volcano",
                            "containers": [{"resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": spec}


def podgroup(name: str, ns: str = "ns", min_member: int = 1, queue: str = "default", phase: str | None = None,
             **spec: Any) -> dict:
    obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member, "queue": queue, **spec}}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def queue(name: str, weight: int = 1, **spec: Any) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": weight, **spec}}


def workload(*jobs: dict, seed: int = 1) -> dict:
    return {"apiVersion": "simulation.policydsl.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w"},
            "spec": {"seed": seed, "jobs": list(jobs)}}


def write_objects(path: Path, objects: list[dict]) -> Path:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def write_policy(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_in_terminal(*argv: str, columns: int = 80, timeout: float = 120) -> str:
    """`python -m policydsl ARGV` in a pseudo-terminal `columns` wide (COLUMNS set too, so rich
    sees a terminal of that width); its output with the terminal's escape sequences removed."""
    import os
    import pty
    import re
    import select
    import subprocess
    import sys
    import time

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "policydsl", *map(str, argv)], stdin=follower, stdout=follower,
                            stderr=follower, env=env, cwd=Path(__file__).resolve().parents[2])
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(leader)
        proc.wait(timeout=10)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", text)
    return "\n".join(line.split("\r")[-1] for line in text.split("\n"))
