"""The built-in example (runtime/simulation/examples/) and the rule that picks a run's inputs.

`policydsl simulate POLICY` with neither --snapshot nor --workload runs the example cluster
and workload, so a new user sees the policy at work with one command. The example's jobs
name the queues `online` and `batch` (Queue objects of the example, weights 3:1). A policy
that declares queues of its own takes the jobs instead: each example queue goes to the
policy's leaf queue of the same name, else to the first unused leaf under a policy queue of
that name, else to the first unused leaf of another top-level queue (`default` aside), so
`online` and `batch` land in different tenants when the policy has them.
"""

from __future__ import annotations

import copy
from pathlib import Path

from compiler import catalog as cat
from compiler.plan import Plan
from runtime.cluster.model import QUEUE_ANNOTATION
from runtime.cluster.objects import read_documents
from runtime.simulation.workload import WORKLOAD_KIND, Document, Scenario, build_scenario, flatten

EXAMPLES = Path(__file__).resolve().parent / "examples"
EXAMPLE_CLUSTER = EXAMPLES / "cluster.yaml"
EXAMPLE_WORKLOAD = EXAMPLES / "workload.yaml"
# Volcano's default configuration: `policydsl explain` uses it when no --policy is given
# (a test keeps it equal to policies/volcano-default.policy).
DEFAULT_POLICY = EXAMPLES / "volcano-default.policy"
EXAMPLE_QUEUES = ("online", "batch")


def queue_mapping(plan: Plan, example_queues: tuple[str, ...] = EXAMPLE_QUEUES) -> dict[str, str]:
    """Example queue -> the policy queue that takes its jobs (empty: keep the example's)."""
    declared = [q for q in plan.queues if q.declared]
    parents = {q.parent for q in plan.queues}
    leaves = [q.name for q in declared if q.name not in parents and q.name != cat.DEFAULT_QUEUE]
    if not leaves:
        return {}
    parent_of = {q.name: q.parent for q in plan.queues}

    def top(name: str) -> str:
        while parent_of.get(name, cat.ROOT_QUEUE) != cat.ROOT_QUEUE:
            name = parent_of[name]
        return name

    def under(name: str, ancestor: str) -> bool:
        while name != cat.ROOT_QUEUE and name in parent_of:
            if name == ancestor:
                return True
            name = parent_of[name]
        return False

    mapping: dict[str, str] = {}
    used: list[str] = []
    for name in example_queues:
        free = [leaf for leaf in leaves if leaf not in used] or leaves
        if name in leaves:
            choice = name
        elif any(q.name == name for q in declared):
            choice = next((leaf for leaf in free if under(leaf, name)), free[0])
        else:
            tops = {top(u) for u in used}
            choice = next((leaf for leaf in free if top(leaf) not in tops), free[0])
        mapping[name] = choice
        used.append(choice)
    return mapping


def remap_queues(documents: list[Document], mapping: dict[str, str]) -> list[Document]:
    """The documents with queues renamed (PodGroups, Workload jobs, and group-less pods' queue
    annotation); Queue objects of renamed queues dropped."""
    out: list[Document] = []
    for source, doc in flatten(documents):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == "Queue" and doc.get("metadata", {}).get("name") in mapping:
            continue
        doc = copy.deepcopy(doc)
        if kind == "PodGroup":
            spec = doc.setdefault("spec", {})
            spec["queue"] = mapping.get(spec.get("queue", cat.DEFAULT_QUEUE), spec.get("queue", cat.DEFAULT_QUEUE))
        elif kind == WORKLOAD_KIND:
            for job in doc.get("spec", {}).get("jobs", []):
                if isinstance(job, dict) and job.get("queue") in mapping:
                    job["queue"] = mapping[job["queue"]]
        elif kind == "Pod":
            annotations = doc.get("metadata", {}).get("annotations") or {}
            if isinstance(annotations, dict) and annotations.get(QUEUE_ANNOTATION) in mapping:
                annotations[QUEUE_ANNOTATION] = mapping[annotations[QUEUE_ANNOTATION]]
        out.append((source, doc))
    return out


def example_scenario(plan: Plan) -> Scenario:
    mapping = queue_mapping(plan)
    cluster = remap_queues(read_documents(EXAMPLE_CLUSTER), mapping)
    workload = remap_queues(read_documents(EXAMPLE_WORKLOAD), mapping)
    shown = ", ".join(f"{k} -> {v}" for k, v in mapping.items() if k != v)
    description = "built-in example: 8 nodes (2 with 8 GPUs), about an hour of API, notebook, ETL and training jobs"
    if shown:
        description += f" (example queues: {shown})"
    return build_scenario(cluster, workload, mapping, description)


def load_scenario(plan: Plan, snapshot: str | Path | None = None, workload: str | Path | None = None,
                  rename: dict[str, str] | None = None) -> Scenario:
    """The run's inputs from files (see `scenario_from_documents`), with queues renamed as
    `rename` says (old name -> new). Raises ObjectError naming bad objects."""
    parts = []
    if snapshot is not None:
        parts.append(f"snapshot {snapshot}")
    if workload is not None:
        parts.append(f"workload {workload}")
    documents = [read_documents(path) if path is not None else None for path in (snapshot, workload)]
    if rename:
        documents = [remap_queues(d, rename) if d is not None else None for d in documents]
        parts.append("queues renamed " + ", ".join(f"{old} -> {new}" for old, new in rename.items()))
    return scenario_from_documents(plan, documents[0], documents[1], ", ".join(parts))


def scenario_from_documents(plan: Plan, snapshot: list[Document] | None, workload: list[Document] | None,
                            description: str = "") -> Scenario:
    """Neither input: the built-in example. Only a workload: it runs on the example cluster
    unless it brings Nodes of its own. Only a snapshot: the snapshot's pods are the whole
    workload."""
    if snapshot is None and workload is None:
        return example_scenario(plan)
    workload = workload or []
    if snapshot is None:
        if any(isinstance(d, dict) and d.get("kind") == "Node" for _, d in flatten(workload)):
            snapshot = []
        else:
            snapshot = read_documents(EXAMPLE_CLUSTER)
            description += " on the built-in example cluster"
    return build_scenario(snapshot, workload, description=description)
