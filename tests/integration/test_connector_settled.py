"""The cache's settled-pod counts (runtime.kube.settled) follow every kind of change the watch
and the scheduler's own overlays and status writes make: a snapshot that counts settled pods
and gangs schedules, and writes statuses, exactly as one that lists every pod. No API server:
events go into the cache as its watch would hand them over."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from runtime_helpers import STANDARD_TIERS, policy

from runtime.engine.cycle import Options, VictimsNeeded, open_session, run_cycle
from runtime.kube.cache import NODES, PODGROUPS, PODS, PRIORITY_CLASSES, ClusterCache
from runtime.kube.settled import Gang, gang_settles
from runtime.kube.status import pod_counts, podgroup_update, queue_phases
from runtime.cluster.model import GPU_INDEX_ANNOTATION, QUEUE_ANNOTATION, ClusterState, Pod, PodGroup, member_settles
from runtime.engine.snapshot import SnapshotCache, build_snapshot

from .connector_helpers import pod_body

OURS = "volcano"
QUEUES = "queue q1 { weight = 2 }\nqueue q2 { weight = 1 capability = { cpu: 6 } }\n"
PLAN = policy(STANDARD_TIERS + QUEUES)
EVICTING = policy(STANDARD_TIERS + QUEUES, actions="enqueue, allocate, preempt, reclaim, backfill")
NODE_NAMES = ("n0", "n1")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pod_object(index: int, *, scheduler: str, node: str | None, phase: str, group: str | None, queue: str | None,
               cpu: str, releasing: bool, cards: bool) -> dict:
    body = pod_body(f"p{index}", scheduler, cpu=cpu, group=group)
    meta = body["metadata"]
    meta.update(namespace="ns", uid=f"uid-{index}", creationTimestamp=f"2026-11-29T10:00:{index % 60:02d}Z")
    if queue:
        meta["annotations"][QUEUE_ANNOTATION] = queue
    if cards:
        meta["annotations"][GPU_INDEX_ANNOTATION] = "0"
    if releasing:
        meta["deletionTimestamp"] = "2026-11-29T11:00:00Z"
    if node:
        body["spec"]["nodeName"] = node
    body["status"] = {"phase": phase}
    return body


def upserts(index: int):
    objects = st.builds(
        partial(pod_object, index),
        scheduler=st.sampled_from([OURS, OURS, "someone-else"]),
        node=st.sampled_from([None, None, None, "n0", "n1", "gone-node"]),
        phase=st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]),
        group=st.sampled_from([None, None, "g", "h"]),
        queue=st.sampled_from([None, "q1", "q2", "nowhere"]),
        cpu=st.sampled_from(["500m", "1", "2"]),
        releasing=st.sampled_from([False] * 5 + [True]),
        cards=st.sampled_from([False] * 5 + [True]),
    )
    return objects.map(lambda obj: ("upsert", index, obj))


def podgroup_object(name: str, *, min_member: int, queue: str, min_cpu: str | None, phase: str) -> dict:
    spec = {"minMember": min_member, "queue": queue}
    if min_cpu:
        spec["minResources"] = {"cpu": min_cpu}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"pg-{name}"}, "spec": spec,
            "status": {"phase": phase}}


podgroups = st.builds(
    podgroup_object,
    st.sampled_from(["g", "h"]),
    min_member=st.integers(1, 3),
    queue=st.sampled_from(["q1", "q2"]),
    min_cpu=st.sampled_from([None, None, "1", "3"]),
    phase=st.sampled_from(["Pending", "Inqueue", "Running", "Running"]),
).map(lambda obj: ("podgroup", obj))

pod_upserts = st.integers(0, 5).flatmap(upserts)
steps = st.lists(st.one_of(
    pod_upserts, pod_upserts, pod_upserts, pod_upserts,
    podgroups,
    st.tuples(st.just("cycle")), st.tuples(st.just("cycle")), st.tuples(st.just("cycle")),
    st.tuples(st.sampled_from(["Running", "Running", "Succeeded"]), st.integers(0, 5)),   # a kubelet's report
    st.tuples(st.just("touch"), st.integers(0, 5)),   # a change the scheduler does not read (a label)
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("assume_bound"), st.integers(0, 5), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("assume_releasing"), st.integers(0, 5)),
    st.tuples(st.just("forget_assumed"), st.integers(0, 5)),
    st.tuples(st.just("delete_podgroup"), st.sampled_from(["g", "h"])),
    st.tuples(st.just("relist")),
    st.tuples(st.just("relist_podgroups")),
), min_size=6, max_size=40)


def new_cache() -> ClusterCache:
    cache = ClusterCache(api=None, scheduler_name=OURS)  # type: ignore[arg-type]  # never started
    with cache._lock:
        for name in NODE_NAMES:
            cache._upsert(NODES, {"metadata": {"name": name},
                                  "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
        for group in FIRST_GROUPS.values():
            cache._upsert(PODGROUPS, group)
    return cache


FIRST_GROUPS = {"ns/g": podgroup_object("g", min_member=2, queue="q1", min_cpu="2", phase="Pending"),
                "ns/h": podgroup_object("h", min_member=1, queue="q2", min_cpu=None, phase="Pending")}


def status_writes(cache: ClusterCache, state: ClusterState, decisions) -> dict[str, dict]:
    """The PodGroup statuses KubeCluster would write after a cycle on `state` (no condition delay)."""
    counts = pod_counts(state, OURS)
    writes = {}
    for pg in decisions.podgroups:
        update = podgroup_update(pg.name, cache.podgroup_status(pg.name), pg.phase, pg.conditions,
                                 counts.get(pg.name, {"running": 0, "succeeded": 0}), now="now", transition_id="t")
        if update is not None:
            writes[pg.name] = update.status
    return writes


@dataclass
class Feed:
    """A cache and the objects an API server would hold for it (what a relist returns); `play`
    hands it a script of watch events, the scheduler's overlays and whole cycles."""

    cache: ClusterCache = field(default_factory=new_cache)
    pods: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=lambda: dict(FIRST_GROUPS))

    def play(self, script: list[tuple], after_each=lambda: None) -> None:
        cache = self.cache
        for step in script:
            kind = step[0]
            key = f"ns/p{step[1]}" if len(step) > 1 and isinstance(step[1], int) else ""
            if kind in ("Running", "Succeeded"):   # a kubelet's report on a bound pod
                if key in self.pods and self.pods[key]["spec"].get("nodeName"):
                    self._change(key, lambda body: body["status"].update(phase=kind))
            elif kind == "touch":   # a change the scheduler does not read
                self._change(key, lambda body: body["metadata"]["labels"].update(touched=str(len(script))))
            elif kind == "upsert":
                self._upsert_pod(key, step[2])
            elif kind == "delete" and key in self.pods:
                with cache._lock:
                    cache._delete(PODS, self.pods.pop(key))
            elif kind == "podgroup":
                self.groups["ns/" + step[1]["metadata"]["name"]] = step[1]
                with cache._lock:
                    cache._upsert(PODGROUPS, step[1])
            elif kind == "delete_podgroup" and "ns/" + step[1] in self.groups:
                with cache._lock:
                    cache._delete(PODGROUPS, self.groups.pop("ns/" + step[1]))
            elif kind == "relist":
                cache._replace(PODS, list(self.pods.values()))
            elif kind == "relist_podgroups":
                cache._replace(PODGROUPS, list(self.groups.values()))
            elif kind == "cycle":
                self._cycle()
            elif kind == "assume_bound":
                cache.assume_bound(key, step[2], {})
            elif kind == "assume_releasing":
                cache.assume_releasing(key)
            elif kind == "forget_assumed":
                cache.forget_assumed(key)
            after_each()

    def _upsert_pod(self, key: str, body: dict) -> None:
        self.pods[key] = body
        with self.cache._lock:
            self.cache._upsert(PODS, body)

    def _change(self, key: str, edit) -> None:
        if key in self.pods:
            body = copy.deepcopy(self.pods[key])
            edit(body)
            self._upsert_pod(key, body)

    def _cycle(self) -> None:
        """A cycle on the counted state, made true as KubeCluster would: binds (the watch shows
        them), then the PodGroup statuses that change."""
        state = self.cache.snapshot(fold_settled=True)
        decisions = run_cycle(PLAN, state, Options(fold_settled=True))
        for binding in decisions.bindings:
            self._change(binding.pod, lambda body: body["spec"].update(nodeName=binding.node))
        for name, status in status_writes(self.cache, state, decisions).items():
            self.cache.record_podgroup_status(name, status)


def outcome(cache: ClusterCache, state: ClusterState, options: Options, plan=PLAN) -> dict:
    """Everything a cycle on `state` changes or reports: decisions, status writes, queue totals."""
    decisions = run_cycle(plan, state, options)
    ssn = open_session(plan, state, options)
    return {
        "bindings": decisions.bindings, "evictions": decisions.evictions, "pipelined": decisions.pipelined,
        "unschedulable": decisions.unschedulable, "writes": status_writes(cache, state, decisions),
        "queue phases": {q: sorted(p) for q, p in queue_phases(decisions.podgroups, state).items() if p},
        "resources": ssn.snap.resources,
        **{name: getattr(ssn, name).tolist() for name in ("used", "releasing", "queue_allocated", "queue_request",
                                                           "queue_inqueue")},
    }


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@SETTINGS
@given(script=steps)
def test_counted_and_listed_states_schedule_alike(pure: bool, script: list[tuple]) -> None:
    feed = Feed()
    options = Options(pure_python=pure, fold_settled=True)

    def compare() -> None:
        counted, listed = feed.cache.snapshot(fold_settled=True), feed.cache.snapshot()
        assert set(counted.pods) <= set(listed.pods)
        assert outcome(feed.cache, counted, options) == outcome(feed.cache, listed, options)

    feed.play(script, after_each=compare)


def gang_pod(index: int, group: str, cpu: str = "1") -> dict:
    return pod_object(index, scheduler=OURS, node=None, phase="Pending", group=group, queue=None, cpu=cpu,
                      releasing=False, cards=False)


# Gangs that our cycles place, then the changes that can unsettle them.
gang_starts = st.lists(st.tuples(st.sampled_from(["g", "h"]), st.sampled_from(["500m", "1", "2"])),
                       min_size=1, max_size=6).map(
    lambda pods: [("upsert", i, gang_pod(i, group, cpu)) for i, (group, cpu) in enumerate(pods)] + [("cycle",)])
gang_changes = st.lists(st.one_of(
    st.tuples(st.just("touch"), st.integers(0, 5)), st.tuples(st.just("touch"), st.integers(0, 5)),
    st.tuples(st.sampled_from(["Running", "Running", "Succeeded"]), st.integers(0, 5)),
    st.tuples(st.just("cycle")), st.tuples(st.just("cycle")),
    podgroups,
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("assume_releasing"), st.integers(0, 5)),
    st.integers(6, 8).map(lambda i: ("upsert", i, gang_pod(i, "g"))),
    st.tuples(st.just("delete_podgroup"), st.sampled_from(["g", "h"])),
    st.tuples(st.just("relist")),
    st.tuples(st.just("relist_podgroups")),
), max_size=20)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@SETTINGS
@given(start=gang_starts, changes=gang_changes)
def test_settled_gangs_schedule_and_write_as_listed_ones(pure: bool, start: list[tuple], changes: list[tuple]) -> None:
    feed = Feed()
    options = Options(pure_python=pure, fold_settled=True)

    def compare() -> None:
        counted, listed = feed.cache.snapshot(fold_settled=True), feed.cache.snapshot()
        assert outcome(feed.cache, counted, options) == outcome(feed.cache, listed, options)

    feed.play(start + changes, after_each=compare)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@SETTINGS
@given(script=steps)
def test_a_plan_that_may_evict_folds_only_while_no_job_could_evict(pure: bool, script: list[tuple]) -> None:
    # Folded, a cycle of a plan with preempt and reclaim either decides exactly what it decides
    # over the listed pods, or says the settled pods may be victims (the connector then lists
    # them and runs again).
    feed = Feed()
    folded, listed_options = Options(pure_python=pure, fold_settled=True), Options(pure_python=pure)

    def compare() -> None:
        counted, listed = feed.cache.snapshot(fold_settled=True), feed.cache.snapshot()
        try:
            got = outcome(feed.cache, counted, folded, EVICTING)
        except VictimsNeeded:
            event("victims needed")
            return
        event("folded")
        assert got == outcome(feed.cache, listed, listed_options, EVICTING)

    feed.play(script, after_each=compare)


def test_a_preemptor_makes_a_folded_cycle_ask_for_its_victims() -> None:
    feed = Feed()
    feed.play([("upsert", i, pod_object(i, scheduler=OURS, node=NODE_NAMES[i % 2], phase="Running", group=None,
                                        queue="q1", cpu="2", releasing=False, cards=False)) for i in range(8)])
    assert len(feed.cache.snapshot(fold_settled=True).pods) == 0          # both nodes full, all settled
    urgent = pod_object(9, scheduler=OURS, node=None, phase="Pending", group=None, queue="q1", cpu="4",
                        releasing=False, cards=False)
    urgent["spec"]["priority"] = 1000
    feed.play([("upsert", 9, urgent)])
    with pytest.raises(VictimsNeeded):
        run_cycle(EVICTING, feed.cache.snapshot(fold_settled=True), Options(fold_settled=True))
    listed = run_cycle(EVICTING, feed.cache.snapshot(), Options())
    assert len(listed.evictions) == 2 and set(listed.pipelined) == {"ns/p9"}


def test_a_gang_still_short_of_pods_folds_and_asks_for_victims_once_whole() -> None:
    # Preempt and reclaim consider valid jobs only: a gang with fewer pods than its minMember
    # evicts nothing, so a folded cycle need not list the settled pods for it.
    feed = Feed()
    feed.play([("upsert", i, pod_object(i, scheduler=OURS, node=NODE_NAMES[i % 2], phase="Running", group=None,
                                        queue="q1", cpu="2", releasing=False, cards=False)) for i in range(8)])
    with feed.cache._lock:
        feed.cache._upsert(PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    big = podgroup_object("big", min_member=3, queue="q1", min_cpu=None, phase="Inqueue")
    big["spec"]["priorityClassName"] = "high"
    feed.play([("podgroup", big), ("upsert", 10, gang_pod(10, "big", cpu="4")), ("upsert", 11, gang_pod(11, "big", cpu="4"))])
    folded = run_cycle(EVICTING, feed.cache.snapshot(fold_settled=True), Options(fold_settled=True))
    listed = run_cycle(EVICTING, feed.cache.snapshot(), Options())
    assert not listed.evictions and folded.to_json() == listed.to_json()
    feed.play([("upsert", 12, gang_pod(12, "big", cpu="4"))])
    with pytest.raises(VictimsNeeded):
        run_cycle(EVICTING, feed.cache.snapshot(fold_settled=True), Options(fold_settled=True))
    listed = run_cycle(EVICTING, feed.cache.snapshot(), Options())
    assert len(listed.evictions) == 6 and len(listed.pipelined) == 3


def gang_state(cache: ClusterCache) -> tuple[list[str], dict[str, int]]:
    state = cache.snapshot(fold_settled=True)
    return sorted(state.pods), state.settled.groups


def test_a_gang_settles_once_its_status_is_written_and_comes_back_while_it_changes() -> None:
    feed = Feed()
    feed.play([("upsert", 0, gang_pod(0, "g")), ("upsert", 1, gang_pod(1, "g")), ("upsert", 2, gang_pod(2, "h"))])
    assert gang_state(feed.cache) == (["ns/p0", "ns/p1", "ns/p2"], {})
    feed.play([("cycle",)])   # binds all three; the PodGroups say Running, n/n tasks ready
    assert gang_state(feed.cache) == ([], {"q1": 1, "q2": 1})
    assert feed.cache.podgroup_status("ns/g")["conditions"][0]["message"] == "2/2 tasks ready"
    # A change the cycle does not read: still settled, the pod counted again.
    feed.play([("touch", 0)])
    assert gang_state(feed.cache) == ([], {"q1": 1, "q2": 1})
    # A kubelet starts a pod: the status's pod counts are stale until a cycle writes them.
    feed.play([("Running", 0)])
    assert gang_state(feed.cache) == (["ns/p0", "ns/p1"], {"q2": 1})
    feed.play([("cycle",)])
    assert feed.cache.podgroup_status("ns/g")["running"] == 1
    assert gang_state(feed.cache) == ([], {"q1": 1, "q2": 1})
    # Its PodGroup moves to another queue: counted there.
    moved = podgroup_object("g", min_member=2, queue="q2", min_cpu=None, phase="Running")
    moved["status"] = feed.cache.podgroup_status("ns/g")   # the watch shows the status written
    feed.play([("podgroup", moved)])
    state = feed.cache.snapshot(fold_settled=True)
    assert state.settled.groups == {"q2": 2}
    assert {queue for queue, _ in state.settled.by_queue} == {"q2"}
    # An eviction in flight, a new member, a deleted PodGroup: in play again.
    for step, pods in ((("assume_releasing", 2), ["ns/p2"]), (("upsert", 3, gang_pod(3, "g")), ["ns/p0", "ns/p1", "ns/p3", "ns/p2"]),
                       (("delete_podgroup", "h"), ["ns/p0", "ns/p1", "ns/p2", "ns/p3"])):
        feed.play([step])
        assert sorted(gang_state(feed.cache)[0]) == sorted(pods), step


def test_a_gang_short_of_its_min_resources_or_finished_stays_in_play() -> None:
    feed = Feed()   # g asks for minResources cpu 2
    feed.play([("upsert", 0, gang_pod(0, "g", "500m")), ("upsert", 1, gang_pod(1, "g", "500m")), ("cycle",)])
    assert feed.cache.podgroup_status("ns/g")["phase"] == "Running"
    assert gang_state(feed.cache) == (["ns/p0", "ns/p1"], {})   # holds 1 cpu of 2: the rest counts as inqueue
    feed.play([("Succeeded", 0), ("Succeeded", 1), ("cycle",)])
    assert feed.cache.podgroup_status("ns/g")["phase"] == "Completed"
    assert gang_state(feed.cache) == (["ns/p0", "ns/p1"], {})


def test_a_settled_pod_leaves_the_listed_pods_and_comes_back_when_it_changes() -> None:
    feed = Feed()
    bound = pod_object(1, scheduler=OURS, node="n0", phase="Running", group=None, queue="q1", cpu="1",
                       releasing=False, cards=False)
    waiting = pod_object(2, scheduler=OURS, node=None, phase="Pending", group=None, queue="q1", cpu="1",
                         releasing=False, cards=False)
    feed.play([("upsert", 1, bound), ("upsert", 2, waiting)])
    state = feed.cache.snapshot(fold_settled=True)
    assert list(state.pods) == ["ns/p2"]
    assert state.settled.by_queue == {("q1", (("cpu", 1000), ("memory", 2**30))): 1}
    assert state.settled.by_node == {("n0", (("cpu", 1000), ("memory", 2**30)), True): 1}
    # An eviction the watch has not shown yet keeps the pod in play, overlaid as releasing.
    feed.cache.assume_releasing("ns/p1")
    state = feed.cache.snapshot(fold_settled=True)
    assert state.pods["ns/p1"].releasing and state.settled.by_node == {}
    # Deleted: counted nowhere.
    feed.play([("delete", 1)])
    assert feed.cache.snapshot(fold_settled=True).settled.by_queue == {}


def test_a_counted_state_needs_a_plan_that_folds() -> None:
    feed = Feed()
    state = feed.cache.snapshot(fold_settled=True)
    with pytest.raises(ValueError, match="only a plan that folds them"):
        build_snapshot(state, PLAN, OURS, SnapshotCache(), fold_settled=False)


def _gang(*phases: str, node: str | None = "n0") -> Gang:
    gang = Gang()
    for i, phase in enumerate(phases):
        pod = Pod("ns", f"p{i}", {"cpu": 1000}, node_name=node, phase=phase, group="g")
        gang.join(pod.key, pod, member_settles(pod))
    return gang


def _written(size: int, running: int = 0, succeeded: int = 0, phase: str = "Running") -> dict:
    return {"phase": phase, "running": running, "succeeded": succeeded,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled",
                            "message": f"{size}/{size} tasks ready", "lastTransitionTime": "then"}]}


RUNNING_GROUP = PodGroup("ns", "g", min_member=2, phase="Running")


@pytest.mark.parametrize("group, status, gang, settles", [
    (RUNNING_GROUP, _written(2), _gang("Pending", "Pending"), True),
    (RUNNING_GROUP, _written(2, running=1, succeeded=1), _gang("Running", "Succeeded"), True),
    (None, _written(2), _gang("Pending", "Pending"), False),                                  # no PodGroup
    (PodGroup("ns", "g", min_member=2, phase="Inqueue"), _written(2), _gang("Pending", "Pending"), False),
    (RUNNING_GROUP, _written(2), _gang("Pending", "Pending", node=None), False),              # waiting members
    (RUNNING_GROUP, _written(2), _gang("Running", "Pending"), False),                         # stale pod counts
    (RUNNING_GROUP, _written(3), _gang("Pending", "Pending"), False),                         # stale message
    (RUNNING_GROUP, {"phase": "Running"}, _gang("Pending", "Pending"), False),                # no condition yet
    (RUNNING_GROUP, _written(2, succeeded=2), _gang("Succeeded", "Succeeded"), False),        # Completed next
    (PodGroup("ns", "g", min_member=3, phase="Running"), _written(2), _gang("Pending", "Pending"), False),
    (PodGroup("ns", "g", min_member=2, phase="Running", min_resources={"cpu": 2000}), _written(2),
     _gang("Pending", "Pending"), True),
    (PodGroup("ns", "g", min_member=2, phase="Running", min_resources={"cpu": 2500}), _written(2),
     _gang("Pending", "Pending"), False),                                                     # short: inqueue
    (PodGroup("ns", "g", min_member=1, phase="Running", min_resources={"cpu": 2000}),
     _written(2, running=1, succeeded=1),
     _gang("Running", "Succeeded"), False),                                                   # a finished pod holds nothing
])
def test_when_a_gang_settles(group, status, gang, settles) -> None:
    assert gang_settles(group, status, gang) is settles
