"""A connection's snapshot carries every kind of object of its state: the embedded cluster once
handed each cycle only nodes, pods, PodGroups, Queues and PriorityClasses, so namespaces'
labels, storage objects and HyperNodes vanished from `policydsl run --cluster embedded:...`."""

from __future__ import annotations

from dataclasses import fields

from runtime.cluster.model import ClusterState
from runtime.cluster.storage import Storage
from runtime.service.embedded import EmbeddedCluster


def populated() -> ClusterState:
    """A state with a value in every field that a snapshot must carry (dicts get an entry of
    their own, whatever kind of object a later field holds)."""
    state = ClusterState()
    for f in fields(ClusterState):
        if not f.init:
            continue
        value = getattr(state, f.name)
        if isinstance(value, dict):
            value[f"{f.name}-key"] = object()
        elif isinstance(value, Storage):
            value.claims["ns/data"] = object()
            value.volumes["pv-1"] = object()
        elif isinstance(value, int):
            setattr(state, f.name, 7)
    return state


def test_the_embedded_snapshot_carries_every_kind_in_new_maps():
    state = populated()
    snap = EmbeddedCluster(state).snapshot()
    for f in fields(ClusterState):
        if not f.init:
            continue
        original, copied = getattr(state, f.name), getattr(snap, f.name)
        if isinstance(original, Storage):
            assert (copied.claims, copied.volumes) == (original.claims, original.volumes), f.name
            assert copied.claims is not original.claims
        else:
            assert copied == original, f.name
            if isinstance(original, dict):
                assert copied is not original, f"{f.name} is shared, not copied"


def test_a_cycle_leaving_objects_out_of_its_snapshot_loses_nothing():
    state = populated()
    snap = state.shallow_copy()
    snap.namespaces.clear()
    snap.storage.claims.clear()
    assert state.namespaces and state.storage.claims
