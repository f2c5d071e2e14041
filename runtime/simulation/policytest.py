"""Policy test files (`*.policytest.yaml`): a policy, a cluster and workload, and assertions
about what the scheduler does with them, for CI (`policydsl test`).

    policy: ../volcano-default.policy     # paths are relative to the test file
    snapshot: cluster.yaml                # a path, or a list of Kubernetes objects inline
    workload: [...]                       # likewise; neither: the built-in example
    cycles: 1                             # or `until: 2h`; neither: until nothing is left to happen
    topology_labels: example.com/rack,kubernetes.io/hostname   # optional: HyperNodes from node labels
    tests:
      - name: the gang lands whole
        expect:
          - {pod: ns/a-0, node: n1}
          - {queue: online, wait_p99: "< 30s"}

Every test may override policy, snapshot, workload, cycles, until, period and topology_labels. Tests with the
same inputs share one run. docs/simulator.md lists every assertion. A malformed file raises
`TestFileError` with file:line:column.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from compiler.pipeline import compile_file
from policydsl.diagnostics import closest, did_you_mean
from runtime.cluster.model import group_key_of
from runtime.cluster.objects import ObjectError, problems_text, read_documents
from runtime.cluster.topology_labels import LabelTopology, LabelTopologyError, read_topology_labels
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from runtime.simulation.workload import Document, format_duration, parse_duration

TEST_SUFFIX = ".policytest.yaml"
RUN_KEYS = ("policy", "snapshot", "workload", "cycles", "until", "period", "topology_labels")
FILE_KEYS = RUN_KEYS + ("tests",)
TEST_KEYS = ("name",) + RUN_KEYS + ("expect",)
POD_CHECKS = ("node", "node_labels", "bound", "unschedulable", "evicted", "volumes")
PODGROUP_CHECKS = ("phase", "unschedulable", "span_tier")
JOB_CHECKS = ("bound_before", "started")
QUEUE_METRICS = {
    "wait_p50": "duration", "wait_p95": "duration", "wait_p99": "duration", "wait_max": "duration",
    "evictions": "count", "jobs": "count", "started": "count", "completed": "count", "waiting": "count",
    "share": "fraction", "fairness": "number",
}
CLUSTER_METRICS = {"gang_violations": "count", "evictions": "count", "fairness": "number",
                   "utilization": "per-resource", "fragmentation": "per-resource",
                   "wasted_evictions": "count", "repeated_evictions": "count", "traded_evictions": "count",
                   "storage_waiting": "count"}
# Every test fails on a run that thrashes (runtime.engine.evictions) unless it asserts one of these itself.
THRASH_METRICS = ("wasted_evictions", "repeated_evictions", "traded_evictions")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "==": lambda a, b: abs(a - b) <= 1e-9,
    "!=": lambda a, b: abs(a - b) > 1e-9, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
}
_COMPARISON = re.compile(r"^\s*(<=|>=|==|!=|<|>)?\s*(.+?)\s*$")


# --- located YAML -----------------------------------------------------------------------------

class Located(dict):
    """A mapping from a test file that remembers where it and each of its values start."""

    line: int = 0
    column: int = 0
    marks: dict

    def at(self, key: Any) -> tuple[int, int]:
        return self.marks.get(key, (self.line, self.column))


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Located:
    loader.flatten_mapping(node)
    out = Located()
    out.line, out.column = node.start_mark.line + 1, node.start_mark.column + 1
    out.marks = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.marks[key] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class TestFileError(Exception):
    def __init__(self, path: Path | str, line: int, column: int, message: str):
        self.path, self.line, self.column, self.message = str(path), line, column, message
        super().__init__(f"{self.path}:{line}:{column}: {message}")


# --- the model --------------------------------------------------------------------------------

class Inline:
    """Objects written in the test file; compared by identity (one YAML node, one run)."""

    def __init__(self, documents: list[Document]):
        self.documents = documents


@dataclass(frozen=True)
class Inputs:
    """What one run needs; tests with equal Inputs share the run."""

    policy: Path
    snapshot: Path | Inline | None
    workload: Path | Inline | None
    cycles: int | None
    until: float | None
    period: float
    topology_labels: LabelTopology | None = None    # HyperNodes derived from node labels (--topology-labels)


@dataclass(frozen=True)
class Assertion:
    text: str                              # how the report names it
    line: int
    check: Callable[[Any], str | None]     # SimulationResult -> failure message, None when it holds


@dataclass(frozen=True)
class TestCase:
    file: Path
    name: str
    line: int
    inputs: Inputs
    assertions: tuple[Assertion, ...]

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@dataclass
class Outcome:
    case: TestCase
    status: str                            # passed | failed | error
    failures: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


# --- discovery and parsing ----------------------------------------------------------------------

def discover(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Test files under the paths (a file is taken as given), and the paths that do not exist."""
    files: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob(f"*{TEST_SUFFIX}")
                                if not any(part.startswith(".") for part in p.relative_to(path).parts[:-1])))
        elif path.is_file():
            files.append(path)
        else:
            missing.append(raw)
    return files, missing


def load_test_file(path: Path) -> list[TestCase]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TestFileError(path, 1, 1, f"cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        document = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise TestFileError(path, line, column, f"invalid YAML: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(document, Located):
        raise TestFileError(path, 1, 1, "a test file is a mapping with `policy` and `tests`")
    _known_keys(path, document, FILE_KEYS, "test file")
    tests = document.get("tests")
    if not isinstance(tests, list) or not tests:
        line, column = document.at("tests")
        raise TestFileError(path, line, column, "`tests` must be a non-empty list of tests")
    shared = {key: _objects(path, document.get(key), document, key) for key in ("snapshot", "workload")}
    cases = []
    names: set[str] = set()
    for raw in tests:
        if not isinstance(raw, Located):
            raise TestFileError(path, *document.at("tests"), "each test is a mapping with `name` and `expect`")
        _known_keys(path, raw, TEST_KEYS, "test")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise TestFileError(path, raw.line, raw.column, "a test needs a `name`")
        if name in names:
            raise TestFileError(path, *raw.at("name"), f"two tests are named `{name}`")
        names.add(name)
        inputs = _inputs(path, document, raw, shared)
        expect = raw.get("expect")
        if not isinstance(expect, list) or not expect:
            raise TestFileError(path, *raw.at("expect"), "`expect` must be a non-empty list of assertions")
        assertions = tuple(_assertion(path, item, raw) for item in expect)
        cases.append(TestCase(path, name, raw.line, inputs, assertions))
    return cases


def _known_keys(path: Path, mapping: Located, known: tuple[str, ...], what: str) -> None:
    for key in mapping:
        if key not in known:
            hint = did_you_mean(str(key), known)
            raise TestFileError(path, *mapping.at(key), f"unknown key `{key}` in a {what}" + (f"; {hint}" if hint else "")
                                + ("" if hint else f" (known: {', '.join(known)})"))


def _inputs(path: Path, file: Located, test: Located, shared: dict[str, Path | Inline | None]) -> Inputs:
    def pick(key: str) -> tuple[Any, Located]:
        return (test[key], test) if key in test else (file.get(key), file)

    policy, where = pick("policy")
    if not isinstance(policy, str):
        line, column = where.at("policy") if "policy" in where else (test.line, test.column)
        raise TestFileError(path, line, column, "`policy` must name the policy file (relative to the test file)")
    # A test's own `cycles` or `until` replaces both limits of the file.
    limits = test if ("cycles" in test or "until" in test) else file
    cycles, until = limits.get("cycles"), limits.get("until")
    if cycles is not None and until is not None:
        raise TestFileError(path, limits.line, limits.column, "give `cycles` or `until`, not both")
    if cycles is not None and (isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1):
        raise TestFileError(path, *limits.at("cycles"), "`cycles` must be a positive integer")
    period, period_where = pick("period")
    labels, labels_where = pick("topology_labels")
    return Inputs(
        policy=(path.parent / policy),
        snapshot=_objects(path, test["snapshot"], test, "snapshot") if "snapshot" in test else shared["snapshot"],
        workload=_objects(path, test["workload"], test, "workload") if "workload" in test else shared["workload"],
        cycles=cycles,
        until=_duration(path, limits, "until", until) if until is not None else None,
        period=_duration(path, period_where, "period", period) if period is not None else 1.0,
        topology_labels=_topology_labels(path, labels_where, labels) if labels is not None else None,
    )


def _topology_labels(path: Path, where: Located, value: Any) -> LabelTopology:
    """A label list (top to bottom, ending with kubernetes.io/hostname), or a file of Volcano's
    controller configuration relative to the test file, as `simulate --topology-labels` takes."""
    if not isinstance(value, str) or not value.strip():
        raise TestFileError(path, *where.at("topology_labels"), "`topology_labels` must be a label list "
                            "(e.g. example.com/rack,kubernetes.io/hostname) or a file of Volcano's configuration")
    relative = path.parent / value
    try:
        return read_topology_labels(str(relative) if "," not in value and relative.is_file() else value)
    except LabelTopologyError as err:
        raise TestFileError(path, *where.at("topology_labels"), f"`topology_labels`: {err}") from None


def _duration(path: Path, where: Located, key: str, value: Any) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        raise TestFileError(path, *where.at(key), f"`{key}`: {err}") from None
    if key == "period" and seconds <= 0:
        raise TestFileError(path, *where.at(key), "`period` must be positive")
    return seconds


def _objects(path: Path, value: Any, where: Located, key: str) -> Path | Inline | None:
    """A path (relative to the test file) or inline objects, each named by its line."""
    if value is None:
        return None
    if isinstance(value, str):
        return path.parent / value
    items = value if isinstance(value, list) else [value]
    docs = []
    for item in items:
        if not isinstance(item, Located):
            raise TestFileError(path, *where.at(key), f"`{key}` must be a path or a list of Kubernetes objects")
        docs.append((f"{path}:{item.line}", item))
    return Inline(docs)


# --- assertions ----------------------------------------------------------------------------------

def _assertion(path: Path, item: Any, test: Located) -> Assertion:
    if not isinstance(item, Located) or not item:
        raise TestFileError(path, *test.at("expect"), "an assertion is a mapping, e.g. {pod: ns/p, node: n1}")
    for subject, checks, build in (("pod", POD_CHECKS, _pod_check), ("podgroup", PODGROUP_CHECKS, _podgroup_check),
                                   ("job", JOB_CHECKS, _job_check), ("queue", tuple(QUEUE_METRICS), _queue_check)):
        if subject in item:
            _known_keys(path, item, (subject,) + checks, f"`{subject}` assertion")
            given = [k for k in item if k != subject]
            if len(given) != 1:
                raise TestFileError(path, item.line, item.column,
                                    f"a `{subject}` assertion checks one thing: one of {', '.join(checks)}")
            key = given[0]
            try:
                return build(str(item[subject]), key, item[key], item.line)
            except ValueError as err:
                raise TestFileError(path, *item.at(key), f"`{key}`: {err}") from None
    _known_keys(path, item, tuple(CLUSTER_METRICS), "cluster assertion (or give pod, podgroup, job or queue)")
    if len(item) != 1:
        raise TestFileError(path, item.line, item.column, "a cluster assertion checks one metric")
    key = next(iter(item))
    try:
        return _cluster_check(key, item[key], item.line)
    except ValueError as err:
        raise TestFileError(path, *item.at(key), f"`{key}`: {err}") from None


def parse_comparison(value: Any, kind: str) -> tuple[str, float, str]:
    """`< 30s` -> ("<", 30.0, "< 30s"); a bare value means ==. Kinds: duration, count,
    fraction (0.5 or 50%), number."""
    if isinstance(value, bool):
        raise ValueError(f"expected a comparison like `< 30s` or a number, found `{value}`")
    if isinstance(value, (int, float)):
        op, operand = "==", value
    else:
        match = _COMPARISON.match(str(value))
        if not match:
            raise ValueError(f"expected a comparison like `< 30s`, found `{value}`")
        op, operand = match.group(1) or "==", match.group(2)
    if kind == "duration":
        number = parse_duration(operand)
        shown = format_duration(number)
    elif kind == "fraction" and isinstance(operand, str) and operand.endswith("%"):
        number = float(operand[:-1]) / 100.0
        shown = operand
    else:
        try:
            number = float(operand)
        except ValueError:
            raise ValueError(f"`{operand}` is not a number") from None
        if kind == "count" and number != int(number):
            raise ValueError(f"`{operand}` is not a whole number")
        shown = f"{number:g}"
    return op, number, f"{op} {shown}"


def _shown(value: float | None, kind: str) -> str:
    if value is None:
        return "none"
    if kind == "duration":
        return format_duration(value)
    if kind == "fraction":
        return f"{value * 100:.1f}%"
    return f"{value:g}"


def _suggest(word: str, candidates) -> str:
    guess = closest(word, list(candidates))
    return f" (did you mean {guess}?)" if guess else ""


def _pod_check(pod: str, key: str, value: Any, line: int) -> Assertion:
    def known(result) -> str | None:
        if pod in result.placements or pod in result.state.pods:
            return None
        return f"no pod {pod} in the run{_suggest(pod, result.state.pods)}"

    if key == "node":
        def check(result) -> str | None:
            node = result.placements.get(pod)
            if node == str(value):
                return None
            return known(result) or f"{pod} was {'bound to ' + node if node else 'never bound'}, expected {value}"
        return Assertion(f"pod {pod} lands on node {value}", line, check)
    if key == "node_labels":
        if not isinstance(value, dict) or not value:
            raise ValueError("give the labels as a mapping, e.g. {pool: gpu}")
        wanted = {str(k): str(v) for k, v in value.items()}

        def check(result) -> str | None:
            node = result.placements.get(pod)
            if node is None:
                return known(result) or f"{pod} was never bound"
            labels = result.state.nodes[node].labels if node in result.state.nodes else {}
            missing = {k: v for k, v in wanted.items() if labels.get(k) != v}
            if not missing:
                return None
            return f"{pod} was bound to {node}, which lacks " + ", ".join(f"{k}={v}" for k, v in missing.items())
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        return Assertion(f"pod {pod} lands on a node labelled {shown}", line, check)
    if key == "bound":
        if not isinstance(value, bool):
            raise ValueError("expected true or false")

        def check(result) -> str | None:
            node = result.placements.get(pod)
            if (node is not None) == value:
                return None
            return known(result) or (f"{pod} was bound to {node}" if node else f"{pod} was never bound")
        return Assertion(f"pod {pod} is {'bound' if value else 'never bound'}", line, check)
    if key == "unschedulable":
        text = "" if value is True else str(value)

        def check(result) -> str | None:
            if pod not in result.waiting_reasons:
                node = result.placements.get(pod)
                if node is not None:
                    return f"{pod} was bound to {node}"
                return known(result) or f"{pod} was never considered by a cycle"
            reasons = [r.message for r in result.waiting_reasons[pod]]
            if any(text.lower() in r.lower() for r in reasons):
                return None
            return f"{pod} waits, but no reason contains `{text}`: " + "; ".join(reasons)
        shown = f" with a reason containing `{text}`" if text else ""
        return Assertion(f"pod {pod} is unschedulable{shown}", line, check)
    if key == "volumes":
        return _volumes_check(pod, value, line, known)
    if isinstance(value, bool):
        op, number, shown = (">=", 1.0, ">= 1") if value else ("==", 0.0, "== 0")
    else:
        op, number, shown = parse_comparison(value, "count")

    def check(result) -> str | None:
        count = result.evicted.get(pod, 0)
        if OPERATORS[op](count, number):
            return None
        return known(result) or f"{pod} was evicted {count} times, expected {shown}"
    return Assertion(f"pod {pod} evictions {shown}", line, check)


PROVISIONED = "provisioned"


def _volumes_check(pod: str, value: Any, line: int, known: Callable[[Any], str | None]) -> Assertion:
    """`volumes: {data: pv-3, scratch: provisioned}`: at the end each of the pod's claims (by name,
    in its namespace) is bound to that PV, or to one provisioned for it."""
    if not isinstance(value, dict) or not value:
        raise ValueError(f"give the claims as a mapping of claim to PV (or `{PROVISIONED}`), e.g. {{data: pv-3}}")
    wanted = {str(k): str(v) for k, v in value.items()}
    namespace = pod.split("/", 1)[0] if "/" in pod else "default"

    def check(result) -> str | None:
        problems = []
        for claim, volume in wanted.items():
            found = result.state.storage.claims.get(f"{namespace}/{claim}")
            if found is None:
                problems.append(f"no claim {namespace}/{claim}")
                continue
            bound = found.volume_name if found.fully_bound else ""
            provisioned = bound and bound.startswith("pvc-")
            if bound == volume or (volume == PROVISIONED and provisioned):
                continue
            problems.append(f"{claim} is bound to {bound}" if bound else f"{claim} is not bound")
        if not problems:
            return None
        return known(result) or f"{pod}: " + ", ".join(problems) + f" (expected {shown})"
    shown = ", ".join(f"{k} -> {v}" for k, v in wanted.items())
    return Assertion(f"pod {pod}'s claims bound: {shown}", line, check)


def _podgroup_check(group: str, key: str, value: Any, line: int) -> Assertion:
    def unknown(result) -> str | None:
        if group in result.podgroup_phases:
            return None
        return f"no PodGroup {group} in the run{_suggest(group, result.podgroup_phases)}"

    if key == "unschedulable":
        text = "" if value is True else str(value)

        def check(result) -> str | None:
            problem = unknown(result)
            if problem:
                return problem
            live = result.state.podgroups.get(group)
            said = [c.message for c in live.conditions if c.type == "Unschedulable"] if live is not None else []
            said += [r.message for pod, reasons in result.waiting_reasons.items()
                     if result.state.pods[pod].group and group_key_of(result.state.pods[pod]) == group
                     for r in reasons]
            if not said:
                return f"PodGroup {group} has no pod waiting (phase {result.podgroup_phases[group]})"
            if any(text.lower() in m.lower() for m in said):
                return None
            return f"PodGroup {group} waits, but no reason contains `{text}`: " + "; ".join(dict.fromkeys(said))
        shown = f" with a reason containing `{text}`" if text else ""
        return Assertion(f"podgroup {group} is unschedulable{shown}", line, check)
    if key == "span_tier":
        op, limit, shown_limit = parse_comparison(value, "count")

        def check(result) -> str | None:
            problem = unknown(result)
            if problem:
                return problem
            span = result.spans.get(group)
            if span is None:
                return f"PodGroup {group} never ran" if result.state.has_hypernodes else \
                    "the run has no HyperNodes (give HyperNode objects or topology_labels)"
            if span.tier is None:
                return f"PodGroup {group} spanned the cluster (no one HyperNode held its {span.nodes} nodes), " \
                       f"expected a tier {shown_limit}"
            return None if OPERATORS[op](span.tier, limit) else \
                f"PodGroup {group} spanned tier {span.tier} ({span.hypernode}), expected {shown_limit}"
        return Assertion(f"podgroup {group} spans tier {shown_limit}", line, check)
    phase = str(value)

    def check(result) -> str | None:
        problem = unknown(result)
        if problem:
            return problem
        actual = result.podgroup_phases[group]
        return None if actual == phase else f"PodGroup {group} ended in phase {actual}, expected {phase}"
    return Assertion(f"podgroup {group} phase is {phase}", line, check)


def _job_check(job: str, key: str, value: Any, line: int) -> Assertion:
    if key == "started":
        if not isinstance(value, bool):
            raise ValueError("expected true or false")

        def check(result) -> str | None:
            started = job in result.job_starts
            if started == value:
                return None
            if started:
                return f"job {job} started at {format_duration(result.job_starts[job])}"
            return f"job {job} never started"
        return Assertion(f"job {job} {'starts' if value else 'never starts'}", line, check)
    other = str(value)

    def check(result) -> str | None:
        first, second = result.job_starts.get(job), result.job_starts.get(other)
        if first is None:
            return f"job {job} never started" + ("" if job in result.podgroup_phases else _suggest(job, result.podgroup_phases))
        if second is None or first < second:
            return None
        when = "in the same cycle as" if first == second else "after"
        return (f"job {job} started at {format_duration(first)}, {when} job {other} "
                f"(at {format_duration(second)})")
    return Assertion(f"job {job} is bound before job {other}", line, check)


def _metric_check(subject: str, name: str, kind: str, value: Any, line: int,
                  read: Callable[[Any], tuple[float | None, str | None]]) -> Assertion:
    op, number, shown = parse_comparison(value, kind)

    def check(result) -> str | None:
        actual, problem = read(result)
        if problem:
            return problem
        if actual is None:
            return f"{subject} {name} has no value (nothing was measured)"
        if OPERATORS[op](actual, number):
            return None
        return f"{subject} {name} is {_shown(actual, kind)}, expected {shown}"
    return Assertion(f"{subject} {name} {shown}".strip(), line, check)


def _queue_check(queue: str, key: str, value: Any, line: int) -> Assertion:
    kind = QUEUE_METRICS[key]

    def read(result):
        metrics = result.metrics.queues.get(queue)
        if metrics is None:
            if key in ("evictions", "jobs", "started", "completed", "waiting"):
                return 0.0, None      # a queue that saw no job had none of these
            return None, f"queue {queue} had no jobs{_suggest(queue, result.metrics.queues)}"
        field_name = {"share": "share", "fairness": "fairness"}.get(key, key)
        return getattr(metrics, field_name), None
    return _metric_check(f"queue {queue}", key, kind, value, line, read)


def _cluster_check(key: str, value: Any, line: int) -> Assertion:
    kind = CLUSTER_METRICS[key]
    if kind == "per-resource":
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError("give one resource and a comparison, e.g. {cpu: \"> 50%\"}")
        resource, comparison = next(iter(value.items()))

        def read(result):
            values = getattr(result.metrics, key)
            if resource not in values:
                return None, f"no {key} measured for {resource}{_suggest(str(resource), values)}"
            return values[resource], None
        return _metric_check(key, str(resource), "fraction", comparison, line, read)

    def read(result):
        m = result.metrics
        a = m.eviction_audit
        return {"gang_violations": float(len(m.gang_violations)), "evictions": float(m.evictions),
                "fairness": m.fairness, "wasted_evictions": float(a.get("wasted", 0)),
                "repeated_evictions": float(a.get("repeats", 0)),
                "traded_evictions": float(a.get("exchanges", 0)),
                "storage_waiting": float(m.storage_waiting)}[key], None
    return _metric_check("", key, kind, value, line, read)


# --- running ---------------------------------------------------------------------------------------

def _documents(value: Path | Inline | None) -> list[Document] | None:
    if value is None:
        return None
    if isinstance(value, Inline):
        return list(value.documents)
    return read_documents(value)


class PolicyUnusable(Exception):
    """A test's policy does not compile (`unreadable`: it could not even be read)."""

    def __init__(self, text: str, unreadable: bool):
        super().__init__(text)
        self.unreadable = unreadable


def run_inputs(inputs: Inputs):
    """Simulate one set of inputs. Raises PolicyUnusable and ObjectError."""
    compilation = compile_file(inputs.policy)
    plan = compilation.plan
    if plan is None:
        raise PolicyUnusable(compilation.error_text(inputs.policy), compilation.unreadable)
    scenario = scenario_from_documents(plan, _documents(inputs.snapshot), _documents(inputs.workload))
    if inputs.topology_labels is not None:
        scenario.initial.label_topology = inputs.topology_labels
    return simulate(plan, scenario, Limits(cycles=inputs.cycles, until=inputs.until, period=inputs.period))


def run_cases(cases: list[TestCase]) -> list[Outcome]:
    runs: dict[Inputs, Any] = {}
    outcomes = []
    for case in cases:
        started = time.perf_counter()
        try:
            result = runs.get(case.inputs)
            if result is None:
                result = runs[case.inputs] = run_inputs(case.inputs)
            if isinstance(result, Exception):
                raise result
        except PolicyUnusable as err:
            runs[case.inputs] = err
            # A policy that does not compile fails its tests; a missing file is an error.
            if not err.unreadable:
                outcomes.append(Outcome(case, "failed", [f"the policy does not compile:\n{err}"],
                                        seconds=time.perf_counter() - started))
            else:
                outcomes.append(Outcome(case, "error", error=str(err), seconds=time.perf_counter() - started))
            continue
        except ObjectError as err:
            runs[case.inputs] = err
            outcomes.append(Outcome(case, "error", error=problems_text(err), seconds=time.perf_counter() - started))
            continue
        failures = []
        for assertion in case.assertions:
            problem = assertion.check(result)
            if problem:
                failures.append(f"line {assertion.line}: {assertion.text}: {problem}")
        if result.metrics.thrashing and not any(m in a.text for a in case.assertions for m in THRASH_METRICS):
            failures.append(next(f.text for f in result.findings if f.kind == "thrashing") +
                            " (assert wasted_evictions, repeated_evictions or traded_evictions to allow it)")
        outcomes.append(Outcome(case, "failed" if failures else "passed", failures,
                                seconds=time.perf_counter() - started))
    return outcomes
