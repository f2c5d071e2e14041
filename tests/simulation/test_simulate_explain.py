"""`simulate --explain NS/NAME --at T` and `--at T --snapshot-out FILE` (issue 32): the explanation
inside a simulation is the one `explain --snapshot` gives for the snapshot written at the same time."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.cluster.objects import load_path
from tests.simulation.sim_helpers import POLICIES, node, pod, podgroup, queue, run_cli, workload, write_objects
from tests.simulation.test_findings import _job, blocked_cluster

POLICY = POLICIES / "volcano-default.policy"


def _snapshot(tmp_path: Path, objects: list[dict]) -> Path:
    return write_objects(tmp_path / "cluster.yaml", objects)


def _busy_cluster() -> list[dict]:
    """Jobs that run, finish and wait at different times: some placed, some pending at 10m."""
    objects = [node("n1", cpu="10", memory="64Gi"), node("n2", cpu="4", memory="64Gi"), queue("a"), queue("b")]
    for i in range(6):
        objects += _job(f"a-{i}", "a", "3", f"{1 + 2 * i}m", duration="15m")
        objects += _job(f"b-{i}", "b", "2", f"{2 + 2 * i}m", duration="5m")
    return objects


def test_explain_inside_the_run_is_explain_of_the_snapshot_written_then(capsys, tmp_path: Path) -> None:
    snapshot = _snapshot(tmp_path, _busy_cluster())
    out_file = tmp_path / "at.yaml"
    code, _, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--at", "10m", "--snapshot-out", out_file)
    assert code == 0, err
    assert f"snapshot at 10m: {out_file}" in err
    state = load_path(out_file)
    placed = {k for k, p in state.pods.items() if p.node_name}
    waiting = {k for k, p in state.pods.items() if not p.node_name}
    assert placed and waiting                    # the moment is a busy one
    # objects that arrive later are not there yet: a-5 at 11m, b-5 at 12m
    assert not any(k.startswith(("ns/a-5", "ns/b-5")) for k in [*state.pods, *state.podgroups])
    assert "ns/a-4" in state.podgroups
    for target in sorted(waiting)[:2] + sorted(placed)[:1]:
        code, inside, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--explain", target,
                                    "--at", "10m")
        assert code == 0, err
        assert inside.startswith("at 10m of the simulation:\n")
        code, offline, err = run_cli(capsys, "explain", target, "--snapshot", out_file, "--policy", POLICY)
        assert code == 0, err
        assert inside.split("\n", 1)[1] == offline


def test_explain_json_carries_the_time(capsys, tmp_path: Path) -> None:
    snapshot = _snapshot(tmp_path, blocked_cluster())
    code, out, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", "30m", "--explain",
                             "ns/big", "--at", "10m", "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["at"] == 600.0
    assert "queue a may allocate" in json.dumps(document)


def test_the_default_time_is_the_end_of_the_run(capsys, tmp_path: Path) -> None:
    snapshot = _snapshot(tmp_path, blocked_cluster())
    code, out, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", "20m", "--explain",
                             "ns/small-1")
    assert code == 0, err
    assert out.startswith("at 20m of the simulation:\n") and "not admitted by enqueue" in out


def test_bad_uses_are_refused_with_exit_2(capsys, tmp_path: Path) -> None:
    snapshot = _snapshot(tmp_path, blocked_cluster())
    cases = [
        (("--at", "5m"), "--at goes with --explain NS/NAME or --snapshot-out FILE"),
        (("--until", "10m", "--explain", "ns/big", "--at", "20m"), "--at 20m is after --until 10m"),
        (("--cycles", "3", "--explain", "ns/big"), "use --until, not --cycles"),
        (("--until", "30m", "--explain", "ns/small-2", "--at", "1m"), "`ns/small-2` at 1m (it arrives at 3m)"),
        (("--until", "30m", "--explain", "ns/smal-2"), "did you mean ns/small-2?"),
        (("--until", "30m", "--at", "-5m", "--explain", "ns/big"), "negative"),
        (("--snapshot-out", str(tmp_path)), "is a folder"),
    ]
    for flags, message in cases:
        code, out, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, *flags)
        assert code == 2, (flags, out, err)
        assert message in " ".join(err.split()), (flags, err)
        assert "Traceback" not in err


def test_snapshot_out_refuses_claims_it_cannot_write(capsys, tmp_path: Path) -> None:
    objects = [node("n1", cpu="4", memory="8Gi"),
               {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ns"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    with_claim = pod("p", duration="5m")
    with_claim["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    objects.append(with_claim)
    snapshot = _snapshot(tmp_path, objects)
    code, _, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", "1m", "--snapshot-out",
                           tmp_path / "out.yaml")
    assert code == 2
    assert "--snapshot-out: pods with PersistentVolumeClaims or ResourceClaims cannot be written" in err
    assert "ns/p" in err


def test_explain_of_a_folder_with_a_workload_says_what_to_run(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    write_objects(folder / "cluster.yaml", [node("n1"), queue("a")])
    write_objects(folder / "workload.yaml", [workload({"name": "w", "queue": "a", "count": 2, "interval": "1m",
                                                       "resources": {"cpu": "1"}, "duration": "5m"})])
    code, _, err = run_cli(capsys, "explain", "default/w-0", "--snapshot", folder)
    assert code == 2
    flat = " ".join(err.split())
    assert f"{folder / 'workload.yaml'}: Workload w: a simulation workload" in flat
    assert f"policydsl simulate POLICY --snapshot {folder} --explain default/w-0" in flat
    assert "unknown kind" not in flat
    # and simulate takes the same folder, and looks inside it
    code, out, err = run_cli(capsys, "simulate", POLICY, "--snapshot", folder, "--explain", "default/w-1-0",
                             "--at", "90s")
    assert code == 0, err
    assert "at 1m30s of the simulation" in out


def test_a_podgroup_without_pods_yet_is_written_and_read_back(capsys, tmp_path: Path) -> None:
    objects = [node("n1", cpu="2"), queue("a"), podgroup("g", queue="a", min_member=2)]
    snapshot = _snapshot(tmp_path, objects)
    out_file = tmp_path / "at.yaml"
    code, _, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", "1m", "--snapshot-out",
                           out_file)
    assert code == 0, err
    state = load_path(out_file)
    assert state.podgroups["ns/g"].phase == "Inqueue"
