"""Simulator input: the cluster at time 0 and the jobs that arrive later, with how long they run.

Two inputs, both Kubernetes objects (YAML or JSON files, or folders of them):

- the *snapshot*: the cluster at time 0 (Nodes, Queues, PriorityClasses, Pods, PodGroups);
- the *workload*: Pods and PodGroups that arrive over time, and `kind: Workload` documents
  that generate them from job templates (see docs/simulator.md).

Timing comes from annotations on Pods and PodGroups:
`simulation.policydsl.io/arrival: 30s` (when the object is created; default 0) and
`simulation.policydsl.io/duration: 10m` (how long a pod runs once bound; a pod without one
inherits its PodGroup's, and without either it runs until the simulation ends). Every problem
names its object (`runtime.cluster.objects.ObjectProblem`); they are reported together as one
`ObjectError`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from compiler.quantities import format_base_units, to_base_units
from policydsl.diagnostics import did_you_mean
from runtime.cluster.model import ClusterState, Pod, PodGroup, group_key_of
from runtime.cluster.objects import ObjectError, ObjectProblem, load_objects

ARRIVAL_ANNOTATION = "simulation.policydsl.io/arrival"
DURATION_ANNOTATION = "simulation.policydsl.io/duration"
WORKLOAD_API = "simulation.policydsl.io/v1alpha1"
WORKLOAD_KIND = "Workload"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"

Document = tuple[str, Any]          # (source file, parsed object)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """`30s`, `10m`, `2h`, `1h30m`, `1.5h`, `500ms` or a number of seconds -> seconds.

    Raises ValueError with a readable message."""
    if isinstance(value, bool):
        raise ValueError(f"`{value}` is not a duration (examples: 30s, 10m, 2h)")
    if isinstance(value, (int, float)):
        return _checked(float(value), value)
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return _checked(seconds, value)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"`{value}` is not a duration (examples: 30s, 10m, 2h, 1h30m)")
    return _checked(total, value)


def _checked(seconds: float, value: Any) -> float:
    # float() reads "nan" and "inf" too: neither is a time the simulator can count cycles to.
    if not math.isfinite(seconds):
        raise ValueError(f"`{value}` is not a finite duration")
    if seconds < 0:
        raise ValueError(f"`{value}` is negative")
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as the shortest readable duration: 45s, 12m30s, 2h5m, 1.5s."""
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds != int(seconds) else f"{int(seconds)}s"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{hours}h" if hours else ""
    if minutes:
        out += f"{minutes}m"
    if secs and not hours:
        out += f"{secs}s"
    return out or "0s"


# --- reading --------------------------------------------------------------------------------

def flatten(documents: Iterable[Document]) -> list[Document]:
    """`List` objects (what `kubectl get -o yaml` prints) become their items; a malformed List
    is left whole for the object loader to report."""
    out: list[Document] = []
    for source, doc in documents:
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            out.extend(flatten((source, item) for item in doc["items"]))
        else:
            out.append((source, doc))
    return out


# --- the scenario ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Arrival:
    """A Pod or PodGroup created at `time` (a template: the simulator adds a copy)."""

    time: float
    pod: Pod | None = None
    podgroup: PodGroup | None = None


@dataclass
class Scenario:
    initial: ClusterState                       # the cluster at time 0
    arrivals: list[Arrival]                     # later objects, by time
    durations: dict[str, float]                 # pod key -> seconds it runs once bound
    queue_map: dict[str, str] = field(default_factory=dict)   # example queue -> policy queue
    description: str = ""
    # Every object of both inputs, Workload generators expanded (runtime.simulation.snapshot_out
    # writes the state at a time T from them).
    documents: list[Document] = field(default_factory=list, repr=False)

    @property
    def last_arrival(self) -> float:
        return self.arrivals[-1].time if self.arrivals else 0.0


def copy_pod(pod: Pod, uid_suffix: str = "") -> Pod:
    """A fresh pod from a template (the engine mutates annotations and devices of live pods)."""
    return dataclasses.replace(pod, annotations=dict(pod.annotations), labels=dict(pod.labels), devices={},
                               uid=pod.uid + uid_suffix)


def copy_podgroup(group: PodGroup) -> PodGroup:
    return dataclasses.replace(group, conditions=[])


def build_scenario(snapshot: list[Document], workload: list[Document], queue_map: dict[str, str] | None = None,
                   description: str = "") -> Scenario:
    """Load both inputs as one set of objects (so every problem is reported at once and a
    PodGroup may name a Queue of either input), then split off the objects that arrive later."""
    problems: list[ObjectProblem] = []
    documents: list[Document] = []
    # Workload generators may sit in either input; what they make arrives like any object.
    for source, doc in flatten(snapshot) + flatten(workload):
        if isinstance(doc, dict) and doc.get("kind") == WORKLOAD_KIND:
            documents.extend(expand_workload(source, doc, problems))
        else:
            documents.append((source, doc))
    problems.extend(_duplicates(documents))
    timing = _timing(documents, problems)
    try:
        state = load_objects(documents)
    except ObjectError as err:
        problems.extend(err.problems)
    if problems:
        raise ObjectError(problems)

    durations: dict[str, float] = {}
    pod_arrival: dict[str, float] = {}
    members: dict[str, list[str]] = {}
    for key, pod in state.pods.items():
        own, duration = timing.get(("Pod", key), (None, None))
        group_key = group_key_of(pod) if pod.group else None
        group_time, group_duration = timing.get(("PodGroup", group_key), (None, None)) if group_key else (None, None)
        duration = duration if duration is not None else group_duration
        if duration is not None:
            durations[key] = duration
        arrive = own if own is not None else (group_time or 0.0)
        pod_arrival[key] = arrive
        if group_key:
            members.setdefault(group_key, []).append(key)
        if arrive > 0 and pod.node_name:
            problems.append(ObjectProblem(_source_of(documents, "Pod", key), "Pod", key,
                                          "a pod already on a node cannot arrive later (drop nodeName or the "
                                          f"{ARRIVAL_ANNOTATION} annotation)"))
    if problems:
        raise ObjectError(problems)
    arrivals = [Arrival(t, pod=state.pods[key]) for key, t in pod_arrival.items() if t > 0]
    for key, group in state.podgroups.items():
        # A PodGroup without its own arrival comes with its first pod.
        own = timing.get(("PodGroup", key), (None, None))[0]
        arrive = own if own is not None else min((pod_arrival[k] for k in members.get(key, ())), default=0.0)
        if arrive > 0:
            arrivals.append(Arrival(arrive, podgroup=group))
    # Later objects leave the initial state; groups sort before their pods at equal times.
    for arrival in arrivals:
        if arrival.pod is not None:
            state.remove_pod(arrival.pod.key)
        else:
            state.remove_podgroup(arrival.podgroup.key)
    arrivals.sort(key=lambda a: (a.time, 0 if a.podgroup is not None else 1,
                                 a.podgroup.key if a.podgroup is not None else a.pod.key))
    return Scenario(state, arrivals, durations, dict(queue_map or {}), description, documents)


NAMESPACED_KINDS = ("Pod", "PodGroup", "PersistentVolumeClaim")


def _source_of(documents: list[Document], kind: str, key: str) -> str:
    return next((s for s, d in documents if isinstance(d, dict) and _identity(d) == (kind, key)), "<input>")


def _identity(doc: dict) -> tuple[str, str]:
    kind = str(doc.get("kind", ""))
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "")
    if kind in NAMESPACED_KINDS and name:
        return kind, f"{meta.get('namespace') or 'default'}/{name}"
    return kind, name


def _duplicates(documents: list[Document]) -> list[ObjectProblem]:
    seen: dict[tuple[str, str], str] = {}
    problems = []
    for source, doc in documents:
        if not isinstance(doc, dict):
            continue
        identity = _identity(doc)
        if not identity[1] or identity[0] not in ("Node", "Pod", "PodGroup", "Queue", "PriorityClass",
                                                  "PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode"):
            continue
        if identity in seen:
            problems.append(ObjectProblem(source, identity[0], identity[1],
                                          f"defined twice (first in {seen[identity]})"))
        else:
            seen[identity] = source
    return problems


def _timing(documents: list[Document], problems: list[ObjectProblem]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(kind, ns/name) -> (arrival, duration) from the simulation annotations of Pods and PodGroups."""
    out: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for source, doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") not in ("Pod", "PodGroup"):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
        identity = _identity(doc)
        values: list[float | None] = []
        for annotation in (ARRIVAL_ANNOTATION, DURATION_ANNOTATION):
            raw = annotations.get(annotation)
            if raw is None:
                values.append(None)
                continue
            try:
                values.append(parse_duration(raw))
            except ValueError as err:
                problems.append(ObjectProblem(source, identity[0], identity[1], f"annotation `{annotation}`: {err}"))
                values.append(None)
        out[identity] = (values[0], values[1])
    return out


# --- the generator form ---------------------------------------------------------------------

TEMPLATE_KEYS = ("name", "namespace", "queue", "count", "start", "interval", "arrivals", "duration", "replicas",
                 "minMember", "priorityClassName", "resources", "nodeSelector", "tolerations", "schedulerName",
                 "labels")


class _BadTemplate(Exception):
    pass


def expand_workload(source: str, doc: dict, problems: list[ObjectProblem]) -> list[Document]:
    """A `kind: Workload` document -> PodGroup and Pod dicts with the simulation annotations.

    Each job template makes `count` jobs named `<name>-<i>`, each a PodGroup of `replicas`
    pods `<name>-<i>-<r>` (minMember defaults to replicas; minResources is minMember pods'
    requests, as Volcano's job controller sets it)."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "")

    def problem(message: str) -> list[Document]:
        problems.append(ObjectProblem(source, WORKLOAD_KIND, name, message))
        return []

    if doc.get("apiVersion") != WORKLOAD_API:
        return problem(f"apiVersion must be {WORKLOAD_API}, found `{doc.get('apiVersion')}`")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return problem("missing `spec` (a mapping with `jobs`)")
    unknown = sorted(set(spec) - {"jobs", "seed"})
    if unknown:
        return problem(f"unknown field `spec.{unknown[0]}` (known: jobs, seed)")
    jobs = spec.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        return problem("`spec.jobs` must be a non-empty list of job templates")
    seed = spec.get("seed", 1)
    out: list[Document] = []
    for i, template in enumerate(jobs):
        where = f"spec.jobs[{i}]"
        try:
            if not isinstance(template, dict):
                raise _BadTemplate("must be a mapping")
            where = f"spec.jobs[{i}] ({template.get('name')})" if template.get("name") else where
            out.extend((source, obj) for obj in _expand_template(template, f"{seed}/{template.get('name')}"))
        except _BadTemplate as err:
            problem(f"`{where}`: {err}")
    return out


def _expand_template(t: dict, seed: str) -> list[dict]:
    for key in t:
        if key not in TEMPLATE_KEYS:
            hint = did_you_mean(str(key), TEMPLATE_KEYS)
            raise _BadTemplate(f"unknown field `{key}`" + (f"; {hint}" if hint else ""))
    name = t.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
        raise _BadTemplate("`name` must be a lowercase DNS label (a-z, 0-9, -)")
    count = _positive(t, "count", 1)
    replicas = _positive(t, "replicas", 1)
    min_member = _positive(t, "minMember", replicas)
    if min_member > replicas:
        raise _BadTemplate(f"`minMember` ({min_member}) is more than `replicas` ({replicas})")
    resources = t.get("resources")
    if not isinstance(resources, dict) or not resources:
        raise _BadTemplate("`resources` must be a mapping of requests, e.g. {cpu: 2, memory: 4Gi}")
    start = _duration(t, "start", 0.0)
    interval = _duration(t, "interval", 0.0)
    mode = t.get("arrivals", "fixed")
    if mode not in ("fixed", "poisson"):
        raise _BadTemplate(f"`arrivals` must be fixed or poisson, found `{mode}`")
    if mode == "poisson" and interval <= 0:
        raise _BadTemplate("poisson arrivals need a positive `interval` (the mean time between jobs)")
    sample_duration = _duration_sampler(t.get("duration"))
    rng = random.Random(seed)
    namespace = str(t.get("namespace") or "default")
    queue = str(t.get("queue") or "default")
    scheduler = str(t.get("schedulerName") or "volcano")
    pod_spec: dict[str, Any] = {"schedulerName": scheduler,
                                "containers": [{"name": "main", "resources": {"requests": dict(resources)}}]}
    for key in ("nodeSelector", "tolerations", "priorityClassName"):
        if t.get(key) is not None:
            pod_spec[key] = t[key]
    min_resources = {}
    for res, quantity in resources.items():
        min_resources[res] = _scaled_quantity(res, quantity, min_member)
    out: list[dict] = []
    when = start
    for j in range(count):
        if j > 0:
            when += rng.expovariate(1.0 / interval) if mode == "poisson" else interval
        arrival = round(when, 3)
        job = f"{name}-{j}"
        group_spec: dict[str, Any] = {"minMember": min_member, "queue": queue, "minResources": min_resources}
        if t.get("priorityClassName") is not None:
            group_spec["priorityClassName"] = t["priorityClassName"]
        out.append({"apiVersion": PODGROUP_API, "kind": "PodGroup",
                    "metadata": {"name": job, "namespace": namespace,
                                 "annotations": {ARRIVAL_ANNOTATION: f"{arrival}s"}},
                    "spec": group_spec})
        duration = sample_duration(rng)
        for r in range(replicas):
            annotations = {GROUP_ANNOTATION: job, ARRIVAL_ANNOTATION: f"{arrival}s"}
            if duration is not None:
                annotations[DURATION_ANNOTATION] = f"{duration}s"
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{job}-{r}", "namespace": namespace, "annotations": annotations,
                                     "labels": {**_strings(t.get("labels")), "simulation.policydsl.io/job": name}},
                        "spec": pod_spec})
    return out


def _positive(t: dict, key: str, default: int) -> int:
    value = t.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _BadTemplate(f"`{key}` must be a positive integer, found `{value}`")
    return value


def _duration(t: dict, key: str, default: float) -> float:
    if t.get(key) is None:
        return default
    try:
        return parse_duration(t[key])
    except ValueError as err:
        raise _BadTemplate(f"`{key}`: {err}") from None


def _duration_sampler(spec: Any):
    """`10m` (fixed), {min: 5m, max: 15m} (uniform) or {mean: 10m} (exponential), rounded to
    whole seconds; None runs until the end of the simulation."""
    if spec is None:
        return lambda rng: None
    if isinstance(spec, dict):
        keys = set(spec)
        try:
            if keys == {"min", "max"}:
                lo, hi = parse_duration(spec["min"]), parse_duration(spec["max"])
                if hi < lo:
                    raise _BadTemplate("`duration.max` is less than `duration.min`")
                return lambda rng: float(round(rng.uniform(lo, hi)))
            if keys == {"mean"}:
                mean = parse_duration(spec["mean"])
                if mean <= 0:
                    raise _BadTemplate("`duration.mean` must be positive")
                return lambda rng: float(max(1, round(rng.expovariate(1.0 / mean))))
        except ValueError as err:
            raise _BadTemplate(f"`duration`: {err}") from None
        raise _BadTemplate("`duration` must be a duration, {min, max} or {mean}")
    try:
        fixed = parse_duration(spec)
    except ValueError as err:
        raise _BadTemplate(f"`duration`: {err}") from None
    return lambda rng: fixed


def _scaled_quantity(resource: str, quantity: Any, times: int) -> str:
    try:
        units = to_base_units(str(resource), quantity if isinstance(quantity, (int, float)) else str(quantity))
    except ValueError as err:
        raise _BadTemplate(f"`resources.{resource}`: {err}") from None
    return format_base_units(str(resource), units * times)


def _strings(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _BadTemplate("`labels` must be a mapping of strings")
    return {str(k): str(v) for k, v in value.items()}
