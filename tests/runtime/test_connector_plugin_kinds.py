"""ResourceQuotas and PodDisruptionBudgets in the connector's cache (runtime/kube/cache.py): watched
only while a plugin of the policy reads them (resourcequota, pdb), said in the log; not read
(None, never "none") until listed or while the role may not list them; the snapshot carries them;
and the scheduler's ClusterRole grants list+watch on exactly the kinds the cache lists and watches
(deploy/rbac.yaml and the Helm chart). On a real API server: tests/integration/test_connector_quota_pdb.py."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from compiler.pipeline import compile_text
from runtime.kube import cache as cache_module
from runtime.kube.api import ApiError
from runtime.kube.cache import DISRUPTION_BUDGETS, RESOURCE_QUOTAS, RESOURCES, WATCHED_FOR_PLUGINS, ClusterCache
from runtime.service.loop import Scheduler

REPO = Path(__file__).resolve().parents[2]


def quota(name: str, hard: dict[str, str], used: dict[str, str], namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"hard": hard}, "status": {"hard": hard, "used": used}}


def budget(name: str, allowed: int, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}


class FakeApi:
    """Lists answer from `items` by path (403 for paths in `forbidden`); watches block until closed."""

    def __init__(self) -> None:
        self.items: dict[str, list[dict]] = {}
        self.forbidden: set[str] = set()
        self.listed: list[str] = []
        self.closed = threading.Event()

    def get(self, path: str, query: Any = None) -> dict:
        self.listed.append(path)
        if path in self.forbidden:
            raise ApiError(403, "Forbidden", f"cannot list {path}")
        return {"metadata": {"resourceVersion": "5"}, "items": self.items.get(path, [])}

    def watch(self, path: str, query: Any, timeout_seconds: int):
        self.closed.wait()
        return iter(())

    def close(self) -> None:
        self.closed.set()


def wait_until(condition, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_kinds_are_watched_only_for_the_plugins_that_read_them(caplog) -> None:
    api = FakeApi()
    api.items[RESOURCE_QUOTAS.path] = [quota("q", {"cpu": "4"}, {"cpu": "1"})]
    api.items[DISRUPTION_BUDGETS.path] = [budget("b", 0)]
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="policydsl.kube.cache"):
        cache.watch_for_plugins(["gang", "drf"])         # neither reads them
        cache.start()
        try:
            assert cache.wait_synced(5)
            state = cache.snapshot()
            assert state.resource_quotas is None and state.disruption_budgets is None
            assert RESOURCE_QUOTAS.path not in api.listed and DISRUPTION_BUDGETS.path not in api.listed
            # A reloaded policy turns resourcequota on: watched from then on, and said so.
            cache.watch_for_plugins(["gang", "resourcequota"])
            wait_until(lambda: cache.snapshot().resource_quotas is not None, "the quotas to be listed")
            assert cache.wait_synced(5)
            [held] = cache.snapshot().resource_quotas.values()
            assert (held.name, dict(held.hard), dict(held.used)) == ("q", {"cpu": 4000}, {"cpu": 1000})
            assert cache.snapshot().disruption_budgets is None
            cache.watch_for_plugins(["resourcequota"])     # asked again: one reflector, one line
            cache.watch_for_plugins(["pdb"])
            wait_until(lambda: cache.snapshot().disruption_budgets is not None, "the budgets to be listed")
            assert cache.snapshot().disruption_budgets["ns/b"].allowed == 0
        finally:
            cache.stop()
            api.close()
    said = [r.getMessage() for r in caplog.records if "watched, since the policy's" in r.getMessage()]
    assert said == ["ResourceQuota: watched, since the policy's resourcequota plugin reads them",
                    "PodDisruptionBudget: watched, since the policy's pdb plugin reads them"]
    assert api.listed.count(RESOURCE_QUOTAS.path) == 1


def test_a_role_that_may_not_list_them_leaves_them_unread_synced_and_said(monkeypatch, caplog) -> None:
    monkeypatch.setattr(cache_module, "ABSENT_RETRY_S", 0.05)
    api = FakeApi()
    api.forbidden = {RESOURCE_QUOTAS.path, DISRUPTION_BUDGETS.path}
    cache = ClusterCache(api=api, scheduler_name="volcano")  # type: ignore[arg-type]
    cache.watch_for_plugins(["resourcequota", "pdb"])
    with caplog.at_level(logging.WARNING, logger="policydsl.kube.cache"):
        cache.start()
        try:
            assert cache.wait_synced(5), "a forbidden kind must not hold the scheduler"
            wait_until(lambda: api.listed.count(RESOURCE_QUOTAS.path) >= 3, "the quotas to be looked for again")
            state = cache.snapshot()
            assert state.resource_quotas is None and state.disruption_budgets is None   # not read, not "none"
            # Granted later: listed on the next look, without a restart.
            api.items[RESOURCE_QUOTAS.path] = [quota("q", {"cpu": "2"}, {})]
            api.forbidden = set()
            wait_until(lambda: cache.snapshot().resource_quotas is not None, "the quotas to be listed")
            wait_until(lambda: cache.snapshot().disruption_budgets == {}, "the budgets to be listed")
        finally:
            cache.stop()
            api.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if m.startswith("ResourceQuota: 403")]) == 1, lines
    assert any("the resourcequota plugin holds every job with minResources" in m for m in lines)
    assert any("the pdb plugin lets no pod be a preempt/reclaim victim" in m for m in lines)


def test_the_cache_holds_events_and_the_snapshot_is_a_copy() -> None:
    cache = ClusterCache(api=None, scheduler_name="volcano")  # type: ignore[arg-type]  # never started
    cache._replace(RESOURCE_QUOTAS, [quota("q", {"cpu": "4"}, {})])
    cache._replace(DISRUPTION_BUDGETS, [budget("b", 1)])
    with cache._lock:
        cache._upsert(RESOURCE_QUOTAS, quota("q", {"cpu": "8"}, {"cpu": "2"}))
        cache._upsert(DISRUPTION_BUDGETS, budget("c", 0, namespace="other"))
        cache._delete(DISRUPTION_BUDGETS, budget("b", 1))
    state = cache.snapshot()
    assert state.resource_quotas["ns/q"].hard == {"cpu": 8000}
    assert set(state.disruption_budgets) == {"other/c"}
    state.resource_quotas.clear()
    assert set(cache.snapshot().resource_quotas) == {"ns/q"}
    cache._unread(RESOURCE_QUOTAS)          # a relist that answered 403
    with cache._lock:
        cache._upsert(RESOURCE_QUOTAS, quota("late", {"cpu": "1"}, {}))   # a late event does not make it "read"
    assert cache.snapshot().resource_quotas is None


class Connection:
    """A connection that records what the scheduler asked it to watch for."""

    def __init__(self) -> None:
        self.plans: list[str] = []

    def on_work(self, callback) -> None:
        pass

    def watch_for(self, plan) -> None:
        self.plans.append(",".join(p.name for tier in plan.tiers for p in tier.plugins))


def plan_with(*plugins: str):
    body = "\n".join(f"  plugin {p}" for p in plugins)
    result = compile_text(f'policy "p" version 1\nactions [enqueue, allocate]\ntier {{\n{body}\n}}\n', "p.policy")
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


def test_the_scheduler_tells_the_connection_each_plan_it_takes() -> None:
    connection = Connection()
    scheduler = Scheduler(plan_with("gang"), connection)  # type: ignore[arg-type]
    scheduler.set_plan(plan_with("gang", "resourcequota"))
    scheduler._take_plan()
    assert connection.plans == ["gang", "gang,resourcequota"]


# --- RBAC: the role grants what the cache lists and watches, nothing more -----------------------------

def group_and_plural(path: str) -> tuple[str, str]:
    parts = path.strip("/").split("/")
    return ("", parts[2]) if parts[0] == "api" else (parts[1], parts[3])


def watch_grants(text: str) -> set[tuple[str, str]]:
    text = re.sub(r"\{\{.*?\}\}", "templated", text)   # the chart's template expressions
    role = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterRole"
                and d["metadata"]["name"] in ("policydsl-scheduler", "templated"))
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return {key for key, verbs in grants.items() if {"list", "watch"} <= verbs}


def test_the_role_grants_list_and_watch_on_exactly_what_the_cache_watches() -> None:
    watched = {group_and_plural(r.path) for r in (*RESOURCES, *WATCHED_FOR_PLUGINS)}
    assert ("", "resourcequotas") in watched and ("policy", "poddisruptionbudgets") in watched
    for rbac in (REPO / "deploy" / "rbac.yaml", REPO / "deploy" / "helm" / "policydsl" / "templates" / "rbac.yaml"):
        assert watch_grants(rbac.read_text()) == watched, rbac
