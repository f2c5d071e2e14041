"""What the stateful rules share: the pods they count and a pod's label profile.

A rule counts every pod on a node (Snapshot.placed_pods, whoever's) and is told of the
cycle's placements, undos and evictions of our tasks (runtime.session.StatefulRule). Two pods
with the same namespace and the same values of the label keys the rules' selectors read
(Snapshot.label_keys) match the same selectors: their profile, the key matches are cached by.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Hashable

from runtime.model import Pod
from runtime.snapshot import Snapshot

Profile = Hashable


def profile(snap: Snapshot, pod: Pod) -> Profile:
    labels = pod.labels
    keys = snap.label_keys or ()
    return pod.namespace, tuple(labels.get(k) for k in keys)


def placed(snap: Snapshot) -> Iterator[tuple[Pod, int]]:
    """Every pod holding room on a node, with its node row."""
    return zip(snap.placed_pods, snap.placed_rows.tolist())
