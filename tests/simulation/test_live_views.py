"""The running scheduler's read-only views (runtime/service/views.py, webapi.py, dashboard.py,
volcano_metrics.py): live explain says what offline explain says, queue figures and pending
order, bounded memory, HTTP answers, the dashboard's content and cache, Volcano's metric names."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from compiler.pipeline import compile_text
from runtime.service import views as observe
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.kube.metrics import Metrics
from runtime.cluster.objects import load_path
from runtime.service.views import LiveView, queues_document
from runtime.engine.session import Options
from runtime.engine.explanation import explain
from runtime.service.webapi import routes
from sim_helpers import node, pod, podgroup, policy_text, run_cli, write_objects

QUEUES = """
queue team_a { weight = 2  capability = { cpu: 6 }  guarantee = { cpu: 1 } }
queue team_b { weight = 1 }
queue research {
  weight = 1
  queue nested { weight = 1 }
}
"""
POLICY = policy_text("live", "enqueue, allocate, backfill", "  plugin predicates\n  plugin proportion\n"
                     "  plugin nodeorder", QUEUES)


def plan_of(text: str = POLICY):
    compiled = compile_text(text, "live.policy")
    assert compiled.plan is not None, [str(d) for d in compiled.diagnostics]
    return compiled.plan


def cluster_objects() -> list[dict]:
    objects = [node("n1", cpu="4"), node("n2", cpu="4")]
    # team_a: one gang runs (2 cpu), one waits: 4 pods of 2 cpu would pass its capability of 6.
    objects += [podgroup("run", queue="team_a", min_member=2), pod("run-0", group="run", cpu="1"),
                pod("run-1", group="run", cpu="1")]
    objects += [podgroup("big", queue="team_a", min_member=4)] + [pod(f"big-{i}", group="big", cpu="2")
                                                                  for i in range(4)]
    # team_b: three jobs of different priority that cannot fit (5 cpu each, nodes have 4).
    for name, priority in (("low", 1), ("high", 100), ("mid", 50)):
        objects += [podgroup(name, queue="team_b", min_member=1), pod(f"{name}-0", group=name, cpu="5",
                                                                       priority=priority)]
    # nested: a gang whose pods are not all created yet.
    objects += [podgroup("partial", queue="nested", min_member=3), pod("partial-0", group="partial", cpu="1")]
    return objects


@pytest.fixture
def state(tmp_path: Path):
    return load_path(write_objects(tmp_path / "cluster.yaml", cluster_objects()))


def run_live(state, plan=None, cycles: int = 1, metrics: Metrics | None = None,
             facts_every: float = 0.0) -> tuple[LiveView, Scheduler]:
    """Cycles one after another; by default each takes the views' figures (no FACTS_EVERY_S)."""
    view = LiveView()
    scheduler = Scheduler(plan or plan_of(), EmbeddedCluster(state), metrics=metrics or Metrics(), view=view,
                          facts_every=facts_every)
    for _ in range(cycles):
        scheduler.run_once()
    return view, scheduler


# --- live explain ------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["ns/big", "ns/big-0", "ns/high-0", "ns/partial", "ns/partial-0"])
def test_live_explain_says_what_offline_explain_says(state, target) -> None:
    plan = plan_of()
    offline = explain(plan, copy.deepcopy(state), target, Options())
    view, _ = run_live(state, plan)
    live = view.last.explain(target)
    assert live.lines() == offline.lines()
    assert live.to_dict() == offline.to_dict()
    assert live.status == "waiting"


def test_a_waiting_gang_explains_with_the_queue_figures(state) -> None:
    view, _ = run_live(state)
    text = "\n".join(view.last.explain("ns/big").lines())
    assert "queue team_a may allocate 2666m more (capability 6, cluster 8, deserved 4666m, guarantee 1" in text, text


def test_the_reasons_index_is_bounded(state, monkeypatch) -> None:
    monkeypatch.setattr(observe, "MAX_EXPLAINED_PODS", 2)
    view, _ = run_live(state)
    assert len(view.last.decisions.unschedulable) > 2
    assert len(view.last.reasons()) == 2


# --- queues and pending ---------------------------------------------------------------------------------

def test_queue_rows_carry_their_figures_in_tree_order(state) -> None:
    view, _ = run_live(state)
    rows = {q.name: q for q in view.last.queues}
    assert [q.name for q in view.last.queues] == ["default", "research", "nested", "team_a", "team_b"]
    assert rows["nested"].parent == "research" and rows["nested"].depth == 1
    a = rows["team_a"]
    assert a.weight == 2 and a.capability == {"cpu": 6000} and a.guarantee == {"cpu": 1000}
    assert a.allocated["cpu"] == 2000
    assert a.deserved is not None and a.borrowed == {r: max(0.0, a.allocated[r] - v) for r, v in a.deserved.items()}
    assert a.share == pytest.approx(a.allocated["cpu"] / a.deserved["cpu"])
    assert a.pending_jobs == 1 and a.unschedulable_jobs == 1 and a.waiting_pods == 4
    assert rows["team_b"].pending_jobs == 3
    assert rows["team_a"].podgroups == {"Inqueue": 1, "Running": 1}


def test_pending_jobs_come_in_the_order_the_next_cycle_takes_them(state) -> None:
    view, _ = run_live(state)
    jobs = view.last.pending("team_b")
    assert [(j.position, j.key, j.priority) for j in jobs] == [(1, "ns/high", 100), (2, "ns/mid", 50),
                                                                (3, "ns/low", 1)]
    # No node has 5 CPUs: that is their reason, before anything their queue says.
    assert all("Insufficient cpu" in j.reason for j in jobs), [j.reason for j in jobs]
    (partial,) = view.last.pending("nested")
    assert "gang has 1 of 3 pods" in partial.reason


def test_pending_lists_are_bounded_but_counted(state, monkeypatch) -> None:
    monkeypatch.setattr(observe, "MAX_PENDING_PER_QUEUE", 2)
    view, _ = run_live(state)
    document = observe.pending_document(view.last, "team_b")
    assert document["pendingJobs"] == 3 and document["listed"] == 2
    assert [j["name"] for j in document["jobs"]] == ["ns/high", "ns/mid"]


# --- HTTP ---------------------------------------------------------------------------------------------

def get(table, path: str) -> tuple[int, dict | str]:
    prefix = max((p for p in table if path == p or (p.endswith("/") and path.startswith(p))), key=len)
    status, body, content_type = table[prefix](path, "")
    return status, json.loads(body) if content_type == "application/json" else body.decode()


def test_http_views_answer_from_the_last_cycle(state) -> None:
    empty = routes(LiveView())
    status, document = get(empty, "/api/v1/queues")
    assert status == 503 and "no cycle yet" in document["error"]
    view, _ = run_live(state, cycles=2)
    table = routes(view)
    status, document = get(table, "/api/v1/queues")
    assert status == 200 and document["cycle"] == 2
    assert {q["name"] for q in document["queues"]} == {"default", "research", "nested", "team_a", "team_b"}
    team_a = next(q for q in document["queues"] if q["name"] == "team_a")
    assert team_a["capability"] == {"cpu": "6"} and team_a["guarantee"] == {"cpu": "1"}
    assert team_a["allocated"]["cpu"] == "2"
    status, document = get(table, "/api/v1/queues/team_b/pending")
    assert status == 200 and [j["position"] for j in document["jobs"]] == [1, 2, 3]
    status, document = get(table, "/api/v1/queues/team_b")
    assert status == 200 and [q["name"] for q in document["queues"]] == ["team_b"]
    status, document = get(table, "/api/v1/queues/nope/pending")
    assert status == 404 and document["message"].startswith("policydsl: no queue `nope`")
    assert "team_a" not in document["message"]   # a miss does not list every queue (issue 30)
    status, document = get(table, "/api/v1/explain/ns/big")
    assert status == 200 and document["text"] == view.last.explain("ns/big").lines()
    status, document = get(table, "/api/v1/explain/ns/bigg")
    assert status == 404 and document["suggestion"] == "ns/big"
    status, document = get(table, "/api/v1/explain/a/b/c")
    assert status == 400


def test_the_metrics_server_serves_the_routes(state) -> None:
    import urllib.request

    from runtime.service.server import MetricsServer

    view, _ = run_live(state)
    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                           routes=routes(view))
    server.start()
    try:
        with urllib.request.urlopen(f"http://{server.address}/api/v1/queues/team_b/pending", timeout=5) as answer:
            assert json.loads(answer.read())["pendingJobs"] == 3
        with urllib.request.urlopen(f"http://{server.address}/ui", timeout=5) as answer:
            assert answer.headers["Content-Type"].startswith("text/html")
            assert b'id="queue-tree"' in answer.read()
    finally:
        server.stop()


# --- the dashboard --------------------------------------------------------------------------------------

def test_the_dashboard_shows_queues_reasons_plots_and_is_rendered_once_per_cycle(state, monkeypatch) -> None:
    from runtime.service import dashboard

    monkeypatch.setattr(observe, "HISTORY_EVERY_S", 0.0)
    view, scheduler = run_live(state, cycles=3)
    page = dashboard.render(view, {"name": "live", "revision": view.last.revision, "version": 1})
    text = page.decode()
    tree = text[text.index('id="queue-tree"'):text.index("</table>", text.index('id="queue-tree"'))]
    assert all(f'data-queue="{q}"' in tree for q in ("team_a", "team_b", "research", "nested"))
    assert "queue team_a may allocate 2666m more" in text     # a pending job's reason, with its figures
    plot = text[text.index('id="plot-shares"'):]
    assert plot.count('<polyline class="series"') >= 3   # one line per leaf queue, three samples each
    assert dashboard.render(view, {"name": "live", "revision": view.last.revision, "version": 1}) is page
    scheduler.run_once()
    assert dashboard.render(view, {"name": "live", "revision": view.last.revision, "version": 1}) is not page


def test_the_dashboard_before_any_cycle() -> None:
    from runtime.service import dashboard

    assert b'id="no-cycle"' in dashboard.render(LiveView())


def test_history_is_a_bounded_ring(state, monkeypatch) -> None:
    monkeypatch.setattr(observe, "HISTORY_EVERY_S", 0.0)
    monkeypatch.setattr(observe, "HISTORY_SAMPLES", 3)
    view = LiveView()
    scheduler = Scheduler(plan_of(), EmbeddedCluster(state), view=view)
    for _ in range(5):
        scheduler.run_once()
    assert len(view.history()) == 3


def test_a_rejected_reload_shows_in_the_history(state) -> None:
    view, _ = run_live(state)
    failed = {"result": "error", "at": "2026-01-01T00:00:00Z", "trigger": "watch", "revision": "abc",
              "errors": ["live.policy:3:1: error PD100: unknown plugin"]}
    view.note_reload(failed)
    view.note_reload(failed)   # the same attempt, seen again at the next refresh
    rejected = [r for r in view.reloads() if r.result == "rejected"]
    assert len(rejected) == 1 and "unknown plugin" in rejected[0].detail


# --- metrics ------------------------------------------------------------------------------------------------

# volcano-sh/volcano v1.14 pkg/scheduler/metrics (and the queue PodGroup counts of
# pkg/controllers/metrics) as they are exposed: name -> label names.
VOLCANO_METRICS = {
    "volcano_e2e_scheduling_latency_milliseconds": set(),
    "volcano_e2e_job_scheduling_latency_milliseconds": set(),
    "volcano_e2e_job_scheduling_duration": {"job_name", "queue", "job_namespace"},
    "volcano_e2e_job_scheduling_start_time": {"job_name", "queue", "job_namespace"},
    "volcano_e2e_job_scheduling_last_time": {"job_name", "queue", "job_namespace"},
    "volcano_action_scheduling_latency_milliseconds": {"action"},
    "volcano_task_scheduling_latency_milliseconds": set(),
    "volcano_schedule_attempts_total": {"result"},
    "volcano_pod_preemption_victims": set(),
    "volcano_total_preemption_attempts": set(),
    "volcano_unschedule_task_count": {"job_id"},
    "volcano_unschedule_job_count": set(),
    **{f"volcano_queue_{what}_{unit}": {"queue_name"} for what in ("allocated", "request", "deserved", "capacity",
                                                                    "real_capacity")
       for unit in ("milli_cpu", "memory_bytes")},
    **{f"volcano_queue_{what}_scalar_resources": {"queue_name", "resource"}
       for what in ("allocated", "request", "deserved", "capacity", "real_capacity")},
    "volcano_queue_share": {"queue_name"},
    "volcano_queue_weight": {"queue_name"},
    "volcano_queue_overused": {"queue_name"},
    **{f"volcano_queue_pod_group_{phase}_count": {"queue_name"}
       for phase in ("inqueue", "pending", "running", "unknown", "completed")},
}


def samples(metrics: Metrics) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_volcano_named_metrics_are_exported_with_volcano_labels(state) -> None:
    metrics = Metrics(volcano=True)
    run_live(state, metrics=metrics)
    text = metrics.render().decode()
    got = samples(metrics)
    declared = set(re.findall(r"^# TYPE (volcano_\S+) ", text, re.M))
    for name, labels in VOLCANO_METRICS.items():
        base = name.removesuffix("_total")
        assert name in declared or base in declared, f"{name} not exported"
        for sample in got.get(name, []) + got.get(f"{name}_bucket", []):
            assert set(sample.labels) - {"le"} == labels, (name, sample.labels)
    def value(name: str, **labels: str) -> float:
        return next(s.value for s in got[name] if all(s.labels.get(k) == v for k, v in labels.items()))
    assert value("volcano_queue_allocated_milli_cpu", queue_name="team_a") == 2000
    assert value("volcano_queue_capacity_milli_cpu", queue_name="team_a") == 6000
    assert "team_b" not in {s.labels["queue_name"] for s in got.get("volcano_queue_capacity_milli_cpu", [])}
    assert value("volcano_queue_weight", queue_name="team_a") == 2
    assert value("volcano_unschedule_task_count", job_id="big") == 4
    assert value("volcano_unschedule_job_count") == 5
    assert value("volcano_queue_pod_group_running_count", queue_name="team_a") == 1
    assert value("volcano_schedule_attempts_total", result="scheduled") == 2
    assert value("volcano_e2e_scheduling_latency_milliseconds_count") == 1
    assert value("policydsl_queue_pending_jobs", queue="team_b") == 3
    assert value("policydsl_queue_unschedulable_jobs", queue="team_a") == 1
    assert value("policydsl_queue_allocated_cpu_cores", queue="team_a") == 2


def test_volcano_metrics_are_off_on_request(state) -> None:
    metrics = Metrics(volcano=False)
    run_live(state, metrics=metrics)
    assert "volcano_" not in metrics.render().decode()
    assert "policydsl_queue_pending_jobs" in metrics.render().decode()


def test_figures_are_taken_once_a_second_and_at_a_new_revision(tmp_path: Path) -> None:
    state = load_path(write_objects(tmp_path / "c.yaml", [node("n1", cpu="4"), podgroup("g", min_member=1),
                                                          pod("g-0", group="g", cpu="8")]))
    metrics = Metrics(volcano=True)
    view, scheduler = run_live(state, metrics=metrics, facts_every=3600.0)
    assert view.last.facts_cycle == 1 and view.last.queue("default").pending_jobs == 1
    del state.pods["ns/g-0"]
    del state.podgroups["ns/g"]
    scheduler.run_once()
    # The reasons are the second cycle's; the figures still the first's, and say so.
    last = view.last
    assert (last.number, last.facts_cycle, queues_document(last)["figuresCycle"]) == (2, 1, 1)
    assert not last.decisions.unschedulable and last.queue("default").pending_jobs == 1
    assert 'volcano_unschedule_task_count{job_id="g"} 1.0' in metrics.render().decode()
    scheduler.set_plan(dataclasses.replace(scheduler.plan, revision="next"))
    scheduler.run_once()
    assert view.last.facts_cycle == 3 and view.last.queue("default").pending_jobs == 0
    assert 'job_id="g"' not in metrics.render().decode()


def test_a_job_that_stops_waiting_takes_its_series_with_it(tmp_path: Path) -> None:
    state = load_path(write_objects(tmp_path / "c.yaml", [node("n1", cpu="4"), podgroup("g", min_member=1),
                                                          pod("g-0", group="g", cpu="8")]))
    metrics = Metrics(volcano=True)
    _, scheduler = run_live(state, metrics=metrics)
    assert 'volcano_unschedule_task_count{job_id="g"} 1.0' in metrics.render().decode()
    del state.pods["ns/g-0"]
    scheduler.run_once()
    assert 'job_id="g"' not in metrics.render().decode()


# --- the commands ---------------------------------------------------------------------------------------------

def test_the_commands_ask_a_running_scheduler(state, capsys) -> None:
    from runtime.service.server import MetricsServer

    view, _ = run_live(state)
    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                           routes=routes(view))
    server.start()
    url = f"http://{server.address}"
    try:
        code, out, err = run_cli(capsys, "explain", "ns/big", "--scheduler", url)
        assert code == 0 and out.splitlines() == view.last.explain("ns/big").lines()
        assert "from the scheduler" in err
        code, out, _ = run_cli(capsys, "queues", "--scheduler", url, "-o", "json")
        assert code == 0 and {q["name"] for q in json.loads(out)["queues"]} >= {"team_a", "team_b"}
        code, out, _ = run_cli(capsys, "queues", "--scheduler", url)
        assert code == 0 and "team_a" in out and "WEIGHT" in out
        code, out, _ = run_cli(capsys, "pending", "team_b", "--scheduler", url, "-o", "yaml")
        assert code == 0 and "position: 1" in out and "name: ns/high" in out
        code, out, _ = run_cli(capsys, "pending", "team_b", "--scheduler", url)
        assert code == 0 and out.index("ns/high") < out.index("ns/mid") < out.index("ns/low")
        code, _, err = run_cli(capsys, "pending", "nope", "--scheduler", url)
        assert code == 2 and "no queue `nope`" in err
        code, _, err = run_cli(capsys, "explain", "ns/bigg", "--scheduler", url)
        assert code == 2 and "did you mean ns/big?" in err
    finally:
        server.stop()


def test_an_unreachable_scheduler_without_a_cluster_is_exit_2(capsys) -> None:
    code, out, err = run_cli(capsys, "queues", "--scheduler", "http://127.0.0.1:1")
    assert code == 2 and out == "" and "did not answer" in err and "Traceback" not in err


def test_the_dashboard_shows_card_use_and_fragmentation(tmp_path: Path) -> None:
    """Two 40 GB cards each holding a 25 GB slice: 30 GB idle in all, none of it on one card, so a
    20 GB slice waits; the dashboard counts the cards shared and the card memory fragmented."""
    from runtime.service import dashboard
    from sim_helpers import POLICIES

    card_node = node("pcie", cpu="16", memory="64Gi", labels={"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB"},
                     **{"nvidia.com/gpu-40gb": "2", "nvidia.com/gpu-40gb-memory": "80Gi"})
    objects = [card_node]
    for card in (0, 1):
        running = pod(f"model-{card}", node_name="pcie", **{"nvidia.com/gpu-40gb-memory": "25Gi"})
        running["metadata"]["annotations"]["volcano.sh/gpu-index"] = str(card)
        objects.append(running)
    objects.append(pod("late", **{"nvidia.com/gpu-40gb-memory": "20Gi"}))
    state = load_path(write_objects(tmp_path / "cards.yaml", objects))
    plan = plan_of((POLICIES / "gpu-sharing.policy").read_text())
    view, _ = run_live(state, plan)
    (cards,) = [c for c in view.last.facts.cards if c.resource == "nvidia.com/gpu-40gb"]
    assert (cards.node, cards.cards, cards.shared, cards.idle, cards.whole) == ("pcie", 2, 2, 0, 0)
    assert view.last.fragmentation()["nvidia.com/gpu-40gb-memory"] == pytest.approx(1.0)
    page = dashboard.render(view).decode()
    table = page[page.index('id="cards"'):page.index("</table>", page.index('id="cards"'))]
    assert "<td>pcie</td><td>nvidia.com/gpu-40gb</td>" in table
    use = page[page.index('id="utilization"'):page.index("</table>", page.index('id="utilization"'))]
    row = use[use.index("<td>nvidia.com/gpu-40gb-memory</td>"):]
    assert row[:row.index("</tr>")].endswith('<td class="num">100%</td>')   # fragmented free: all of it


@pytest.mark.parametrize("value", [0.0, 5.0, 5.000001, 80.0, 1e9])
def test_one_observation_counts_in_the_bucket_many_would(value) -> None:
    from runtime.kube.volcano_metrics import LATENCY_MS_BUCKETS, _Histogram

    one, many = _Histogram(LATENCY_MS_BUCKETS), _Histogram(LATENCY_MS_BUCKETS)
    one.observe_one(value)
    many.observe([value])
    assert one.family_sample() == many.family_sample()
    # A value equal to an edge counts in it (Prometheus' `le`).
    buckets, _ = one.family_sample()
    assert next(count for le, count in buckets if le == "+Inf" or float(le) >= value) == 1.0


def test_queues_and_pending_are_whole_at_80_columns(state, capsys) -> None:
    """Issue 32, point 1: in an 80-column terminal no header and no value is cut (records when the
    table is too wide)."""
    from runtime.service.server import MetricsServer
    from sim_helpers import run_in_terminal

    view, _ = run_live(state)
    server = MetricsServer("127.0.0.1:0", Metrics(), ready=lambda: (True, "ok"), healthy=lambda: (True, "ok"),
                           routes=routes(view))
    server.start()
    url = f"http://{server.address}"
    try:
        for argv in (("queues",), ("pending", "team_b")):
            text = run_in_terminal(*argv, "--scheduler", url, columns=80)
            assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
            _, out, _ = run_cli(capsys, *argv, "--scheduler", url, "-o", "json")
            document = json.loads(out)
            for row in document.get("queues") or document["jobs"]:
                assert row["name"] in text
                if "reason" in row:
                    assert " ".join(row["reason"].split()) in " ".join(text.split())
    finally:
        server.stop()
