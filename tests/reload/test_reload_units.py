"""The reloader's parts without threads: what is watched, when a check compiles, what a reload
hands over and reports, the /policy document, the Lease Events, the scheduler's wake-up."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from compiler.plan import Plan
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.service.server import MetricsServer
from runtime.kube.metrics import Metrics
from runtime.service.reload import (
    LeaseEvents, PolicyReloader, attempt_compile, fingerprint_of, fingerprint_of_known, watch_folders,
)

from polling import wait_for
from reload_helpers import policy_text, small_cluster, write


class HeldTarget:
    """A scheduler that takes a handed-over plan only when told (a cycle start)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.handed: list[Plan] = []

    def set_plan(self, plan: Plan) -> None:
        self.handed.append(plan)

    def cycle(self) -> None:
        if self.handed:
            self.plan = self.handed[-1]


def reloader_for(policy: Path, **options) -> tuple[PolicyReloader, HeldTarget, Metrics]:
    first = attempt_compile(policy)
    assert first.plan is not None
    target, metrics = HeldTarget(first.plan), Metrics()
    return PolicyReloader(policy, first, target, metrics=metrics, **options), target, metrics


# --- what is watched ---------------------------------------------------------------------------

def test_sources_are_the_main_file_its_includes_and_includes_that_failed(tmp_path: Path) -> None:
    write(tmp_path / "a.policy", 'policy "a" version 1\n')
    write(tmp_path / "main.policy", policy_text(includes=("a.policy", "sub/missing.policy")))
    attempt = attempt_compile(tmp_path)  # a folder stands for its main.policy
    assert not attempt.ok
    assert attempt.main == str(tmp_path / "main.policy")
    assert attempt.files == (str(tmp_path / "a.policy"), str(tmp_path / "sub" / "missing.policy"),
                             str(tmp_path / "main.policy"))
    # The missing include's folder does not exist (yet): it is wanted, and watched once it exists.
    assert watch_folders(attempt.files) == (str(tmp_path), str(tmp_path / "sub"))


def test_an_include_outside_the_policys_folder_is_neither_read_nor_watched(tmp_path: Path) -> None:
    write(tmp_path / "secrets" / "token", "eyJhbGciOiJSUzI1NiJ9.secret\n")
    write(tmp_path / "policy" / "main.policy", policy_text(includes=("../secrets/token",)))
    attempt = attempt_compile(tmp_path / "policy")
    assert not attempt.ok and attempt.files == (str(tmp_path / "policy" / "main.policy"),)
    assert watch_folders(attempt.files) == (str(tmp_path / "policy"),)
    assert all("secret" not in path for path, _ in attempt.fingerprint)


def test_a_symlinked_source_outside_the_folder_is_watched_where_it_lives(tmp_path: Path) -> None:
    write(tmp_path / "real" / "main.policy", policy_text())
    (tmp_path / "conf").mkdir()
    os.symlink(tmp_path / "real" / "main.policy", tmp_path / "conf" / "main.policy")
    assert watch_folders([str(tmp_path / "conf" / "main.policy")]) == (str(tmp_path / "conf"), str(tmp_path / "real"))


def test_configmap_timestamped_folders_are_not_watched(tmp_path: Path) -> None:
    stamped = tmp_path / "..2024_01_01"
    write(stamped / "main.policy", policy_text())
    os.symlink(stamped.name, tmp_path / "..data")
    os.symlink("..data/main.policy", tmp_path / "main.policy")
    attempt = attempt_compile(tmp_path)
    assert attempt.ok and attempt.files == (str(tmp_path / "main.policy"),)  # the path kept, not resolved
    assert watch_folders(attempt.files) == (str(tmp_path),)


def test_fingerprint_restricted_to_known_files(tmp_path: Path) -> None:
    write(tmp_path / "x", "1")
    fingerprint = fingerprint_of([str(tmp_path / "x"), str(tmp_path / "gone")])
    assert dict(fingerprint)[str(tmp_path / "gone")] is None
    assert fingerprint_of_known(fingerprint, [str(tmp_path / "x")]) == fingerprint_of([str(tmp_path / "x")])
    assert fingerprint_of_known(fingerprint, [str(tmp_path / "x"), str(tmp_path / "new")]) is None


# --- one reload ------------------------------------------------------------------------------------

def test_a_check_compiles_only_when_a_source_changed(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(tmp_path / "q.policy", 'policy "q" version 1\nqueue q { weight = 1 }\n')
    write(policy, policy_text(includes=("q.policy",)))
    reloader, target, metrics = reloader_for(policy)
    write(tmp_path / "unrelated.txt", "x")
    assert reloader.reload("file change") is None
    assert metrics.registry.get_sample_value("policydsl_policy_reload_duration_seconds_count") == 0

    write(tmp_path / "q.policy", 'policy "q" version 1\nqueue q { weight = 2 }\n')
    outcome = reloader.reload("file change")
    assert outcome is not None and outcome.ok and outcome.changed
    assert target.handed[-1].queue("q").weight == 2
    assert reloader.reload("file change") is None  # same content again: nothing to do
    forced = reloader.reload("SIGHUP", force=True)
    assert forced is not None and forced.ok and not forced.changed and len(target.handed) == 1


def test_a_comment_only_edit_is_a_success_without_a_new_revision(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text())
    reloader, target, metrics = reloader_for(policy)
    write(policy, "# a comment\n" + policy_text())
    outcome = reloader.reload("file change")
    assert outcome is not None and outcome.ok and not outcome.changed and target.handed == []
    assert metrics.registry.get_sample_value("policydsl_policy_reload_total", {"result": "success"}) == 1


def test_errors_leave_the_last_good_policy_and_do_not_touch_the_success_timestamp(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text())
    reloader, target, metrics = reloader_for(policy)
    started = metrics.registry.get_sample_value("policydsl_policy_last_reload_success_timestamp_seconds")
    assert started > 0
    write(policy, policy_text(gang="gnag"))
    outcome = reloader.reload("file change")
    assert outcome is not None and not outcome.ok and target.handed == []
    assert outcome.errors[0].startswith(f"{policy}:5:10: error[PD102]")
    assert metrics.registry.get_sample_value("policydsl_policy_last_reload_success_timestamp_seconds") == started
    assert metrics.registry.get_sample_value("policydsl_policy_reload_total", {"result": "error"}) == 1


def test_the_first_policy_must_be_valid(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(gang="gnag"))
    bad = attempt_compile(policy)
    with pytest.raises(ValueError):
        PolicyReloader(policy, bad, HeldTarget(None), metrics=Metrics())  # type: ignore[arg-type]


# --- what it shows ---------------------------------------------------------------------------------

def test_policy_document_shows_the_active_policy_and_the_next_one(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    reloader, target, _ = reloader_for(policy)
    first = target.plan.revision
    write(policy, policy_text(binpack_weight=2))
    reloader.reload("file change")
    document = reloader.describe()
    # Handed over, not taken yet: the cycles still run the first one.
    assert (document["revision"], document["next_revision"]) == (first, target.handed[-1].revision)
    assert document["sources"] == [str(policy)] and document["main"] == str(policy)
    target.cycle()
    document = reloader.describe()
    assert (document["revision"], document["next_revision"]) == (target.handed[-1].revision, None)
    assert document["plan"]["revision"] == document["revision"]
    assert {"name": "binpack", "weight": 2}.items() <= document["plan"]["tiers"][1]["plugins"][2].items()
    assert document["last_reload"]["result"] == "success" and document["last_reload"]["changed"]


class EagerTarget(HeldTarget):
    """A scheduler whose next cycle starts the moment a plan is handed over (its loop is another
    thread): what /policy shows then is what a request racing the reload reads."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.shown: list[dict] = []
        self.reloader: PolicyReloader | None = None

    def set_plan(self, plan: Plan) -> None:
        super().set_plan(plan)
        self.cycle()
        assert self.reloader is not None
        self.shown.append(self.reloader.describe())


def test_the_policy_document_never_shows_a_new_revision_without_the_reload_that_brought_it(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = attempt_compile(policy)
    assert first.plan is not None
    target = EagerTarget(first.plan)
    reloader = target.reloader = PolicyReloader(policy, first, target, metrics=Metrics())
    for trigger, weight in (("SIGHUP", 2), ("file change", 3)):
        write(policy, policy_text(binpack_weight=weight))
        reloader.reload(trigger)
        shown = target.shown[-1]
        assert shown["revision"] == target.plan.revision
        assert shown["last_reload"] is not None, shown
        assert (shown["last_reload"]["trigger"], shown["last_reload"]["revision"]) == (trigger, shown["revision"])


def test_policy_endpoint(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text())
    reloader, target, metrics = reloader_for(policy)
    described: list = [None]
    server = MetricsServer("127.0.0.1:0", metrics, ready=reloader.ready, healthy=lambda: (True, "ok"),
                           policy=lambda: described[0])
    server.start()

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{server.address}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    try:
        assert get("/policy")[0] == 503
        described[0] = reloader.describe()
        status, body = get("/policy")
        assert status == 200 and json.loads(body)["revision"] == target.plan.revision
        assert get("/readyz") == (200, "ok")
    finally:
        server.stop()


# --- connected mode: Events on the Lease ------------------------------------------------------------

class FakeRecorder:
    """EventRecorder's interface and its dedup (same object, reason and message: not sent again)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, str]] = []
        self.last: dict[tuple[str, str], str] = {}

    def forget(self, keep) -> None:
        self.last = {k: v for k, v in self.last.items() if keep(k[0])}

    def record(self, obj, type_: str, reason: str, message: str) -> bool:
        if self.last.get((obj.key, reason)) == message:
            return False
        self.last[(obj.key, reason)] = message
        self.sent.append((f"{obj.kind}/{obj.name}/{obj.uid}", type_, reason, message))
        return True


class FakeApi:
    def __init__(self, lease: dict | None) -> None:
        self.lease = lease
        self.gets = 0

    def get(self, path: str) -> dict:
        self.gets += 1
        if self.lease is None:
            raise RuntimeError("404")
        return self.lease


def test_reload_outcomes_become_events_on_the_lease_each_time(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    recorder, api = FakeRecorder(), FakeApi({"metadata": {"uid": "lease-uid"}})
    reloader, target, _ = reloader_for(policy, notifier=LeaseEvents(api, recorder, "sched", "lease"))
    bad = policy_text(binpack_weight=1, gang="gnag")
    for text in (bad, policy_text(binpack_weight=1), bad):  # fail, recover, the same failure again
        write(policy, text)
        reloader.reload("file change")
    write(policy, policy_text(binpack_weight=2))
    reloader.reload("file change")
    assert [(obj, kind, reason) for obj, kind, reason, _ in recorder.sent] == [
        ("Lease/lease/lease-uid", "Warning", "PolicyReloadFailed"),
        ("Lease/lease/lease-uid", "Normal", "PolicyReloaded"),
        ("Lease/lease/lease-uid", "Warning", "PolicyReloadFailed"),
        ("Lease/lease/lease-uid", "Normal", "PolicyReloaded"),
    ]
    failure = recorder.sent[0][3]
    assert f"{policy}:5:10: error[PD102] unknown plugin `gnag`" in failure
    assert f"revision {target.plan.revision} keeps running" in failure
    assert api.gets == 1  # the uid is read once


def test_an_event_without_a_lease_still_names_it(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text())
    recorder = FakeRecorder()
    reloader, _, _ = reloader_for(policy, notifier=LeaseEvents(FakeApi(None), recorder, "kube-system", "sched"))
    write(policy, policy_text(gang="gnag"))
    reloader.reload("file change")
    assert [obj for obj, *_ in recorder.sent] == ["Lease/sched/"]


# --- the scheduler's side ----------------------------------------------------------------------------

def test_a_new_plan_starts_the_next_cycle_without_waiting_out_the_period(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = attempt_compile(policy).plan
    write(policy, policy_text(binpack_weight=2))
    second = attempt_compile(policy).plan
    scheduler = Scheduler(first, EmbeddedCluster(small_cluster(2)), period=3600.0)
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: scheduler.cycles == 1, "the first cycle")
        scheduler.set_plan(second)
        wait_for(lambda: scheduler.cycles == 2, "a cycle right after the new plan (the period is an hour)")
        assert scheduler.plan is second
        registry = scheduler.metrics.registry
        assert registry.get_sample_value("policydsl_policy_cycles_total", {"revision": second.revision}) == 1
        assert registry.get_sample_value("policydsl_policy_cycles_total", {"revision": first.revision}) is None
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.parametrize("path, wakes", [
    ("/p/main.policy", True),  # a source, as named
    ("/p/..data", True),  # the ConfigMap's swap
    ("/p/..2024_01_01_00_00_00.123", True),
    ("/p/..data_tmp", True),
    ("/p/scheduler.log", False),  # a busy neighbour
    ("/p/.main.policy.swp", False),
    ("/p/other.policy", False),  # a policy nobody includes
])
def test_which_changes_wake_the_reloader(path: str, wakes: bool) -> None:
    from runtime.service.reload import source_paths, touches_sources

    assert touches_sources(path, source_paths(["/p/main.policy"])) is wakes


class Standby:
    def is_leader(self) -> bool:
        return False


def test_a_standby_takes_a_new_plan_without_running_cycles(tmp_path: Path) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = attempt_compile(policy).plan
    write(policy, policy_text(binpack_weight=2))
    second = attempt_compile(policy).plan
    scheduler = Scheduler(first, EmbeddedCluster(small_cluster(1)), period=0.01, elector=Standby())
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        scheduler.set_plan(second)
        wait_for(lambda: scheduler.plan is second, "the standby to hold the new plan")
        assert scheduler.cycles == 0
        assert scheduler.metrics.registry.get_sample_value(
            "policydsl_policy_active_info", {"name": "reload-test", "revision": second.revision}) == 1
    finally:
        stop.set()
        thread.join(10)
