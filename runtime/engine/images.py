"""Image locality: kube-scheduler's ImageLocality score (pkg/scheduler/framework/plugins/imagelocality,
v1.34, the version Volcano v1.14.1 builds on), which the nodeorder plugin weighs by its
`imagelocality` argument (Volcano's `imagelocality.weight`).

A node scores by the images of the pod's containers (init containers and regular ones, each
container counted, as kube-scheduler's sumImageScores) that its status.images lists: each such
image adds its size scaled by the share of all nodes that have it (so an image every node has
adds its whole size, one only this node has a fraction: spreading pulls over the cluster weighs
less). The sum is clamped to [23 MB, 1000 MB x containers] and mapped onto 0-100 (integer
arithmetic, as kube-scheduler's calculatePriority). A container's image is looked up as written,
`:latest` added when it names no tag (normalizedImageName); a node's image names are taken as the
kubelet reports them.

Difference from kube-scheduler: an image whose size differs between nodes counts each node's own
size (kube-scheduler's cache keeps the size the first node it saw reported). Volcano v1.14.1's
nodeorder hands the k8s plugin NodeInfos built without image states (framework.GenerateNodeMapAndSlice),
so there the score is 0 on every node whatever the weight; we score as the argument says
(runtime/README.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from runtime.cluster.model import Node, Pod

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_NODE_SCORE = 100


def normalized_image_name(name: str) -> str:
    """`name:latest` when the name has no tag (a `:` after its last `/`), else the name as written."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


@dataclass
class NodeImages:
    """The images nodes report (status.images), indexed by name: which nodes have each, at what size."""

    nodes: Sequence[Node]
    _index: dict[str, tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)

    @property
    def any(self) -> bool:
        return bool(self.index())

    def index(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Image name -> (rows of the nodes that have it, its size on each), built once."""
        if self._index is None:
            rows: dict[str, dict[int, int]] = {}
            for i, node in enumerate(self.nodes):
                for names, size in node.images:
                    for name in names:
                        rows.setdefault(name, {}).setdefault(i, size)   # a name listed twice on a node: once
            self._index = {name: (np.fromiter(held, dtype=np.int64, count=len(held)),
                                  np.fromiter(held.values(), dtype=np.int64, count=len(held)))
                           for name, held in rows.items()}
        return self._index


_last: NodeImages | None = None


def node_images(nodes: Sequence[Node]) -> NodeImages:
    """The index of these nodes' images: the snapshot cache hands every cycle the same node list
    while no node changed (runtime.engine.snapshot.SnapshotCache), so the last index serves again."""
    global _last
    if _last is None or _last.nodes is not nodes:
        _last = NodeImages(nodes)
    return _last


def image_locality(images: NodeImages, pod: Pod) -> np.ndarray | None:
    """Each node's score (0-100, int64) for the pod's images; None when no node has any of them."""
    index = images.index()
    n = len(images.nodes)
    total = np.zeros(n, dtype=np.int64)
    found = False
    for image in pod.images:
        held = index.get(normalized_image_name(image)) if image else None
        if held is None:
            continue
        found = True
        rows, sizes = held
        # int64(float64(size) * spread), spread = nodes having it / all nodes (scaledImageScore)
        total[rows] += (sizes.astype(np.float64) * (len(rows) / n)).astype(np.int64)
    if not found:
        return None
    top = MAX_CONTAINER_THRESHOLD * len(pod.images)
    clamped = np.clip(total, MIN_THRESHOLD, top)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


def image_locality_weight(plan) -> float:  # plan: compiler.plan.Plan
    """nodeorder's image locality weight times its plugin weight (0 without nodeorder)."""
    spec = plan.plugin("nodeorder")
    if spec is None or not spec.enabled("node_order"):
        return 0.0
    weight = spec.weight if spec.weight is not None else 1.0
    return float(spec.arguments.get("imagelocality", 1)) * weight


def image_class_key(pod: Pod) -> tuple | None:
    """What tells a pending pod's task class apart for nodeorder's image score, which scores a
    class by its first pod: its images, when it names any."""
    return pod.images if any(pod.images) else None
