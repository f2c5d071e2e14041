"""The side-by-side benchmark: every scheduler, the same workloads, one API server.

    python -m bench.e2e [--scale 0.1] [--only kube-scheduler,ceiling,a] [--timeout 600]
                        [--repeat 3] [--markdown docs/benchmarks.md] [--json results.json]

One dev cluster (policydsl.cli.devcluster, API-server rate limits off) serves the
whole run. For each workload the harness creates the fake nodes and queues,
then for each scheduler in turn (SCHEDULERS in bench/e2e/schedulers.py): a
fresh namespace, the scheduler started and proven live by binding a probe
pod, a watch started, the workload created by `loadgen create` at full speed,
and the run over when every pod is bound or at the timeout. Then the
scheduler is stopped and its pods and PodGroups deleted, and etcd's history
compacted before the next run, so runs are independent. With --repeat N
every scheduler runs N times per workload, round after round, and the
report takes each one's median run. See bench/e2e/measure.py for what is
measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from bench.e2e import binaries, report, topology_check, workloads
from bench.e2e.measure import RunResult, cpu_seconds, read_watch_records, request_totals, summarize
from bench.e2e.schedulers import PEERS, SCHEDULERS, SCHEDULER_NAME_PREFIX, Launch, Scheduler
from bench.e2e.workloads import WORKLOADS, Workload
from policydsl.cli import devcluster

# Rate limits off for the benchmark: every client here is system:masters and
# so exempt from priority and fairness anyway, but without APF the in-flight
# limits below are the only ones, and they are out of reach.
APISERVER_ARGS = (
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=10000",
    "--max-mutating-requests-inflight=5000",
)
STARTUP_TIMEOUT_S = 180.0  # scheduler start to probe pod bound (vc-scheduler syncs its caches first)
SETTLE_S = 2.0  # after the last bind, for trailing status writes to count against the scheduler
PROBE_NAMESPACE = "bench-probe"
# Before a run's first create, the API server and etcd must be nearly idle: the previous run's
# deletions, the Go garbage collection and etcd work they leave behind would otherwise be
# charged to whichever scheduler comes next (on two cores, up to a third of its throughput).
QUIET_CORES = 0.2  # API server + etcd processor use, in cores, over QUIET_WINDOW_S
QUIET_WINDOW_S = 1.0
QUIET_TIMEOUT_S = 30.0
# Deleting 20,000 pods or PodGroups in one request can outlast the API server's request timeout
# (504: the deletion goes on); the collection is deleted again, this many times at most.
WIPE_ATTEMPTS = 5
EXTRA_CRDS = binaries.E2E_DIR / "crds"  # APIs vc-scheduler waits for, beyond deploy/crds/
VIOLATION_EXAMPLES = 5  # a run's first rule violations kept in its result, as examples


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why."""


@dataclass(frozen=True)
class Options:
    scale: float
    schedulers: tuple[Scheduler, ...]
    workloads: tuple[Workload, ...]
    timeout_s: float
    create_concurrency: int
    ceiling_concurrency: tuple[int, ...]
    workdir: Path
    repeat: int = 1  # runs of each scheduler (and each ceiling concurrency) per workload
    repeat_of: Mapping[str, int] = field(default_factory=dict)  # scheduler key -> its own count
    # Fetches per second of policydsl's dashboard (/ui, /api/v1/queues) during its runs; 0: none.
    dashboard_load: float = 0.0

    def repeats(self, scheduler: Scheduler) -> int:
        return self.repeat_of.get(scheduler.key, self.repeat)


# ------------------------------------------------------------------ processes


class Child:
    """A program the harness started; stopped by its own pid only."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None,
                 capture_stdout: bool = False) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else self._log,
            stderr=self._log,
            env={**os.environ, **(env or {})},
            cwd=binaries.REPO_ROOT,
            start_new_session=True,  # a Ctrl-C on the harness does not hit it half-way
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def read_line(self, timeout: float) -> str | None:
        """The next stdout line, or None at timeout or EOF (only with capture_stdout)."""
        assert self.proc.stdout is not None
        # select() cannot see what the buffered reader already holds; once the
        # child has exited, a blocking read ends at EOF anyway.
        if self.alive():
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                return None
        line = self.proc.stdout.readline()
        return line.decode().strip() if line else None

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def stop(self, grace_s: float = 10.0) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def log_tail(self, lines: int = 15) -> str:
        if not self._log.closed:
            self._log.flush()
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(tail)


def two_free_ports() -> tuple[int, int]:
    """Two distinct free loopback ports (both held open while choosing, so they differ)."""
    first, second = socket.socket(), socket.socket()
    try:
        first.bind(("127.0.0.1", 0))
        second.bind(("127.0.0.1", 0))
        return first.getsockname()[1], second.getsockname()[1]
    finally:
        first.close()
        second.close()


# ------------------------------------------------------------------ the cluster side


class Bench:
    """One dev cluster and the runs made on it."""

    def __init__(self, cluster: devcluster.DevCluster, options: Options, log: IO[str]) -> None:
        from kubernetes import client as k8s

        self.cluster = cluster
        self.options = options
        self.log = log
        self.api_client = cluster.api_client()
        self.core = k8s.CoreV1Api(self.api_client)
        self.custom = k8s.CustomObjectsApi(self.api_client)
        self.tools = binaries.loadtools_dir()
        self.tool_env = {"BENCH_KUBE_TOKEN": cluster.token}
        self.runs_dir = options.workdir / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)

    def say(self, message: str) -> None:
        print(f"[{dt.datetime.now():%H:%M:%S}] {message}", file=self.log, flush=True)

    def close(self) -> None:
        self.api_client.close()

    # ---- objects

    def _loadgen_create(self, jobs_file: Path, log_name: str, concurrency: int) -> dict[str, Any]:
        child = Child(
            [str(self.tools / "loadgen"), "create", f"--server={self.cluster.server}",
             f"--ca-file={self.cluster.ca_cert}", f"--concurrency={concurrency}", f"--jobs={jobs_file}"],
            self.runs_dir / log_name, env=self.tool_env, capture_stdout=True,
        )
        try:
            child.wait()
            line = child.read_line(timeout=5.0)
        finally:
            child.stop()
        if child.proc.returncode != 0 or not line:
            raise BenchError(f"loadgen create failed (exit {child.proc.returncode}):\n{child.log_tail()}")
        summary: dict[str, Any] = json.loads(line)
        if summary["failed"]:
            raise BenchError(f"loadgen create: {summary['failed']} requests failed, e.g. {summary['errors'][:2]}")
        return summary

    def create_nodes(self, count: int, zones: int = 0) -> None:
        name = f"nodes-{count}" + (f"-{zones}-zones" if zones else "")
        jobs_file = self.runs_dir / f"{name}.jsonl"
        workloads.write_jobs_file(jobs_file, workloads.node_requests(count, zones))
        started = time.monotonic()
        self._loadgen_create(jobs_file, f"{name}.log", concurrency=32)
        node = self.core.read_node(workloads.node_name(count - 1))
        if not (node.status and node.status.allocatable):
            raise BenchError(f"node {node.metadata.name} has no allocatable after create")
        self.say(f"created {count} nodes in {time.monotonic() - started:.1f}s")

    def create_hypernodes(self, workload: Workload) -> None:
        """The workload's HyperNodes (none for most): created once per workload, after its nodes."""
        manifests = workloads.hypernode_manifests(workload)
        started = time.monotonic()
        for body in manifests:
            self.custom.create_cluster_custom_object(workloads.HYPERNODE_GROUP, workloads.HYPERNODE_VERSION,
                                                     "hypernodes", body)
        if manifests:
            self.say(f"created {len(manifests)} HyperNodes in {time.monotonic() - started:.1f}s")

    def delete_hypernodes(self) -> None:
        selector = f"{workloads.HYPERNODE_LABEL}=true"
        self.custom.delete_collection_cluster_custom_object(workloads.HYPERNODE_GROUP, workloads.HYPERNODE_VERSION,
                                                            "hypernodes", label_selector=selector)

    def delete_nodes(self) -> None:
        self.core.delete_collection_node(label_selector="bench.policydsl/node=true")
        self._wait_until(lambda: not self.core.list_node(label_selector="bench.policydsl/node=true", limit=1).items,
                         "bench nodes deleted", 300)

    def create_queues(self, count: int) -> None:
        from kubernetes.client.rest import ApiException

        for index in range(count):
            body = workloads.queue_manifest(index)
            try:
                created = self.custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                created = self.custom.get_cluster_custom_object(
                    "scheduling.volcano.sh", "v1beta1", "queues", body["metadata"]["name"])
            # Volcano's queue controller opens a queue; nothing else here would.
            created["status"] = {"state": "Open", "allocated": {}}
            self.custom.replace_cluster_custom_object_status(
                "scheduling.volcano.sh", "v1beta1", "queues", body["metadata"]["name"], created)

    def delete_queues(self, count: int) -> None:
        for index in range(count):
            self.custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues",
                                                     workloads.queue_name(index))

    def ensure_namespace(self, name: str) -> None:
        from kubernetes.client.rest import ApiException

        try:
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise

    def wipe_namespace(self, namespace: str) -> None:
        """Delete every pod (no grace: there is no kubelet) and PodGroup; the empty namespace stays
        (without a namespace controller a deleted namespace would never finish terminating)."""
        self._delete_all(lambda: self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0),
                         lambda: not self.core.list_namespaced_pod(namespace, limit=1).items, f"pods of {namespace}")
        self._delete_all(
            lambda: self.custom.delete_collection_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups"),
            lambda: not self.custom.list_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", limit=1)["items"],
            f"PodGroups of {namespace}")

    def _delete_all(self, delete: Callable[[], object], gone: Callable[[], bool], what: str) -> None:
        """Delete a collection, again after a server timeout, a 5xx or an answer cut short, until
        it is empty."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import ProtocolError   # lazy, as ApiException: only the wipe needs them

        for attempt in range(1, WIPE_ATTEMPTS + 1):
            try:
                delete()
                break
            except ApiException as exc:
                if exc.status not in (429, 500, 502, 503, 504) or attempt == WIPE_ATTEMPTS:
                    raise BenchError(f"deleting the {what}: {exc.status} {exc.reason}") from None
                self.say(f"deleting the {what}: {exc.status} {exc.reason}; deleting the rest again")
                time.sleep(2.0)
            except ProtocolError as exc:
                # The answer (every deleted object, tens of MB) broke off mid-stream: the deletion
                # itself goes on in the API server; asking again deletes what is left.
                if attempt == WIPE_ATTEMPTS:
                    raise BenchError(f"deleting the {what}: {exc}") from None
                self.say(f"deleting the {what}: the answer broke off ({exc.__class__.__name__}); "
                         "deleting the rest again")
                time.sleep(2.0)
        self._wait_until(gone, f"the {what} deleted", 300)

    def wait_quiet(self) -> float:
        """Wait until the API server and etcd use less than QUIET_CORES over QUIET_WINDOW_S (at
        most QUIET_TIMEOUT_S: a run then starts anyway); the seconds waited."""
        pids = (self.cluster.apiserver_pid, self.cluster.etcd_pid)
        started = time.monotonic()
        while time.monotonic() - started < QUIET_TIMEOUT_S:
            before = cpu_seconds(*pids)
            time.sleep(QUIET_WINDOW_S)
            after = cpu_seconds(*pids)
            if before is None or after is None or (after - before) / QUIET_WINDOW_S < QUIET_CORES:
                break
        return time.monotonic() - started

    def _wait_until(self, condition: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise BenchError(f"timed out waiting for {what}")
            time.sleep(0.2)

    # ---- one scheduler

    def start_scheduler(self, scheduler: Scheduler, variant: int | None, run_id: str,
                        topology: bool = False) -> Child:
        workdir = self.runs_dir / run_id
        workdir.mkdir(exist_ok=True)
        launch = Launch(
            server=self.cluster.server,
            ca_cert=self.cluster.ca_cert,
            kubeconfig=self.cluster.kubeconfig,
            scheduler_name=SCHEDULER_NAME_PREFIX + scheduler.key,
            workdir=workdir,
            ports=two_free_ports(),
            token=self.cluster.token,
            variant=variant,
            topology=topology,
        )
        command = scheduler.command(launch)
        (workdir / "command.txt").write_text(shlex.join(command.argv) + "\n")
        child = Child(command.argv, workdir / "scheduler.log", env=command.env)
        child.metrics_base = f"http://127.0.0.1:{launch.ports[0]}"   # policydsl's /ui for --dashboard-load
        try:
            self._probe(scheduler, launch.scheduler_name, run_id, child)
        except BaseException:
            child.stop()
            raise
        return child

    def check_placement(self, result: RunResult, namespace: str, run_id: str) -> RunResult:
        """`result` with what the independent checker (tests/placement_checker.py) finds wrong in
        the run's final placement: every required rule of every bound pod, after the scheduler
        stopped and outside the measured window. The raw binder keeps none but room, by design."""
        from tests.placement_checker import bearer_get, read_placement

        started = time.monotonic()
        get = bearer_get(self.cluster.server, self.cluster.token, str(self.cluster.ca_cert))
        try:
            violations = read_placement(get, node_selector="bench.policydsl/node=true", namespace=namespace).check()
        except OSError as exc:  # the figures stand; the check is reported as not made
            self.say(f"{run_id}: warning: placement not checked: {exc}")
            return result
        by_rule = dict(Counter(v.rule for v in violations).most_common())
        self.say(f"{run_id}: placement checked in {time.monotonic() - started:.1f}s: {len(violations)} violations"
                 + (f" ({', '.join(f'{rule} {n}' for rule, n in by_rule.items())})" if violations else ""))
        return replace(result, violations=len(violations), violations_by_rule=by_rule,
                       violation_examples=[str(v) for v in violations[:VIOLATION_EXAMPLES]])

    def check_topology(self, result: RunResult, workload: Workload, namespace: str, run_id: str) -> RunResult:
        """`result` with the share of the run's gangs whose bound pods all lie within one HyperNode
        of the workload's tier, by bench/e2e/topology_check.py (its own reading of the HyperNodes,
        nodes and pods from the API server, after the scheduler stopped)."""
        from tests.placement_checker import bearer_get

        get = bearer_get(self.cluster.server, self.cluster.token, str(self.cluster.ca_cert))
        try:
            hypernodes, nodes, pods = topology_check.read(get, namespace)
        except OSError as exc:
            self.say(f"{run_id}: warning: topology not checked: {exc}")
            return result
        share = topology_check.tier_share(topology_check.gang_spans(pods, topology_check.tree_of(hypernodes, nodes)),
                                          workload.topology_tier)
        self.say(f"{run_id}: {share.within}/{share.gangs} gangs within one tier-{share.tier} HyperNode"
                 + (f"; e.g. {share.examples[0]}" if share.examples else ""))
        return replace(result, topology_tier=share.tier, gangs_with_pods=share.gangs, gangs_within_tier=share.within,
                       topology_examples=list(share.examples))

    def _probe(self, scheduler: Scheduler, scheduler_name: str, run_id: str, child: Child) -> None:
        """Bind one pod through the scheduler: it is up, synced and really scheduling."""
        name = f"probe-{run_id}"
        grouped = workloads.gets_podgroup(scheduler.podgroups, 1)
        if grouped:
            body = workloads.podgroup_manifest(PROBE_NAMESPACE, name, 1, workloads.queue_name(0))
            self.custom.create_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", PROBE_NAMESPACE, "podgroups", body)
        pod = workloads.pod_manifest(PROBE_NAMESPACE, name, scheduler_name, name if grouped else None,
                                     workloads.queue_name(0))
        self.core.create_namespaced_pod(PROBE_NAMESPACE, pod)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.core.read_namespaced_pod(name, PROBE_NAMESPACE).spec.node_name:
            if not child.alive():
                raise BenchError(f"{scheduler.key} exited (code {child.proc.returncode}) before binding "
                                 f"a probe pod; last lines of {child.log_path}:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{scheduler.key} did not bind a probe pod within {STARTUP_TIMEOUT_S:.0f}s; "
                                 f"last lines of {child.log_path}:\n{child.log_tail()}")
            time.sleep(0.2)
        self.wipe_namespace(PROBE_NAMESPACE)

    def run_one(self, scheduler: Scheduler, variant: int | None, workload: Workload, repetition: int = 1) -> RunResult:
        run_id = (f"{workload.key}-{scheduler.key}" + (f"-{variant}" if variant is not None else "")
                  + (f"-r{repetition}" if self.options.repeats(scheduler) > 1 else ""))
        namespace = f"bench-{run_id}"
        # Every run starts from the same storage: no history of the runs before it to pay for.
        devcluster.compact_storage(self.cluster)
        self.ensure_namespace(namespace)
        jobs_file = self.runs_dir / f"{run_id}.jsonl"
        objects = workloads.write_jobs_file(jobs_file, workloads.job_requests(
            workload, namespace, SCHEDULER_NAME_PREFIX + scheduler.key, scheduler.podgroups))
        try:
            scheduler_proc = self.start_scheduler(scheduler, variant, run_id, bool(workload.topology_tier))
        except BenchError as exc:
            self.say(f"{run_id}: {exc}")
            return RunResult.failed(workload.key, scheduler.key, variant, workload.pods, str(exc), repetition)
        watcher: Child | None = None
        dashboard = None
        if self.options.dashboard_load and scheduler.key == "policydsl":
            from bench.dashboard_load import DashboardLoad

            dashboard = DashboardLoad(scheduler_proc.metrics_base, self.options.dashboard_load,
                                      self.options.timeout_s + 120).start()
        try:
            records_file = self.runs_dir / f"{run_id}.tsv"
            watcher = Child(
                [str(self.tools / "loadgen"), "watch", f"--server={self.cluster.server}",
                 f"--ca-file={self.cluster.ca_cert}", f"--namespace={namespace}",
                 f"--expect={workload.pods}", f"--out={records_file}", f"--timeout={self.options.timeout_s}s"],
                self.runs_dir / f"{run_id}-watch.log", env=self.tool_env, capture_stdout=True,
            )
            if watcher.read_line(timeout=30.0) != "ready":
                raise BenchError(f"loadgen watch did not start:\n{watcher.log_tail()}")
            waited = self.wait_quiet()
            if waited >= 2 * QUIET_WINDOW_S:  # more than the one window that found it idle
                self.say(f"{run_id}: waited {waited:.0f} s for the API server and etcd to be idle")
            before = request_totals(self.cluster.server, self.cluster.token, self.cluster.ca_cert)
            control_plane = (self.cluster.apiserver_pid, self.cluster.etcd_pid)
            cpu_before = (cpu_seconds(scheduler_proc.proc.pid), cpu_seconds(*control_plane))
            self.say(f"{run_id}: creating {objects} objects ({workload.pods} pods)")
            created = self._loadgen_create(jobs_file, f"{run_id}-create.log", self.options.create_concurrency)
            try:
                watcher.wait(self.options.timeout_s + 60)  # it has its own timeout; this is a backstop
            except subprocess.TimeoutExpired:
                raise BenchError(f"loadgen watch did not stop at its timeout:\n{watcher.log_tail()}") from None
            watched = json.loads(watcher.read_line(timeout=5.0) or "{}")
            if not watched:
                raise BenchError(f"loadgen watch ended without a summary:\n{watcher.log_tail()}")
            end_ns = time.time_ns()
            time.sleep(SETTLE_S)
            after = request_totals(self.cluster.server, self.cluster.token, self.cluster.ca_cert)
            cpu_after = (cpu_seconds(scheduler_proc.proc.pid), cpu_seconds(*control_plane))
        except BenchError as exc:
            self.say(f"{run_id}: {exc}")
            return RunResult.failed(workload.key, scheduler.key, variant, workload.pods, str(exc), repetition)
        finally:
            if watcher is not None:
                watcher.stop()
            if dashboard is not None:
                fetched = dashboard.stop().to_dict()
                (self.runs_dir / run_id / "dashboard_load.json").write_text(json.dumps(fetched) + "\n")
                self.say(f"{run_id}: dashboard fetched {fetched['fetches']} times (p50 {fetched['p50_ms']} ms, "
                         f"{fetched['errors']} errors)")
            scheduler_proc.stop()
        result = summarize(
            workload=workload.key,
            scheduler=scheduler.key,
            variant=variant,
            pods=workload.pods,
            records=read_watch_records(records_file),
            first_create_ns=created["first_sent_ns"],
            last_create_ns=created["last_done_ns"],
            end_ns=end_ns,
            objects_created=created["created"],
            requests_before=before,
            requests_after=after,
            harness_requests=created["requests"] + watched["requests_since_ready"],
            timed_out=bool(watched["timed_out"]),
            scheduler_cpu_s=_difference(cpu_before[0], cpu_after[0]),
            control_plane_cpu_s=_difference(cpu_before[1], cpu_after[1]),
            repetition=repetition,
        )
        self.say(f"{run_id}: bound {result.bound}/{result.pods} in {result.seconds}s = {result.pods_per_s} pods/s, "
                 f"P50 {result.p50_ms} ms, P99 {result.p99_ms} ms, {result.requests_per_pod} requests/pod"
                 + (" (TIMED OUT)" if result.timed_out else ""))
        result = self.check_placement(result, namespace, run_id)
        if workload.topology_tier:
            result = self.check_topology(result, workload, namespace, run_id)
        try:
            self.wipe_namespace(namespace)
        except BenchError as exc:  # the next run has a namespace of its own; say so and go on
            self.say(f"{run_id}: warning: {exc}")
        return result


def _difference(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


# ------------------------------------------------------------------ the whole run


def run_benchmark(options: Options, results: list[RunResult], log: IO[str] = sys.stderr) -> dict[str, str]:
    """Run everything selected, appending each run's result to `results` as it ends (a failure
    later keeps them); returns, per skipped scheduler, why it was skipped."""
    skipped: dict[str, str] = {}
    runnable = []
    for scheduler in options.schedulers:
        reason = scheduler.availability()
        if reason:
            skipped[scheduler.key] = reason
            print(f"skipping {scheduler.key}: {reason}", file=log, flush=True)
        else:
            runnable.append(scheduler)
    if not runnable:
        raise BenchError("none of the selected schedulers can run:\n" + "\n".join(
            f"  {key}: {reason}" for key, reason in skipped.items()))
    binaries.loadtools_dir()  # build (seconds) before the cluster is up

    cluster_dir = options.workdir / "cluster"
    cluster = devcluster.up(cluster_dir, apiserver_args=APISERVER_ARGS)
    try:
        devcluster.install_crds(cluster, EXTRA_CRDS)
        bench = Bench(cluster, options, log)
    except BaseException:
        devcluster.down(cluster_dir)
        raise
    try:
        bench.ensure_namespace(PROBE_NAMESPACE)
        for workload in options.workloads:
            takers = [s for s in runnable if (s.gangs and not s.plain_only) or not workload.gangs]
            if not takers:
                continue
            bench.say(f"workload {workload.title}")
            bench.create_nodes(workload.nodes, workload.zones)
            bench.create_hypernodes(workload)
            bench.create_queues(workload.queues)
            # Round after round of every scheduler, not one scheduler's repeats in a row: what
            # drifts over the run (the machine's other work, the control plane's state) is shared.
            for repetition in range(1, max(options.repeats(s) for s in takers) + 1):
                for scheduler in (s for s in takers if options.repeats(s) >= repetition):
                    variants = options.ceiling_concurrency if scheduler.ceiling else scheduler.variants
                    for variant in variants:
                        results.append(bench.run_one(scheduler, variant, workload, repetition))
            bench.delete_queues(workload.queues)
            if workload.hypernode_fanout:
                bench.delete_hypernodes()
            bench.delete_nodes()
    finally:
        bench.close()
        devcluster.down(cluster_dir)
    return skipped


def _parse_only(items: list[str]) -> tuple[tuple[Scheduler, ...], tuple[str, ...]]:
    names = [name.strip() for item in items for name in item.split(",") if name.strip()]
    scheduler_keys = {s.key for s in SCHEDULERS}
    workload_keys = {w.key for w in WORKLOADS}
    unknown = [name for name in names if name not in scheduler_keys | workload_keys]
    if unknown:
        raise BenchError(f"--only: unknown {', '.join(unknown)} (schedulers: {', '.join(sorted(scheduler_keys))}; "
                         f"workloads: {', '.join(sorted(workload_keys))})")
    chosen_schedulers = tuple(s for s in SCHEDULERS if s.key in names) or SCHEDULERS
    chosen_workloads = tuple(w.key for w in WORKLOADS if w.key in names) or tuple(w.key for w in WORKLOADS)
    return chosen_schedulers, chosen_workloads


def _repeat(text: str) -> tuple[str | None, int]:
    """`N` (every scheduler) or `SCHEDULER=N`."""
    key, _, count = text.rpartition("=")
    if not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"expected N or SCHEDULER=N with N at least 1, got {text!r}")
    if key and key not in {s.key for s in SCHEDULERS}:
        raise argparse.ArgumentTypeError(
            f"unknown scheduler {key!r} (schedulers: {', '.join(sorted(s.key for s in SCHEDULERS))})")
    return key or None, int(count)


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every workload's nodes and jobs by this (e.g. 0.1 for a quick run)")
    parser.add_argument("--only", action="append", default=[], metavar="NAMES",
                        help="comma-separated schedulers (" + ", ".join(s.key for s in SCHEDULERS)
                        + ") and/or workloads (" + ", ".join(w.key for w in WORKLOADS) + "); default: all")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="per run: a scheduler that has not bound every pod by then is reported with what "
                        "it bound (default 600)")
    parser.add_argument("--create-concurrency", type=int, default=16, metavar="N",
                        help="jobs the harness creates at once (default 16)")
    parser.add_argument("--ceiling-concurrency", type=_positive_ints, default=None, metavar="N,N,...",
                        help="raw binder concurrencies to try; the best is the ceiling (default 8,32,128)")
    parser.add_argument("--repeat", type=_repeat, action="append", default=[], metavar="N|SCHEDULER=N",
                        help="run every scheduler (and every raw binder concurrency) N times per workload, in "
                        "rounds; the median run counts and the range is reported (default 1). SCHEDULER=N "
                        "sets one scheduler's count (e.g. --repeat 3 --repeat vc-scheduler=1)")
    parser.add_argument("--dashboard-load", type=_dashboard_rate, default=0.0, metavar="PER_SECOND",
                        help="keep policydsl's dashboard refreshing during its runs: fetch /ui and /api/v1/queues "
                             "this many times a second (bench/dashboard_load.py; default 0: off)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the cluster logs, scheduler logs and raw watch records here (default: a temp dir)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="FILE", help="write the report here")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write every run's figures here")
    parser.add_argument("--from-json", type=Path, default=None, metavar="FILE",
                        help="run nothing: render the report of an earlier --json (with --markdown, into that file)")
    return parser


def _render_only(source: Path, markdown: Path | None) -> int:
    try:
        document = report.Report.from_json(json.loads(source.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"bench.e2e: cannot read the results in {source}: {exc}", file=sys.stderr)
        return 2
    print(document.markdown())
    if markdown:
        document.write_markdown(markdown)
    return 0


def _dashboard_rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a number") from None
    if not 0 <= rate <= 50:
        raise argparse.ArgumentTypeError(f"`{text}`: fetches per second must be from 0 to 50")
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.from_json:
        return _render_only(args.from_json, args.markdown)
    if not 0 < args.scale <= 10:
        parser.error("--scale must be in (0, 10]")
    if args.create_concurrency < 1:
        parser.error("--create-concurrency must be at least 1")
    try:
        schedulers, workload_keys = _parse_only(args.only)
    except BenchError as exc:
        parser.error(str(exc))
    ceiling = next(s for s in SCHEDULERS if s.ceiling)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="policydsl-bench-e2e-"))
    options = Options(
        scale=args.scale,
        schedulers=schedulers,
        workloads=tuple(w.scaled(args.scale) for w in WORKLOADS if w.key in workload_keys),
        timeout_s=args.timeout,
        create_concurrency=args.create_concurrency,
        ceiling_concurrency=args.ceiling_concurrency or tuple(v for v in ceiling.variants if v is not None),
        workdir=workdir.resolve(),
        repeat=next((count for key, count in reversed(args.repeat) if key is None), 1),
        repeat_of={key: count for key, count in args.repeat if key is not None},
        dashboard_load=args.dashboard_load,
    )
    command = "python -m bench.e2e" + ("" if argv is None and len(sys.argv) <= 1 else " " + shlex.join(
        sys.argv[1:] if argv is None else argv))
    from kubernetes.client.rest import ApiException

    machine = report.machine()  # before the run: its load average is the other work on the machine
    results: list[RunResult] = []

    def report_of(skipped: dict[str, str]) -> report.Report:
        return report.Report(results=results, skipped=skipped, workloads=options.workloads, command=command,
                             machine=machine, peers=PEERS, when=dt.datetime.now(dt.timezone.utc))

    try:
        skipped = run_benchmark(options, results)
    except (BenchError, binaries.MissingBinary, devcluster.DevClusterError, ApiException) as exc:
        if isinstance(exc, ApiException):
            print(f"bench.e2e: the API server refused a request of the harness: {exc.status} {exc.reason}: "
                  f"{exc.body}", file=sys.stderr)
        else:
            print(f"bench.e2e: {exc}", file=sys.stderr)
        if results and args.json:  # the runs that ended are kept (render them with --from-json)
            args.json.write_text(json.dumps(report_of({}).to_json(), indent=2) + "\n")
            print(f"bench.e2e: the {len(results)} runs that ended are in {args.json}", file=sys.stderr)
        return 1
    document = report_of(skipped)
    print(document.markdown())
    if args.markdown:
        document.write_markdown(args.markdown)
    if args.json:
        args.json.write_text(json.dumps(document.to_json(), indent=2) + "\n")
    print(f"work directory (logs, watch records): {workdir}", file=sys.stderr)
    # A run that binds only part of its pods is a result; one that could not run is not.
    return 1 if skipped or any(r.error for r in results) else 0
