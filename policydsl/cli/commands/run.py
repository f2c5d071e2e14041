"""`policydsl run --policy FILE`: the scheduler, against a Kubernetes cluster or the embedded one."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import socket
import sys
import threading
import uuid

from policydsl.cli.flags import (TOPOLOGY_LABELS_HELP, count, duration, embedded_cluster, existing_path, kube_name,
                                 listen_address, nonempty, output_folder, rate, topology_labels, url_paths)

HELP = "run the scheduler against a cluster (or the embedded simulator)"
DESCRIPTION = (
    "Schedule pods whose schedulerName matches, every --schedule-period and sooner when pods arrive "
    "(--min-interval): watch the cluster, run the "
    "policy's actions, bind, evict, and write PodGroup/Queue status and Events. With --leader-elect only "
    "the replica holding the Lease writes. SIGTERM or SIGINT finishes the current cycle, releases the "
    "lease and exits 0. Exit 2: invalid policy, bad kubeconfig, unreachable API server. The policy's "
    "folders are watched (and SIGHUP reloads): an edit without errors goes live at the next cycle, one "
    "with errors is logged and the running policy stays (docs/hot-reload.md)."
)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", required=True, type=existing_path("the policy path"), metavar="FILE",
                        help="the policy file (or a folder with main.policy); edits to it and its includes reload it")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kubeconfig", type=existing_path("the kubeconfig path", "file"), metavar="PATH",
                       help="kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
    where.add_argument("--cluster", type=embedded_cluster, metavar="embedded:SNAPSHOT",
                       help="run on the embedded simulator loaded from SNAPSHOT (a file or folder of objects)")
    parser.add_argument("--context", type=nonempty("the context"), help="kubeconfig context (default: the current one)")
    parser.add_argument("--scheduler-name", default="volcano", type=kube_name("scheduler name"),
                        help="schedule pods with this schedulerName (default: volcano)")
    parser.add_argument("--topology-labels", type=topology_labels, metavar="LABELS|FILE", help=TOPOLOGY_LABELS_HELP)
    parser.add_argument("--schedule-period", type=duration, default=1.0, metavar="DURATION",
                        help="longest time from one cycle's start to the next (default: 1s)")
    parser.add_argument("--min-interval", type=duration, default=0.1, metavar="DURATION",
                        help="when pods or PodGroups arrive, the next cycle starts early, but no sooner than "
                             "this after the last one started (and after a pause twice as long as that cycle took); "
                             "a value of at least --schedule-period keeps the fixed period (default: 100ms)")
    parser.add_argument("--metrics-addr", default="127.0.0.1:8080", type=listen_address, metavar="HOST:PORT",
                        help="serve /metrics, /healthz, /readyz, /livez, /policy, the read-only views "
                             "/api/v1/explain, /api/v1/queues and the dashboard /ui here; port 0 picks one; `off` "
                             "disables. Against a cluster, any address but loopback is served securely (see "
                             "--secure-serving) (default: 127.0.0.1:8080)")
    serving = parser.add_argument_group("secure serving (as kube-scheduler's; docs/observability.md)")
    secure = serving.add_mutually_exclusive_group()
    secure.add_argument("--secure-serving", dest="secure_serving", action="store_const", const=True, default=None,
                        help="HTTPS, every request but the probes authenticated by the API server (TokenReview "
                             "of its bearer token) and authorized (SubjectAccessReview): /metrics and /policy "
                             "need `get` on that URL, the views RBAC on pods, queues and hypernodes. The default "
                             "against a cluster on any address but loopback; also on loopback with this flag")
    secure.add_argument("--insecure-serving", dest="secure_serving", action="store_const", const=False,
                        help="plain HTTP without authentication or authorization on any address: whoever reaches "
                             "the port reads every namespace's waiting pods, their reasons, every queue's figures "
                             "and the metrics, and nothing on the wire is encrypted. For a trusted network only")
    serving.add_argument("--tls-cert-file", type=existing_path("the certificate", "file"), metavar="FILE",
                         help="PEM certificate (chain) to serve with (default: a self-signed one made at start)")
    serving.add_argument("--tls-private-key-file", type=existing_path("the private key", "file"), metavar="FILE",
                         help="PEM private key of --tls-cert-file")
    serving.add_argument("--client-ca-file", type=existing_path("the client CA", "file"), metavar="FILE",
                         help="trust client certificates this CA signed: the caller is the certificate's CN, in its "
                              "O groups, authorized by SubjectAccessReview like a token (kube-scheduler's "
                              "--client-ca-file)")
    serving.add_argument("--cert-dir", type=output_folder, metavar="DIR",
                         help="write the self-signed certificate (not its key) here as policydsl.crt, for "
                              "clients to trust (default: kept in memory only)")
    serving.add_argument("--authentication-kubeconfig", type=existing_path("the kubeconfig path", "file"),
                         metavar="PATH", help="kubeconfig of the API server that reviews tokens (TokenReview) "
                                              "(default: the scheduler's own connection)")
    serving.add_argument("--authorization-kubeconfig", type=existing_path("the kubeconfig path", "file"),
                         metavar="PATH", help="kubeconfig of the API server that authorizes requests "
                                              "(SubjectAccessReview) (default: the scheduler's own connection)")
    serving.add_argument("--authorization-always-allow-paths", type=url_paths, default="/healthz,/readyz,/livez",
                         metavar="PATHS", help="paths served to anyone, without credentials "
                                               "(default: /healthz,/readyz,/livez)")
    parser.add_argument("--volcano-metrics", action=argparse.BooleanOptionalAction, default=True,
                        help="also export Volcano's scheduler metrics under their names (volcano_*; "
                             "docs/observability.md; default: on)")
    parser.add_argument("--pod-conditions", action=argparse.BooleanOptionalAction, default=True,
                        help="write PodScheduled=False (reason Unschedulable) with the reason on waiting pods, "
                             "for Cluster Autoscaler and kubectl (default: on)")
    parser.add_argument("--publish-queues", action=argparse.BooleanOptionalAction, default=True,
                        help="create the policy's queues as Queue objects and keep their spec and status "
                             "(default: on)")
    election = parser.add_argument_group("leader election")
    election.add_argument("--leader-elect", action="store_true", help="only the holder of the Lease schedules")
    election.add_argument("--lease-namespace", default="policydsl-system", type=kube_name("namespace", label=True),
                          help="namespace of the Lease (default: policydsl-system, as deploy/ installs it)")
    election.add_argument("--lease-name", default="policydsl-scheduler", type=kube_name("Lease name"),
                          help="name of the Lease (default: policydsl-scheduler)")
    election.add_argument("--lease-duration", type=duration, default=15.0, metavar="DURATION",
                          help="how long a standby waits for an unrenewed lease (default: 15s)")
    election.add_argument("--renew-deadline", type=duration, default=10.0, metavar="DURATION",
                          help="the leader stops when it could not renew for this long (default: 10s)")
    election.add_argument("--retry-period", type=duration, default=2.0, metavar="DURATION",
                          help="how often to renew or try to acquire (default: 2s)")
    election.add_argument("--identity", type=nonempty("the identity"),
                          help="this replica's name in the Lease (default: hostname_random)")
    parser.add_argument("--kube-api-qps", type=rate, default=1000.0, metavar="QPS",
                        help="requests per second to the API server, watches aside; 0 = no limit (default: 1000)")
    parser.add_argument("--kube-api-burst", type=count(1), default=2000, metavar="N",
                        help="requests allowed at once above --kube-api-qps (default: 2000)")
    reload = parser.add_argument_group("policy reload")
    reload.add_argument("--reload-debounce", type=duration, default=0.05, metavar="DURATION",
                        help="how long a burst of file changes has to settle into one reload (default: 50ms)")
    reload.add_argument("--no-watch", action="store_true",
                        help="do not watch the policy files; reload on SIGHUP only")
    parser.add_argument("--cycles", type=count(0), default=0, metavar="N",
                        help="stop after N cycles (default, 0: run until stopped)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="text", choices=["text", "json"],
                        help="text lines, or one JSON object per line with the pod, PodGroup, queue or node a line "
                             "is about as fields (default: text)")


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.logformat import configure

    configure(args.log_level, args.log_format)
    log = logging.getLogger("policydsl.run")
    # urllib3 warns on every retried connection; the cache and the writers say what matters.
    logging.getLogger("urllib3").setLevel(logging.ERROR)

    first = _compile(args.policy)
    if first is None:
        return 2
    plan = first.plan
    label_topology = None
    if args.topology_labels:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from runtime.cluster.topology_labels import LabelTopologyError, read_topology_labels

        try:
            label_topology = read_topology_labels(args.topology_labels)
        except LabelTopologyError as err:     # the file changed since the flag was checked
            print(f"policydsl run: --topology-labels: {err}", file=sys.stderr)
            return 2

    stop = threading.Event()
    reloader = None

    def on_hangup(signum: int, frame: object) -> None:
        if reloader is not None:
            reloader.request("SIGHUP", force=True)

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            return
        log.info("%s: finishing the current cycle, then stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)  # before the reloader exists: the policy just compiled is current

    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.loop import Scheduler
    from runtime.service.server import MetricsServer
    from runtime.kube.metrics import Metrics
    from runtime.service.views import LiveView
    from runtime.service.reload import LeaseEvents, PolicyReloader
    from runtime.service.webapi import routes

    metrics = Metrics(volcano=args.volcano_metrics)
    view = LiveView()
    identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    elector = None
    notifier = None
    if args.cluster:
        cluster = _embedded(args.cluster, plan, label_topology)
        if cluster is None:
            return 2
        where = args.cluster
    else:
        # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
        from policydsl import __version__
        from runtime.kube.api import ConnectError, connect
        from runtime.kube.cluster import KubeCluster

        try:
            api = connect(args.kubeconfig, args.context, qps=args.kube_api_qps, burst=args.kube_api_burst,
                          user_agent=f"policydsl/{__version__}")
        except ConnectError as err:
            print(f"policydsl run: {err}", file=sys.stderr)
            return 2
        if args.leader_elect:
            # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
            from runtime.kube.leader import LeaseElector

            try:
                elector = LeaseElector(api, args.lease_namespace, args.lease_name, identity,
                                       lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                       retry_period=args.retry_period,
                                       on_change=lambda leading: metrics.is_leader.set(1 if leading else 0))
            except ValueError as err:
                print(f"policydsl run: {err}", file=sys.stderr)
                return 2
        may_write = elector.is_leader if elector is not None else (lambda: True)
        cluster = KubeCluster(api, args.scheduler_name, identity=identity, metrics=metrics, may_write=may_write,
                              pod_conditions=args.pod_conditions, publish_queues=args.publish_queues)
        where = api.host
        if label_topology is not None:
            cluster.cache.use_label_topology(label_topology)
        notifier = LeaseEvents(api, cluster.events, args.lease_namespace, args.lease_name)

    if elector is None:
        metrics.is_leader.set(1)  # the only replica: it leads
    scheduler = Scheduler(plan, cluster, scheduler_name=args.scheduler_name, period=args.schedule_period,
                          min_interval=args.min_interval, metrics=metrics, elector=elector, view=view)
    reloader = PolicyReloader(args.policy, first, scheduler, metrics=metrics, debounce=args.reload_debounce,
                              notifier=notifier)

    def ready() -> tuple[bool, str]:
        ok, why = reloader.ready()
        return scheduler.readiness() if ok else (ok, why)

    server = None
    if args.metrics_addr and args.metrics_addr != "off":
        serving = _serving(args)
        if serving is None:
            cluster.stop()
            return 2
        tls, gate = serving
        try:
            server = MetricsServer(args.metrics_addr, metrics, ready=ready, healthy=scheduler.health,
                                   policy=reloader.describe, routes=routes(view, reloader.describe), tls=tls,
                                   gate=gate, always_allow=args.authorization_always_allow_paths)
        except (OSError, ValueError) as err:
            print(f"policydsl run: cannot serve metrics on {args.metrics_addr}: {err}", file=sys.stderr)
            cluster.stop()
            return 2
        server.start()
        log.info("metrics on %s/metrics", server.url)
        log.info("dashboard on %s/ui", server.url)
        if gate is not None:
            log.info("serving HTTPS; every request but %s authenticated (TokenReview) and authorized "
                     "(SubjectAccessReview) by the API server", ",".join(args.authorization_always_allow_paths)
                     or "none")
        elif args.secure_serving is False:
            log.warning("serving plain HTTP without authentication (--insecure-serving): whoever reaches %s "
                        "reads every view and metric", server.address)

    log.info("scheduling pods of %s with policy %s (revision %s) on %s as %s", args.scheduler_name, plan.name,
             plan.revision, where, identity)
    if label_topology is not None:
        log.info("HyperNodes derived from node labels while the cluster has no HyperNode objects: %s",
                 label_topology.describe())
    log.info("policy sources: %s%s", ", ".join(first.files), " (reload on SIGHUP only)" if args.no_watch else "")
    # Everything built so far (the interpreter, the kubernetes client's thousands of model
    # classes, numpy, the plan) lives as long as the process: out of the cyclic collector's
    # sight, each full collection while pods stream in does not walk it again.
    gc.collect()
    gc.freeze()
    cluster.start()
    if elector is not None:
        elector.start()
    reloader.start(watch=not args.no_watch)
    try:
        scheduler.run(stop, max_cycles=args.cycles)
    finally:
        reloader.stop()
        cluster.drain(timeout=30.0)  # binds of the last cycle answer while we still lead
        if elector is not None:
            elector.stop(release=True)
        cluster.stop()
        if server is not None:
            server.stop()
    log.info("stopped after %d cycles", scheduler.cycles)
    return 0


def _serving(args: argparse.Namespace):  # -> (ssl.SSLContext | None, auth.Gate | None) | None
    """The serving mode: secure (TLS + delegated authn/authz) against a cluster on any address but
    loopback, or when asked; plain HTTP on loopback, with --insecure-serving, and for the embedded
    simulator (no API server to review tokens), which must then stay on loopback. None: refused."""
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.tls import TlsError, is_loopback, server_context

    host = args.metrics_addr.rpartition(":")[0]
    secure = args.secure_serving
    if args.cluster:
        if secure:
            print("policydsl run: --secure-serving needs an API server to review tokens; the embedded simulator "
                  "has none (serve it on loopback)", file=sys.stderr)
            return None
        if secure is None and not is_loopback(host):
            print(f"policydsl run: the embedded simulator serves without authentication, so only on loopback: "
                  f"--metrics-addr {args.metrics_addr} needs --insecure-serving (or a 127.0.0.1 address)",
                  file=sys.stderr)
            return None
        secure = False
    elif secure is None:
        secure = not is_loopback(host)
    given_tls = args.tls_cert_file or args.tls_private_key_file
    if not secure:
        if given_tls or args.cert_dir or args.client_ca_file or args.authentication_kubeconfig \
                or args.authorization_kubeconfig:
            print("policydsl run: --tls-*/--cert-dir/--authentication-kubeconfig/--authorization-kubeconfig are for secure "
                  "serving, which is off here (--insecure-serving, a loopback address or the embedded simulator)",
                  file=sys.stderr)
            return None
        return None, None
    try:
        tls = server_context(args.tls_cert_file, args.tls_private_key_file, (host,), args.cert_dir,
                             args.client_ca_file)
    except TlsError as err:
        print(f"policydsl run: {err}", file=sys.stderr)
        return None
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl import __version__
    from runtime.kube.api import ConnectError, connect
    from runtime.service.auth import Gate

    if args.authentication_kubeconfig and args.authorization_kubeconfig \
            and args.authentication_kubeconfig != args.authorization_kubeconfig:
        print("policydsl run: --authentication-kubeconfig and --authorization-kubeconfig must name the same API "
              "server's kubeconfig (one reviewer serves both)", file=sys.stderr)
        return None
    reviewer = args.authentication_kubeconfig or args.authorization_kubeconfig
    try:
        # A pool of its own, without the scheduler's rate limiter: reviews never wait behind binds.
        api = connect(reviewer or args.kubeconfig, None if reviewer else args.context,
                      user_agent=f"policydsl/{__version__} (reviews)")
    except ConnectError as err:
        print(f"policydsl run: secure serving: {err}", file=sys.stderr)
        return None
    return tls, Gate(api)


def _compile(path: str):  # -> runtime.service.reload.Attempt | None
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.diagnostics import Severity, render
    from runtime.service.reload import attempt_compile

    attempt = attempt_compile(path)
    result = attempt.compilation
    for diag in result.diagnostics:
        if diag.severity >= Severity.WARNING:
            print(render(diag, result.sources), file=sys.stderr)
    if not attempt.ok:
        print(f"policydsl run: {path}: the policy has errors, not starting", file=sys.stderr)
        return None
    return attempt


def _embedded(spec: str, plan, label_topology=None):  # -> EmbeddedCluster | None
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.embedded import EmbeddedCluster
    from runtime.cluster.objects import ObjectError, load_path

    scheme, _, location = spec.partition(":")
    if scheme != "embedded" or not location:
        print(f"policydsl run: --cluster must be embedded:SNAPSHOT, got `{spec}`", file=sys.stderr)
        return None
    try:
        state = load_path(os.path.expanduser(location))
    except ObjectError as err:
        for problem in err.problems:
            print(f"policydsl run: {problem}", file=sys.stderr)
        return None
    state.label_topology = label_topology
    return EmbeddedCluster(state)
