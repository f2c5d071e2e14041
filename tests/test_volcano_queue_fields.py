"""import-volcano --queues and export-volcano --queues carry a Queue's dequeueStrategy and
affinity (node groups) both ways; malformed ones are located errors; fields no scheduler reads
are reported as not imported."""

from __future__ import annotations

from pathlib import Path

import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text

CONFIG = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodegroup
    enableHierarchy: true
    arguments:
      strict: false
"""
QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: nlp}
spec:
  weight: 2
  dequeueStrategy: priorityfifo
  affinity:
    nodeGroupAffinity:
      requiredDuringSchedulingIgnoredDuringExecution: [group1, group2]
      preferredDuringSchedulingIgnoredDuringExecution: [group1]
    nodeGroupAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution: [group3]
      preferredDuringSchedulingIgnoredDuringExecution: [group4]
"""


def test_queue_fields_import_and_export_back(tmp_path: Path):
    result = import_volcano_text(CONFIG, "c.conf", QUEUE, "q.yaml")
    assert [d.message for d in result.diagnostics] == []
    compiled = compile_text(result.text)
    assert compiled.ok, [str(d) for d in compiled.errors]
    queue = compiled.plan.queue("nlp")
    assert queue.dequeue == "priorityfifo"
    assert (queue.node_groups, queue.preferred_node_groups, queue.excluded_node_groups, queue.avoided_node_groups) == (
        ("group1", "group2"), ("group1",), ("group3",), ("group4",))
    nodegroup = compiled.plan.plugin("nodegroup")
    assert nodegroup.flags.get("hierarchy") is True and nodegroup.arguments["strict"] is False
    policy = tmp_path / "p.policy"
    policy.write_text(result.text)
    exported = export_volcano(str(policy), queues=True)
    documents = list(yaml.safe_load_all(exported.text))
    [queue_object] = [d for d in documents if d and d.get("kind") == "Queue"]
    assert queue_object["spec"]["dequeueStrategy"] == "priorityfifo"
    assert queue_object["spec"]["affinity"] == yaml.safe_load(QUEUE)["spec"]["affinity"]
    [config] = [d for d in documents if d and "tiers" in d]
    [plugin] = [p for t in config["tiers"] for p in t["plugins"] if p["name"] == "nodegroup"]
    assert plugin == {"name": "nodegroup", "enableHierarchy": True, "arguments": {"strict": False}}


def test_a_malformed_affinity_is_located():
    bad = QUEUE.replace("nodeGroupAntiAffinity:", "nodeGroupAntiAfinity:")
    result = import_volcano_text(CONFIG, "c.conf", bad, "q.yaml")
    [diag] = [d for d in result.diagnostics if "affinity" in d.message]
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "nodeGroupAntiAfinity" in text)
    assert diag.span.line == line and "nodeGroupAntiAfinity" in diag.message
    assert result.exit_code != 0


def test_a_bad_dequeue_strategy_is_located():
    bad = QUEUE.replace("priorityfifo", "lifo")
    result = import_volcano_text(CONFIG, "c.conf", bad, "q.yaml")
    [diag] = [d for d in result.diagnostics if "dequeueStrategy" in d.message]
    assert "lifo" in diag.message and diag.span.line == 6


def test_fields_no_scheduler_reads_are_reported_not_imported():
    queue = QUEUE + "  type: gpu\n  extendClusters: [{name: c2, weight: 1}]\n"
    result = import_volcano_text(CONFIG, "c.conf", queue, "q.yaml")
    messages = [d.message for d in result.diagnostics]
    assert any("spec.type" in m and "not imported" in m for m in messages)
    assert any("spec.extendClusters" in m and "not imported" in m for m in messages)
