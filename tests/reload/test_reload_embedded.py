"""Hot reload against the embedded cluster, in process: real files, the real watcher thread, the
real scheduling loop. Polls with generous timeouts; no test asserts how fast anything is."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from polling import wait_for
from reload_helpers import add_gang, policy_text, revision_of, small_cluster, write


def test_valid_invalid_valid(tmp_path: Path, loop, caplog: pytest.LogCaptureFixture) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = revision_of(policy)
    running = loop(policy)

    write(policy, policy_text(binpack_weight=2))
    second = revision_of(policy)
    running.wait_active(second)

    caplog.set_level(logging.ERROR, logger="policydsl.reload")
    write(policy, policy_text(binpack_weight=3, gang="gnag"))
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok], "the failed reload")[0]
    assert failed.errors == (f"{policy}:5:10: error[PD102] unknown plugin `gnag` (hint: did you mean `gang`?)",)
    assert failed.revision == second and not failed.changed
    assert f"{policy}:5:10" in caplog.text
    cycles = len(running.cluster.cycles)
    wait_for(lambda: len(running.cluster.cycles) > cycles + 3, "cycles going on after the failed reload")
    assert running.revision == second  # the last good policy keeps running
    assert running.sample("policydsl_policy_reload_total", result="error") == 1

    write(policy, policy_text(binpack_weight=4))
    fourth = revision_of(policy)
    running.wait_active(fourth)
    assert len({first, second, fourth}) == 3
    assert running.sample("policydsl_policy_reload_total", result="success") == 2
    # Only the active revision has a series.
    assert running.sample("policydsl_policy_active_info", name="reload-test", revision=fourth) == 1
    assert running.sample("policydsl_policy_active_info", name="reload-test", revision=second) is None
    assert running.sample("policydsl_policy_cycles_total", revision=fourth) >= 1
    assert running.sample("policydsl_policy_reload_duration_seconds_count") == 3


def test_a_burst_of_writes_is_few_reloads_and_the_last_write_wins(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    # A long debounce: the 20 writes below land well within one quiet period.
    running = loop(policy, debounce=0.5)
    for weight in range(2, 22):
        policy.write_text(policy_text(binpack_weight=weight))  # in place: truncate, then write
    last = revision_of(policy)
    running.wait_active(last)
    wait_for(lambda: running.reloader.last_outcome and running.reloader.last_outcome.revision == last,
             "the reload of the last write")
    changed = [o for o in running.outcomes if o.changed]
    assert 1 <= len(changed) < 20
    assert changed[-1].revision == last


def test_a_deleted_file_keeps_the_policy_running_until_it_comes_back(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = revision_of(policy)
    running = loop(policy)

    policy.unlink()
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok], "the reload of a missing file")[0]
    assert failed.errors[0].startswith(f"{policy}:1:1: error[")
    assert "cannot read" in failed.errors[0]
    assert running.revision == first

    policy.write_text(policy_text(binpack_weight=7))
    running.wait_active(revision_of(policy))
    # The reloader reports after it handed the plan over, so a cycle may run under it first.
    wait_for(lambda: running.outcomes[-1].ok and running.outcomes[-1].changed, "the restored file's reload reported")


def configmap_volume(root: Path, files: dict[str, str], stamp: str) -> None:
    """What the kubelet does for a ConfigMap volume: the data in a new timestamped folder, `..data`
    swapped to it in one rename, each key a symlink through `..data`, the old folder removed."""
    folder = root / f"..{stamp}"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    old = os.readlink(root / "..data") if (root / "..data").is_symlink() else None
    os.symlink(folder.name, root / "..data_tmp")
    os.replace(root / "..data_tmp", root / "..data")
    for name in files:
        if not (root / name).is_symlink():
            os.symlink(f"..data/{name}", root / name)
    if old is not None:
        shutil.rmtree(root / old)


def test_configmap_symlink_swap(tmp_path: Path, loop) -> None:
    root = tmp_path / "policydsl"
    root.mkdir()
    common = 'policy "common" version 1\nqueue team { weight = 1 }\n'
    configmap_volume(root, {"main.policy": policy_text(includes=("common.policy",)), "common.policy": common},
                     "2024_01_01_00_00_00.1")
    running = loop(root)  # a folder: its main.policy
    assert running.reloader.watching == (str(root),)  # not the timestamped folder that the next swap removes

    for n, weight in enumerate((5, 6), start=2):
        configmap_volume(root, {"main.policy": policy_text(binpack_weight=weight, includes=("common.policy",)),
                                "common.policy": common}, f"2024_01_01_00_00_00.{n}")
        running.wait_active(revision_of(root))
    assert running.scheduler.plan.plugin("binpack").weight == 6
    # The reloader hands the plan over before it reports: wait for the second report.
    assert [o.ok for o in running.wait_outcomes(2)] == [True, True]
    # Only ..data and the live folder are left: the first one's watch went with it.
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("..")) == ["..2024_01_01_00_00_00.3", "..data"]


def test_an_included_file_changed_and_a_new_include_watched(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(tmp_path / "queues.policy", 'policy "queues" version 1\nqueue team { weight = 1 }\n')
    write(policy, policy_text(includes=("queues.policy",)))
    running = loop(policy)

    write(tmp_path / "queues.policy", 'policy "queues" version 1\nqueue team { weight = 5 }\n')
    running.wait_active(revision_of(policy))
    assert running.scheduler.plan.queue("team").weight == 5

    # An include in another folder: the folder is watched from then on.
    write(tmp_path / "teams" / "research.policy", 'policy "research" version 1\nqueue research { weight = 2 }\n')
    write(policy, policy_text(includes=("queues.policy", "teams/research.policy")))
    running.wait_active(revision_of(policy))
    wait_for(lambda: str(tmp_path / "teams") in running.reloader.watching, "the new include's folder watched")
    write(tmp_path / "teams" / "research.policy", 'policy "research" version 1\nqueue research { weight = 9 }\n')
    running.wait_active(revision_of(policy))
    assert running.scheduler.plan.queue("research").weight == 9


def test_a_missing_include_is_an_error_until_it_is_created(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text())
    first = revision_of(policy)
    running = loop(policy)
    write(policy, policy_text(includes=("later.policy",)))
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok], "the failed reload")[0]
    assert failed.errors[0].startswith(f"{policy}:2:9: error[PD013]")
    assert running.revision == first
    write(tmp_path / "later.policy", 'policy "later" version 1\nqueue later { weight = 3 }\n')
    running.wait_active(revision_of(policy))
    assert running.scheduler.plan.queue("later") is not None


def test_without_watching_only_a_request_reloads(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    first = revision_of(policy)
    running = loop(policy, watch=False)
    write(policy, policy_text(binpack_weight=2))
    cycles = len(running.cluster.cycles)
    wait_for(lambda: len(running.cluster.cycles) > cycles + 5, "a few cycles")
    assert running.revision == first and running.outcomes == []

    running.reloader.request("SIGHUP", force=True)
    running.wait_active(revision_of(policy))
    running.reloader.request("SIGHUP", force=True)  # forced: compiled again although nothing changed
    outcomes = running.wait_outcomes(2)
    assert [(o.trigger, o.ok, o.changed) for o in outcomes] == [("SIGHUP", True, True), ("SIGHUP", True, False)]


QUEUES = {
    "both": "queue team_a { weight = 1 }\nqueue team_b { weight = 1 }\n",
    "b_only": "queue team_b { weight = 1 }\n",
    "a_under_b": "queue team_b { weight = 1\n  queue team_a { weight = 1 }\n}\n",
    "a_parent": "queue team_a { weight = 1\n  queue sub { weight = 1 }\n}\nqueue team_b { weight = 1 }\n",
}


def test_a_removed_queue_leaves_its_jobs_waiting_not_lost_nor_moved(tmp_path: Path, loop,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(queues=QUEUES["both"]))
    state = small_cluster()
    add_gang(state, "running", 2, "team_a", cpu=2000, node="n0")
    running = loop(policy, state)
    caplog.set_level(logging.INFO, logger="policydsl.scheduler")

    write(policy, policy_text(queues=QUEUES["b_only"]))
    running.wait_active(revision_of(policy))
    add_gang(running.cluster.state, "waiting", 2, "team_a")
    wait_for(lambda: "skipping PodGroup ns/waiting: names queue `team_a`, which does not exist" in caplog.text,
             "the waiting gang reported")
    cycles = len(running.cluster.cycles)
    wait_for(lambda: len(running.cluster.cycles) > cycles + 5, "more cycles")
    pods = running.cluster.state.pods
    assert [pods[f"ns/waiting-{i}"].node_name for i in range(2)] == [None, None]  # waiting, not bound
    assert {"ns/running", "ns/waiting"} <= set(running.cluster.state.podgroups)  # nothing dropped
    assert [pods[f"ns/running-{i}"].node_name for i in range(2)] == ["n0", "n0"]  # not evicted
    # The running gang's 4 cpus are no queue's: not charged to `default`.
    assert running.sample("policydsl_queue_allocated_cpu_cores", queue="default") == 0
    # Its waiting pods are counted as waiting (and say why), not left out of the cycle.
    assert running.sample("policydsl_pods_waiting") == 2

    write(policy, policy_text(queues=QUEUES["a_under_b"]))  # back, moved under team_b
    running.wait_active(revision_of(policy))
    wait_for(lambda: all(pods[f"ns/waiting-{i}"].node_name for i in range(2)), "the waiting gang bound")
    assert "no longer skipped" in caplog.text
    assert running.sample("policydsl_queue_allocated_cpu_cores", queue="team_a") == 6


def test_a_queue_that_gains_children_holds_its_jobs(tmp_path: Path, loop) -> None:
    policy = tmp_path / "main.policy"
    write(policy, policy_text(queues=QUEUES["both"]))
    running = loop(policy)
    write(policy, policy_text(queues=QUEUES["a_parent"]))
    running.wait_active(revision_of(policy))
    reports: list = []
    original = running.cluster.apply

    def apply(decisions, state, usage):
        reports.append(decisions)
        return original(decisions, state, usage)

    running.cluster.apply = apply
    add_gang(running.cluster.state, "job", 2, "team_a")
    waiting = wait_for(lambda: [u for d in reports[-1:] for u in d.unschedulable if u.pod == "ns/job-0"],
                       "the job's pods reported waiting")
    assert "queue team_a is not a leaf queue" in [r.message for r in waiting[0].reasons]
    assert running.cluster.state.pods["ns/job-0"].node_name is None


def test_a_policy_folder_deleted_and_created_again(tmp_path: Path, loop) -> None:
    folder = tmp_path / "conf"
    write(folder / "main.policy", policy_text(binpack_weight=1))
    running = loop(folder)
    shutil.rmtree(folder)
    wait_for(lambda: [o for o in running.outcomes if not o.ok], "the reload of the missing policy")
    write(folder / "main.policy", policy_text(binpack_weight=8))  # a new folder: the old watch saw nothing of it
    running.wait_active(revision_of(folder))
    assert running.scheduler.plan.plugin("binpack").weight == 8


def test_a_pathological_edit_is_refused_located_and_the_old_policy_keeps_running(
        tmp_path: Path, loop, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # The case: a list nested 200,000 deep raised a RecursionError in the reloader's thread.
    # Then a policy over the size limit (lowered here, to keep the test small) and a chain of includes
    # too deep: each is one failed reload with the located diagnostic, and cycles go on under the old plan.
    from policydsl import loader
    from policydsl.limits import MAX_INCLUDE_DEPTH, MAX_NESTING

    policy = tmp_path / "main.policy"
    write(policy, policy_text(binpack_weight=1))
    good = revision_of(policy)
    running = loop(policy)
    caplog.set_level(logging.ERROR, logger="policydsl.reload")
    line = policy_text().count("\n") + 1

    deep = 200_000
    write(policy, policy_text(binpack_weight=2) + "const X = " + "[" * deep + "]" * deep + "\n")
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok], "the refused deep policy")
    assert failed[0].errors[0].startswith(f"{policy}:{line}:{len('const X = ') + MAX_NESTING + 1}: error[PD005]")
    assert f"{policy}:{line}:" in caplog.text and "RecursionError" not in caplog.text

    monkeypatch.setattr(loader, "MAX_POLICY_BYTES", 2000)
    write(policy, policy_text(binpack_weight=3) + "#" * 3000 + "\n")
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok][1:], "the refused large policy")
    assert failed[0].errors[0].startswith(f"{policy}:1:1: error[PD004]")
    monkeypatch.undo()

    for i in range(1, MAX_INCLUDE_DEPTH + 1):
        (tmp_path / f"f{i}.policy").write_text(f'policy "f{i}" version 1\ninclude "f{i + 1}.policy"\n')
    write(policy, policy_text(binpack_weight=4, includes=("f1.policy",)))
    failed = wait_for(lambda: [o for o in running.outcomes if not o.ok][2:], "the refused include chain")
    assert failed[0].errors[0].startswith(f"{tmp_path / f'f{MAX_INCLUDE_DEPTH - 1}.policy'}:2:9: error[PD013]")

    cycles = len(running.cluster.cycles)
    wait_for(lambda: len(running.cluster.cycles) > cycles + 3, "cycles going on after the refused reloads")
    assert running.revision == good
    assert running.sample("policydsl_policy_reload_total", result="error") == 3
