"""Image locality on a real API server: the connector reads the images a node's status lists (as a
kubelet reports them) and nodeorder's imagelocality sends a pod to the node that has its image;
a node whose image list changes is read again (runtime/engine/images.py, runtime/kube/cache.py)."""

from __future__ import annotations

import pytest

from .connector_helpers import InProcess, Objects, pod_body, unique_scheduler_name, wait_for

pytestmark = pytest.mark.integration

POLICY = """policy "images" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin predicates
  plugin nodeorder {
    leastrequested = 0
    balancedresource = 0
    tainttoleration = 0
    nodeaffinity = 0
    imagelocality = 1
  }
}
"""

IMAGE = "registry.example/train:v3"
GIB = 1024 ** 3
# Large: the score scales an image's size by the share of nodes holding it, and other tests' nodes
# may share the dev cluster (at 64 GiB one node in 60 still scores 100).


def set_images(objects: Objects, node: str, images: list[dict]) -> None:
    path = f"/api/v1/nodes/{node}"
    body = objects.api.get(path)
    body["status"]["images"] = images
    objects.api.put(f"{path}/status", body)


def pod_with_image(pod: str, scheduler: str, group: str) -> dict:
    body = pod_body(pod, scheduler, group=group)
    body["spec"]["containers"][0]["image"] = IMAGE
    return body


def test_a_pod_goes_to_the_node_that_has_its_image(objects: Objects, in_process) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    # Without images every node scores alike and the tie goes to a-plain, first by name.
    plain, cached, later = f"{ns}-a-plain", f"{ns}-b-cached", f"{ns}-c-later"
    for node in (plain, cached, later):
        objects.node(node, cpu="8", memory="32Gi")
    set_images(objects, cached, [{"names": [IMAGE], "sizeBytes": 64 * GIB}])
    scheduler: InProcess = in_process(name, POLICY)
    wait_for(lambda: scheduler.cluster.snapshot().nodes[cached].images, "the cache to read the node's images", 10)

    objects.podgroup("first", 1)
    objects.api.post(f"/api/v1/namespaces/{ns}/pods", pod_with_image("first-0", name, "first"))
    scheduler.cycle_until(lambda: objects.bound().get("first-0") == cached, 15, "the pod to go where its image is")

    # The kubelet of c-later reports the image, b-cached's garbage-collects it: read again.
    set_images(objects, later, [{"names": [IMAGE], "sizeBytes": 64 * GIB}])
    set_images(objects, cached, [])
    wait_for(lambda: not scheduler.cluster.snapshot().nodes[cached].images, "the cache to see the change", 10)
    objects.podgroup("second", 1)
    objects.api.post(f"/api/v1/namespaces/{ns}/pods", pod_with_image("second-0", name, "second"))
    scheduler.cycle_until(lambda: objects.bound().get("second-0") == later, 15, "the second pod to follow the image")
