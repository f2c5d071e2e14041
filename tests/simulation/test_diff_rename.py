"""`policydsl diff --rename-queue OLD=NEW` compares a migration that renames queues (issue 32):
the NEW run's inputs put OLD's jobs in NEW, and OLD's figures line up with NEW's. And a pod
without a PodGroup counts in the queue its annotation names, not in default."""

from __future__ import annotations

import json
from pathlib import Path

from policydsl.cli import main

POLICY = """policy "{name}" version 1
actions [enqueue, allocate, backfill]
tier {{
  plugin priority
  plugin gang
}}
tier {{
  plugin predicates
  plugin proportion
}}
queue {queue} {{
  weight = 1
}}
"""
CLUSTER = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "8", memory: 32Gi}}}
- apiVersion: scheduling.volcano.sh/v1beta1
  kind: PodGroup
  metadata: {name: train, namespace: ml}
  spec: {minMember: 2, queue: research}
- {apiVersion: v1, kind: Pod, metadata: {name: train-0, namespace: ml, annotations: {scheduling.k8s.io/group-name: train}},
   spec: {schedulerName: volcano, containers: [{resources: {requests: {cpu: "2"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: train-1, namespace: ml, annotations: {scheduling.k8s.io/group-name: train}},
   spec: {schedulerName: volcano, containers: [{resources: {requests: {cpu: "2"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: solo, namespace: ml, annotations: {scheduling.volcano.sh/queue-name: research}},
   spec: {schedulerName: volcano, containers: [{resources: {requests: {cpu: "1"}}}]}}
"""


def files(tmp_path: Path) -> list[str]:
    (tmp_path / "old.policy").write_text(POLICY.format(name="old", queue="research"))
    (tmp_path / "new.policy").write_text(POLICY.format(name="new", queue="ml-research"))
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    return [str(tmp_path / "old.policy"), str(tmp_path / "new.policy"), "--snapshot", str(tmp_path / "cluster.yaml"),
            "--cycles", "1", "-o", "json"]


def test_without_the_rename_the_new_policy_cannot_place_the_jobs(tmp_path, capsys):
    assert main(["diff", *files(tmp_path)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert {p["pod"] for p in result["placements"]} == {"ml/train-0", "ml/train-1", "ml/solo"}
    started = {m["name"]: (m["old"], m["new"]) for m in result["metrics"]}
    # The group-less pod counts in research (its annotation), not in default.
    assert started["queue research jobs started"] == (2.0, 0.0)


def test_a_renamed_queue_compares_with_itself(tmp_path, capsys):
    assert main(["diff", *files(tmp_path), "--rename-queue", "research=ml-research"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["placements"] == [] and not result["changed"]
    names = {m["name"] for m in result["metrics"]}
    assert "queue ml-research (was research) jobs started" in names
    assert not any(n.startswith("queue research ") for n in names)


def test_a_rename_to_a_queue_the_new_policy_lacks_is_a_usage_error(tmp_path, capsys):
    assert main(["diff", *files(tmp_path), "--rename-queue", "research=nope"]) == 2
    assert "nope is not a queue of" in capsys.readouterr().err


def test_a_malformed_rename_is_a_usage_error(tmp_path, capsys):
    assert main(["diff", *files(tmp_path), "--rename-queue", "research"]) == 2
    assert "give OLD=NEW" in capsys.readouterr().err
