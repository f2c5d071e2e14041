"""The connector's failure handling without an API server: refused binds held back, outage log
lines, a held pod in the engine (waits, saying why; its gang is short)."""

from __future__ import annotations

import logging

import pytest

from compiler.pipeline import compile_text
from runtime.engine.cycle import Options, run_cycle
from runtime.cluster.decisions import Reason
from runtime.kube.binder import REFUSED, BindOutcome, RefusedPods
from runtime.kube.outages import LineBudget, OutageLog, cause_of
from runtime.cluster.model import ClusterState, Node, Pod, PodGroup

GANG_POLICY = """policy "t" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
}
"""


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused(pod: str = "ns/p") -> BindOutcome:
    return BindOutcome(pod, "n1", REFUSED, "403 Forbidden: no", status=403)


def test_a_refused_pod_is_held_until_it_changes_or_its_hold_passes_doubling() -> None:
    clock = Clock()
    held = RefusedPods(clock)
    pod = object()
    objects = {"ns/p": pod}
    first = held.refuse(refused(), pod)
    assert first.refusals == 1 and set(held.holding(objects.get)) == {"ns/p"}
    clock.now += first.hold_s
    assert held.holding(objects.get) == {}          # its time passed: tried again
    second = held.refuse(refused(), pod)            # refused again, the same object: holds longer
    assert second.refusals == 2 and second.hold_s == 2 * first.hold_s
    objects["ns/p"] = object()                       # the pod changed: the hold ends at once
    assert held.holding(objects.get) == {} and len(held) == 0
    third = held.refuse(refused(), objects["ns/p"])
    assert third.refusals == 1                       # a changed pod starts afresh
    held.bound("ns/p")
    assert len(held) == 0


def test_a_held_pod_waits_saying_why_and_its_gang_is_not_running() -> None:
    plan = compile_text(GANG_POLICY, "t.policy").plan
    assert plan is not None
    state = ClusterState()
    state.add_node(Node("n1", {"cpu": 8000, "memory": 8 << 30, "pods": 110}))
    state.add_podgroup(PodGroup("ns", "g", min_member=3, phase="Running"))
    for i in range(3):
        pod = Pod("ns", f"g-{i}", {"cpu": 1000, "memory": 1 << 30}, uid=f"u{i}", scheduler_name="volcano", group="g")
        if i < 2:
            pod.node_name, pod.phase = "n1", "Running"
        else:
            pod.held_back = Reason("bind", "binding to n1 was refused (403 Forbidden: no)")
        state.add_pod(pod)
    state.add_pod(Pod("ns", "lone", {"cpu": 1000}, uid="lone", scheduler_name="volcano",
                      held_back=Reason("bind", "binding to n1 was refused (422 Unprocessable Entity: bad)")))
    for pure in (False, True):
        decisions = run_cycle(plan, state, Options(scheduler_name="volcano", pure_python=pure))
        assert decisions.bindings == []
        reasons = {u.pod: [(r.kind, r.message) for r in u.reasons] for u in decisions.unschedulable}
        assert reasons == {"ns/g-2": [("bind", "binding to n1 was refused (403 Forbidden: no)")],
                           "ns/lone": [("bind", "binding to n1 was refused (422 Unprocessable Entity: bad)")]}
        assert [(pg.name, pg.phase) for pg in decisions.podgroups] == [("ns/g", "Inqueue")]


@pytest.mark.parametrize("detail, status, cause", [
    ("503 Service Unavailable: etcd is down", 503, "503 Service Unavailable"),
    ("no answer: cannot connect to 127.0.0.1:6443: [Errno 111] Connection refused", 0,
     "no answer (connection refused)"),
    ("no answer: HTTPSConnectionPool(host='x', port=1): Read timed out. (read timeout=30)", 0, "no answer (timed out)"),
    ("no answer: the connection ended before the answer", 0, "no answer (ended before the answer)"),
])
def test_failure_causes_are_classes_not_texts(detail: str, status: int, cause: str) -> None:
    assert cause_of(detail, status) == cause


def test_an_outage_is_a_line_when_it_starts_a_summary_while_it_lasts_and_a_line_when_it_ends(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    outages = OutageLog("binds", logging.getLogger("test.outage"), clock=clock)
    for second in range(22):          # 22 s down, 500 pods failing every second
        for pod in range(500):
            outages.failed("no answer (connection refused)", f"ns/p{pod}")
        outages.tick()
        clock.now += 1.0
    for pod in range(500):
        outages.succeeded(f"ns/p{pod}")
    clock.now += 5.0
    outages.tick()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines[0] == ("WARNING", "binds failing: no answer (connection refused) (ns/p0 first)")
    assert [level for level, _ in lines] == ["WARNING", "WARNING", "WARNING", "INFO"]
    assert lines[1][1].startswith("binds failing for 10 s: no answer (connection refused) x5,0")
    assert "500 pods waiting" in lines[1][1]
    assert lines[-1][1].startswith("binds succeed again after 21 s of failures: no answer (connection refused) x11,000")
    assert caplog.records[0].failure == "binds" and caplog.records[0].pod == "ns/p0"
    assert not outages.active


def test_a_trickle_of_failures_is_one_outage_not_a_line_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    outages = OutageLog("binds", logging.getLogger("test.trickle"), clock=clock)
    for second in range(60):
        outages.failed("500 Internal Server Error", f"ns/p{second}")
        for pod in range(99):
            outages.succeeded(f"ns/q{pod}")
        clock.now += 1.0
    assert len(caplog.records) == 1 + 5     # the start, a summary each 10 s
    assert outages.active


def test_a_line_budget_says_what_it_held_back() -> None:
    clock = Clock()
    budget = LineBudget(lines=2, per_s=10.0, clock=clock)
    assert [budget.take() for _ in range(5)] == [(True, 0), (True, 0), (False, 0), (False, 0), (False, 0)]
    clock.now += 10.0
    assert budget.take() == (True, 3)


def test_json_log_lines_carry_the_objects_as_fields() -> None:
    import io
    import json

    from runtime.service.logformat import configure

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure("info", "json", stream)
        logging.getLogger("policydsl.kube").warning("bind of %s refused", "ns/p", extra={"pod": "ns/p", "node": "n1"})
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("policydsl.scheduler").exception("cycle failed", extra={"cycle": 3})
    finally:
        root.handlers[:], root.level = saved
    first, second = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert {k: first[k] for k in ("level", "logger", "message", "pod", "node")} == {
        "level": "WARNING", "logger": "policydsl.kube", "message": "bind of ns/p refused", "pod": "ns/p", "node": "n1"}
    assert first["time"].endswith("Z") and "exception" not in first
    assert second["cycle"] == 3 and "ValueError: boom" in second["exception"]


def test_policydsl_run_writes_json_lines(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "policydsl", "run", "--policy", str(repo / "policies/volcano-default.policy"),
                           "--cluster", f"embedded:{repo / 'examples'}", "--cycles", "1", "--metrics-addr", "off",
                           "--log-format", "json"], capture_output=True, text=True, cwd=repo, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any("scheduling pods of" in line["message"] for line in lines)
