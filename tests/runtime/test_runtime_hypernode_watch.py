"""The connector's cache and Volcano's HyperNodes (runtime/kube/cache.py): a missing CRD is no
HyperNodes (synced, said once, looked for again), invalid ones are named, not fatal, and the
snapshot carries them. The same on a real API server: tests/integration/test_connector_hypernodes.py."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from runtime.kube import cache as cache_module
from runtime.kube.api import ApiError
from runtime.kube.cache import HYPERNODES, NODES, ClusterCache


def hypernode(name: str, tier: int, *nodes: str, version: str = "1") -> dict:
    return {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": version},
            "spec": {"tier": tier, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}}
                                               for n in nodes]}}


class FakeApi:
    """Answers 404 for HyperNodes until `installed`; watches block until closed."""

    def __init__(self) -> None:
        self.installed = False
        self.items: list[dict] = []
        self.lists = 0
        self.closed = threading.Event()

    def get(self, path: str, query: Any = None) -> dict:
        assert path == HYPERNODES.path == "/apis/topology.volcano.sh/v1alpha1/hypernodes"
        self.lists += 1
        if not self.installed:
            raise ApiError(404, "Not Found", "the server could not find the requested resource")
        return {"metadata": {"resourceVersion": "7"}, "items": self.items}

    def watch(self, path: str, query: Any, timeout_seconds: int):
        self.closed.wait()
        return iter(())

    def close(self) -> None:
        self.closed.set()


def test_a_missing_hypernode_crd_is_no_hypernodes_synced_said_once_and_looked_for_again(monkeypatch, caplog) -> None:
    monkeypatch.setattr(cache_module, "ABSENT_RETRY_S", 0.05)
    api = FakeApi()
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    thread = threading.Thread(target=cache._reflect, args=(HYPERNODES,), daemon=True)
    with caplog.at_level(logging.INFO, logger="policydsl.kube.cache"):
        thread.start()
        try:
            assert cache._synced["HyperNode"].wait(5), "a missing CRD must not hold the sync"
            deadline = time.monotonic() + 5
            while api.lists < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert api.lists >= 3 and cache.snapshot().hypernodes == {}
            said = [r for r in caplog.records if "its CRD is not installed" in r.getMessage()]
            assert len(said) == 1, [r.getMessage() for r in caplog.records]
            # The CRD installed later: the next look finds the HyperNodes and watches them.
            api.items = [hypernode("s1", 1, "n1", "n2")]
            api.installed = True
            deadline = time.monotonic() + 5
            while "s1" not in cache.snapshot().hypernodes and time.monotonic() < deadline:
                time.sleep(0.01)
            assert cache.snapshot().hypernodes["s1"].tier == 1
            # The reflector says so just after it publishes the HyperNodes: wait for the line.
            deadline = time.monotonic() + 5
            while not any("served by the API server now" in r.getMessage() for r in caplog.records) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            assert any("served by the API server now" in r.getMessage() for r in caplog.records)
        finally:
            cache._stop.set()
            api.close()
            thread.join(5)
    assert not thread.is_alive()


def test_a_role_without_hypernodes_is_no_hypernodes_too(monkeypatch) -> None:
    monkeypatch.setattr(cache_module, "ABSENT_RETRY_S", 5.0)
    api = FakeApi()
    api.get = lambda path, query=None: (_ for _ in ()).throw(ApiError(403, "Forbidden", "cannot list"))  # type: ignore
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    thread = threading.Thread(target=cache._reflect, args=(HYPERNODES,), daemon=True)
    thread.start()
    try:
        assert cache._synced["HyperNode"].wait(5)
    finally:
        cache._stop.set()
        api.close()
        thread.join(5)


def test_hypernodes_are_held_resolved_and_invalid_ones_named(caplog) -> None:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]  # never started
    with cache._lock:
        for name in ("n1", "n2"):
            cache._upsert(NODES, {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "1"}}})
    cache._replace(HYPERNODES, [hypernode("s1", 1, "n1", "n2")])   # takes the lock itself
    state = cache.snapshot()
    assert state.topology().leaves["s1"] == frozenset({"n1", "n2"})
    generation = state.hypernode_generation
    with cache._lock:   # the same spec again (a status update): nothing to resolve again
        cache._upsert(HYPERNODES, hypernode("s1", 1, "n1", "n2", version="2"))
    assert cache.snapshot().hypernode_generation == generation

    bad = {"metadata": {"name": "s2", "uid": "u-s2", "resourceVersion": "3"},
           "spec": {"tier": 1, "members": [{"type": "Node", "selector": {}}]}}
    with caplog.at_level(logging.WARNING, logger="policydsl.kube.cache"):
        for _ in range(2):
            with cache._lock:
                cache._upsert(HYPERNODES, bad)
    [invalid] = cache.invalid_objects()
    assert (invalid.kind, invalid.key, invalid.version) == ("HyperNode", "s2", "3")
    assert "spec.members[0].selector" in invalid.message
    assert len([r for r in caplog.records if "HyperNode s2 is invalid" in r.getMessage()]) == 1
    assert set(cache.snapshot().hypernodes) == {"s1"}

    with cache._lock:
        cache._delete(HYPERNODES, {"metadata": {"name": "s1"}})
        cache._delete(HYPERNODES, bad)
    assert cache.snapshot().hypernodes == {} and cache.invalid_objects() == []
    cache._replace(HYPERNODES, [hypernode("s3", 2, "n1")])   # a relist replaces what was held
    assert set(cache.snapshot().hypernodes) == {"s3"}
