"""Volcano's device node lock (runtime.kube.nodelock), cases after Volcano v1.14.1's
pkg/scheduler/plugins/util/nodelock TestLockNode (no lock: taken; locked 20 minutes ago: taken over;
locked in the future: refused) and its LockNode/ReleaseNodeLock, against a fake API. The
dev-cluster proof with the device-plugin stand-in is tests/integration/test_device_plugin_standin.py."""

from __future__ import annotations

import pytest

from runtime.cluster.decisions import Binding
from runtime.cluster.model import ClusterState
from runtime.kube import nodelock
from runtime.kube.api import ApiError
from tests.runtime.runtime_helpers import pod

NOW = 1_800_000_000.0


class FakeApi:
    """One node; merge patches honour the resourceVersion precondition as the API server does."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.annotations = dict(annotations or {})
        self.version = 1
        self.conflict_next = False

    def get(self, path: str) -> dict:
        return {"metadata": {"name": "g0", "resourceVersion": str(self.version), "annotations": dict(self.annotations)}}

    def merge_patch(self, path: str, body: dict) -> dict:
        meta = body["metadata"]
        if self.conflict_next or meta.get("resourceVersion") != str(self.version):
            self.conflict_next = False
            raise ApiError(409, "Conflict", "the object has been modified")
        for key, value in meta.get("annotations", {}).items():
            if value is None:
                self.annotations.pop(key, None)
            else:
                self.annotations[key] = value
        self.version += 1
        return self.get(path)


@pytest.mark.parametrize("name, existing, taken", [
    ("no lock: taken", None, True),
    ("locked 20 minutes ago: stale, taken over", NOW - 1200, True),
    ("locked 5 minutes ago to the second: still held", NOW - 300, False),
    ("locked a minute ago: held", NOW - 60, False),
    ("locked in 20 minutes (a clock ahead): held", NOW + 1200, False),
])
def test_lock_node(name, existing, taken) -> None:
    api = FakeApi({"gpu": nodelock.rfc3339(existing)} if existing is not None else {})
    got = nodelock.lock(api, "g0", "gpu", NOW)
    assert isinstance(got, nodelock.Held) is taken, (name, got)
    if taken:
        assert api.annotations["gpu"] == nodelock.rfc3339(NOW) == got.stamp
        assert nodelock.parse_rfc3339(got.stamp) == NOW
    else:
        assert "is locked for devices (gpu since" in got.detail and got.status == nodelock.LOCKED
        assert api.annotations["gpu"] == nodelock.rfc3339(existing)


def test_a_lock_that_is_no_time_holds_and_says_so() -> None:
    api = FakeApi({"hamivgpu": "yesterday"})
    got = nodelock.lock(api, "g0", "hamivgpu", NOW)
    assert "no RFC 3339 time" in got.detail and api.annotations["hamivgpu"] == "yesterday"


def test_a_write_that_lost_a_race_reads_the_node_again() -> None:
    """A 409 (the node changed since it was read, e.g. another scheduler took the lock) is never
    overwritten blindly: the node is read again and the lock checked again."""
    api = FakeApi()
    api.conflict_next = True
    assert isinstance(nodelock.lock(api, "g0", "gpu", NOW), nodelock.Held)

    class TakenMeanwhile(FakeApi):
        def merge_patch(self, path: str, body: dict) -> dict:
            self.annotations["gpu"] = nodelock.rfc3339(NOW - 1)     # another scheduler won
            self.version += 1
            return super().merge_patch(path, body)

    raced = TakenMeanwhile()
    got = nodelock.lock(raced, "g0", "gpu", NOW)
    assert isinstance(got, nodelock.NotTaken) and got.status == nodelock.LOCKED
    assert raced.annotations["gpu"] == nodelock.rfc3339(NOW - 1)


def test_release_removes_only_our_own_lock() -> None:
    api = FakeApi()
    held = nodelock.lock(api, "g0", "gpu", NOW)
    api.annotations["gpu"] = nodelock.rfc3339(NOW + 400)      # taken over by another since
    nodelock.release(api, held)
    assert api.annotations["gpu"] == nodelock.rfc3339(NOW + 400)
    api.annotations["gpu"] = held.stamp
    nodelock.release(api, held)
    assert "gpu" not in api.annotations


def test_which_pods_take_which_lock() -> None:
    """As Volcano's Allocate calls take them: a GPU-share pod (gpu-memory) `gpu`, a vGPU pod
    `hamivgpu`, a GPU-number pod or a plain device pod none."""
    state = ClusterState()
    share = pod(state, "share", requests={"volcano.sh/gpu-memory": 1024})
    number = pod(state, "number", requests={"volcano.sh/gpu-number": 1})
    vgpu = pod(state, "vgpu", requests={"volcano.sh/vgpu-number": 1})
    assert nodelock.lock_name(Binding(share.key, "g0", {"volcano.sh/gpu-number": (0,)}), share) == "gpu"
    assert nodelock.lock_name(Binding(number.key, "g0", {"volcano.sh/gpu-number": (0,)}), number) is None
    assert nodelock.lock_name(Binding(vgpu.key, "g0", {"volcano.sh/vgpu-number": (1,)}), vgpu) == "hamivgpu"
    assert nodelock.lock_name(Binding(share.key, "g0", {}), share) is None
