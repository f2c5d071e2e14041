"""Node load for the usage plugin: read from the metrics source Volcano's `metrics` config names,
off the scheduling path.

Volcano's scheduler cache reads every node's CPU and memory load (percent, averaged over 10
minutes) every `interval` (default 30 s) in a goroutine, and the usage plugin reads what the
cache last stored. Here `NodeUsageWatcher` is that goroutine: a daemon thread reading the source
every interval; a cycle takes its last figures (`figures()`, a dict lookup) and never waits for
the source. `NodeUsageFeed` keeps one watcher for the policy's current source (started, replaced
or stopped as the policy is reloaded) and hands its figures to each cycle's ClusterState.

The queries are Volcano v1.14.1's (pkg/scheduler/metrics/source): for Prometheus, the two
instant queries below with the node's name as `instance` (Prometheus must relabel node_exporter's
targets so); for Elasticsearch, a search of the index over the last 10 minutes for the node's
hostname field, averaging host.cpu.usage and system.memory.actual.used.pct (fractions, times 100);
for `prometheus_adaptor`, the custom metrics API through the API server (metrics_client_prometheus_adapt.go):
the root-scoped metrics node_cpu_usage_avg and node_memory_usage_avg of every Node (`GET
/apis/custom.metrics.k8s.io/<preferred version>/nodes/*/<metric>`, one request each per pass; the
values are fractions, times 100; each item's timestamp is when it was read), as the adapter's rules
define them. The scheduler hands the watcher its API server connection (`ApiGet`); no address is
used.

What differs from Volcano (runtime/README.md): a node the source has no figures for, or whose
query failed, gets no figures (Volcano stores 0% load read "now", so the node looks idle and
scores highest); a failing source is said in the log once per change (failing, recovered), and
`status()` tells it; a pass stops at the first connection failure instead of waiting out a
timeout per node; credentials are not read; with `prometheus_adaptor`, a node with only one of the
two metrics gets no figures (Volcano keeps 0 for the other)."""

from __future__ import annotations

import json
import logging
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping

from compiler.quantities import to_base_units

log = logging.getLogger(__name__)

NODE_METRICS_PERIOD = "10m"          # Volcano's source.NODE_METRICS_PERIOD
METRICS_ACTIVE_S = 300.0             # figures older than this are not used (Volcano's MetricsActiveTime)
DEFAULT_INTERVAL_S = 30.0            # Volcano's defaultMetricsInternal
PASS_DEADLINE_S = 60.0               # one pass over the nodes (Volcano's context timeout)
REQUEST_TIMEOUT_S = 10.0             # one HTTP request
MAX_BODY = 1 << 20                   # 1 MiB, as Volcano's Elasticsearch client reads at most
READERS = 8                          # requests in flight at once during a pass
ES_CPU_FIELD = "host.cpu.usage"
ES_MEM_FIELD = "system.memory.actual.used.pct"
PROMETHEUS_ADAPTOR = "prometheus_adaptor"
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
CUSTOM_METRICS_VERSIONS = ("v1beta2", "v1beta1")     # those Volcano's client (k8s.io/metrics) speaks
CUSTOM_CPU, CUSTOM_MEMORY = "node_cpu_usage_avg", "node_memory_usage_avg"   # the adapter rules' names
API_SERVER = "the API server's custom metrics API"
# GET a path on the API server: its decoded JSON; SourceUnreachable when no answer came, ValueError
# for any other failure (the scheduler's connector adapts its errors to these).
ApiGet = Callable[[str], Any]

_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float | None:
    """A Go duration (`30s`, `1m30s`, `100ms`) in seconds; None when it is not one."""
    body = text.strip().lstrip("+")
    if not body or _DURATION_PART.sub("", body):
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(body))


@dataclass(frozen=True)
class NodeUsage:
    """A node's load as Volcano's NodeUsage: CPU and memory percent over the period, and when read."""

    cpu: float
    memory: float
    time: float          # seconds since the epoch; figures older than METRICS_ACTIVE_S are not used


@dataclass(frozen=True)
class MetricsSource:
    """Volcano's `metrics` section, as the usage plugin's arguments hold it."""

    type: str
    address: str
    interval_s: float = DEFAULT_INTERVAL_S
    insecure_skip_verify: bool = False
    es_index: str = "metricbeat-*"
    es_hostname_field: str = "host.hostname"

    @classmethod
    def from_arguments(cls, args: Mapping[str, Any]) -> "MetricsSource | None":
        """The source the usage plugin's arguments name; None when they name none (no type, as
        Volcano reads no load then) or no address (Volcano's client refuses to start)."""
        kind, address = args.get("metrics_type"), args.get("metrics_address")
        if kind == PROMETHEUS_ADAPTOR:
            address = API_SERVER        # Volcano reads it with the scheduler's own API server config
        if not kind or not address:
            return None
        interval = duration_s(str(args.get("metrics_interval") or ""))
        return cls(str(kind), str(address), interval if interval and interval > 0 else DEFAULT_INTERVAL_S,
                   bool(args.get("metrics_insecure_skip_verify", False)),
                   str(args.get("elasticsearch_index") or "metricbeat-*"),
                   str(args.get("elasticsearch_hostname_field") or "host.hostname"))


# A load read with a snapshot (NodeMetrics objects): a snapshot is one moment, so its figures are
# fresh for every cycle over it (the simulator keeps them for the whole run).
WITH_THE_SNAPSHOT = float("inf")


def node_metrics_usage(usage: Mapping[str, int], allocatable: Mapping[str, int]) -> NodeUsage:
    """A NodeMetrics' usage (cpu in millicores, memory in bytes) as percent of the node's allocatable:
    the stand-in for the metrics source in snapshot files (documented in runtime/README.md)."""
    def percent(resource: str) -> float:
        total = allocatable.get(resource, 0)
        return 100.0 * usage.get(resource, 0) / total if total > 0 else 0.0
    return NodeUsage(percent("cpu"), percent("memory"), WITH_THE_SNAPSHOT)


class SourceUnreachable(RuntimeError):
    """The source did not answer at all (connection refused, timeout, TLS): the pass stops."""


def prometheus_queries(node: str) -> tuple[str, str]:
    """Volcano's two PromQL queries for one node (metrics_client_prometheus.go), CPU then memory."""
    cpu = (f'avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{{mode="idle",'
           f'instance="{node}"}}[5m])) * 100), 0)[{NODE_METRICS_PERIOD}:30s])')
    mem = (f'100*avg_over_time(((1-node_memory_MemAvailable_bytes{{instance="{node}"}}/'
           f'node_memory_MemTotal_bytes{{instance="{node}"}}))[{NODE_METRICS_PERIOD}:30s])')
    return cpu, mem


def elasticsearch_query(node: str, hostname_field: str) -> dict:
    """Volcano's Elasticsearch search body for one node (metrics_client_elasticsearch.go)."""
    return {
        "size": 0,
        "query": {"bool": {"must": [
            {"range": {"@timestamp": {"gte": "now-" + NODE_METRICS_PERIOD, "lt": "now"}}},
            {"term": {hostname_field: node}},
        ]}},
        "aggs": {"cpu": {"avg": {"field": ES_CPU_FIELD}}, "mem": {"avg": {"field": ES_MEM_FIELD}}},
    }


def _post(source: MetricsSource, url: str, body: bytes, content_type: str, timeout: float) -> Any:
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context()
        if source.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            raw = answer.read(MAX_BODY + 1)
    except urllib.error.HTTPError as err:
        raise ValueError(f"{url} answered HTTP {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        raise SourceUnreachable(f"{source.address} unreachable: {getattr(err, 'reason', err)}") from None
    if len(raw) > MAX_BODY:
        raise ValueError(f"{url} answered more than {MAX_BODY} bytes")
    try:
        return json.loads(raw)
    except ValueError:
        raise ValueError(f"{url} answered something that is not JSON") from None


def _prometheus_value(answer: Any) -> float | None:
    """The first row of an instant vector (Volcano reads only that), None when there is none."""
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise ValueError(f"Prometheus answered {str(answer)[:200]}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector" or not data.get("result"):
        return None
    value = data["result"][0].get("value") or [None, None]
    return float(value[1])


def read_node(source: MetricsSource, node: str, timeout: float = REQUEST_TIMEOUT_S,
              clock: Callable[[], float] = time.time) -> NodeUsage | None:
    """One node's load from the source; None when the source has no figures for it."""
    if source.type == "elasticsearch":
        url = f"{source.address.rstrip('/')}/{urllib.parse.quote(source.es_index)}/_search"
        answer = _post(source, url, json.dumps(elasticsearch_query(node, source.es_hostname_field)).encode(),
                       "application/json", timeout)
        aggs = (answer or {}).get("aggregations") if isinstance(answer, dict) else None
        if not isinstance(aggs, dict):
            raise ValueError(f"Elasticsearch answered no aggregations for {node}")
        cpu, mem = (aggs.get("cpu") or {}).get("value"), (aggs.get("mem") or {}).get("value")
        if cpu is None or mem is None:
            return None
        return NodeUsage(float(cpu) * 100, float(mem) * 100, clock())
    url = f"{source.address.rstrip('/')}/api/v1/query"
    values = []
    for query in prometheus_queries(node):
        body = urllib.parse.urlencode({"query": query, "time": f"{clock():.3f}"}).encode()
        values.append(_prometheus_value(_post(source, url, body, "application/x-www-form-urlencoded", timeout)))
    if values[0] is None or values[1] is None:
        return None
    return NodeUsage(values[0], values[1], clock())


def custom_metrics_version(api_get: ApiGet) -> str:
    """The custom metrics API version to read: the group's preferred one when Volcano's client
    speaks it, else the first it speaks (k8s.io/metrics' chooseVersion)."""
    group = api_get(f"/apis/{CUSTOM_METRICS_GROUP}")
    if not isinstance(group, dict):
        raise ValueError(f"/apis/{CUSTOM_METRICS_GROUP} answered {str(group)[:200]}")
    preferred = str((group.get("preferredVersion") or {}).get("version") or "")
    if preferred in CUSTOM_METRICS_VERSIONS:
        return preferred
    offered = {str(v.get("version")) for v in group.get("versions") or [] if isinstance(v, dict)}
    for version in CUSTOM_METRICS_VERSIONS:
        if version in offered:
            return version
    raise ValueError(f"{CUSTOM_METRICS_GROUP} serves none of {', '.join(CUSTOM_METRICS_VERSIONS)}")


def _fraction(value: Any) -> float:
    """A metric's value, a Kubernetes quantity ("425m", "0.4253", "1")."""
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return to_base_units("cpu", text) / 1000.0


def _timestamp(text: Any, default: float) -> float:
    if not text:
        return default
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"metric timestamp `{text}` is no RFC 3339 time") from None


def read_custom_metrics(api_get: ApiGet, nodes: Iterable[str],
                        clock: Callable[[], float] = time.time) -> dict[str, NodeUsage | None]:
    """Every wanted node's load from the custom metrics API (Volcano's KMetricsClient.NodesMetricsAvg):
    a node with both metrics gets them times 100, read when their items say; others get None."""
    wanted = set(nodes)
    version = custom_metrics_version(api_get)
    values: dict[str, dict[str, tuple[float, float]]] = {}
    for metric in (CUSTOM_CPU, CUSTOM_MEMORY):
        answer = api_get(f"/apis/{CUSTOM_METRICS_GROUP}/{version}/nodes/*/{metric}")
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise ValueError(f"the custom metrics API answered no MetricValueList for {metric}")
        for item in items:
            name = str(((item or {}).get("describedObject") or {}).get("name") or "")
            if name in wanted:
                values.setdefault(name, {})[metric] = (_fraction(item.get("value")) * 100,
                                                       _timestamp(item.get("timestamp"), clock()))
    out: dict[str, NodeUsage | None] = {}
    for name in wanted:
        got = values.get(name, {})
        if CUSTOM_CPU in got and CUSTOM_MEMORY in got:
            (cpu, t_cpu), (memory, t_memory) = got[CUSTOM_CPU], got[CUSTOM_MEMORY]
            out[name] = NodeUsage(cpu, memory, min(t_cpu, t_memory))
        else:
            out[name] = None
    return out


@dataclass(frozen=True)
class WatchStatus:
    """How the last pass went: for logs, explain and tests."""

    source: str
    last_success: float | None = None    # when a pass last read some node
    error: str = ""                      # the last pass's failure ("" when it read every node it could)
    nodes_read: int = 0


class NodeUsageWatcher:
    """Reads every wanted node's load every `source.interval_s`, in a daemon thread (`start`);
    `figures()` is what the last passes read, each node's latest."""

    def __init__(self, source: MetricsSource, clock: Callable[[], float] = time.time,
                 reader: Callable[[MetricsSource, str], NodeUsage | None] | None = None,
                 api_get: ApiGet | None = None):
        self.source = source
        self.clock = clock
        self._read = reader or (lambda s, n: read_node(s, n, clock=clock))
        self._api_get = api_get     # prometheus_adaptor: the scheduler's API server connection
        self._lock = threading.Lock()
        self._wanted: frozenset[str] = frozenset()
        self._figures: dict[str, NodeUsage] = {}
        self._status = WatchStatus(source.address)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def want(self, nodes: Iterable[str]) -> None:
        """The nodes the next pass reads (the cluster's, as the cycle sees them)."""
        wanted = frozenset(nodes)
        with self._lock:
            self._wanted = wanted
            self._figures = {n: u for n, u in self._figures.items() if n in wanted}

    def figures(self) -> dict[str, NodeUsage]:
        with self._lock:
            return dict(self._figures)

    def status(self) -> WatchStatus:
        with self._lock:
            return self._status

    def read_once(self) -> WatchStatus:
        """One pass over the wanted nodes (READERS at a time, within PASS_DEADLINE_S): a node read
        replaces its figures; one the source has none for loses them; the pass stops at the
        first SourceUnreachable (every other node would wait out the same timeout)."""
        with self._lock:
            nodes = sorted(self._wanted)
        started = self.clock()
        read: dict[str, NodeUsage | None] = {}
        error = ""
        unreachable = threading.Event()

        def one(node: str) -> None:
            nonlocal error
            if unreachable.is_set() or time.monotonic() - begun > PASS_DEADLINE_S:
                return
            try:
                read[node] = self._read(self.source, node)
            except SourceUnreachable as err:
                unreachable.set()
                error = str(err)
            except (ValueError, KeyError, TypeError, IndexError) as err:
                error = f"node {node}: {err}"

        begun = time.monotonic()
        if self.source.type == PROMETHEUS_ADAPTOR:
            # One pass is two requests for every node (Volcano's GetForObjects), not one per node.
            if self._api_get is None:
                error = "no API server connection to read the custom metrics API through"
            else:
                try:
                    read = read_custom_metrics(self._api_get, nodes, self.clock)
                except SourceUnreachable as err:
                    error = str(err)
                except (ValueError, KeyError, TypeError, AttributeError) as err:
                    error = str(err)
        elif nodes:
            with ThreadPoolExecutor(max_workers=min(READERS, len(nodes)), thread_name_prefix="usage-read") as pool:
                list(pool.map(one, nodes))
        if not error and len(read) < len(nodes) and not unreachable.is_set():
            error = f"the pass took over {PASS_DEADLINE_S:.0f} s; {len(nodes) - len(read)} nodes not read"
        with self._lock:
            for node, usage in read.items():
                if usage is None:
                    self._figures.pop(node, None)
                elif node in self._wanted:
                    self._figures[node] = usage
            got = sum(1 for u in read.values() if u is not None)
            before = self._status
            self._status = WatchStatus(self.source.address, started if got else before.last_success, error, got)
        if error and error != before.error:
            log.warning("usage: metrics source %s (%s): %s; a node's last figures are used until %.0f s old, then "
                        "it passes the usage filter and scores 0 (as Volcano with no figures)",
                        self.source.address, self.source.type, error, METRICS_ACTIVE_S)
        elif not error and before.error:
            log.info("usage: metrics source %s answers again (%d nodes read)", self.source.address, got)
        return self._status

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="usage-metrics", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self.source.interval_s)

    def stop(self) -> None:
        self._stop.set()


class NodeUsageFeed:
    """The usage figures each cycle gets: one watcher for the plan's metrics source (the usage
    plugin's metrics_* arguments), replaced when a reload changes the source, stopped when the
    plan has none."""

    def __init__(self, make: Callable[[MetricsSource], NodeUsageWatcher] | None = None,
                 api_get: ApiGet | None = None):
        self._make = make or (lambda source: NodeUsageWatcher(source, api_get=api_get))
        self.watcher: NodeUsageWatcher | None = None

    def figures(self, usage_arguments: Mapping[str, Any] | None, nodes: Iterable[str]) -> dict[str, NodeUsage] | None:
        """This cycle's figures (None when the plan reads no load); never waits for the source:
        the first cycles after a start see none until the first pass is done."""
        source = MetricsSource.from_arguments(usage_arguments) if usage_arguments is not None else None
        if self.watcher is not None and (source is None or self.watcher.source != source):
            self.watcher.stop()
            self.watcher = None
        if source is None:
            return None
        if self.watcher is None:
            self.watcher = self._make(source)
            self.watcher.want(nodes)
            self.watcher.start()
        else:
            self.watcher.want(nodes)
        return self.watcher.figures()

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
