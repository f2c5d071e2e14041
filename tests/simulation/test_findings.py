"""The simulator's findings (runtime/simulation/findings.py) on small workloads whose answer is
known by construction: head-of-line blocking in admission, a starved sibling queue, jobs naming
a queue that does not exist, the longest waits; and a workload where blocking must not be found."""

from __future__ import annotations

import json
from pathlib import Path

from tests.simulation.sim_helpers import POLICIES, node, pod, podgroup, queue, run_cli, write_objects

POLICY = POLICIES / "volcano-default.policy"     # enqueue with overcommit (factor 1.2) and proportion


def _job(name: str, queue_name: str, cpu: str, arrival: str, duration: str = "10m", **pod_extra) -> list[dict]:
    """A one-pod gang whose PodGroup asks minResources cpu = its pod's request."""
    return [podgroup(name, queue=queue_name, minResources={"cpu": cpu}),
            pod(f"{name}-0", cpu=cpu, memory="1Gi", group=name, arrival=arrival, duration=duration, **pod_extra)]


def _run(capsys, tmp_path: Path, objects: list[dict], until: str = "30m") -> dict:
    snapshot = write_objects(tmp_path / "cluster.yaml", objects)
    code, out, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", until, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def _kinds(document: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for finding in document["findings"]:
        out.setdefault(finding["kind"], []).append(finding)
    return out


def blocked_cluster() -> list[dict]:
    """One 10-cpu node (admission room 12 with overcommit 1.2). ns/big (queue a) asks 8 cpu on a
    disk no node has: admitted at once, never placed, it holds 8 of the 12. Every job of queue
    b asks 5: 8 + 5 > 12, so none is admitted although the node stays idle."""
    objects = [node("n1", cpu="10", memory="64Gi"), queue("a"), queue("b")]
    objects += _job("big", "a", "8", "1s", node_selector={"disk": "ssd"})
    for i in range(3):
        objects += _job(f"small-{i}", "b", "5", f"{1 + i}m")
    return objects


def test_head_of_line_blocking_names_the_holder_and_who_waited_behind_it(capsys, tmp_path: Path) -> None:
    document = _run(capsys, tmp_path, blocked_cluster())
    found = _kinds(document)
    [blocking] = found["head-of-line blocking"]
    assert blocking["explain"] == "ns/big"
    assert set(blocking["jobs"]) == {"ns/big", "ns/small-0", "ns/small-1", "ns/small-2"}
    text = blocking["text"]
    assert "ns/big (queue a) was admitted at 1s and held cpu 8" in text
    assert "3 jobs waited for admission behind it (queue b)" in text
    assert "without being placed (pod needs cpu 8; queue a may allocate 5 more" in text   # its last reason
    assert "idle on average: cpu 10" in text        # the node never ran anything
    assert blocking["next"].startswith(f"policydsl simulate {POLICY} --snapshot ")
    assert blocking["next"].endswith(f"--explain ns/big --at {blocking['next'].rsplit(' ', 1)[1]}")
    assert 1 <= blocking["at"] <= 1800


def test_a_starved_sibling_is_its_own_finding(capsys, tmp_path: Path) -> None:
    found = _kinds(_run(capsys, tmp_path, blocked_cluster()))
    [starved] = found["starved queue"]
    assert "no job of queue b was admitted for" in starved["text"]
    assert "sibling queues under root held admitted jobs they could not place: ns/big (queue a" in starved["text"]
    assert starved["explain"] == "ns/small-0"


def test_no_blocking_when_the_room_is_taken_by_running_jobs(capsys, tmp_path: Path) -> None:
    """The same shapes, but ns/big fits and runs for 20m: queue b waits for admission because the
    cluster is used, not because an admitted job holds room it cannot use."""
    objects = [node("n1", cpu="10", memory="64Gi"), queue("a"), queue("b")]
    objects += _job("big", "a", "8", "1s", duration="20m")
    for i in range(3):
        objects += _job(f"small-{i}", "b", "5", f"{1 + i}m")
    document = _run(capsys, tmp_path, objects, until="1h")
    found = _kinds(document)
    assert "head-of-line blocking" not in found, found
    assert "starved queue" not in found, found
    assert document["queues"]["b"]["started"] == 3


def test_jobs_naming_a_missing_queue_are_named_in_their_own_finding(capsys, tmp_path: Path) -> None:
    objects = [node("n1", cpu="10", memory="64Gi"), queue("a")]
    objects += _job("ok", "a", "1", "1s", duration="5m")
    objects += _job("lost-1", "gpu-team", "1", "1s")
    objects += _job("lost-2", "gpu-team", "1", "2s")
    objects += _job("stuck", "a", "1", "3s", node_selector={"disk": "ssd"})
    found = _kinds(_run(capsys, tmp_path, objects))
    [missing] = found["missing queue"]
    assert missing["jobs"] == ["ns/lost-1", "ns/lost-2"]
    assert "2 jobs name queue `gpu-team`, which neither the policy nor a Queue object declares" in missing["text"]
    assert missing["explain"] == "ns/lost-1"
    # the generic finding no longer hides them, and its example is a job that really waits
    [never] = found["never started"]
    assert never["jobs"] == ["ns/stuck"]
    assert "ns/stuck" in never["text"] and "lost" not in never["text"]


def test_longest_waits_come_with_their_last_reasons(capsys, tmp_path: Path) -> None:
    document = _run(capsys, tmp_path, blocked_cluster())
    waits = document["longest_waits"]
    assert [w["job"] for w in waits][:1] == ["ns/big"]       # waited from 1s to the end
    first = waits[0]
    assert not first["started"] and first["since"] == 1.0 and first["wait"] == 1800 - 1
    assert first["reasons"] and first["next"].endswith("--explain ns/big")
    small = next(w for w in waits if w["job"] == "ns/small-0")
    assert small["reasons"][0].startswith("job needs cpu 5 (minResources)")


def test_the_text_output_prints_findings_and_next_commands(capsys, tmp_path: Path) -> None:
    snapshot = write_objects(tmp_path / "cluster.yaml", blocked_cluster())
    code, out, _ = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", "30m")
    assert code == 0
    flat = " ".join(out.split())
    assert "warning: head-of-line blocking: ns/big (queue a)" in flat
    assert "next: policydsl simulate" in flat and "--explain ns/big --at" in flat
    assert "longest waits" in flat


def test_the_built_in_example_names_train_3_and_the_notebooks_behind_it(capsys) -> None:
    """Issue 32's example: online waits while GPUs idle because ml/train-3 holds admission room."""
    code, out, err = run_cli(capsys, "simulate", POLICY, "-o", "json")
    assert code == 0, err
    found = _kinds(json.loads(out))
    train3 = next(f for f in found["head-of-line blocking"] if f["explain"] == "ml/train-3")
    assert "nvidia.com/gpu 8 of admission room" in train3["text"]
    assert {"research/notebook-6", "research/notebook-7", "research/notebook-8", "research/notebook-9"} \
        <= set(train3["jobs"])
    assert "idle on average: nvidia.com/gpu" in train3["text"]
    assert any("queue online" in f["text"] for f in found["starved queue"])


def test_blocking_behind_a_queue_limit_counts_only_that_queues_jobs(capsys, tmp_path: Path) -> None:
    """Queue a may hold cpu 10 (capability): ns/big (8, never placed) holds 8 of it, so ns/next
    (5, queue a) is refused by queue a's limit; ns/other (queue b) is admitted and runs."""
    objects = [node("n1", cpu="20", memory="64Gi"), queue("a", capability={"cpu": "10"}), queue("b")]
    objects += _job("big", "a", "8", "1s", node_selector={"disk": "ssd"})
    objects += _job("next", "a", "5", "1m")
    objects += _job("other", "b", "5", "1m", duration="5m")
    document = _run(capsys, tmp_path, objects)
    [blocking] = _kinds(document)["head-of-line blocking"]
    assert blocking["jobs"] == ["ns/big", "ns/next"]
    assert "1 job waited for admission behind it (queue a)" in blocking["text"]
    assert document["queues"]["b"]["started"] == 1
