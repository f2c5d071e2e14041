"""What the snapshot kernels return (runtime/engine/kernels/passes.py, compiled or interpreted):
plain records of lists and arrays, so both paths hand runtime.engine.snapshot the same shapes."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from runtime.cluster.model import PodGroup


@dataclass
class PodScan:
    """One pass over the cluster's pods (`scan_pods`)."""

    shapes: list[dict[str, int]]     # distinct request maps, in order of first appearance
    placed_node: np.ndarray          # (P,) int64: node of each pod holding room on one (-1: unknown node)
    placed_shape: np.ndarray         # (P,) int64: its request map
    placed_gone: np.ndarray          # (P,) uint8: releasing
    placed_mine: np.ndarray          # (P,) uint8: of our scheduler
    ours: list[Any]                  # our scheduler's pods (Failed ones aside), in state order
    keys: list[str]                  # their namespace/name
    shape: np.ndarray                # (T,) int64: request map of each of ours
    job: np.ndarray                  # (T,) int64: job in order of first appearance
    priority: np.ndarray             # (T,) int64
    creation: np.ndarray             # (T,) float64
    status: np.ndarray               # (T,) int8: runtime.engine.snapshot's status codes (PENDING, BOUND, ...)
    node: np.ndarray                 # (T,) int64: node, -1 when not on a known node
    plain: np.ndarray                # (T,) uint8: pending without node constraints or tolerations
    job_names: list[str]             # "namespace/podgroup" (or the pod's name when implicit) per job
    # With `fold`: our lone pods (no PodGroup) that are bound and not releasing, left out of the
    # tasks and counted here per (queue annotation or None, request map); Succeeded lone pods
    # are left out and not counted (they hold nothing).
    settled: dict[tuple[str | None, int], int]
    # Pods with inter-pod rules (runtime.cluster.model.PodRules) that matter this cycle: every such
    # pod on a node, whoever's, and ours waiting (folded or not).
    rule_pods: list[Any]
    # Pods with PersistentVolumeClaims (runtime.cluster.model.Pod.volumes) that matter this cycle: every
    # such pod on a node, whoever's, and ours waiting; and the scan positions of ours waiting.
    volume_pods: list[Any]
    volume_tasks: list[int]
    # (P,) int64: each placed pod's position in the state's pods (dict order), so that the placed
    # pods themselves are listed without a second pass over every pod.
    placed_at: np.ndarray
    # The scan positions of ours waiting whose pod has ResourceClaims or a NUMA policy annotation:
    # the only ones the snapshot's DRA and NUMA passes read, not every waiting pod each cycle.
    asking_tasks: list[int]


@dataclass
class TaskOrder:
    """Our pods as tasks (`group_tasks`): jobs by name, each job's tasks by priority
    (descending), creation, uid; each job one contiguous range."""

    order: np.ndarray                # (T,) int64: scan position of each task
    pods: list[Any]
    keys: list[str]
    job_first: np.ndarray            # (J+1,) int64: job j's tasks are job_first[j]:job_first[j+1]
    job_names: list[str]             # per job, sorted


@dataclass
class TaskColumns:
    """Each pending task's class (`task_columns`); a class is new where it first appears."""

    task_class: np.ndarray           # (T,) int64 (0 for tasks not pending)
    class_heads: list[int]           # per class: its first task


@dataclass(slots=True)      # slots: built field by field in kernels/passes.py
class JobInfo:
    """A job of the snapshot (`build_jobs`): a PodGroup, or a lone pod's implicit group."""

    index: int
    key: str                         # namespace/name of the PodGroup (or the pod, if implicit)
    podgroup: PodGroup | None
    implicit: bool
    queue: int                       # -1 when the queue is unknown
    queue_name: str
    min_member: int
    min_task_member: Mapping[str, int]     # read only (an implicit job's is shared)
    min_resources: np.ndarray | None
    priority: int
    creation: float
    uid: str
    phase: str
    tasks: np.ndarray                # task indices, in task order
    problem: str | None = None       # why the job cannot run at all (missing PodGroup, ...)


@dataclass(frozen=True)
class JobColumns:
    """The snapshot's jobs' fields as arrays (`job_columns`, one pass): what the session and its
    plugins read for every job at once (job order columns, accounting, validity)."""

    queue: np.ndarray           # (J,) int64, -1 when unknown
    min_member: np.ndarray      # (J,) int64
    priority: np.ndarray        # (J,) int64
    creation: np.ndarray        # (J,) float64
    problem: np.ndarray         # (J,) bool: it cannot run at all (JobInfo.problem)
    grouped: np.ndarray         # (J,) bool: it has a PodGroup (not a lone pod's implicit group)
    sized: np.ndarray           # (J,) bool: it has minResources
    roles: np.ndarray           # (J,) bool: it has minTaskMember


def min_resource_vector(group: PodGroup, index: dict[str, int], r: int) -> np.ndarray | None:
    """A PodGroup's minResources as a vector over the snapshot's resource columns (resources the
    snapshot has no column for are left out), or None when it sets none."""
    if not group.min_resources:
        return None
    vector = np.zeros(r, dtype=np.int64)
    for resource, amount in group.min_resources.items():
        if resource in index:
            vector[index[resource]] = amount
    return vector
