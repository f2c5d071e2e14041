"""The soak's cluster and job stream: nodes, queues, priority classes and jobs as API objects
(dicts), all drawn from one seeded RNG so that a seed names a run.

A job is a gang (a PodGroup with minMember, its pods annotated with the group), a single pod, a
GPU-sharing pod (volcano.sh/gpu-memory on cards of volcano.sh/gpu-number), or a small set of
pods under one placement rule: required pod anti-affinity, zone topology spread, a node
selector, required node affinity, a toleration of the soak's fault taint, or a host port.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
JOB_LABEL = "soak.policydsl.io/job"
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONES = ("zone-a", "zone-b", "zone-c")
NODE_KIND_LABEL = "soak.policydsl.io/kind"
FAULT_TAINT = "soak.policydsl.io/fault"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY = "volcano.sh/gpu-memory"
CARDS_PER_GPU_NODE = 4
CARD_MIB = 16384

# The policy's queues (published as Queue objects by the scheduler) and one that exists only as
# a Volcano Queue object, created by the soak: both kinds of queue are read by the checker the same way.
POLICY_QUEUES = ("default", "prod", "batch")
OBJECT_QUEUES: dict[str, dict[str, Any]] = {
    "research": {"weight": 1, "reclaimable": True, "capability": {"cpu": "8", "memory": "32Gi"}},
}
QUEUES = POLICY_QUEUES + tuple(OBJECT_QUEUES)
PRIORITY_CLASSES = {"soak-high": 1000, "soak-low": 10}

# Job kinds and how often each comes.
KINDS = {"single": 30, "gang": 22, "gpu": 12, "anti-affinity": 8, "spread": 8, "selector": 6, "affinity": 5,
         "toleration": 5, "host-port": 4}


@dataclass(frozen=True)
class Job:
    namespace: str
    name: str
    kind: str
    pods: tuple[dict[str, Any], ...]
    podgroup: dict[str, Any] | None = None


def node_body(name: str, rng: random.Random, *, gpu: bool = False) -> dict[str, Any]:
    """A node as a kubelet registers it (allocatable == capacity, Ready), in a random zone."""
    resources: dict[str, str] = {"cpu": "8", "memory": "32Gi", "pods": "40"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", ZONE_LABEL: rng.choice(ZONES),
              NODE_KIND_LABEL: "gpu" if gpu else "cpu"}
    if gpu:
        resources |= {GPU_NUMBER: str(CARDS_PER_GPU_NODE), GPU_MEMORY: str(CARDS_PER_GPU_NODE * CARD_MIB)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": resources, "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "soak node (kubelet stand-in)"}]}}


def queue_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def priority_class_body(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


class JobStream:
    """Jobs, one `next()` at a time, for the scheduler named `scheduler`."""

    def __init__(self, rng: random.Random, scheduler: str, multi_card_gpu: bool = False) -> None:
        self.rng = rng
        self.scheduler = scheduler
        # A shared-GPU pod on two cards (volcano.sh/gpu-number 2 beside gpu-memory): outside
        # Volcano's GPU sharing, which puts a memory request on one card, and the engine lets such
        # pods take more of a node's volcano.sh/gpu-number than the kubelet admits
        # (docs/reliability.md, findings); off unless asked for.
        self.multi_card_gpu = multi_card_gpu
        self.made = 0
        self._kinds, self._weights = list(KINDS), list(KINDS.values())

    def next(self, namespace: str) -> Job:
        self.made += 1
        kind = self.rng.choices(self._kinds, self._weights)[0]
        name = f"j{self.made}-{kind}"
        queue = self.rng.choice(QUEUES)
        priority = self.rng.choice((None, None, "soak-high", "soak-low"))
        if kind == "gang":
            size = self.rng.randint(2, 5)
            minimum = size if self.rng.random() < 0.7 else size - 1
            cpu, memory = self._size()
            pods = tuple(self._pod(namespace, f"{name}-{i}", name, cpu, memory, priority,
                                   annotations={GROUP_ANNOTATION: name}) for i in range(size))
            group = {"apiVersion": VOLCANO_API, "kind": "PodGroup",
                     "metadata": {"name": name, "namespace": namespace},
                     "spec": {"minMember": minimum, "queue": queue,
                              **({"priorityClassName": priority} if priority else {})}}
            return Job(namespace, name, kind, pods, group)
        annotations = {QUEUE_ANNOTATION: queue}
        if kind == "gpu":
            cards = 2 if self.rng.random() < 0.15 and self.multi_card_gpu else 1
            mib = self.rng.choice((2048, 4096, 4096, 8192, 12288))
            extra = {GPU_MEMORY: str(mib), **({GPU_NUMBER: str(cards)} if cards > 1 else {})}
            pod = self._pod(namespace, name, name, "500m", "1Gi", priority, annotations=annotations, extra=extra)
            return Job(namespace, name, kind, (pod,))
        cpu, memory = self._size()
        if kind in ("anti-affinity", "spread"):
            count = self.rng.randint(2, 4)
            app = {"soak.policydsl.io/app": name}
            pods = []
            for i in range(count):
                pod = self._pod(namespace, f"{name}-{i}", name, cpu, memory, priority, annotations=annotations,
                                labels=app)
                if kind == "anti-affinity":
                    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": app}, "topologyKey": "kubernetes.io/hostname"}]}}
                else:
                    pod["spec"]["topologySpreadConstraints"] = [
                        {"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                         "labelSelector": {"matchLabels": app}}]
                pods.append(pod)
            return Job(namespace, name, kind, tuple(pods))
        pod = self._pod(namespace, name, name, cpu, memory, priority, annotations=annotations)
        spec = pod["spec"]
        if kind == "selector":
            spec["nodeSelector"] = {ZONE_LABEL: self.rng.choice(ZONES)}
        elif kind == "affinity":
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": ZONE_LABEL, "operator": "NotIn", "values": [self.rng.choice(ZONES)]},
                    {"key": NODE_KIND_LABEL, "operator": "In", "values": ["cpu"]}]}]}}}
        elif kind == "toleration":
            spec["tolerations"] = [{"key": FAULT_TAINT, "operator": "Exists",
                                    **({"effect": self.rng.choice(("NoSchedule", "NoExecute"))}
                                       if self.rng.random() < 0.5 else {})}]
        elif kind == "host-port":
            spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 18000 + self.rng.randint(0, 2)}]
        return Job(namespace, name, kind, (pod,))

    def _size(self) -> tuple[str, str]:
        cpu = self.rng.choice((100, 250, 500, 500, 1000, 1000, 1500, 2000))
        memory = self.rng.choice((128, 256, 512, 1024, 2048, 4096))
        return f"{cpu}m", f"{memory}Mi"

    def _pod(self, namespace: str, name: str, job: str, cpu: str, memory: str, priority: str | None, *,
             annotations: dict[str, str], labels: dict[str, str] | None = None,
             extra: dict[str, str] | None = None) -> dict[str, Any]:
        resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory, **(extra or {})}}
        if extra:
            resources["limits"] = dict(extra)  # extended resources need a limit equal to the request
        spec: dict[str, Any] = {"schedulerName": self.scheduler, "terminationGracePeriodSeconds": 5,
                                "containers": [{"name": "main", "image": "busybox", "resources": resources}]}
        # Some pods carry an init container larger than their main one: the checker must count it as
        # the kubelet does. (No overhead: the API server admits one only from a RuntimeClass.)
        if self.rng.random() < 0.1:
            spec["initContainers"] = [{"name": "init", "image": "busybox",
                                       "resources": {"requests": {"cpu": "1500m", "memory": "512Mi"}}}]
        if priority:
            spec["priorityClassName"] = priority
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations),
                             "labels": {JOB_LABEL: job, **(labels or {})}},
                "spec": spec}


def initial_nodes(rng: random.Random, cpu_nodes: int, gpu_nodes: int) -> Sequence[dict[str, Any]]:
    return [node_body(f"soak-n{i}", rng) for i in range(cpu_nodes)] + \
        [node_body(f"soak-g{i}", rng, gpu=True) for i in range(gpu_nodes)]
