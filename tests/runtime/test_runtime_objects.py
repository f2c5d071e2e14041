"""Loading Kubernetes objects: kinds, Lists, folders, and errors that name the object."""

from __future__ import annotations

import textwrap

import pytest

from runtime.engine.cycle import run_cycle
from runtime.cluster.objects import ObjectError, load_path, load_text
from runtime_helpers import GiB, policy

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
spec: {taints: [{key: gpu, value: "true", effect: NoSchedule}]}
status: {allocatable: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 2}}
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: team, annotations: {scheduling.volcano.sh/group-name: g1}}
spec:
  schedulerName: volcano
  priorityClassName: high
  containers:
  - resources: {requests: {cpu: 500m, memory: 1Gi}}
  - resources: {requests: {cpu: 250m}}
"""


def test_reads_every_kind_from_a_list_and_documents():
    text = textwrap.dedent("""
    apiVersion: v1
    kind: List
    items:
    - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
    - apiVersion: scheduling.volcano.sh/v1beta1
      kind: Queue
      metadata: {name: research}
      spec: {weight: 3, capability: {cpu: 10}, reclaimable: false}
    - apiVersion: scheduling.volcano.sh/v1beta1
      kind: PodGroup
      metadata: {name: g1, namespace: team}
      spec: {minMember: 2, queue: research, minResources: {cpu: 2}}
    """) + "---" + NODE + "---" + POD
    state = load_text(text, "cluster.yaml")
    assert state.nodes["n1"].allocatable == {"cpu": 4000, "memory": 8 * GiB, "nvidia.com/gpu": 2, "pods": 110}
    assert state.nodes["n1"].taints[0].key == "gpu"
    p = state.pods["team/p1"]
    assert p.requests == {"cpu": 750, "memory": GiB}
    assert p.group == "g1" and state.pod_priority(p) == 1000
    assert state.podgroups["team/g1"].min_resources == {"cpu": 2000}
    q = state.queues["research"]
    assert (q.weight, q.capability, q.reclaimable) == (3, {"cpu": 10000}, False)


def test_folder_and_json(tmp_path):
    (tmp_path / "nodes.yaml").write_text(NODE)
    (tmp_path / "pods.json").write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},'
                                        ' "spec": {"nodeName": "n1", "containers": [{}]}}')
    state = load_path(tmp_path)
    assert set(state.nodes) == {"n1"}
    assert state.pods["default/x"].node_name == "n1" and state.pods["default/x"].phase == "Running"


@pytest.mark.parametrize("text, expected", [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{resources: {requests: {cpu: 2x}}}]}",
     "Pod default/p: `spec.containers[0].resources.requests.cpu`: `2x` is not a quantity"),
    ("apiVersion: v1\nkind: Deployment\nmetadata: {name: d}", "Deployment d: unknown kind `Deployment`"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {}", "Node n: missing `status.allocatable`"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\nspec: {containers: [{}]}", "missing `metadata.name`"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: ghost, containers: [{}]}",
     "Pod default/p: runs on node `ghost`, which does not exist"),
    ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 70000}",
     "Queue q: `spec.weight` must be 0..65535, found 70000"),
    ("kind: Node\nmetadata: {name: [", "invalid YAML at line"),
])
def test_bad_objects_are_named(text, expected):
    with pytest.raises(ObjectError) as err:
        load_text(text, "bad.yaml")
    assert expected in str(err.value)
    assert str(err.value).startswith("bad.yaml")


def test_all_problems_reported_together():
    text = "kind: Foo\nmetadata: {name: a}\n---\nkind: Bar\nmetadata: {name: b}\n"
    with pytest.raises(ObjectError) as err:
        load_text(text)
    assert [p.kind for p in err.value.problems] == ["Foo", "Bar"]


def test_podgroup_naming_a_missing_queue_waits_and_the_rest_is_scheduled():
    text = ("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
            "metadata: {name: g, namespace: ns}\nspec: {queue: nowhere}\n---\n"
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 4, memory: 8Gi}}\n")
    for name, group in (("g-0", "g"), ("lone", None)):
        text += ("---\napiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ns%s}\n"
                 "spec: {schedulerName: volcano, containers: [{name: c, resources: {requests: {cpu: 1}}}]}\n"
                 % (name, ", annotations: {scheduling.k8s.io/group-name: g}" if group else ""))
    state = load_text(text)              # no error of the input: Volcano skips such a job
    decisions = run_cycle(policy("tier { plugin gang\n plugin predicates }"), state)
    assert [b.pod for b in decisions.bindings] == ["ns/lone"]
    assert [r.message for r in decisions.reasons_for("ns/g-0")] == ["queue nowhere does not exist"]


def test_only_our_scheduler_is_scheduled():
    text = NODE.replace("spec: {taints: [{key: gpu, value: \"true\", effect: NoSchedule}]}", "") + "---\n" + \
        "apiVersion: v1\nkind: Pod\nmetadata: {name: mine}\nspec: {schedulerName: volcano, containers: [{}]}\n---\n" \
        "apiVersion: v1\nkind: Pod\nmetadata: {name: theirs}\nspec: {containers: [{}]}\n"
    decisions = run_cycle(policy("tier { plugin predicates }"), load_text(text))
    assert [b.pod for b in decisions.bindings] == ["default/mine"]
    assert decisions.unschedulable == []
