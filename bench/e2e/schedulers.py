"""The schedulers the benchmark compares: one entry each in SCHEDULERS.

An entry says what the scheduler can run (gangs or not), whether it wants
Volcano's PodGroups, how to check that it is available, and the command
that starts it configured for throughput as its documentation recommends.
The harness (bench/e2e/run.py) treats every entry the same way: start the
command, wait until a probe pod is bound, run the workload, stop it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import yaml

from bench.e2e import binaries, workloads

# Pods are labelled with a scheduler name of their own per scheduler, so that a
# scheduler never touches another's pods, even one left running by accident.
SCHEDULER_NAME_PREFIX = "bench-"

# Client rate limits, raised as Volcano's own benchmark does (benchmark/sh/
# install-volcano.sh sets the scheduler's kube-api-qps and -burst to 10000);
# kube-scheduler gets the same so neither is throttled on the client side.
CLIENT_QPS = 10_000
CLIENT_BURST = 10_000

OUR_POLICY = binaries.REPO_ROOT / "policies" / "volcano-default.policy"
# The same with preempt and reclaim (issue 17): what a cycle that may evict costs.
EVICTING_POLICY = Path(__file__).with_name("volcano-evicting.policy")
# Workload (e), gangs with network topology: the default with the network-topology-aware plugin.
TOPOLOGY_POLICY = Path(__file__).with_name("volcano-topology.policy")

# Volcano's default scheduler configuration (its Helm chart's
# volcano-scheduler.conf at the pinned release): these actions, these tiers.
VOLCANO_SCHEDULER_CONF = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
        {
            "plugins": [
                {"name": "overcommit"},
                {"name": "drf", "enablePreemptable": False},
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder"},
                {"name": "binpack"},
            ]
        },
    ],
}
# On workloads with network topology, vc-scheduler gets the plugin as Volcano's user guide adds it
# (docs/user-guide/how_to_use_network_topology_aware_scheduling.md, section 3.1) to the second tier.
VOLCANO_TOPOLOGY_PLUGIN = {
    "name": "network-topology-aware",
    "arguments": {"weight": 10, "hypernode.binpack.cpu": 5, "hypernode.binpack.memory": 1},
}


@dataclass(frozen=True)
class Launch:
    """What a scheduler's command line may refer to."""

    server: str  # https://127.0.0.1:PORT
    ca_cert: Path
    kubeconfig: Path  # admin token, verified TLS
    scheduler_name: str  # spec.schedulerName of the pods it must bind
    workdir: Path  # for config files
    ports: tuple[int, int]  # free loopback ports for metrics / health endpoints
    token: str  # the admin bearer token (also in the kubeconfig)
    variant: int | None  # the entry's variant (the ceiling's concurrency), None otherwise
    topology: bool = False  # the workload has HyperNodes and gangs asking for network topology


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the harness's environment


@dataclass(frozen=True)
class Scheduler:
    key: str  # what --only and the report call it
    label: str
    gangs: bool  # can it schedule gangs (all-or-nothing)? kube-scheduler cannot
    podgroups: str  # which jobs get a Volcano PodGroup: workloads.PODGROUP_MODES
    availability: Callable[[], str | None]  # None when it can run, else why not and what to do
    command: Callable[[Launch], Command]
    variants: tuple[int | None, ...] = (None,)  # run once per variant; the best run counts
    ceiling: bool = False  # the raw binder: the others are reported as a fraction of it
    plain_only: bool = False  # runs the plain-pod workloads only (a second configuration of a scheduler)


# ------------------------------------------------------------------ availability


def _binary_available(locate: Callable[[], Path]) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            locate()
        except binaries.MissingBinary as exc:
            return str(exc)
        return None

    return check


def _ours_available() -> str | None:
    """Ours runs as `python -m policydsl run`; the connector may not exist yet."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "policydsl", "run", "--help"],
            capture_output=True,
            text=True,
            cwd=binaries.REPO_ROOT,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "`python -m policydsl run --help` did not answer within 120 s"
    if result.returncode != 0:
        reason = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"`python -m policydsl run --help` fails ({reason[0]}): the Kubernetes connector is not available"
    return None


# ------------------------------------------------------------------ commands


def _kube_scheduler_command(launch: Launch) -> Command:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(launch.kubeconfig), "qps": CLIENT_QPS, "burst": CLIENT_BURST},
        "leaderElection": {"leaderElect": False},
        # 0 = the documented adaptive default (scheduler-perf-tuning): 50% of
        # the nodes at 100 nodes, falling to 10% at 5,000, never under 5%.
        "percentageOfNodesToScore": 0,
        "profiles": [{"schedulerName": launch.scheduler_name}],
    }
    path = launch.workdir / "kube-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return Command([
        str(binaries.kube_scheduler()),
        f"--config={path}",
        # Metrics and health on loopback only, on a port of our choosing.
        "--bind-address=127.0.0.1",
        f"--secure-port={launch.ports[0]}",
        f"--authentication-kubeconfig={launch.kubeconfig}",
        f"--authorization-kubeconfig={launch.kubeconfig}",
    ])


def _vc_scheduler_command(launch: Launch) -> Command:
    conf = launch.workdir / "volcano-scheduler.conf"
    settings = VOLCANO_SCHEDULER_CONF
    if launch.topology:
        tiers = [dict(t, plugins=list(t["plugins"])) for t in settings["tiers"]]
        tiers[-1]["plugins"].append(VOLCANO_TOPOLOGY_PLUGIN)
        settings = {**settings, "tiers": tiers}
    conf.write_text(yaml.safe_dump(settings, sort_keys=False))
    return Command([
        str(binaries.vc_scheduler()),
        f"--kubeconfig={launch.kubeconfig}",
        f"--scheduler-name={launch.scheduler_name}",
        f"--scheduler-conf={conf}",
        "--leader-elect=false",
        f"--kube-api-qps={CLIENT_QPS}",
        f"--kube-api-burst={CLIENT_BURST}",
        "--enable-metrics=true",
        f"--listen-address=127.0.0.1:{launch.ports[0]}",
        "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{launch.ports[1]}",
        # Would otherwise register a signal handler that dumps the cache to /tmp.
        "--cache-dumper=false",
    ])


def _ours_command(launch: Launch, policy: Path = OUR_POLICY, topology_policy: Path = TOPOLOGY_POLICY) -> Command:
    """`policydsl run` with `policy`, or `topology_policy` on a workload with network topology."""
    if launch.topology:
        policy = topology_policy
    return Command([
        sys.executable,
        "-m",
        "policydsl",
        "run",
        "--policy",
        str(policy),
        "--kubeconfig",
        str(launch.kubeconfig),
        "--scheduler-name",
        launch.scheduler_name,
        "--metrics-addr",
        f"127.0.0.1:{launch.ports[0]}",
    ])


def _rawbinder_command(launch: Launch) -> Command:
    return Command(
        [
            str(binaries.loadtools_dir() / "rawbinder"),
            f"--server={launch.server}",
            f"--ca-file={launch.ca_cert}",
            f"--scheduler-name={launch.scheduler_name}",
            f"--concurrency={launch.variant}",
        ],
        env={"BENCH_KUBE_TOKEN": launch.token},
    )


def _always() -> None:
    return None


OURS = Scheduler(
    key="policydsl",
    label="policydsl (ours)",
    gangs=True,
    # A pod without a PodGroup is its own one-pod job here: plain pods need no PodGroup
    # controller, so a cluster running policydsl creates none for them.
    podgroups=workloads.GANGS_ONLY,
    availability=_ours_available,
    command=_ours_command,
)

SCHEDULERS: tuple[Scheduler, ...] = (
    Scheduler(
        key="ceiling",
        label="raw binder (ceiling)",
        gangs=True,  # binds everything it sees, so gangs trivially all bind
        # The gangs' PodGroups are part of the workload the API server absorbs (created as
        # Volcano's job controller would, whichever scheduler runs): the ceiling gets them too,
        # and ignores them. Plain pods get none, as with kube-scheduler.
        podgroups=workloads.GANGS_ONLY,
        availability=_always,  # built on demand in seconds
        command=_rawbinder_command,
        variants=(8, 32, 128),
        ceiling=True,
    ),
    Scheduler(
        key="kube-scheduler",
        label="kube-scheduler",
        gangs=False,
        podgroups=workloads.NO_PODGROUPS,
        availability=_binary_available(binaries.kube_scheduler),
        command=_kube_scheduler_command,
    ),
    Scheduler(
        key="vc-scheduler",
        label="Volcano vc-scheduler",
        gangs=True,
        podgroups=workloads.EVERY_JOB,  # it ignores pods without one
        availability=_binary_available(binaries.vc_scheduler),
        command=_vc_scheduler_command,
    ),
    OURS,
    # The same scheduler on exactly vc-scheduler's objects; on gangs it is the row above.
    replace(OURS, key="policydsl-podgroups", label="policydsl (ours), a PodGroup per pod as vc-scheduler gets",
            podgroups=workloads.EVERY_JOB, plain_only=True),
    replace(OURS, key="policydsl-evicting", label="policydsl (ours), with preempt and reclaim",
            # On (e) as on the others: its own policy, without the network-topology-aware plugin (the
            # topology is kept all the same; the plugin only ranks HyperNodes).
            command=partial(_ours_command, policy=EVICTING_POLICY, topology_policy=EVICTING_POLICY)),
)

PEERS = ("kube-scheduler", "vc-scheduler")  # the report gives everyone's ratio to these


def by_key(key: str) -> Scheduler:
    for scheduler in SCHEDULERS:
        if scheduler.key == key:
            return scheduler
    raise KeyError(key)
