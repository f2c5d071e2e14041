"""The restart and failover benchmark (python -m bench.e2e.restart) at a tiny scale: it runs every
scheduler it can over the existing pods, each binds the probe, the failover hands over, and the
report says so. No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _restart(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.e2e.restart", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.integration
def test_tiny_restart_and_failover_bind_their_probes(tmp_path: Path) -> None:
    from bench.e2e import binaries

    try:
        binaries.vc_scheduler()
        only = "policydsl,kube-scheduler,vc-scheduler"
    except binaries.MissingBinary:
        only = "policydsl,kube-scheduler"
    results = tmp_path / "restart.json"
    done = _restart("--nodes", "20", "--pods", "200", "--gang-size", "4", "--only", only, "--lease-duration", "3",
                    "--timeout", "120", "--workdir", str(tmp_path / "work"), "--json", str(results))
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(results.read_text())
    assert [s["scheduler"] for s in document["starts"]] == only.split(",")
    for start in document["starts"]:
        assert start["error"] == "" and start["seconds_to_bind"] > 0 and start["rss_mib"] > 0, start
    failover = document["failover"]
    assert failover["error"] == "", failover
    # The standby waited the lease out (killed, not released), then bound the probe.
    assert failover["kill_to_lease_s"] > 0 and failover["lease_to_bind_s"] > 0, failover
    assert failover["kill_to_bind_s"] >= failover["lease_seen_to_bind_s"] > 0, failover
    assert "| policydsl (ours) |" in done.stdout and "lease taken → probe bound" in done.stdout
    # The existing pods were created bound, in jobs of 4 with a Running PodGroup, spread over every node.
    jobs = [json.loads(line) for line in (tmp_path / "work" / "runs" / "existing.jsonl").read_text().splitlines()]
    assert len(jobs) == 50
    group, *pods = jobs[0]
    assert group["body"]["kind"] == "PodGroup" and group["body"]["status"]["phase"] == "Running"
    assert [p["body"]["spec"]["nodeName"] for p in pods] == [f"bench-node-{i:05d}" for i in range(4)]
    nodes = {p["body"]["spec"]["nodeName"] for job in jobs for p in job[1:]}
    assert len(nodes) == 20


def test_bad_sizes_are_usage_errors() -> None:
    for args, message in ((["--nodes", "0"], "--nodes"), (["--nodes", "2", "--pods", "500"], "100 pods a node"),
                          (["--only", "slurm"], "unknown slurm")):
        done = _restart(*args, timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def test_a_standby_runs_its_first_cycle_within_min_interval_of_taking_the_lease() -> None:
    # A failover binds within a second of the lease: the standby's loop must not wait out a period
    # (here an hour) before it notices it leads; nor a replica whose cache has just synced.
    import threading
    import time

    from polling import wait_for

    from runtime.service.embedded import EmbeddedCluster
    from runtime.service.loop import Scheduler

    from .test_connector_units import plan, small_cluster

    class Elector:
        leading = False

        def is_leader(self) -> bool:
            return self.leading

    class Syncing(EmbeddedCluster):
        synced = False

    elector, cluster = Elector(), Syncing(small_cluster(1))
    scheduler = Scheduler(plan(), cluster, period=3600.0, min_interval=0.05, elector=elector)
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(0.2)
        cluster.synced = True      # synced, still a standby: no cycle
        time.sleep(0.2)
        assert scheduler.cycles == 0
        elector.leading, took = True, time.monotonic()
        wait_for(lambda: scheduler.cycles == 1, "the first cycle after taking the lease", 10)
        assert time.monotonic() - took < 2.0   # min_interval and a cycle, not the hour
        assert cluster.state.pods["ns/p0"].node_name == "n1"
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_lists_read_the_watch_cache_with_the_collector_paused(monkeypatch) -> None:
    # A restart lists from the API server's watch cache (resourceVersion 0, as client-go's
    # reflectors), pages followed if it pages; the cyclic collector is off during the list (it
    # walked everything built so far, again and again) and back on after, and a big list is frozen.
    import gc

    from runtime.kube import cache as cache_module
    from runtime.kube.cache import NODES, ClusterCache

    node = {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}
    queries, enabled_during = [], []

    class Api:
        def get(self, path, query):
            queries.append(dict(query))
            enabled_during.append(gc.isenabled())
            if "continue" not in query:
                return {"metadata": {"continue": "next", "resourceVersion": "7"}, "items": [node]}
            return {"metadata": {"resourceVersion": "9"}, "items": [{**node, "metadata": {"name": "n1"}}]}

    froze = []
    monkeypatch.setattr(cache_module, "FREEZE_AFTER", 2)
    monkeypatch.setattr(cache_module.gc, "freeze", lambda: froze.append(True))
    cache = ClusterCache(Api(), "sched")
    assert gc.isenabled()
    assert cache._list(NODES) == "9"
    assert queries == [{"limit": cache_module.PAGE_SIZE, "resourceVersion": "0"},
                       {"limit": cache_module.PAGE_SIZE, "continue": "next"}]
    assert enabled_during == [False, False] and gc.isenabled() and froze == [True]
    assert sorted(cache.snapshot().nodes) == ["n0", "n1"]

    # Two lists at once (one per reflector thread): back on only when both are done; and a
    # collector someone else turned off stays off.
    pause = cache_module.collector_paused
    with pause:
        with pause:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with pause:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    # A cycle that ends while a list goes on leaves the collector off: the cycle's pause is the
    # same one (runtime.engine.cycle.collector_paused).
    from runtime.engine.cycle import collector_paused as cycle_pause

    cycle_pause.__enter__()             # a cycle starts
    pause.__enter__()                   # a reflector lists meanwhile
    cycle_pause.__exit__(None, None, None)
    assert not gc.isenabled()
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_the_api_json_reader_reads_what_the_standard_library_reads() -> None:
    import json

    from runtime.kube.api import loads

    for text in (b'{"items": [{"a": 1, "b": "\\u00e9", "c": [true, null, 1.5]}]}', b'{"big": 18446744073709551616}',
                 '{"s": "x"}', b"[]"):
        assert loads(text) == json.loads(text)
