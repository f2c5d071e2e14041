"""Image locality in nodeorder (runtime/engine/images.py): kube-scheduler's ImageLocality score,
weighed by nodeorder's `imagelocality` (Volcano's `imagelocality.weight`).

The score tables are translated from kubernetes v1.34.1 (the version Volcano v1.14.1 builds on)
pkg/scheduler/framework/plugins/imagelocality/image_locality_test.go: TestImageLocalityPriority
(its seven cases, by name) and TestNormalizedImageName. Then placements on both kernels, node
images read from snapshot objects (the connector reads Nodes through the same reader), and the
argument imported from Volcano and exported back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano
from compiler.volcano.importer import import_volcano_text
from runtime.cluster.model import Node, Pod
from runtime.cluster.objects import ObjectError, load_objects
from runtime.engine.cycle import run_cycle
from runtime.engine.images import NodeImages, image_locality, normalized_image_name
from runtime.engine.session import Options
from runtime.kube.convert import node_from, pod_from

MB = 1024 * 1024


def status(*images: tuple[tuple[str, ...], int]) -> tuple:
    return tuple((names, size * MB) for names, size in images)


# The node statuses of TestImageLocalityPriority.
NODE_403002000 = status((("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40),
                        (("gcr.io/300:latest", "gcr.io/300:v1"), 300), (("gcr.io/2000:latest",), 2000))
NODE_25010 = status((("gcr.io/250:latest",), 250), (("gcr.io/10:latest", "gcr.io/10:v1"), 10))
NODE_60040900 = status((("gcr.io/600:latest",), 600), (("gcr.io/40:latest",), 40), (("gcr.io/900:latest",), 900))
NODE_300600900 = status((("gcr.io/300:latest",), 300), (("gcr.io/600:latest",), 600), (("gcr.io/900:latest",), 900))
NODE_400030 = status((("gcr.io/4000:latest",), 4000), (("gcr.io/30:latest",), 30))
NODE_203040 = status((("gcr.io/20:latest",), 20), (("gcr.io/30:latest",), 30), (("gcr.io/40:latest",), 40))
NO_IMAGES: tuple = ()


def images_pod(*images: str, init: tuple[str, ...] = ()) -> Pod:
    return Pod("ns", "p", images=init + images)


@pytest.mark.parametrize("pod, nodes, expected", [
    (images_pod("gcr.io/40", "gcr.io/250"), [NODE_403002000, NODE_25010], [0, 5]),
    (images_pod("gcr.io/40", "gcr.io/300"), [NODE_403002000, NODE_25010], [7, 0]),
    (images_pod("gcr.io/10", "gcr.io/4000"), [NODE_400030, NODE_25010], [100, 0]),
    (images_pod("gcr.io/10", "gcr.io/4000"), [NODE_400030, NODE_25010, NO_IMAGES], [66, 0, 0]),
    (images_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"), [NODE_60040900, NODE_300600900, NO_IMAGES], [32, 36, 0]),
    (images_pod("gcr.io/30", "gcr.io/40"), [NODE_203040, NODE_400030], [1, 0]),
    (images_pod("gcr.io/30", init=("gcr.io/300",)), [NODE_403002000, NODE_203040], [6, 0]),
], ids=[
    "two images spread on two nodes, prefer the larger image one",
    "two images on one node, prefer this node",
    "if exceed limit, use limit",
    "if exceed limit, use limit (with node which has no images present)",
    "pod with multiple large images, node2 is preferred",
    "pod with multiple small images",
    "include InitContainers: two images spread on two nodes, prefer the larger image one",
])
def test_image_locality_priority(pod: Pod, nodes: list[tuple], expected: list[int]) -> None:
    """TestImageLocalityPriority."""
    index = NodeImages([Node(f"node{i + 1}", {"cpu": 1000}, images=images) for i, images in enumerate(nodes)])
    scores = image_locality(index, pod)
    assert (scores.tolist() if scores is not None else [0] * len(nodes)) == expected


@pytest.mark.parametrize("name, normalized", [
    ("root", "root:latest"),                            # add :latest postfix 1
    ("gcr.io:5000/root", "gcr.io:5000/root:latest"),    # add :latest postfix 2
    ("root:tag", "root:tag"),                           # keep it as is 1
    ("root@sha256:" + "ab" * 32, "root@sha256:" + "ab" * 32),   # keep it as is 2
])
def test_normalized_image_name(name: str, normalized: str) -> None:
    """TestNormalizedImageName."""
    assert normalized_image_name(name) == normalized


def test_a_pod_whose_images_no_node_has_scores_nothing() -> None:
    index = NodeImages([Node("n1", {"cpu": 1}, images=NODE_25010)])
    assert image_locality(index, images_pod("gcr.io/other")) is None
    assert image_locality(index, Pod("ns", "p")) is None


# --- objects: the reader (snapshots and the connector) ----------------------------------------------

def node_object(name: str, images: list[dict] | None) -> dict:
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}
    if images is not None:
        body["status"]["images"] = images
    return body


def pod_object(name: str, image: str, init: str | None = None, group: str = "job") -> dict:
    spec = {"schedulerName": "volcano",
            "containers": [{"name": "main", "image": image, "resources": {"requests": {"cpu": "1"}}}]}
    if init:
        spec["initContainers"] = [{"name": "init", "image": init}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": spec}


BIG = [{"names": ["registry.example/train@sha256:" + "0" * 64, "registry.example/train:v3"], "sizeBytes": 5 * 1024 * MB}]


def test_node_images_and_pod_images_are_read_from_objects_and_the_api() -> None:
    node = node_from(node_object("n1", BIG + [{"names": [], "sizeBytes": 1}]))
    assert node.images == ((("registry.example/train@sha256:" + "0" * 64, "registry.example/train:v3"), 5 * 1024 * MB),)
    pod = pod_from(pod_object("p", "registry.example/train:v3", init="busybox"), {})
    assert pod.images == ("busybox", "registry.example/train:v3")
    with pytest.raises(ObjectError) as err:
        load_objects([("s.yaml", node_object("n2", [{"names": "x", "sizeBytes": 1}]))])
    assert "status.images[0].names" in str(err.value) and "n2" in str(err.value)


POLICY = """policy "images" version 1
actions [enqueue, allocate, backfill]
tier {{
  plugin gang
}}
tier {{
  plugin predicates
  plugin nodeorder {{
    leastrequested = 0
    balancedresource = 0
    tainttoleration = 0
    nodeaffinity = 0
    imagelocality = {weight}
  }}
}}
"""


def plan(weight: int):
    compiled = compile_text(POLICY.format(weight=weight), "images.policy")
    assert compiled.plan is not None, [str(d) for d in compiled.errors]
    return compiled.plan


def cluster(pods: list[dict]):
    nodes = [node_object("a-plain", []), node_object("b-cached", BIG), node_object("c-plain", None)]
    podgroup = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "job", "namespace": "ns"}, "spec": {"minMember": 1}}
    return load_objects([("s.yaml", o) for o in (*nodes, podgroup, *pods)])


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_a_pod_goes_where_its_image_is_and_weight_0_turns_it_off(pure: bool) -> None:
    pods = [pod_object("p0", "registry.example/train:v3")]
    placed = {b.pod: b.node for b in run_cycle(plan(1), cluster(pods), Options(pure_python=pure)).bindings}
    assert placed == {"ns/p0": "b-cached"}
    # Off: every node scores alike, and the first by name wins the tie.
    placed = {b.pod: b.node for b in run_cycle(plan(0), cluster(pods), Options(pure_python=pure)).bindings}
    assert placed == {"ns/p0": "a-plain"}


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_pods_of_one_job_with_other_images_are_scored_each_by_its_own(pure: bool) -> None:
    # Same request, same job: without images in the class key they would share one score.
    pods = [pod_object("p0", "busybox"), pod_object("p1", "registry.example/train:v3"), pod_object("p2", "busybox")]
    placed = {b.pod: b.node for b in run_cycle(plan(1), cluster(pods), Options(pure_python=pure)).bindings}
    assert placed["ns/p1"] == "b-cached"
    assert placed["ns/p0"] == placed["ns/p2"] == "a-plain"


def test_imagelocality_weight_imports_and_exports_back(tmp_path: Path) -> None:
    config = ('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n'
              '  - name: predicates\n  - name: nodeorder\n    arguments:\n      imagelocality.weight: 3\n')
    result = import_volcano_text(config, "c.conf")
    assert result.exit_code == 0 and "imagelocality = 3" in result.text
    compiled = compile_text(result.text)
    assert compiled.plan.plugin("nodeorder").arguments["imagelocality"] == 3
    policy = tmp_path / "p.policy"
    policy.write_text(result.text)
    [out] = [d for d in yaml.safe_load_all(export_volcano(str(policy)).text) if d and "tiers" in d]
    [nodeorder] = [p for t in out["tiers"] for p in t["plugins"] if p["name"] == "nodeorder"]
    assert nodeorder["arguments"]["imagelocality.weight"] == 3
