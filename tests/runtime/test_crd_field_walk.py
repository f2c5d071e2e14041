"""Volcano's CRDs walked field by field: every field of a PodGroup's, Queue's and HyperNode's spec
(Volcano v1.14.1's schemas, vendored in tests/fixtures/volcano/crds) is read into our model, or makes
the object wait naming it, or is another component's and runtime/README.md says whose. A field a
new Volcano release adds fails here until someone decides which.

"Read" is checked generically: the object parsed with the field set differs from the object
parsed without it (a field dropped on the way in is certainly ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.cluster.objects import load_objects
from runtime.cluster.topology import read_hypernode

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "fixtures" / "volcano" / "crds"
README = (ROOT / "runtime" / "README.md").read_text()


def leaf_paths(schema: dict, path: str = "spec", depth: int = 0) -> list[str]:
    """The spec's fields down to three levels (arrays of objects walked through their items)."""
    props = schema.get("properties") or (schema.get("items") or {}).get("properties")
    if not props or depth > 2:
        return [path]
    return [p for key, sub in props.items() for p in leaf_paths(sub, f"{path}.{key}", depth + 1)]


def crd_fields(file: str) -> set[str]:
    crd = yaml.safe_load((CRDS / file).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return set(leaf_paths(version["schema"]["openAPIV3Schema"]["properties"]["spec"]))


def nested(path: str, value: Any) -> dict:
    """`spec.a.b` = value as a spec mapping ({"a": {"b": value}})."""
    keys = path.split(".")[1:]
    out: Any = value
    for key in reversed(keys):
        out = {key: out}
    return out


LABELS = {"matchLabels": {"team": "a"}}
# Samples that a PodGroup's subGroupPolicy items need around the field under test.
SUB = {"name": "workers", "subGroupSize": 2}

# field -> the spec fragment that sets it (None: the field set to a plain sample via `nested`).
PODGROUP_SAMPLES: dict[str, dict] = {
    "spec.minMember": {"minMember": 3},
    "spec.minResources": {"minResources": {"cpu": "4"}},
    "spec.minTaskMember": {"minTaskMember": {"worker": 2}},
    "spec.networkTopology.highestTierAllowed": {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}},
    "spec.networkTopology.highestTierName": {"networkTopology": {"mode": "hard", "highestTierName": "spine"}},
    "spec.networkTopology.mode": {"networkTopology": {"mode": "soft"}},
    "spec.priorityClassName": {"priorityClassName": "high"},
    "spec.queue": {"queue": "team-a"},
    "spec.subGroupPolicy.labelSelector.matchExpressions": {"subGroupPolicy": [{**SUB, "labelSelector": {
        "matchExpressions": [{"key": "role", "operator": "In", "values": ["w"]}]}}]},
    "spec.subGroupPolicy.labelSelector.matchLabels": {"subGroupPolicy": [{**SUB, "labelSelector": LABELS}]},
    "spec.subGroupPolicy.matchLabelKeys": {"subGroupPolicy": [{**SUB, "matchLabelKeys": ["rank-group"]}]},
    "spec.subGroupPolicy.minSubGroups": {"subGroupPolicy": [{**SUB, "minSubGroups": 2}]},
    "spec.subGroupPolicy.name": {"subGroupPolicy": [{"name": "other", "subGroupSize": 2}]},
    "spec.subGroupPolicy.networkTopology.highestTierAllowed": {"subGroupPolicy": [{**SUB, "networkTopology": {
        "mode": "hard", "highestTierAllowed": 1}}]},
    "spec.subGroupPolicy.networkTopology.highestTierName": {"subGroupPolicy": [{**SUB, "networkTopology": {
        "mode": "hard", "highestTierName": "leaf"}}]},
    "spec.subGroupPolicy.networkTopology.mode": {"subGroupPolicy": [{**SUB, "networkTopology": {"mode": "soft"}}]},
    "spec.subGroupPolicy.subGroupSize": {"subGroupPolicy": [{"name": "workers", "subGroupSize": 4}]},
}
# A subGroupPolicy field is compared against the same policy without it (else against none).
PODGROUP_BASE = {path: ({"subGroupPolicy": [dict(SUB)]} if ".subGroupPolicy." in path and not path.endswith(
    (".name", ".subGroupSize")) else {}) for path in PODGROUP_SAMPLES}

QUEUE_SAMPLES: dict[str, dict] = {
    "spec.affinity.nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution": None,
    "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution": None,
    "spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution": None,
    "spec.affinity.nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution": None,
    "spec.capability": {"capability": {"cpu": "8"}},
    "spec.dequeueStrategy": {"dequeueStrategy": "fifo"},
    "spec.deserved": {"deserved": {"cpu": "8"}},
    "spec.guarantee.resource": {"guarantee": {"resource": {"cpu": "2"}}},
    "spec.parent": {"parent": "eng"},
    "spec.priority": {"priority": 5},
    "spec.reclaimable": {"reclaimable": False},
    "spec.weight": {"weight": 3},
}
# Fields no scheduler reads: whose they are, as runtime/README.md says.
QUEUE_NOT_THE_SCHEDULERS = {
    "spec.extendClusters.capacity": "vc-controller-manager",
    "spec.extendClusters.name": "vc-controller-manager",
    "spec.extendClusters.weight": "vc-controller-manager",
    "spec.type": "no Volcano component",
}

HYPERNODE_MEMBER = {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}
HYPERNODE_SAMPLES: dict[str, dict] = {
    "spec.members.selector.exactMatch": {"members": [{"type": "Node", "selector": {"exactMatch": {"name": "n2"}}}]},
    "spec.members.selector.labelMatch": {"members": [{"type": "Node", "selector": {"labelMatch": LABELS}}]},
    "spec.members.selector.regexMatch": {"members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "n"}}}]},
    "spec.members.type": {"members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "n1"}}}]},
    "spec.tier": {"tier": 2},
    "spec.tierName": {"tierName": "leaf"},
}


def test_every_podgroup_field_is_decided():
    assert crd_fields("scheduling.volcano.sh_podgroups.yaml") == set(PODGROUP_SAMPLES)


def test_every_queue_field_is_decided():
    assert crd_fields("scheduling.volcano.sh_queues.yaml") == set(QUEUE_SAMPLES) | set(QUEUE_NOT_THE_SCHEDULERS)


def test_every_hypernode_field_is_decided():
    assert crd_fields("topology.volcano.sh_hypernodes.yaml") == set(HYPERNODE_SAMPLES)


def podgroup(spec: dict):
    obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "pg", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"minMember": 1, "queue": "default", **spec}}
    return load_objects([("pg.yaml", obj)]).podgroups["ns/pg"]


@pytest.mark.parametrize("path", sorted(PODGROUP_SAMPLES))
def test_a_podgroup_field_is_read_or_holds_the_group_naming_it(path):
    base = podgroup(PODGROUP_BASE[path])
    group = podgroup({**PODGROUP_BASE[path], **PODGROUP_SAMPLES[path]})
    top = path.split(".")[1]
    assert group != base or (group.unsupported and top in group.unsupported), path


def queue(spec: dict):
    obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
           "spec": {"weight": 1, **spec}}
    return load_objects([("q.yaml", obj)]).queues["q"]


@pytest.mark.parametrize("path", sorted(QUEUE_SAMPLES))
def test_a_queue_field_is_read_or_holds_the_queue_naming_it(path):
    sample = QUEUE_SAMPLES[path] or nested(path, ["group-a"])
    base, read = queue({}), queue(sample)
    if "weight" in sample:
        base = queue({"weight": 2})
    assert read != base or (read.problem and path.split(".")[1] in read.problem), path


@pytest.mark.parametrize("path, owner", sorted(QUEUE_NOT_THE_SCHEDULERS.items()))
def test_a_queue_field_no_scheduler_reads_is_said_whose_it_is(path, owner):
    field = path.split(".")[1]
    lines = [line for line in README.splitlines() if f"`spec.{field}`" in line]
    assert lines and any(owner in line for line in lines), f"runtime/README.md does not say whose `spec.{field}` is"


def hypernode(spec: dict):
    return read_hypernode({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                           "metadata": {"name": "h"}, "spec": {"tier": 1, "members": [HYPERNODE_MEMBER], **spec}})


@pytest.mark.parametrize("path", sorted(HYPERNODE_SAMPLES))
def test_a_hypernode_field_is_read(path):
    assert hypernode(HYPERNODE_SAMPLES[path]) != hypernode({}), path
