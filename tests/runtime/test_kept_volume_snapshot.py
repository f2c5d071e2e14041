"""The claims of the pods in play, resolved once and kept by the SnapshotCache while nothing they
are made of changes (SnapshotCache.volume_snapshot): kept when the pods and the storage objects
are the same, made again when a claim, a volume, a class or a CSINode is replaced, and a cycle
with the kept cache decides exactly as one with a fresh cache through such changes, on both
kernels."""

from __future__ import annotations

import pytest

from runtime.cluster.model import ClusterState
from runtime.cluster.objects import load_objects
from runtime.engine.cycle import Options, run_cycle
from runtime.engine.snapshot import SnapshotCache
from runtime_helpers import STANDARD_TIERS, policy
from storage_docs import LOCAL, claim_pod, csinode_doc, node_doc, pv_doc, pvc_doc, storage_class

PLAN = policy(STANDARD_TIERS)
CSI = "csi.example.com"


def base_docs() -> list[dict]:
    return [storage_class(LOCAL), storage_class("disks", provisioner=CSI),
            *(node_doc(f"n{i}", cpu="2") for i in range(3)),
            pv_doc("pv-a", node="n0"), pv_doc("pv-b", node="n1"),
            *(pvc_doc(f"c{i}") for i in range(3)), pvc_doc("d0", cls="disks"),
            *(claim_pod(f"p{i}", [f"c{i}"], cpu="500m") for i in range(3)), claim_pod("q0", ["d0"], cpu="500m")]


def loaded(docs: list[dict]) -> ClusterState:
    return load_objects(("test", d) for d in docs)


# Each change replaces storage objects of the state in place of the cluster's watch: the pods
# stay the same objects, so only the storage tells the kept answer is stale.
CHANGES = {
    "nothing": [],
    "a volume added": [pv_doc("pv-c", node="n2")],
    "a claim pre-bound by a volume's claimRef": [pv_doc("pv-d", node="n2", claim="c0")],
    "a claim being deleted": [pvc_doc("c1", deleting=True)],
    "the local class binding at once": [storage_class(LOCAL, mode="Immediate")],
    "a CSINode allowing no volume of the driver": [csinode_doc("n0", {CSI: 0}), csinode_doc("n1", {CSI: 0})],
}


def changed(state: ClusterState, docs: list[dict]) -> None:
    new = loaded(docs).storage
    for mine, theirs in ((state.storage.volumes, new.volumes), (state.storage.claims, new.claims),
                         (state.storage.classes, new.classes), (state.storage.csinodes, new.csinodes)):
        mine.update(theirs)


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_a_kept_cache_decides_as_a_fresh_one_through_storage_changes(pure):
    state = loaded(base_docs())
    kept = SnapshotCache()
    seen = []
    for what, docs in [*CHANGES.items(), ("nothing", [])]:
        changed(state, docs)
        state.storage = state.storage.copy()    # a new Storage each cycle, as the cluster cache's snapshot
        with_kept = run_cycle(PLAN, state, Options(pure_python=pure), kept)
        fresh = run_cycle(PLAN, state, Options(pure_python=pure), SnapshotCache())
        assert with_kept.to_json() == fresh.to_json(), what
        seen.append(sorted(b.pod for b in fresh.bindings))
    assert len({tuple(s) for s in seen}) > 2       # the changes changed decisions


def test_the_resolved_claims_are_kept_while_nothing_changes_and_made_again_when_something_does():
    state = loaded(base_docs())
    pods = list(state.pods.values())
    waiting = list(range(len(pods)))
    cache = SnapshotCache()
    first = cache.volume_snapshot(state.storage, pods, waiting, [])
    assert cache.volume_snapshot(state.storage, pods, list(waiting), []) is first
    assert cache.volume_snapshot(state.storage.copy(), pods, waiting, []) is first      # equal objects
    for docs in list(CHANGES.values())[1:]:
        other = loaded(base_docs())
        changed(other, docs)
        again = cache.volume_snapshot(other.storage, pods, waiting, [])
        assert again is not first
        first = cache.volume_snapshot(state.storage, pods, waiting, [])
    assert cache.volume_snapshot(state.storage, pods, waiting[1:], []) is not first     # another waiting set
    assert cache.volume_snapshot(state.storage, list(pods), waiting, []) is not cache.volume_snapshot(
        state.storage, pods, waiting, [])                                                 # another task list
