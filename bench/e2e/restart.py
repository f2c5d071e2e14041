"""Restart and failover at scale: how long a scheduler takes to its first bind over a full cluster.

    python -m bench.e2e.restart [--nodes 10000] [--pods 100000] [--gang-size 10]
                                [--only policydsl,kube-scheduler,vc-scheduler] [--no-failover]
                                [--lease-duration 15] [--timeout 600] [--workdir DIR] [--json FILE]

One dev cluster (the side-by-side benchmark's: bench/e2e/run.py) is filled once with N fake
nodes and M pods already bound (spec.nodeName set at creation, jobs of --gang-size pods on
consecutive nodes, each job's PodGroup Running, as Volcano's controllers leave a running job),
created by `loadgen create`. Every scheduler then gets the same objects, one at a time, under
the same scheduler name: a probe pod (with a PodGroup of one, which vc-scheduler needs and the
others accept) is created pending, the scheduler is started, and what counts is the time from
the process's start to the probe's bind. After the bind the scheduler's resident memory is
read (its cache is synced by then) and it is stopped.

Failover (ours): two replicas with leader election, the leader proven by a probe bound and
the standby ready (/readyz: its cache listed); the leader is killed (SIGKILL: no release of the
Lease, the standby waits the lease duration out), a probe created at once, and what counts is
the time from the standby taking the Lease (its "became the leader" log line; the Lease's
holderIdentity change seen by polling is reported beside it) to that probe's bind.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from bench.e2e import binaries, report, workloads
from bench.e2e.measure import cpu_seconds
from bench.e2e.run import APISERVER_ARGS, EXTRA_CRDS, PROBE_NAMESPACE, Bench, BenchError, Child, Options, \
    two_free_ports
from bench.e2e.schedulers import OURS, SCHEDULERS, Command, Launch, Scheduler
from policydsl.cli import devcluster

SCHEDULER_NAME = "bench-restart"     # every scheduler's: the existing pods are its own
NAMESPACE = "bench-restart"          # the existing pods and their PodGroups
QUEUES = 4
TARGETS = ("policydsl", "kube-scheduler", "vc-scheduler")
POLL_S = 0.02                        # how often the probe pod and the Lease are read
LEASE_NAME = "bench-restart"


@dataclass(frozen=True)
class StartResult:
    scheduler: str
    label: str
    seconds_to_bind: float | None    # process start -> probe bound
    rss_mib: float | None            # resident memory after the bind (cache synced)
    cpu_s: float | None              # processor time the scheduler used up to the bind
    error: str = ""


@dataclass(frozen=True)
class FailoverResult:
    lease_duration_s: float
    kill_to_lease_s: float | None        # leader killed -> standby's "became the leader"
    lease_to_bind_s: float | None        # standby's "became the leader" -> probe bound
    lease_seen_to_bind_s: float | None   # the Lease's new holder seen by polling -> probe bound
    kill_to_bind_s: float | None
    standby_rss_mib: float | None        # the standby's memory before it led (its cache warm)
    error: str = ""


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def running_status(size: int) -> dict[str, Any]:
    """The status a scheduler leaves on a running job of `size` bound pods that no kubelet runs
    (their phase stays Pending, so none counts as running): Running, Scheduled "N/N tasks ready".
    What ours writes, so that a restart finds nothing to write back (Volcano writes the same
    phase and condition; kube-scheduler reads no PodGroup)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"phase": "Running", "running": 0, "succeeded": 0, "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "Scheduled", "message": f"{size}/{size} tasks ready",
         "lastTransitionTime": stamp}]}


def existing_requests(nodes: int, pods: int, gang_size: int) -> Iterator[list[dict[str, Any]]]:
    """Per job: its PodGroup (Running, as Volcano's controllers leave a running job), then its
    pods bound at creation to consecutive nodes, round the cluster (pods spread evenly)."""
    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    groups_path = f"{workloads.PODGROUP_API}/namespaces/{NAMESPACE}/podgroups"
    made, job = 0, 0
    while made < pods:
        size = min(gang_size, pods - made)
        name, queue = f"job-{job:06d}", workloads.queue_name(job % QUEUES)
        group = workloads.podgroup_manifest(NAMESPACE, name, size, queue)
        group["status"] = running_status(size)
        steps = [{"method": "POST", "path": groups_path, "body": group}]
        for task in range(size):
            pod = workloads.pod_manifest(NAMESPACE, f"{name}-{task}", SCHEDULER_NAME, name, queue)
            pod["spec"]["nodeName"] = workloads.node_name((made + task) % nodes)
            steps.append({"method": "POST", "path": pods_path, "body": pod})
        yield steps
        made += size
        job += 1


class RestartBench:
    def __init__(self, bench: Bench, timeout_s: float) -> None:
        self.bench = bench
        self.timeout_s = timeout_s
        self.probes = 0

    def fill(self, nodes: int, pods: int, gang_size: int) -> None:
        bench = self.bench
        bench.create_nodes(nodes)
        bench.create_queues(QUEUES)
        bench.ensure_namespace(NAMESPACE)
        bench.ensure_namespace(PROBE_NAMESPACE)
        jobs_file = bench.runs_dir / "existing.jsonl"
        objects = workloads.write_jobs_file(jobs_file, existing_requests(nodes, pods, gang_size))
        started = time.monotonic()
        bench._loadgen_create(jobs_file, "existing.log", concurrency=32)
        bench.say(f"created {objects:,} objects ({pods:,} bound pods and their PodGroups) in "
                  f"{time.monotonic() - started:.0f}s")
        devcluster.compact_storage(bench.cluster)

    def launch(self, name: str) -> Launch:
        workdir = self.bench.runs_dir / name
        workdir.mkdir(exist_ok=True)
        cluster = self.bench.cluster
        return Launch(server=cluster.server, ca_cert=cluster.ca_cert, kubeconfig=cluster.kubeconfig,
                      scheduler_name=SCHEDULER_NAME, workdir=workdir, ports=two_free_ports(), token=cluster.token,
                      variant=None)

    def create_probe(self) -> str:
        self.probes += 1
        name = f"probe-{self.probes}"
        body = workloads.podgroup_manifest(PROBE_NAMESPACE, name, 1, workloads.queue_name(0))
        self.bench.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", PROBE_NAMESPACE,
                                                          "podgroups", body)
        pod = workloads.pod_manifest(PROBE_NAMESPACE, name, SCHEDULER_NAME, name, workloads.queue_name(0))
        self.bench.core.create_namespaced_pod(PROBE_NAMESPACE, pod)
        return name

    def wait_bound(self, probe: str, children: list[Child], what: str) -> float:
        """Poll until `probe` is bound; the monotonic time it was first seen bound."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.bench.core.read_namespaced_pod(probe, PROBE_NAMESPACE).spec.node_name:
                return time.monotonic()
            for child in children:
                if not child.alive():
                    raise BenchError(f"{what}: the scheduler exited (code {child.proc.returncode}) before binding "
                                     f"{probe}; last lines of {child.log_path}:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{what}: {probe} not bound within {self.timeout_s:.0f}s; last lines of "
                                 f"{children[-1].log_path}:\n{children[-1].log_tail()}")
            time.sleep(POLL_S)

    def start_one(self, scheduler: Scheduler) -> StartResult:
        self.bench.wipe_namespace(PROBE_NAMESPACE)
        self.bench.wait_quiet()
        launch = self.launch(f"start-{scheduler.key}")
        command = scheduler.command(launch)
        probe = self.create_probe()
        (launch.workdir / "command.txt").write_text(shlex.join(command.argv) + "\n")
        started = time.monotonic()
        child = Child(command.argv, launch.workdir / "scheduler.log", env=command.env)
        try:
            bound = self.wait_bound(probe, [child], scheduler.key)
            cpu = cpu_seconds(child.proc.pid)
            memory = rss_mib(child.proc.pid)
        except BenchError as exc:
            self.bench.say(str(exc))
            return StartResult(scheduler.key, scheduler.label, None, None, None, str(exc))
        finally:
            child.stop()
        result = StartResult(scheduler.key, scheduler.label, round(bound - started, 2), memory,
                             None if cpu is None else round(cpu, 2))
        self.bench.say(f"{scheduler.key}: start -> first bind {result.seconds_to_bind:.2f}s, RSS {memory} MiB, "
                       f"CPU {result.cpu_s} s")
        return result

    # ---- failover

    def replica(self, identity: str, lease_duration: float) -> tuple[Child, Launch]:
        launch = self.launch(f"failover-{identity}")
        base = OURS.command(launch)
        renew = max(lease_duration * 2 / 3, 0.2)
        retry = max(min(2.0, renew / 2), 0.1)
        command = Command(base.argv + [
            "--leader-elect", "--lease-namespace", PROBE_NAMESPACE, "--lease-name", LEASE_NAME, "--identity", identity,
            "--lease-duration", f"{lease_duration}s", "--renew-deadline", f"{renew:.2f}s",
            "--retry-period", f"{retry:.2f}s", "--log-format", "json"], base.env)
        (launch.workdir / "command.txt").write_text(shlex.join(command.argv) + "\n")
        return Child(command.argv, launch.workdir / "scheduler.log", env=command.env), launch

    def lease_holder(self) -> str | None:
        from kubernetes.client.rest import ApiException

        try:
            lease = self.bench.coordination.read_namespaced_lease(LEASE_NAME, PROBE_NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease.spec.holder_identity or ""

    def _until(self, condition, what: str, children: list[Child]) -> float:
        deadline = time.monotonic() + self.timeout_s
        while not condition():
            for child in children:
                if not child.alive():
                    raise BenchError(f"{what}: a replica exited (code {child.proc.returncode}); last lines of "
                                     f"{child.log_path}:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"timed out waiting for {what}")
            time.sleep(POLL_S)
        return time.monotonic()

    def failover(self, lease_duration: float) -> FailoverResult:
        self.bench.wipe_namespace(PROBE_NAMESPACE)
        self.bench.wait_quiet()
        first, _ = self.replica("first", lease_duration)
        second: Child | None = None
        try:
            self._until(lambda: self.lease_holder() == "first", "the first replica to take the lease", [first])
            second, second_launch = self.replica("second", lease_duration)
            ready = f"http://127.0.0.1:{second_launch.ports[0]}/readyz"
            self._until(lambda: _http_ok(ready), "the standby's cache synced (/readyz)", [first, second])
            self.wait_bound(self.create_probe(), [first, second], "the leader")
            time.sleep(1.0)   # the standby idles as it would for hours: what it holds is what it has
            standby_memory = rss_mib(second.proc.pid)
            first.proc.kill()
            killed_wall, killed = time.time(), time.monotonic()
            first.proc.wait()
            probe = self.create_probe()
            seen = self._until(lambda: self.lease_holder() == "second", "the standby to take the lease", [second])
            bound = self.wait_bound(probe, [second], "the standby")
            bound_wall = time.time() - (time.monotonic() - bound)
        except BenchError as exc:
            self.bench.say(str(exc))
            return FailoverResult(lease_duration, None, None, None, None, None, str(exc))
        finally:
            first.stop()
            if second is not None:
                second.stop()
        took = became_leader_at(second.log_path, "second")
        result = FailoverResult(
            lease_duration_s=lease_duration,
            kill_to_lease_s=None if took is None else round(took - killed_wall, 2),
            lease_to_bind_s=None if took is None else round(bound_wall - took, 2),
            lease_seen_to_bind_s=round(bound - seen, 2),
            kill_to_bind_s=round(bound - killed, 2),
            standby_rss_mib=standby_memory,
        )
        self.bench.say(f"failover: killed -> lease taken {result.kill_to_lease_s}s, lease taken -> bound "
                       f"{result.lease_to_bind_s}s (Lease seen -> bound {result.lease_seen_to_bind_s}s), standby "
                       f"RSS {standby_memory} MiB")
        return result


def became_leader_at(log_path: Path, identity: str) -> float | None:
    """The wall time (s) of the replica's "became the leader" JSON log line, or None."""
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and f"{identity}: became the leader" in str(record.get("message", "")):
            stamp = dt.datetime.strptime(record["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
            return stamp.timestamp()
    return None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


# ------------------------------------------------------------------ report


def markdown(starts: list[StartResult], failover: FailoverResult | None, nodes: int, pods: int, gang_size: int,
             command: str, machine: report.Machine, load_after: tuple[float, float, float]) -> str:
    def cell(value: float | None, unit: str = "") -> str:
        if value is None:
            return "—"
        return f"{value:,.0f}{unit}" if unit == " MiB" else f"{value:,.2f}{unit}"

    lines = [f"{nodes:,} nodes, {pods:,} pods already bound (jobs of {gang_size} with a Running PodGroup each); "
             "one pending probe pod created before the scheduler starts.", "",
             "| scheduler | process start → probe bound | RSS after the bind | CPU to the bind |",
             "|---|---|---|---|"]
    for run in starts:
        if run.error:
            lines.append(f"| {run.label} | failed: {run.error.splitlines()[0]} | | |")
        else:
            lines.append(f"| {run.label} | {cell(run.seconds_to_bind, ' s')} | {cell(run.rss_mib, ' MiB')} | "
                         f"{cell(run.cpu_s, ' s')} |")
    if failover is not None:
        lines.append("")
        if failover.error:
            lines.append(f"Failover (ours, two replicas): failed: {failover.error.splitlines()[0]}")
        else:
            lines.append(
                f"Failover (ours, two replicas, lease duration {failover.lease_duration_s:g} s, leader SIGKILLed): "
                f"standby took the Lease {cell(failover.kill_to_lease_s, ' s')} after the kill; **lease taken → probe "
                f"bound {cell(failover.lease_to_bind_s, ' s')}** (from the new holder seen on the Lease: "
                f"{cell(failover.lease_seen_to_bind_s, ' s')}); the standby's RSS while waiting "
                f"{cell(failover.standby_rss_mib, ' MiB')}.")
    lines += ["", f"Command: `{command}`. Machine: {machine.cpus} CPUs ({machine.cpu_model}), "
              f"{machine.memory_gib:.0f} GiB, kube {machine.kube_version}, Volcano {machine.volcano_version}, "
              f"Python {machine.python}; load average before {machine.load_average[0]:.1f}, after "
              f"{load_after[0]:.1f}."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.restart", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--nodes", type=int, default=10_000, help="fake nodes (default 10,000)")
    parser.add_argument("--pods", type=int, default=100_000, help="pods already bound (default 100,000)")
    parser.add_argument("--gang-size", type=int, default=10, help="pods per existing job/PodGroup (default 10)")
    parser.add_argument("--only", default=",".join(TARGETS), metavar="NAMES",
                        help=f"comma-separated schedulers among {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--no-failover", action="store_true", help="skip ours' failover")
    parser.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS",
                        help="the replicas' lease duration in the failover (default 15, policydsl run's)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="per scheduler: start to probe bound at most this long (default 600)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the figures here")
    return parser


def main(argv: list[str] | None = None, log: IO[str] = sys.stderr) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 0 or args.gang_size < 1:
        parser.error("--nodes and --gang-size must be at least 1, --pods at least 0")
    if args.pods > args.nodes * 100:
        parser.error("at most 100 pods a node (a fake node holds 110)")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (one of {', '.join(TARGETS)})")
    chosen = [next(s for s in SCHEDULERS if s.key == key) for key in TARGETS if key in names]
    for scheduler in chosen:
        reason = scheduler.availability()
        if reason:
            print(f"bench.e2e.restart: {scheduler.key}: {reason}", file=sys.stderr)
            return 1
    command = "python -m bench.e2e.restart" + ("" if not (sys.argv[1:] if argv is None else argv) else " " +
                                               shlex.join(sys.argv[1:] if argv is None else argv))
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="policydsl-bench-restart-"))).resolve()
    machine = report.machine()
    options = Options(scale=1.0, schedulers=tuple(chosen), workloads=(), timeout_s=args.timeout,
                      create_concurrency=32, ceiling_concurrency=(), workdir=workdir)
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException

    starts: list[StartResult] = []
    failover: FailoverResult | None = None
    cluster_dir = workdir / "cluster"
    try:
        binaries.loadtools_dir()
        cluster = devcluster.up(cluster_dir, apiserver_args=APISERVER_ARGS)
        try:
            devcluster.install_crds(cluster, EXTRA_CRDS)
            bench = Bench(cluster, options, log)
            bench.coordination = k8s.CoordinationV1Api(bench.api_client)
            runner = RestartBench(bench, args.timeout)
            runner.fill(args.nodes, args.pods, args.gang_size)
            for scheduler in chosen:
                starts.append(runner.start_one(scheduler))
            if OURS in chosen and not args.no_failover:
                failover = runner.failover(args.lease_duration)
            bench.close()
        finally:
            devcluster.down(cluster_dir)
    except (BenchError, binaries.MissingBinary, devcluster.DevClusterError, ApiException) as exc:
        print(f"bench.e2e.restart: {exc}", file=sys.stderr)
        return 1
    text = markdown(starts, failover, args.nodes, args.pods, args.gang_size, command, machine, os.getloadavg())
    print(text)
    if args.json:
        args.json.write_text(json.dumps({
            "nodes": args.nodes, "pods": args.pods, "gang_size": args.gang_size, "command": command,
            "machine": asdict(machine), "starts": [asdict(s) for s in starts],
            "failover": None if failover is None else asdict(failover)}, indent=2) + "\n")
    print(f"work directory (logs): {workdir}", file=sys.stderr)
    return 1 if any(s.error for s in starts) or (failover is not None and failover.error) else 0


if __name__ == "__main__":
    sys.exit(main())
