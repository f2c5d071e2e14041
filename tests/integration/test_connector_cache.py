"""The watch cache on a real API server: which pods it holds, and a relist after 410 Gone
that drops what was deleted while the watch was behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polling import wait_for

from runtime.kube.api import KubeApi, WatchEvent, connect
from runtime.kube.cache import PODS, ClusterCache

from .connector_helpers import Objects, unique_scheduler_name
from .kube_helpers import KubeCluster

pytestmark = pytest.mark.integration


class FallingBehind:
    """The real API, except that its pods watch can miss deletions and then end with 410 Gone:
    what a client sees when its resourceVersion has left the server's window."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.hide_deletions = False
        self.expire = False

    def get(self, path: str, query=None, timeout: float = 30.0):
        return self.api.get(path, query, timeout)

    def close(self) -> None:
        self.api.close()

    def watch(self, path: str, query, timeout_seconds: int) -> Iterator[WatchEvent]:
        for event in self.api.watch(path, query, timeout_seconds):
            if path == PODS.path:
                if self.hide_deletions and event.type == "DELETED":
                    continue
                if self.expire:
                    self.expire = False
                    yield WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                                               "message": "too old resource version"})
                    return
            yield event


def test_cache_holds_our_pods_and_bound_foreign_ones_and_relists_after_410(
    objects: Objects, kube_cluster: KubeCluster
) -> None:
    name = unique_scheduler_name()
    ns = objects.namespace
    objects.node(f"{ns}-n0")
    api = FallingBehind(connect(str(kube_cluster.kubeconfig)))
    restarts: list[tuple[str, str]] = []
    cache = ClusterCache(api, name, on_watch_restart=lambda kind, reason: restarts.append((kind, reason)))
    cache.start()
    try:
        assert cache.wait_synced(30)

        def ours() -> set[str]:
            return {key.split("/", 1)[1] for key in cache.snapshot().pods if key.startswith(ns + "/")}

        objects.pod("a", name)
        objects.pod("b", name)
        objects.pod("foreign", "default-scheduler")
        wait_for(lambda: ours() == {"a", "b"}, "our two pods in the cache (not the foreign one)", 10)
        # A foreign pod matters once it holds room on a node.
        objects.api.post(f"/api/v1/namespaces/{ns}/pods/foreign/binding",
                         {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "foreign"},
                          "target": {"apiVersion": "v1", "kind": "Node", "name": f"{ns}-n0"}})
        wait_for(lambda: ours() == {"a", "b", "foreign"}, "the bound foreign pod in the cache", 10)

        api.hide_deletions = True
        objects.api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/a", query={"gracePeriodSeconds": "0"})
        api.expire = True
        objects.pod("c", name)  # the next pods event ends the watch with 410

        wait_for(lambda: ours() == {"b", "c", "foreign"}, "the relisted pods, without the deleted one", 20)
        assert ("Pod", "expired") in restarts
        assert cache.synced
    finally:
        cache.stop()
