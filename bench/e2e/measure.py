"""What one run measured, and the API server's request counter it reads.

Throughput is pods bound over the time from the first create request sent to
the last bind seen. Latency per pod is the local receive time of the watch
event showing its spec.nodeName minus that of its ADDED event, both from one
watch started before anything was created (metadata.creationTimestamp has
whole-second resolution, too coarse to time a bind). Requests per pod are the
increase of the API server's `apiserver_request_total` over the run, less the
harness's own requests, divided by the pods bound.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

RequestKey = tuple[str, str, str]  # (verb, resource, subresource)


def request_totals(server: str, token: str, ca_cert: Path) -> Counter[RequestKey]:
    """The API server's `apiserver_request_total`, summed over codes and scopes, per verb/resource/subresource.

    Requests to non-resource paths (/metrics, /healthz, /readyz) are left out:
    the harness scrapes /metrics itself, and no scheduler's work goes there.
    """
    request = urllib.request.Request(f"{server}/metrics", headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(ca_cert))
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        text = response.read().decode()
    totals: Counter[RequestKey] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":  # the parser drops the counter's _total suffix
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total") or not sample.labels.get("resource"):
                continue
            labels = sample.labels
            totals[(labels.get("verb", ""), labels["resource"], labels.get("subresource", ""))] += int(sample.value)
    return totals


@dataclass(frozen=True)
class PodTimes:
    name: str
    added_ns: int
    bound_ns: int  # 0: never bound
    node: str


def read_watch_records(path: Path) -> list[PodTimes]:
    """The TSV `loadgen watch` writes: name, added ns, bound ns (0 if never), node."""
    records = []
    for line in path.read_text().splitlines():
        name, added, bound, node = line.split("\t")
        records.append(PodTimes(name, int(added), int(bound), node))
    return records


@dataclass(frozen=True)
class RunResult:
    workload: str  # Workload.key
    scheduler: str  # Scheduler.key
    variant: int | None
    pods: int  # in the workload
    bound: int
    seconds: float  # first create sent → last bind seen (or the end of the run if none)
    pods_per_s: float  # bound / seconds
    p50_ms: float | None  # create → bind, over bound pods
    p99_ms: float | None
    scheduler_requests: int  # API requests over the run that were not the harness's
    requests_per_pod: float | None  # scheduler_requests / bound
    create_per_s: float  # how fast the harness created the workload's objects
    timed_out: bool
    # Every API request over the run, the harness's included: "VERB resource[/sub]" → count.
    requests_by_kind: dict[str, int] = field(default_factory=dict)
    error: str = ""  # set when the run could not happen (binary missing, failed to start, ...)
    # Processor time per pod bound over the same window as the requests (user + system, from
    # /proc): the scheduler's own, and the control plane's (kube-apiserver and etcd). On a
    # machine where they share the cores, every millisecond of the first is taken from the second.
    scheduler_cpu_ms_per_pod: float | None = None
    control_plane_cpu_ms_per_pod: float | None = None
    repetition: int = 1  # which of --repeat's rounds (1 when the runs were not repeated)
    # What the independent placement checker found wrong in the final placement (None: not
    # checked): how many violations, how many per rule, and the first few as examples.
    violations: int | None = None
    violations_by_rule: dict[str, int] = field(default_factory=dict)
    violation_examples: list[str] = field(default_factory=list)
    # On a workload with network topology (bench/e2e/topology_check.py): of the gangs with a pod
    # bound, how many lie whole within one HyperNode of `topology_tier`, and a few that do not.
    topology_tier: int | None = None
    gangs_with_pods: int | None = None
    gangs_within_tier: int | None = None
    topology_examples: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.error and self.bound == self.pods

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def failed(cls, workload: str, scheduler: str, variant: int | None, pods: int, error: str,
               repetition: int = 1) -> RunResult:
        return cls(workload, scheduler, variant, pods, 0, 0.0, 0.0, None, None, 0, None, 0.0, False, {}, error,
                   repetition=repetition)


def summarize(
    *,
    workload: str,
    scheduler: str,
    variant: int | None,
    pods: int,
    records: list[PodTimes],
    first_create_ns: int,
    last_create_ns: int,
    end_ns: int,
    objects_created: int,
    requests_before: Counter[RequestKey],
    requests_after: Counter[RequestKey],
    harness_requests: int,
    timed_out: bool,
    scheduler_cpu_s: float | None = None,
    control_plane_cpu_s: float | None = None,
    repetition: int = 1,
) -> RunResult:
    """Turn a run's raw observations into its figures."""
    bound = [r for r in records if r.bound_ns]
    last_bind_ns = max((r.bound_ns for r in bound), default=end_ns)
    seconds = max(last_bind_ns - first_create_ns, 1) / 1e9
    latencies_ms = np.array([(r.bound_ns - r.added_ns) / 1e6 for r in bound])
    p50, p99 = (np.percentile(latencies_ms, [50, 99]).tolist() if len(bound) else (None, None))

    delta = requests_after - requests_before  # Counter subtraction keeps positive counts only
    by_kind = {
        f"{verb} {resource}{'/' + sub if sub else ''}": count
        for (verb, resource, sub), count in sorted(delta.items(), key=lambda item: -item[1])
    }
    scheduler_requests = max(sum(delta.values()) - harness_requests, 0)
    create_seconds = max(last_create_ns - first_create_ns, 1) / 1e9
    return RunResult(
        workload=workload,
        scheduler=scheduler,
        variant=variant,
        pods=pods,
        bound=len(bound),
        seconds=round(seconds, 3),
        pods_per_s=round(len(bound) / seconds, 1),
        p50_ms=None if p50 is None else round(p50, 1),
        p99_ms=None if p99 is None else round(p99, 1),
        scheduler_requests=scheduler_requests,
        requests_per_pod=round(scheduler_requests / len(bound), 2) if bound else None,
        create_per_s=round(objects_created / create_seconds, 1),
        timed_out=timed_out,
        requests_by_kind=by_kind,
        scheduler_cpu_ms_per_pod=_per_pod_ms(scheduler_cpu_s, len(bound)),
        control_plane_cpu_ms_per_pod=_per_pod_ms(control_plane_cpu_s, len(bound)),
        repetition=repetition,
    )


def _per_pod_ms(seconds: float | None, pods: int) -> float | None:
    return round(seconds * 1000 / pods, 2) if seconds is not None and pods else None


def cpu_seconds(*pids: int) -> float | None:
    """User + system processor seconds the live processes `pids` have used so far (Linux
    /proc/PID/stat); None when any cannot be read (gone, or not Linux)."""
    total = 0.0
    for pid in pids:
        try:
            # Fields after the command name, which may itself hold spaces and parentheses.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total / os.sysconf("SC_CLK_TCK")
