"""The snapshot's pass over the pods kept across cycles (runtime.engine.podscan.PodScanMemo): after
any change a cluster's pods go through between cycles — pods added, deleted, replaced, moved in
the dict's order, bound, evicted, finished, relabelled in place, a node added, a priority class
changed — its answer is the PodScan one scan of every pod gives, field for field, with the
compiled and the pure-Python kernels; and it reads again only the pods that changed."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from runtime.cluster.decisions import Binding, Decisions, Eviction
from runtime.cluster.model import (
    QUEUE_ANNOTATION, ClusterState, HostPort, PodAffinityTerm, PodRules, SpreadConstraint, pod_changed,
)
from runtime.cluster.selectors import LabelSelector
from runtime.cluster.dra import PodResourceClaim
from runtime.cluster.numa import NUMA_POLICY_ANNOTATION
from runtime.cluster.storage import PodClaim
from runtime.engine.cycle import run_cycle
from runtime.engine.kernels import load
from runtime.engine.podscan import PodScanMemo
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, gang, node, placements, pod, policy

HOST = "kubernetes.io/hostname"
ANTI = PodRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector((("app", "web"),)), frozenset({"ns"})),))
SPREAD = PodRules(spread=(SpreadConstraint(1, "zone", "DoNotSchedule", LabelSelector((("app", "db"),))),))
PORT = PodRules(host_ports=(HostPort(8080),))


def scan_fields(scan) -> dict:
    """A PodScan as comparable values (pods by identity)."""
    out = {}
    for f in dataclasses.fields(scan):
        value = getattr(scan, f.name)
        if isinstance(value, np.ndarray):
            out[f.name] = (str(value.dtype), value.tolist())
        elif f.name in ("ours", "rule_pods", "volume_pods"):
            out[f.name] = [id(p) for p in value]
        else:
            out[f.name] = value
    return out


def cluster(rng: random.Random, pods: int = 120) -> ClusterState:
    state = ClusterState(priority_classes={"high": 1000})
    for i in range(8):
        node(state, f"n{i}", cpu=64000, labels={HOST: f"n{i}", "zone": f"z{i % 2}"})
    for i in range(pods):
        add_random_pod(state, rng, f"p{i}")
    return state


def add_random_pod(state: ClusterState, rng: random.Random, name: str) -> None:
    kind = rng.randrange(10)
    placed = rng.random() < 0.6
    p = pod(state, name, cpu=rng.choice((100, 200, 500)), memory=rng.choice((2**28, 2**30)),
            group=f"g{rng.randrange(6)}" if kind == 0 else None, labels={"app": rng.choice(("web", "db", "x"))},
            node_name=rng.choice((f"n{rng.randrange(8)}", "n-gone")) if placed else None,
            rules=(ANTI, SPREAD, PORT, None, None)[kind % 5], priority_class="high" if kind == 3 else None)
    p.annotations[QUEUE_ANNOTATION] = rng.choice(("q1", "q2"))
    if placed:
        p.phase = rng.choice(("Running", "Running", "Running", "Succeeded", "Failed"))
    if kind == 7:
        p.scheduler_name = "other"
    if kind == 8 and not placed:
        p.volumes = (PodClaim("data", f"claim-{name}"),)
    # What the snapshot's DRA and NUMA passes read (PodScan.asking_tasks).
    if kind == 6 and rng.random() < 0.5:
        p.resource_claims = (PodResourceClaim("gpu", claim=f"claim-{name}"),)
    elif kind in (4, 6):
        p.annotations[NUMA_POLICY_ANNOTATION] = rng.choice(("single-numa-node", "none"))
    if kind == 9:
        p.requests = {}
    if rng.random() < 0.05:
        p.releasing = True


def change(state: ClusterState, rng: random.Random, step: int) -> None:
    """One round of the changes a cluster sees between cycles, through the model's transitions,
    replacement and (noted) in-place edits."""
    keys = list(state.pods)
    for _ in range(rng.randrange(1, 6)):
        key = rng.choice(keys)
        p = state.pods.get(key)
        if p is None:
            continue
        what = rng.randrange(9)
        if what == 0:
            state.remove_pod(key)
        elif what == 1:
            state.pods[key] = dataclasses.replace(p, labels={"app": "other"})
        elif what == 2 and p.node_name is None:
            state.apply(Decisions(bindings=[Binding(key, f"n{rng.randrange(8)}")]))
        elif what == 3 and p.node_name:
            state.apply(Decisions(evictions=[Eviction(key, "test")]))
        elif what == 4 and p.node_name:
            state.complete_pod(key, rng.choice(("Succeeded", "Failed")))
        elif what == 5:
            p.annotations = {QUEUE_ANNOTATION: "q3"}
            p.requests = dict(p.requests, cpu=999)
            pod_changed(p)
        elif what == 6:          # removed and added again: to the end of the dict's order
            del state.pods[key]
            state.pods[key] = p
        elif what == 7:
            p.rules = None if p.rules else ANTI
            p.group = None
            if NUMA_POLICY_ANNOTATION in p.annotations:
                del p.annotations[NUMA_POLICY_ANNOTATION]
            else:
                p.annotations[NUMA_POLICY_ANNOTATION] = "best-effort"
            pod_changed(p)
        else:
            add_random_pod(state, rng, f"new-{step}-{rng.randrange(10**6)}")


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fold", [False, True])
def test_kept_scan_is_the_full_scan_after_every_kind_of_change(pure: bool, seed: int, fold: bool) -> None:
    rng = random.Random(seed)
    k = load(pure)
    state = cluster(rng)
    cache = SnapshotCache()
    memo = PodScanMemo()
    read = []
    for step in range(25):
        if step == 12:
            node(state, "n-new", cpu=64000, labels={HOST: "n-new", "zone": "z0"})   # rows move: all read again
        if step == 18:
            state.priority_classes["high"] = 2000
        positions = cache.node_positions(state)
        kept = memo.scan(k, state.pods, "volcano", state.priority_classes, state.default_priority, positions, fold)
        full = k.scan_pods(state.pods, "volcano", state.priority_classes, state.default_priority, positions, fold)
        assert scan_fields(kept) == scan_fields(full), f"step {step}"
        read.append((memo.rescanned, len(state.pods)))
        # Nothing changed since: the same lists of pods (kept, read only), the same scan.
        again = memo.scan(k, state.pods, "volcano", state.priority_classes, state.default_priority, positions, fold)
        assert again.ours is kept.ours and again.rule_pods is kept.rule_pods
        assert scan_fields(again) == scan_fields(full), f"step {step}"
        change(state, rng, step)
    assert read[0] == (120, 120) and read[12][0] == read[12][1], read      # all read: first, and after a new node
    assert max(r for r, _ in read[1:12]) < 40, read       # only what changed is read again


def test_only_what_changed_is_read_again() -> None:
    rng = random.Random(1)
    k = load(False)
    state = cluster(rng, pods=400)
    positions = SnapshotCache().node_positions(state)
    memo = PodScanMemo()
    scan = lambda: memo.scan(k, state.pods, "volcano", {}, 0, positions, True)   # noqa: E731
    scan()
    assert memo.rescanned == 400
    scan()
    assert memo.rescanned == 0
    keys = list(state.pods)
    state.pods[keys[5]] = dataclasses.replace(state.pods[keys[5]])
    pod_changed(state.pods[keys[9]])
    scan()
    assert memo.rescanned == 2


def test_a_pod_bound_by_apply_is_read_again() -> None:
    """ClusterState.apply changes the pod in place: without its note, the kept scan would still
    list the pod as waiting (and place it twice)."""
    state = ClusterState()
    node(state, "n0", cpu=8000)
    node(state, "n1", cpu=8000)
    pod(state, "a", cpu=5000)
    pod(state, "b", cpu=5000)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    first = run_cycle(plan, state, cache=cache)
    assert sorted(placements(first)) == ["ns/a", "ns/b"]
    state.apply(first)
    again = run_cycle(plan, state, cache=cache)
    assert not again.bindings
    # evicted in place, then gone: its room is free again for a new pod
    key = next(iter(placements(first)))
    state.apply(Decisions(evictions=[Eviction(key, "test")]))
    state.advance()
    pod(state, "c", cpu=5000)
    third = run_cycle(plan, state, cache=cache)
    assert placements(third) == {"ns/c": placements(first)[key]}


def test_a_pod_relabelled_in_place_and_noted_moves_the_rules() -> None:
    """A bound pod's labels changed in place (pod_changed said so): the anti-affinity of the
    waiting pod no longer keeps it off that node."""
    state = ClusterState()
    for i in range(2):
        node(state, f"n{i}", cpu=8000, labels={HOST: f"n{i}"})
    blocker = pod(state, "blocker", node_name="n0", labels={"app": "web"})
    pod(state, "other", node_name="n1", labels={"app": "web"})
    pod(state, "web", labels={"app": "web"}, rules=ANTI)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    assert not run_cycle(plan, state, cache=cache).bindings
    blocker.labels = {"app": "batch"}
    pod_changed(blocker)
    assert placements(run_cycle(plan, state, cache=cache)) == {"ns/web": "n0"}


def test_a_node_added_before_the_others_moves_every_row() -> None:
    """A node whose name sorts first moves every node's row: the rows kept would put the bound
    pods' room on the wrong nodes (and the waiting pod on a full one)."""
    state = ClusterState()
    node(state, "n1", cpu=4000)
    node(state, "n2", cpu=4000)
    pod(state, "big1", cpu=4000, node_name="n1")
    pod(state, "big2", cpu=4000, node_name="n2")
    pod(state, "w", cpu=3000)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    assert not run_cycle(plan, state, cache=cache).bindings
    node(state, "n0", cpu=4000)
    assert placements(run_cycle(plan, state, cache=cache)) == {"ns/w": "n0"}


def test_gang_members_and_settled_counts_follow_changes() -> None:
    state = ClusterState()
    node(state, "n0", cpu=16000)
    gang(state, "g", 2)
    for i in range(3):
        p = pod(state, f"lone-{i}", node_name="n0", cpu=1000)
        p.annotations[QUEUE_ANNOTATION] = "default"
    k = load(False)
    memo = PodScanMemo()
    positions = SnapshotCache().node_positions(state)
    first = memo.scan(k, state.pods, "volcano", {}, 0, positions, True)
    assert sum(first.settled.values()) == 3
    state.remove_pod("ns/lone-0")
    second = memo.scan(k, state.pods, "volcano", {}, 0, positions, True)
    assert scan_fields(second) == scan_fields(k.scan_pods(state.pods, "volcano", {}, 0, positions, True))
    assert sum(second.settled.values()) == 2


def test_rule_keys_and_classes_follow_new_rules_objects() -> None:
    """The label keys and selectors the rules read are kept while the same rules objects are in
    play: a pod replaced with rules reading another key changes them (and the classes)."""
    from runtime.engine.snapshot import build_snapshot
    state = ClusterState()
    for i in range(3):
        node(state, f"n{i}", cpu=8000, labels={HOST: f"n{i}", "zone": f"z{i % 2}"})
    pod(state, "bound", node_name="n0", labels={"app": "web", "tier": "a"}, rules=ANTI)
    for i, tier in enumerate(("a", "b", "a")):
        pod(state, f"w{i}", labels={"app": "web", "tier": tier}, rules=ANTI)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    first = build_snapshot(state, plan, cache=cache)
    assert first.label_keys == ("app",)
    by_tier = PodRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector((("tier", "a"),)), frozenset({"ns"})),))
    state.pods["ns/bound"] = dataclasses.replace(state.pods["ns/bound"], rules=by_tier)
    kept, fresh = build_snapshot(state, plan, cache=cache), build_snapshot(state, plan)
    assert kept.label_keys == fresh.label_keys == ("app", "tier")
    assert kept.task_class.tolist() == fresh.task_class.tolist()
    assert len({kept.task_class[kept.task_keys.index(f"ns/w{i}")] for i in range(3)}) == 2   # tier a / b apart


def groups_of(snap) -> list[tuple]:
    from runtime.engine.rules.pods import _group_placed
    return [(id(g.pod), id(g.rules), g.live.tolist(), g.leaving.tolist(), g.profile) for g in _group_placed(snap)]


@pytest.mark.parametrize("seed", range(4))
def test_placed_groups_kept_are_the_groups_made_afresh(seed: int) -> None:
    """The placed pods grouped for the rules by the snapshot cache (PlacedGrouping, a pod's key
    read again only where the scan read the pod again) are the groups made from the pods afresh,
    after every kind of change; and a change reads only the pods it touched."""
    from runtime.engine.snapshot import build_snapshot
    rng = random.Random(seed)
    state = cluster(rng, pods=200)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    for step in range(20):
        if step == 10:
            node(state, "a-first", cpu=64000, labels={HOST: "a-first", "zone": "z0"})
        kept = build_snapshot(state, plan, cache=cache)
        assert kept.placed_grouping is not None
        afresh = dataclasses.replace(kept, placed_grouping=None)
        assert groups_of(kept) == groups_of(afresh), f"step {step}"
        # Nothing changed since: the same grouping's lists and rows, the same groups.
        again = build_snapshot(state, plan, cache=cache)
        assert again.placed_grouping.rows is kept.placed_grouping.rows and groups_of(again) == groups_of(afresh)
        assert (kept.label_keys == ("app", "tier")) == (step > 14)
        if 0 < step < 10:
            assert cache.pods.regrouped <= 2 * cache.pods.rescanned
        change(state, rng, step)
        if step == 14:    # a rules object reading another key: every key read again
            key = next(k for k, p in state.pods.items() if p.node_name in state.nodes and not p.terminal)
            state.pods[key] = dataclasses.replace(state.pods[key], rules=PodRules(
                anti_affinity=(PodAffinityTerm(HOST, LabelSelector((("tier", "a"),)), frozenset({"ns"})),)))


def test_folding_and_listing_keep_a_scan_each() -> None:
    """A plan that may evict folds settled pods, lists them all after a cycle that needed victims,
    then folds again: each way keeps its own scan, so neither starts over."""
    from runtime.engine.snapshot import build_snapshot
    state = cluster(random.Random(3), pods=150)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    for fold in (True, False, True, False):
        kept = build_snapshot(state, plan, cache=cache, fold_settled=fold)
        fresh = build_snapshot(state, plan, fold_settled=fold)
        assert kept.task_keys == fresh.task_keys and kept.status.tolist() == fresh.status.tolist()
        assert kept.settled_pods == fresh.settled_pods
    assert cache.pods.rescanned == 0


def test_placed_groups_of_unchanged_pods_are_reused() -> None:
    """A group none of whose pods changed is the object made for it last cycle; a group that
    lost or gained a pod is made again (and equals the one made afresh)."""
    from runtime.engine.rules.pods import _group_placed
    from runtime.engine.snapshot import build_snapshot
    state = cluster(random.Random(5), pods=200)
    plan = policy(STANDARD_TIERS, actions="enqueue, allocate")
    cache = SnapshotCache()
    first = _group_placed(build_snapshot(state, plan, cache=cache))
    again = _group_placed(build_snapshot(state, plan, cache=cache))
    assert len(first) == len(again) and all(a is b for a, b in zip(first, again))
    assert again is first        # no group changed: the list made then (read only)
    victim = next(g for g in again if len(g.live) > 1)
    key = next(k for k, p in state.pods.items() if p is victim.pod)
    state.remove_pod(key)
    snap = build_snapshot(state, plan, cache=cache)
    third = _group_placed(snap)
    assert third is not again
    assert victim not in third and any(g.rules is victim.rules and g.profile == victim.profile for g in third)
    before = {id(g) for g in again}
    assert sum(id(g) not in before for g in third) == 1      # only the victim's group is made again
    assert groups_of(snap) == groups_of(dataclasses.replace(snap, placed_grouping=None))
    # A change whose snapshot nobody groups, then none: the groups are made, not the last list.
    state.remove_pod(next(k for k, p in state.pods.items() if p is third[0].pod))
    build_snapshot(state, plan, cache=cache)
    snap = build_snapshot(state, plan, cache=cache)
    assert groups_of(snap) == groups_of(dataclasses.replace(snap, placed_grouping=None))
