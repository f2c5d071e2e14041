"""`policydsl test`: the example policies' test files pass; failures, bad files and missing
paths get the right exit codes; text, JSON and JUnit output."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest

from sim_helpers import POLICIES, run_cli

CLUSTER = """\
policy: {policy}
snapshot:
  - {{apiVersion: v1, kind: Node, metadata: {{name: n1, labels: {{pool: a}}}}, status: {{allocatable: {{cpu: "2", memory: 8Gi}}}}}}
  - {{apiVersion: v1, kind: Node, metadata: {{name: n2, labels: {{pool: b}}}}, status: {{allocatable: {{cpu: "8", memory: 8Gi}}}}}}
  - {{apiVersion: v1, kind: Pod, metadata: {{name: big, namespace: ns}}, spec: {{schedulerName: volcano, containers: [{{resources: {{requests: {{cpu: "4"}}}}}}]}}}}
  - {{apiVersion: v1, kind: Pod, metadata: {{name: lost, namespace: ns}}, spec: {{schedulerName: volcano, nodeSelector: {{pool: c}}, containers: [{{resources: {{requests: {{cpu: "1"}}}}}}]}}}}
cycles: 1
"""


def write_test(tmp_path, body: str, name: str = "case.policytest.yaml"):
    path = tmp_path / name
    path.write_text(CLUSTER.format(policy=POLICIES / "volcano-default.policy") + textwrap.dedent(body))
    return path


PASSING = """
tests:
  - name: big lands where it fits
    expect:
      - {pod: ns/big, node_labels: {pool: b}}
      - {pod: ns/lost, unschedulable: "didn't match Pod's node affinity/selector"}
      - {queue: default, evictions: 0}
"""
FAILING = """
tests:
  - name: passes
    expect:
      - {pod: ns/big, node: n2}
  - name: fails twice
    expect:
      - {pod: ns/big, node: n1}
      - {queue: default, wait_p99: "< 0s"}
"""


def test_the_example_policies_tests_pass(capsys):
    code, out, err = run_cli(capsys, "test", POLICIES / "tests")
    assert code == 0, out + err
    files = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    assert len(files) >= 4                      # one test file per example policy
    assert all(line.endswith(" PASSED") for line in out.splitlines() if "::" in line)
    assert out.splitlines()[-1].startswith(f"{out.count(' PASSED')} passed, 0 failed in ")


def test_passing_file_exits_0(tmp_path, capsys):
    path = write_test(tmp_path, PASSING)
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 0
    assert f"{path}::big lands where it fits PASSED" in out
    assert "1 passed, 0 failed" in out


def test_failures_exit_1_and_say_what_was_found(tmp_path, capsys):
    path = write_test(tmp_path, FAILING)
    code, out, _ = run_cli(capsys, "test", tmp_path)
    assert code == 1
    assert f"{path}::passes PASSED" in out and f"{path}::fails twice FAILED" in out
    assert "pod ns/big lands on node n1: ns/big was bound to n2, expected n1" in out
    assert "queue default wait_p99 < 0s: queue default wait_p99 is 0s, expected < 0s" in out
    assert "1 passed, 1 failed" in out


def test_junit_output(tmp_path, capsys):
    path = write_test(tmp_path, FAILING)
    code, out, _ = run_cli(capsys, "test", path, "-o", "junit")
    assert code == 1
    root = ET.fromstring(out.split("\n", 1)[1])
    [suite] = root.findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("errors")) == (str(path), "2", "1", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["passes"].find("failure") is None
    failure = cases["fails twice"].find("failure")
    assert "ns/big was bound to n2" in failure.get("message") and "wait_p99" in failure.text


def test_json_output(tmp_path, capsys):
    write_test(tmp_path, FAILING)
    code, out, _ = run_cli(capsys, "test", tmp_path, "-o", "json")
    assert code == 1
    result = json.loads(out)
    assert (result["passed"], result["failed"]) == (1, 1)
    assert [t["outcome"] for t in result["tests"]] == ["passed", "failed"]
    assert len(result["tests"][1]["failures"]) == 2


def test_keyword_selects_tests(tmp_path, capsys):
    write_test(tmp_path, FAILING)
    code, out, _ = run_cli(capsys, "test", tmp_path, "-k", "passes")
    assert code == 0 and "1 passed, 0 failed" in out


BAD_FILES = [
    ("unknown top-level key", "tests:\n  - name: t\n    expect: [{pod: ns/big, bound: true}]\ncycels: 1\n", 11, 1,
     "unknown key `cycels` in a test file; did you mean `cycles`?"),
    ("unknown assertion", "tests:\n  - name: t\n    expect:\n      - {pod: ns/big, lands_on: n1}\n", 11, 23,
     "unknown key `lands_on` in a `pod` assertion"),
    ("two checks in one", "tests:\n  - name: t\n    expect:\n      - {pod: ns/big, node: n1, bound: true}\n", 11, 9,
     "a `pod` assertion checks one thing"),
    ("bad comparison", "tests:\n  - name: t\n    expect:\n      - {queue: default, wait_p99: \"< soon\"}\n", 11, 26,
     "`wait_p99`: `soon` is not a duration"),
    ("no tests", "tests: []\n", 8, 1, "`tests` must be a non-empty list"),
    ("invalid yaml", "tests:\n  - name: [unclosed\n", 10, 1, "invalid YAML"),
    ("duplicate names", "tests:\n  - {name: t, expect: [{evictions: 0}]}\n  - {name: t, expect: [{evictions: 0}]}\n",
     10, 6, "two tests are named `t`"),
    ("volumes not a mapping", "tests:\n  - name: t\n    expect:\n      - {pod: ns/big, volumes: pv-1}\n", 11, 23,
     "`volumes`: give the claims as a mapping of claim to PV (or `provisioned`), e.g. {data: pv-3}"),
]


@pytest.mark.parametrize("body, line, column, message", [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_test_file_is_a_located_error_exit_2(tmp_path, capsys, body, line, column, message):
    path = write_test(tmp_path, body)
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 2
    assert f"ERROR {path}:{line}:{column}: {message}" in out
    assert "Traceback" not in out


def test_bad_objects_in_a_test_are_an_error_naming_the_object_and_line(tmp_path, capsys):
    path = tmp_path / "objects.policytest.yaml"
    path.write_text(f"policy: {POLICIES / 'volcano-default.policy'}\nsnapshot:\n"
                    "  - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: lots}}}\n"
                    "tests:\n  - {name: t, expect: [{evictions: 0}]}\n")
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 2
    assert f"ERROR {path}::t" in out and f"{path}:3: Node n1: `status.allocatable.cpu`" in out


def test_a_policy_that_does_not_compile_fails_its_tests(tmp_path, capsys):
    policy = tmp_path / "broken.policy"
    policy.write_text('policy "broken" version 1\nactions [allocate, nope]\n')
    path = tmp_path / "broken.policytest.yaml"
    path.write_text("policy: broken.policy\ntests:\n  - {name: t, expect: [{evictions: 0}]}\n")
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 1
    assert "the policy does not compile" in out and "broken.policy:2:" in out


@pytest.mark.parametrize("argv, message", [
    (["/nonexistent/tests"], "/nonexistent/tests: no such file or folder"),
])
def test_missing_paths_are_usage_errors(capsys, argv, message):
    code, _, err = run_cli(capsys, "test", *argv)
    assert code == 2 and message in err


def test_a_folder_without_test_files_is_a_usage_error(tmp_path, capsys):
    code, _, err = run_cli(capsys, "test", tmp_path)
    assert code == 2 and "no *.policytest.yaml files" in err


def test_job_order_and_phase_assertions(tmp_path, capsys):
    path = tmp_path / "order.policytest.yaml"
    path.write_text(textwrap.dedent(f"""\
        policy: {POLICIES / 'volcano-default.policy'}
        snapshot:
          - {{apiVersion: v1, kind: Node, metadata: {{name: n1}}, status: {{allocatable: {{cpu: "1", memory: 8Gi}}}}}}
        workload:
          - apiVersion: simulation.policydsl.io/v1alpha1
            kind: Workload
            metadata: {{name: w}}
            spec:
              jobs:
                - {{name: first, interval: 1s, resources: {{cpu: "1"}}, duration: 1m}}
                - {{name: second, start: 5s, resources: {{cpu: "1"}}, duration: 1m}}
        until: 90s
        tests:
          - name: order
            expect:
              - {{job: default/first-0, bound_before: default/second-0}}
              - {{podgroup: default/second-0, phase: Running}}
              - {{podgroup: default/first-0, phase: Completed}}
              - {{job: default/second-0, started: true}}
          - name: reversed
            expect:
              - {{job: default/second-0, bound_before: default/first-0}}
        """))
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 1
    assert "::order PASSED" in out and "::reversed FAILED" in out
    assert "job default/second-0 started at 1m, after job default/first-0 (at 0s)" in out


def test_volume_assertions_say_what_each_claim_is_bound_to(tmp_path, capsys):
    path = tmp_path / "volumes.policytest.yaml"
    path.write_text(f"""policy: {POLICIES / 'volcano-default.policy'}
snapshot:
  - {{apiVersion: v1, kind: Node, metadata: {{name: n1}}, status: {{allocatable: {{cpu: "2", memory: 8Gi}}}}}}
  - {{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {{name: local}}, provisioner: kubernetes.io/no-provisioner,
     volumeBindingMode: WaitForFirstConsumer}}
  - {{apiVersion: v1, kind: PersistentVolume, metadata: {{name: pv-1}},
     spec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: local, local: {{path: /d}},
            nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [n1]}}]}}]}}}}}}}}
  - {{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {{name: data, namespace: ns}},
     spec: {{accessModes: [ReadWriteOnce], storageClassName: local, resources: {{requests: {{storage: 1Gi}}}}}}}}
  - {{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: ns}},
     spec: {{schedulerName: volcano, containers: [{{resources: {{requests: {{cpu: "1"}}}}}}],
            volumes: [{{name: d, persistentVolumeClaim: {{claimName: data}}}}]}}}}
cycles: 1
tests:
  - name: right
    expect: [{{pod: ns/p, volumes: {{data: pv-1}}}}]
  - name: wrong
    expect: [{{pod: ns/p, volumes: {{data: provisioned, other: pv-2}}}}]
""")
    code, out, _ = run_cli(capsys, "test", path)
    assert code == 1
    assert "::right PASSED" in out
    assert "ns/p: data is bound to pv-1, no claim ns/other (expected data -> provisioned, other -> pv-2)" in out
