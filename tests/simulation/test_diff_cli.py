"""`policydsl diff`: placements that differ between two policies and how the metrics moved."""

from __future__ import annotations

import json

import pytest

from sim_helpers import POLICIES, node, pod, policy_text, run_cli, write_objects, write_policy

SCORERS = {
    "binpack": "  plugin predicates\n  plugin proportion\n  plugin binpack",
    "leastrequested": "  plugin predicates\n  plugin proportion\n"
                      "  plugin nodeorder { leastrequested = 1 mostrequested = 0 balancedresource = 0 }",
}


@pytest.fixture
def inputs(tmp_path):
    policies = {name: write_policy(tmp_path / f"{name}.policy", policy_text(name, "enqueue, allocate", body))
                for name, body in SCORERS.items()}
    # n1 is half full, n2 empty: binpack fills n1, least-requested picks n2.
    snapshot = write_objects(tmp_path / "cluster.yaml", [
        node("n1"), node("n2"), pod("busy", cpu="2", node_name="n1"), pod("new", cpu="1")])
    return policies, snapshot


def test_a_changed_placement_is_shown_and_exits_1(inputs, capsys):
    policies, snapshot = inputs
    code, out, _ = run_cli(capsys, "diff", policies["binpack"], policies["leastrequested"], "--snapshot", snapshot,
                           "--cycles", "1")
    assert code == 1
    assert "1 of 1 pods placed differently:" in out
    assert "ns/new: n1 -> n2" in out


def test_json_lists_placements_and_metric_deltas(inputs, capsys):
    policies, snapshot = inputs
    code, out, _ = run_cli(capsys, "diff", policies["binpack"], policies["leastrequested"], "--snapshot", snapshot,
                           "--cycles", "1", "--output", "json")
    assert code == 1
    result = json.loads(out)
    assert (result["old"], result["new"], result["changed"]) == ("binpack", "leastrequested", True)
    assert result["placements"] == [{"pod": "ns/new", "old": "n1", "new": "n2"}]
    metrics = {m["name"]: m for m in result["metrics"]}
    assert metrics["utilization cpu"]["delta"] == 0       # same pods run, only elsewhere
    assert set(metrics["queue default wait p99"]) == {"name", "old", "new", "delta", "unit"}


def test_metric_changes_over_time(tmp_path, capsys):
    # A queue with a small capability waits longer under the new policy.
    old = write_policy(tmp_path / "old.policy", policy_text("old", "enqueue, allocate", SCORERS["binpack"]))
    new = write_policy(tmp_path / "new.policy", policy_text(
        "new", "enqueue, allocate", SCORERS["binpack"], "queue default { capability = { cpu: 1 } }\n"))
    snapshot = write_objects(tmp_path / "cluster.yaml", [
        node("n1"), pod("a", duration="1m"), pod("b", duration="1m")])
    code, out, _ = run_cli(capsys, "diff", old, new, "--snapshot", snapshot, "--output", "json")
    assert code == 1
    metrics = {m["name"]: m for m in json.loads(out)["metrics"]}
    wait = metrics["queue default wait p99"]
    assert (wait["old"], wait["new"], wait["delta"], wait["unit"]) == (0.0, 60.0, 60.0, "s")
    code, out, _ = run_cli(capsys, "diff", old, new, "--snapshot", snapshot)
    assert "queue default wait p99" in out and "+1m" in out


def test_the_same_policy_twice_differs_in_nothing(inputs, capsys):
    policies, snapshot = inputs
    code, out, _ = run_cli(capsys, "diff", policies["binpack"], policies["binpack"], "--snapshot", snapshot)
    assert code == 0
    assert "every one of the 1 bound pods is placed the same" in out
    assert "metrics that changed" not in out


def test_a_bad_policy_is_trouble_not_a_difference(inputs, tmp_path, capsys):
    policies, snapshot = inputs
    bad = write_policy(tmp_path / "bad.policy", 'policy "bad" version 1\nactions [allocate, nope]\n')
    code, out, err = run_cli(capsys, "diff", policies["binpack"], bad, "--snapshot", snapshot)
    assert code == 2 and out == "" and "bad.policy:2:" in err


def test_diff_on_the_built_in_example(capsys):
    code, out, _ = run_cli(capsys, "diff", POLICIES / "volcano-default.policy", POLICIES / "colocation.policy",
                           "--until", "10m", "--output", "json")
    assert code == 1
    result = json.loads(out)
    assert result["pods"] > 0 and any(m["name"] == "fairness index" for m in result["metrics"])
