"""`policydsl simulate`: the --cycles JSON contract, evictions over cycles, the summary of a
run over time, the report, and bad input named by object."""

from __future__ import annotations

import json

import pytest

from sim_helpers import (
    POLICIES, json_lines, node, pod, podgroup, policy_text, queue, run_cli, workload, write_objects, write_policy,
)

TAINT = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
DECISION_KEYS = {"bindings", "evictions", "podgroups", "unschedulable"}


@pytest.fixture
def small_snapshot(tmp_path):
    return write_objects(tmp_path / "cluster.yaml", [
        node("n1"), node("n2", taints=TAINT),
        podgroup("g", min_member=2), pod("g-0", group="g"), pod("g-1", group="g"),
        pod("solo"), pod("lost", node_selector={"zone": "mars"}),
    ])


def test_one_cycle_json_is_the_decisions_of_that_cycle(small_snapshot, capsys):
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", small_snapshot,
                             "--cycles", "1", "--output", "json")
    assert code == 0, err
    [decisions] = json_lines(out)
    assert set(decisions) == DECISION_KEYS
    assert all(set(b) == {"pod", "node", "devices"} for b in decisions["bindings"])
    # n2's taint leaves n1 for everyone; the gang fits whole, the pod for zone mars nowhere.
    assert {b["pod"]: b["node"] for b in decisions["bindings"]} == {"ns/g-0": "n1", "ns/g-1": "n1", "ns/solo": "n1"}
    assert [b["pod"] for b in decisions["bindings"]] == sorted(b["pod"] for b in decisions["bindings"])
    assert decisions["evictions"] == []
    assert decisions["podgroups"] == [{"name": "ns/g", "phase": "Running"}]
    [waiting] = decisions["unschedulable"]
    assert waiting["pod"] == "ns/lost"
    assert waiting["reasons"] == ["0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."]


def test_one_cycle_json_names_the_cards_of_a_device_binding(tmp_path, capsys):
    snapshot = write_objects(tmp_path / "gpu.yaml", [
        node("pcie", cpu="16", memory="64Gi", labels={"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB"},
             **{"nvidia.com/gpu-40gb": "2", "nvidia.com/gpu-40gb-memory": "80Gi"}),
        pod("infer", **{"nvidia.com/gpu-40gb-memory": "10Gi"}),
    ])
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "gpu-sharing.policy", "--snapshot", snapshot,
                           "--cycles", "1", "--output", "json")
    assert code == 0
    assert json_lines(out)[0]["bindings"] == [{"pod": "ns/infer", "node": "pcie", "devices": {"nvidia.com/gpu-40gb": [0]}}]


def test_cycles_json_prints_one_object_per_cycle(small_snapshot, capsys):
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", small_snapshot,
                           "--cycles", "3", "--output", "json")
    assert code == 0
    cycles = json_lines(out)
    assert len(cycles) == 3 and all(set(c) == DECISION_KEYS for c in cycles)
    # Bound in the first cycle, nothing to bind afterwards; the pod for zone mars still waits.
    assert len(cycles[0]["bindings"]) == 3 and cycles[1]["bindings"] == cycles[2]["bindings"] == []
    assert [u["pod"] for u in cycles[2]["unschedulable"]] == ["ns/lost"]


@pytest.fixture
def preempting(tmp_path):
    policy = write_policy(tmp_path / "preempt.policy", policy_text(
        "preempt", "enqueue, allocate, preempt", "  plugin predicates\n  plugin proportion\n  plugin nodeorder"))
    snapshot = write_objects(tmp_path / "cluster.yaml", [
        node("a"), pod("low", cpu="4", node_name="a", priority=1), pod("urgent", cpu="3", priority=100)])
    return policy, snapshot


def test_evicted_pods_leave_over_the_following_cycles(preempting, capsys):
    policy, snapshot = preempting
    code, out, _ = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--cycles", "3", "--output", "json")
    assert code == 0
    first, second, third = json_lines(out)
    # Cycle 1 evicts; the victim still holds the node, so the preemptor is not bound yet.
    assert first["evictions"] == [{"pod": "ns/low", "reason": "preempted by ns/urgent (priority 100)"}]
    assert first["bindings"] == []
    # Cycle 2: the victim has left (and is recreated pending by its controller); the preemptor binds.
    assert second["bindings"] == [{"pod": "ns/urgent", "node": "a", "devices": {}}]
    assert [u["pod"] for u in second["unschedulable"]] == ["ns/low"]
    # The recreated pod has lower priority: it cannot preempt back.
    assert third["evictions"] == [] and third["bindings"] == []


def test_cycles_text_lists_each_cycles_decisions(preempting, capsys):
    policy, snapshot = preempting
    code, out, _ = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--cycles", "2")
    assert code == 0
    assert "cycle 1 at 0s: 0 bound, 1 evicted, 1 pipelined, 0 waiting" in out
    assert "evict  ns/low: preempted by ns/urgent (priority 100)" in out
    assert "bind   ns/urgent -> a" in out


def test_the_readme_main_job_runs_the_built_in_example(capsys):
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy")
    assert code == 0, err
    assert "built-in example" in out and "nothing left to happen" in out
    for text in ("online", "batch", "wait p50", "utilization", "fragmentation", "fairness index"):
        assert text in out
    assert "gang violations   0" in out


def test_json_summary_over_time(capsys):
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--until", "20m", "--output", "json")
    assert code == 0
    summary = json.loads(out)
    assert summary["duration"] == 1200.0 and summary["stopped"] == "until"
    assert set(summary["queues"]) == {"online", "batch"}
    online = summary["queues"]["online"]
    assert online["jobs"] >= online["started"] > 0
    assert online["wait"]["p50"] <= online["wait"]["p95"] <= online["wait"]["p99"] <= online["wait"]["max"]
    assert 0 < summary["utilization"]["cpu"] <= 1
    assert summary["gang_violations"] == 0


def test_report_writes_a_page_with_inline_svg_plots(tmp_path, capsys):
    folder = tmp_path / "report"
    code, _, err = run_cli(capsys, "simulate", POLICIES / "colocation.policy", "--until", "30m", "--report", folder)
    assert code == 0
    page = (folder / "index.html").read_text()
    assert str(folder / "index.html") in err
    # no evictions in this run: the words say so instead of a flat line
    assert "Evictions over time: no evictions." in page and "Evictions so far" not in page
    assert page.count("<svg") == 4 and page.count("</svg>") == 4
    for title in ("Utilization over time", "Queue shares over time", "Pods waiting over time",
                  "Wait distribution per queue"):
        assert title in page
    assert page.count("<polyline") >= 6          # resources, queue shares and deserved, waiting, CDFs
    assert page.index('id="findings"') < page.index("<h2>Queues</h2>")   # findings first
    # The header says what made it: the policy's revision and the command.
    from policydsl.cli.inputs import compile_policy

    revision = compile_policy(str(POLICIES / "colocation.policy")).revision
    assert f"Policy revision <code>{revision}</code>" in page
    assert f"policydsl simulate {POLICIES / 'colocation.policy'} --until 30m --report {folder}" in page
    assert 'class="plots"' in page and 'width="100%"' in page    # laid out to the page's width
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_report_into_an_unwritable_place_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--cycles", "1",
                           "--report", blocker / "sub")
    assert code == 2 and "cannot write the report" in err


BAD_INPUTS = [
    ("unknown kind", [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}],
     "Deployment web: unknown kind `Deployment`"),
    ("malformed quantity", [node("n1", cpu="four")], "Node n1: `status.allocatable.cpu`: `four` is not a quantity"),
    ("missing field", [node("n1"), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                                    "spec": {"schedulerName": "volcano"}}], "Pod ns/p: missing `spec.containers`"),
    ("bad duration", [node("n1"), pod("p", duration="ten minutes")],
     "Pod ns/p: annotation `simulation.policydsl.io/duration`: `ten minutes` is not a duration"),
    ("running pod arriving later", [node("n1"), pod("p", node_name="n1", arrival="5m")],
     "Pod ns/p: a pod already on a node cannot arrive later"),
    ("duplicate", [node("n1"), node("n1")], "Node n1: defined twice"),
    ("template typo", [node("n1"), workload({"name": "etl", "replica": 2, "resources": {"cpu": "1"}})],
     "Workload w: `spec.jobs[0] (etl)`: unknown field `replica`; did you mean `replicas`?"),
    ("template quantity", [node("n1"), workload({"name": "etl", "resources": {"cpu": "lots"}})],
     "`resources.cpu`: `lots` is not a quantity"),
    ("template gang", [node("n1"), workload({"name": "etl", "replicas": 2, "minMember": 3, "resources": {"cpu": "1"}})],
     "`minMember` (3) is more than `replicas` (2)"),
    ("volume without capacity", [node("n1"), {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
                                               "spec": {"accessModes": ["ReadWriteOnce"]}}],
     "PersistentVolume pv: missing `spec.capacity.storage`"),
    ("claim twice", [node("n1"), *[{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                    "metadata": {"name": "c", "namespace": "ns"}, "spec": {}}] * 2],
     "PersistentVolumeClaim ns/c: defined twice"),
]


@pytest.mark.parametrize("objects, message", [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_names_the_object_and_exits_2(tmp_path, capsys, objects, message):
    snapshot = write_objects(tmp_path / "bad.yaml", objects)
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot,
                             "--cycles", "1")
    assert code == 2
    assert out == ""
    assert f"{snapshot}: " in err and message in err
    assert "Traceback" not in err


def test_every_problem_of_a_file_is_reported_at_once(tmp_path, capsys):
    snapshot = write_objects(tmp_path / "bad.yaml", [node("n1", cpu="x"), node("n2", memory="y")])
    code, _, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot)
    assert code == 2 and "Node n1" in err and "Node n2" in err


@pytest.mark.parametrize("argv, code, message", [
    (["--snapshot", "/nonexistent/cluster.yaml"], 2,
     "argument --snapshot: `/nonexistent/cluster.yaml`: no such file or folder"),
    (["--until", "soon"], 2, "--until: `soon` is not a duration"),
    (["--cycles", "0"], 2, "argument --cycles: `0` is below 1"),
    (["--cycles", "many"], 2, "argument --cycles: `many` is not a whole number"),
    (["--period", "0s"], 2, "argument --period: `0s` is shorter than 1ms"),
    (["--period", "nan"], 2, "--period: `nan` is not a finite duration"),
    (["--until", "inf"], 2, "--until: `inf` is not a finite duration"),
    (["--until", "1" + "0" * 400], 2, "is not a finite duration"),
    (["--scheduler-name", ""], 2, "argument --scheduler-name: `` is not a valid scheduler name"),
    (["--scheduler-name", "Volcano"], 2, "argument --scheduler-name: `Volcano` is not a valid scheduler name"),
    (["--report", str(POLICIES / "volcano-default.policy")], 2, "argument --report: "),
])
def test_bad_options_are_usage_errors(capsys, argv, code, message):
    got, _, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", *argv)
    assert got == code and message in err


def test_invalid_yaml_is_located(tmp_path, capsys):
    snapshot = tmp_path / "broken.yaml"
    snapshot.write_text("kind: Node\nmetadata: {name: [unclosed\n")
    code, _, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot)
    assert code == 2 and f"{snapshot}: invalid YAML at line" in err


def test_a_policy_with_errors_prints_its_diagnostics_and_exits_1(tmp_path, capsys):
    bad = write_policy(tmp_path / "bad.policy", 'policy "bad" version 1\nactions [enqueue, alocate]\n')
    code, out, err = run_cli(capsys, "simulate", bad, "--cycles", "1")
    assert code == 1 and out == ""
    assert f"{bad}:2:" in err and "alocate" in err


def test_a_missing_policy_is_an_io_error(tmp_path, capsys):
    code, _, err = run_cli(capsys, "simulate", tmp_path / "missing.policy")
    assert code == 2 and "missing.policy" in err


def test_a_workload_alone_runs_on_the_example_cluster(tmp_path, capsys):
    jobs = write_objects(tmp_path / "jobs.yaml", [
        queue("team", weight=1),
        workload({"name": "etl", "namespace": "data", "queue": "team", "count": 3, "interval": "1m",
                  "resources": {"cpu": "2", "memory": "2Gi"}, "duration": "5m"})])
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--workload", jobs, "--output", "json")
    assert code == 0
    summary = json.loads(out)
    assert summary["input"].endswith("on the built-in example cluster")
    assert summary["queues"]["team"]["completed"] == 3


def test_a_podgroup_whose_pods_arrive_later_is_admitted_then_runs(tmp_path, capsys):
    # As Volcano's job controller does: the PodGroup first, its pods once it is Inqueue.
    group = podgroup("job", min_member=2, minResources={"cpu": "2"})
    group["metadata"]["annotations"] = {"simulation.policydsl.io/arrival": "10s"}
    workload = write_objects(tmp_path / "w.yaml", [
        node("n1", cpu="8"), group,
        pod("job-0", group="job", arrival="30s", duration="5m"), pod("job-1", group="job", arrival="40s", duration="5m")])
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--workload", workload,
                           "--until", "20m", "--output", "json")
    assert code == 0
    assert json.loads(out)["queues"]["default"]["completed"] == 1


def test_a_podgroup_without_pods_is_admitted_in_the_first_cycle(tmp_path, capsys):
    snapshot = write_objects(tmp_path / "s.yaml", [node("n1", cpu="8"),
                                                   podgroup("job", min_member=2, minResources={"cpu": "2"})])
    code, out, _ = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot,
                           "--cycles", "1", "--output", "json")
    assert code == 0
    assert json_lines(out)[0]["podgroups"] == [{"name": "ns/job", "phase": "Inqueue"}]


def test_a_snapshot_with_storage_simulates_and_names_the_volumes_chosen(tmp_path, capsys):
    local = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-n2"},
          "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                   "local": {"path": "/d"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                       {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}}
    claims = [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": c, "namespace": "ns"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                        "resources": {"requests": {"storage": "1Gi"}}}} for c in ("data", "more")]
    pods = [pod("db"), pod("db2")]
    for p, claim in zip(pods, ("data", "more")):
        p["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    snapshot = write_objects(tmp_path / "cluster.yaml", [node("n1"), node("n2"), local, pv, *claims, *pods])
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot,
                             "--cycles", "1", "--output", "json")
    assert code == 0, err
    [decisions] = json_lines(out)
    assert len(decisions["bindings"]) == 1 and decisions["bindings"][0]["node"] == "n2"
    [chosen] = decisions["volumes"]
    assert chosen["claims"][0]["volume"] == "pv-n2"
    [waiting] = decisions["unschedulable"]
    assert "node(s) didn't find available persistent volumes to bind" in waiting["reasons"][0]
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot)
    assert code == 0, err
    assert "waiting on storage" in out and "1 pods" in out


@pytest.mark.parametrize("guarantee, warned", [("1000", True), ("8", False)])
@pytest.mark.parametrize("output", ["text", "json"])
def test_guarantees_beyond_the_simulated_cluster_are_reported(tmp_path, capsys, guarantee, warned, output):
    """Issue 20's repro: an empty Queue guaranteeing 1,000 CPUs on a 32-CPU cluster starves the rest."""
    snapshot = write_objects(tmp_path / "cluster.yaml", [
        *(node(f"n{i}", cpu="8") for i in range(4)),
        queue("big", guarantee={"resource": {"cpu": guarantee}}), pod("solo"),
    ])
    code, out, err = run_cli(capsys, "simulate", POLICIES / "volcano-default.policy", "--snapshot", snapshot,
                             "--until", "5s", "--output", output)
    assert code == 0, err
    finding = ("PD215 promise-beyond-cluster: guarantee of cpu 1000 (big 1000) cannot be met: the cluster has 32; "
               "the other queues under root get no cpu")
    if output == "json":
        assert (finding in [f["text"] for f in json.loads(out)["findings"]]) == warned
    else:
        assert (finding in " ".join(out.split())) == warned   # the console may wrap the line
