"""Asking the running scheduler (`explain`, `queues`, `pending`): where it is, and the offline
cycle on a fresh list of the cluster when it cannot be reached.

The scheduler serves its read-only views on its metrics port (runtime/service/webapi.py). A command
reaches it either directly (`--scheduler http://HOST:PORT`, e.g. after `kubectl port-forward`)
or, with a kubeconfig, through the API server's proxy to its metrics Service
(`--scheduler-service NAMESPACE/NAME:PORT`, default deploy/'s). When neither answers, the command
lists the cluster itself and runs one cycle of `--policy` (default: Volcano's default
configuration) on it, and says so on stderr.

Through the API server's proxy, the caller's own bearer token (from its kubeconfig) goes along
in `X-Policydsl-Authorization` (the API server drops `Authorization` once it has authenticated a
request), so a scheduler serving securely (docs/observability.md) answers what the caller's RBAC
lets it see; the proxy speaks HTTPS to it (`https:NAME:PORT`), else plain HTTP to a scheduler
run with --insecure-serving.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from policydsl.cli.flags import existing_path, kube_name, nonempty, scheduler_url, service_ref

DEFAULT_SERVICE = "policydsl-system/policydsl-scheduler-metrics:metrics"
CALLER_HEADER = "X-Policydsl-Authorization"   # runtime/service/auth.py TOKEN_HEADERS
TIMEOUT_S = 10.0
STANDBY_RETRIES = 6   # through a Service of two replicas, one a standby: 1 in 64 misses the leader
def add_connection_arguments(parser: argparse.ArgumentParser, *, snapshot: bool = False) -> None:
    # Neither: the default kubeconfig (in-cluster, else $KUBECONFIG or ~/.kube/config), as kubectl.
    where = parser.add_mutually_exclusive_group()
    if snapshot:
        where.add_argument("--snapshot", type=existing_path("the snapshot path"), metavar="PATH",
                           help="the cluster: Kubernetes objects (file or folder); explained offline")
    where.add_argument("--kubeconfig", type=existing_path("the kubeconfig path", "file"), metavar="PATH",
                       help="ask the scheduler running in this cluster, through the API server's proxy to its "
                            "metrics Service (else: one offline cycle on a fresh list of the cluster); default: "
                            "in-cluster config, else $KUBECONFIG or ~/.kube/config")
    where.add_argument("--scheduler", type=scheduler_url, metavar="URL",
                       help="ask the scheduler at this address (its metrics port, e.g. after "
                            "`kubectl port-forward`), e.g. http://127.0.0.1:8080")
    parser.add_argument("--context", type=nonempty("the context"), help="kubeconfig context (default: the current one)")
    parser.add_argument("--scheduler-service", type=service_ref, default=DEFAULT_SERVICE,
                        metavar="NAMESPACE/NAME[:PORT]",
                        help=f"the scheduler's metrics Service, with --kubeconfig (default: {DEFAULT_SERVICE})")
    parser.add_argument("--policy", type=existing_path("the policy path"), metavar="FILE",
                        help="the policy of an offline cycle (default: Volcano's default configuration)")
    parser.add_argument("--scheduler-name", default="volcano", type=kube_name("scheduler name"), metavar="NAME",
                        help="the scheduler whose pods are scheduled, offline (default volcano)")


class Unreachable(Exception):
    """The scheduler did not answer (the text says why)."""


class Refused(Exception):
    """The scheduler answered with an error for this request (4xx; 503 before its first cycle):
    the message is for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Source:
    """Where the answers come from: a scheduler URL, or the API server's service proxy."""

    url: str | None = None
    api: Any = None            # runtime.kube.api.KubeApi
    service: str = DEFAULT_SERVICE
    scheme: str = ""           # of the proxy to the Service: "https:" first, "" (http) when that fails

    def describe(self) -> str:
        return self.url or f"service {self.service} through the API server"

    def get(self, path: str) -> dict:
        """The scheduler's answer. A replica that has run no cycle (a standby: only the leader
        schedules) answers 503; through a Service the next request may reach the leader, so a few
        more are made before the answer counts as no scheduler."""
        for attempt in range(STANDBY_RETRIES + 1):
            try:
                if self.url is not None:
                    return _get_url(self.url + path)
                return self._get_proxy(path)
            except Refused as err:
                if err.status != 503:
                    raise
                if attempt == STANDBY_RETRIES or self.url is not None:
                    raise Unreachable(f"{self.describe()}: {err}") from None
                time.sleep(0.2)
        raise AssertionError("unreachable")


    def _get_proxy(self, path: str) -> dict:
        if self.scheme:
            return _get_proxy(self.api, self.service, path, self.scheme)
        try:
            document = _get_proxy(self.api, self.service, path, "https:")
            self.scheme = "https:"
            return document
        except Unreachable as secure:
            try:
                document = _get_proxy(self.api, self.service, path, "http:")
            except Unreachable:
                raise secure from None
            self.scheme = "http:"
            return document


def _get_url(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        body = err.read()
        if 400 <= err.code < 500 and err.code != 404 or _is_ours(body):
            raise Refused(err.code, _message(body, err.reason)) from None
        raise Unreachable(f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise Unreachable(f"{url}: {getattr(err, 'reason', err)}") from None


def _get_proxy(api: Any, service: str, path: str, scheme: str = "https:") -> dict:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.kube.api import ApiError
    from runtime.service.webapi import ERROR_PREFIX

    namespace, _, rest = service.partition("/")
    name, _, port = rest.partition(":")
    target = f"{scheme if scheme == 'https:' else ''}{name}:{port}" if port else f"{scheme}{name}:"
    token = api.authorization()
    try:
        return api.get(f"/api/v1/namespaces/{namespace}/services/{target}/proxy{path}", timeout=TIMEOUT_S,
                       headers={CALLER_HEADER: token} if token else None)
    except ApiError as err:
        # The proxy passes the scheduler's own 4xx through (its message says it is ours); anything
        # else (no such Service, no endpoint, 503) means no scheduler answered.
        if (400 <= err.status < 500 or err.status == 503) and err.message.startswith(ERROR_PREFIX):
            message = err.message[len(ERROR_PREFIX):]
            if err.status == 401 and not token:
                message += (" (this kubeconfig authenticates without a bearer token, e.g. with a client "
                            "certificate: use one with a token, e.g. from `kubectl create token`)")
            raise Refused(err.status, message) from None
        if err.status == 403:   # the API server's own: no right to its proxy (an offline list would fare no better)
            raise Refused(403, f"service {service}: {err.message or err.reason} (asking the scheduler through the API "
                               f"server needs `get services/proxy` on it)") from None
        raise Unreachable(f"service {service}: {err}") from None
    except ValueError as err:   # not JSON: something else answered
        raise Unreachable(f"service {service}: {err}") from None


def _is_ours(body: bytes) -> bool:
    try:
        return "error" in json.loads(body)
    except ValueError:
        return False


def _message(body: bytes, fallback: str) -> str:
    try:
        document = json.loads(body)
    except ValueError:
        return fallback
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.service.webapi import ERROR_PREFIX

    return str(document.get("message") or fallback).removeprefix(ERROR_PREFIX)


def source_of(args: argparse.Namespace, command: str) -> tuple[Source | None, Any]:
    """(the scheduler to ask, the KubeApi for an offline list); exit-2 errors print and raise SystemExit."""
    if args.scheduler:
        return Source(url=args.scheduler), None
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.kube.api import ConnectError, connect

    try:
        api = connect(args.kubeconfig, args.context)
    except ConnectError as err:
        print(f"policydsl {command}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    return Source(api=api, service=args.scheduler_service), api


def offline_view(args: argparse.Namespace, api: Any, command: str, why: str):
    """One cycle of --policy on a fresh list of the cluster, as a runtime.service.views.CycleView."""
    import time

    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.kube.cache import ClusterCache
    from runtime.service.loop import CycleRecord
    from runtime.service.views import CycleView, with_podgroup_phases
    from runtime.engine.cycle import Options, run_cycle
    from policydsl.cli.inputs import InputError, compile_policy
    from runtime.simulation.scenarios import DEFAULT_POLICY

    if api is None:
        print(f"policydsl {command}: the scheduler did not answer ({why})", file=sys.stderr)
        raise SystemExit(2)
    try:
        plan = compile_policy(args.policy or DEFAULT_POLICY)
    except InputError as err:
        print(f"policydsl {command}: {err}" if err.exit_code == 2 else str(err), file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    print(f"policydsl {command}: the scheduler did not answer ({why}); one offline cycle of policy {plan.name} "
          f"on a fresh list of the cluster instead", file=sys.stderr)
    cache = ClusterCache(api, args.scheduler_name)
    cache.start()
    try:
        if not cache.wait_synced(60):
            print(f"policydsl {command}: could not list the cluster within 60 s", file=sys.stderr)
            raise SystemExit(2)
        state = cache.snapshot()
    finally:
        cache.stop()
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.cluster.objects import check_queues

    bad = {p.name for p in check_queues(state, [q.name for q in plan.queues])}
    for key in bad:   # as the scheduler does: a PodGroup of an unknown queue stays out of the cycle
        state.podgroups.pop(key, None)
    record = CycleRecord(want_facts=True)
    started = time.perf_counter()
    decisions = run_cycle(plan, state, Options(scheduler_name=args.scheduler_name, now=time.time()),
                          observer=record)
    facts = with_podgroup_phases(record.facts, decisions, state) if record.facts is not None else None
    return CycleView(0, plan.revision, plan.name, time.time(), time.perf_counter() - started,
                     args.scheduler_name, state, decisions, facts)


def print_document(document: Any, output: str) -> None:
    if output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(document, sort_keys=True, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
