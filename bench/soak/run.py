"""The soak: a dev cluster, two scheduler replicas, a job stream, faults, and the checker after
every step. `run(options)` returns the `Outcome` the report is made from."""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
import traceback
import urllib.error

import yaml
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.soak import rss
from bench.soak.checker import Checker, Limits, Violation, World
from bench.soak.faults import FaultInjector, Injected, Policies, create_node
from bench.soak.kubelet import KubeletStandIn
from bench.soak.observe import VOLCANO, PodFeed, Reader, Unreachable
from bench.soak.replicas import LEASE_NAME, LEASE_NAMESPACE, Replica
from bench.soak.workload import (OBJECT_QUEUES, PRIORITY_CLASSES, VOLCANO_API, JobStream, initial_nodes,
                                 priority_class_body, queue_body)
from policydsl.cli import devcluster
from runtime.kube.api import ApiError, KubeApi, connect

SCHEDULER_NAME = "soak"
PERMANENT_NAMESPACES = ("soak-a", "soak-b")
STEP_S = 1.0  # the checker runs this often
RSS_EVERY_S = 5.0
BACKLOG_PODS = 120  # the stream waits while this many of its pods are pending
SETTLE_S = 30.0  # after the last job and fault: pending pods that fit get their chance

POLICY = """policy "soak" version 1

actions [enqueue, allocate, preempt, backfill]

tier "jobs" {
  plugin priority
  plugin gang
  plugin conformance
}

tier "placement" {
  plugin overcommit
  plugin drf
  plugin predicates
  plugin proportion
  plugin deviceshare {
    gpu_sharing = true
  }
  plugin nodeorder
  plugin binpack%(binpack)s
}

queue default {
  weight = 1
}

queue prod {
  weight = %(prod_weight)d
  guarantee = { cpu: 4, memory: 8Gi }
}

queue batch {
  weight = 2
  capability = { cpu: 12, memory: 48Gi }
}
"""
GOOD_POLICIES = (POLICY % {"binpack": "", "prod_weight": 3}, POLICY % {"binpack": " weight 3", "prod_weight": 4})
BAD_POLICIES = (
    POLICY % {"binpack": "", "prod_weight": 3} + "\nqueue broken {\n  weight = \n}\n",  # a syntax error
    (POLICY % {"binpack": "", "prod_weight": 3}).replace("plugin drf", "plugin no_such_plugin"),  # unknown plugin
)


@dataclass(frozen=True)
class Options:
    minutes: float
    seed: int
    cpu_nodes: int = 6
    gpu_nodes: int = 2
    job_interval_s: float = 0.8  # mean time between jobs
    fault_interval_s: float | None = None  # default: every kind about 8 times over the run, 8-30 s apart
    rss_warmup_s: float = 120.0
    multi_card_gpu: bool = False  # see JobStream
    limits: Limits = field(default_factory=lambda: Limits(SCHEDULER_NAME))
    workdir: Path | None = None  # kept when given (logs of the cluster and the replicas)


@dataclass(frozen=True)
class Outcome:
    options: Options
    started: float  # time.time() at the start: violations' `at` and the checker's times are absolute
    seconds: float
    injected: tuple[Injected, ...]
    fault_errors: tuple[str, ...]
    replica_exits: tuple[str, ...]
    checks: dict[str, int]
    steps: int
    fit_evaluations: int
    uncontended_steps: int
    violations: tuple[Violation, ...]
    rss_samples: tuple[rss.Sample, ...]
    rss_instances: tuple[rss.Instance, ...]
    latencies: tuple[float, ...]
    slowest: tuple[tuple[float, str], ...]  # the slowest binds, slowest first
    jobs: dict[str, int]
    pods_created: int
    kubelet: dict[str, int]
    reloads: dict[str, int]
    paused_steps: int
    checker_errors: tuple[str, ...]  # a check that raised (the run went on)


class Namespaces:
    """Where jobs go: two namespaces that stay, and a temporary one that the namespace-delete
    fault deletes (with its pods) and that is then replaced by a new one."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._made = 0
        self._lock = threading.Lock()
        self.temp = self._new_temp()

    def _new_temp(self) -> str:
        self._made += 1
        name = f"soak-tmp{self._made}"
        ensure_namespace(self.api, name)
        return name

    def pick(self, rng: random.Random) -> str:
        with self._lock:
            return self.temp if rng.random() < 0.3 else rng.choice(PERMANENT_NAMESPACES)

    def take_temp(self) -> str:
        """The namespace to delete; jobs go to a fresh one from now on."""
        with self._lock:
            doomed, self.temp = self.temp, self._new_temp()
            return doomed


def ensure_namespace(api: KubeApi, name: str) -> None:
    try:
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except ApiError as exc:
        if exc.status != 409:
            raise


def _setup(api: KubeApi, rng: random.Random, options: Options) -> None:
    for namespace in (*PERMANENT_NAMESPACES, LEASE_NAMESPACE):
        ensure_namespace(api, namespace)
    for name, value in PRIORITY_CLASSES.items():
        api.post("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class_body(name, value))
    for name, spec in OBJECT_QUEUES.items():
        api.post(f"{VOLCANO}/queues", queue_body(name, spec))
    for node in initial_nodes(rng, options.cpu_nodes, options.gpu_nodes):
        create_node(api, node)


class Stream:
    """The job stream's thread: a job every `interval` (exponential), unless the backlog is full."""

    def __init__(self, api: KubeApi, jobs: JobStream, namespaces: Namespaces, kubelet: KubeletStandIn,
                 feed: PodFeed, rng: random.Random, interval: float) -> None:
        self.api, self.jobs, self.namespaces, self.kubelet, self.feed = api, jobs, namespaces, kubelet, feed
        self.rng = rng
        self.interval = interval
        self.kinds: Counter[str] = Counter()
        self.pods_created = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-stream", daemon=True)

    def start(self) -> Stream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _backlog(self) -> int:
        return sum(1 for p in self.feed.pods() if (p.get("spec") or {}).get("schedulerName") == SCHEDULER_NAME
                   and not (p.get("spec") or {}).get("nodeName"))

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.expovariate(1.0 / self.interval)):
            if self._backlog() >= BACKLOG_PODS:
                continue
            job = self.jobs.next(self.namespaces.pick(self.rng))
            made = 0
            try:
                if job.podgroup is not None:
                    self.api.post(f"{VOLCANO}/namespaces/{job.namespace}/podgroups", job.podgroup)
                for pod in job.pods:
                    self.api.post(f"/api/v1/namespaces/{job.namespace}/pods", pod)
                    made += 1
            except ApiError:
                self.errors += 1  # the API server restarting, or the namespace being deleted
            self.pods_created += made
            if made:
                self.kinds[job.kind] += 1
                # Told the whole size: a job cut short by an API error counts as having lost pods,
                # and is removed instead of waiting forever as a gang below its minimum.
                self.kubelet.job_created(job.namespace, job.name, len(job.pods))


def _world(reader: Reader, feed: PodFeed) -> World:
    now = time.time()
    return World(now=now, nodes=reader.items("/api/v1/nodes"), pods=feed.pods(),
                 podgroups=reader.items(f"{VOLCANO}/podgroups"), queues=reader.items(f"{VOLCANO}/queues"),
                 namespaces=reader.items("/api/v1/namespaces"),
                 leader=reader.lease_holder(LEASE_NAMESPACE, LEASE_NAME))


def _dump(world: World, path: Path) -> None:
    """The objects of a check as one YAML stream (`policydsl simulate --snapshot` reads it), to
    replay the cycle before a violation."""
    kinds = (("v1", "Node", world.nodes), ("v1", "Pod", world.pods), ("v1", "Namespace", world.namespaces),
             (VOLCANO_API, "PodGroup", world.podgroups), (VOLCANO_API, "Queue", world.queues))
    docs = [{"apiVersion": api, "kind": kind, **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
            for api, kind, objects in kinds for obj in objects]
    docs += [priority_class_body(name, value) for name, value in PRIORITY_CLASSES.items()]
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def _reload_counts(replicas: list[Replica]) -> dict[str, int]:
    text = "\n".join(r.log_text() for r in replicas)
    return {"reloaded": text.count("policy reloaded ("), "rejected": text.count("policy reload (")}


def run(options: Options, progress: Any = print) -> Outcome:
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="policydsl-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cluster_dir, logs = workdir / "cluster", workdir / "logs"
    logs.mkdir(exist_ok=True)
    rng = random.Random(options.seed)
    cluster = devcluster.up(cluster_dir)
    replicas: list[Replica] = []
    threads: list[Any] = []
    try:
        api = connect(str(cluster.kubeconfig))
        _setup(api, rng, options)
        policy = workdir / "soak.policy"
        policy.write_text(GOOD_POLICIES[0])
        replicas = [Replica(identity, policy, cluster.kubeconfig, SCHEDULER_NAME, logs) for identity in ("r0", "r1")]
        for replica in replicas:
            replica.start()
        reader = Reader(cluster.server, cluster.token, str(cluster.ca_cert))
        started = time.time()
        checker = Checker(options.limits, started)
        feed = PodFeed(reader, checker.saw_pod).start()
        kubelet = KubeletStandIn(connect(str(cluster.kubeconfig)), SCHEDULER_NAME, random.Random(rng.random()))
        namespaces = Namespaces(api)
        seconds = options.minutes * 60.0
        interval = options.fault_interval_s or min(30.0, max(8.0, seconds / (8 * 11)))

        def temp_namespace() -> str | None:
            return namespaces.take_temp()

        def leader() -> str:
            try:
                return reader.lease_holder(LEASE_NAMESPACE, LEASE_NAME)
            except (Unreachable, urllib.error.HTTPError):
                return ""

        faults = FaultInjector(connect(str(cluster.kubeconfig)), cluster_dir, replicas, kubelet,
                               Policies(policy, GOOD_POLICIES, BAD_POLICIES), random.Random(rng.random()), leader,
                               temp_namespace, started, interval)
        stream = Stream(connect(str(cluster.kubeconfig)), JobStream(random.Random(rng.random()), SCHEDULER_NAME, options.multi_card_gpu),
                        namespaces, kubelet, feed, random.Random(rng.random()), options.job_interval_s)
        kubelet.start()
        threads = [stream.start(), faults.start(), kubelet, feed]
        samples: list[rss.Sample] = []
        previous: World | None = None
        checker_errors: list[str] = []
        dumps = workdir / "violations"
        steps = paused = 0
        next_rss = 0.0
        load_until = started + seconds
        end = load_until + SETTLE_S
        stopped_load = False
        last_report = started
        while time.time() < end:
            step_began = time.time()
            if not stopped_load and step_began >= load_until:
                stream.stop()
                faults.stop()
                faults.finish()  # every node restored, the good policy back, both replicas up
                stopped_load = True
            if step_began >= next_rss:
                for replica in replicas:
                    pid = replica.pid
                    mib = rss.read_rss_mib(pid) if pid else None
                    if pid and mib is not None:
                        samples.append(rss.Sample(step_began - started, replica.identity, pid, mib))
                next_rss = step_began + RSS_EVERY_S
            try:
                world = _world(reader, feed)
            except (Unreachable, urllib.error.HTTPError):
                checker.pause(time.time())  # nothing can bind while the API server is away
                paused += 1
            else:
                if world.now - faults.disruption_until < STEP_S:
                    checker.pause(world.now)
                try:
                    found = checker.check(world)
                except Exception:  # noqa: BLE001 - a checker bug must not end a 30-minute run unseen
                    checker_errors.append(traceback.format_exc())
                    progress(f"CHECKER ERROR {checker_errors[-1]}")
                    found = []
                for violation in found:
                    progress(f"VIOLATION {violation}")
                if found and options.workdir is not None:
                    dumps.mkdir(exist_ok=True)
                    _dump(world, dumps / f"step{steps}-after.yaml")
                    if previous is not None:
                        _dump(previous, dumps / f"step{steps}-before.yaml")
                previous = world
                steps += 1
            if time.time() - last_report >= 60:
                last_report = time.time()
                progress(f"{(last_report - started) / 60:.0f} min: {stream.pods_created} pods created, "
                         f"{len(checker.latencies)} bound, {len(faults.injected)} faults, "
                         f"{len(checker.violations)} violations")
            time.sleep(max(0.0, STEP_S - (time.time() - step_began)))
        if not stopped_load:
            stream.stop()
            faults.stop()
            faults.finish()
        return Outcome(
            options=options, started=started, seconds=time.time() - started, injected=tuple(faults.injected),
            fault_errors=tuple(faults.errors), replica_exits=tuple(faults.exits), checks=dict(checker.checks), steps=steps,
            fit_evaluations=checker.fit_evaluations, uncontended_steps=checker.uncontended_steps, violations=tuple(checker.violations),
            rss_samples=tuple(samples), rss_instances=tuple(rss.instances(samples, options.rss_warmup_s)),
            latencies=tuple(checker.latencies), slowest=tuple(sorted(checker.slowest, reverse=True)), jobs=dict(stream.kinds), pods_created=stream.pods_created,
            kubelet=dict(kubelet.actions), reloads=_reload_counts(replicas), paused_steps=paused,
            checker_errors=tuple(checker_errors))
    finally:
        for thread in threads:
            thread.stop()
        for replica in replicas:
            replica.terminate(timeout=15)
        devcluster.down(cluster_dir)
        if options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
