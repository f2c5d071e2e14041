"""Volcano's table-driven scheduler unit tests, restated as our snapshot + policy.

Volcano's tests (volcano.sh/volcano@v1.14.1, pkg/scheduler/{actions,plugins}/*/…_test.go) build a
cluster with util.BuildNode/BuildPod/BuildPodGroup/BuildQueue, open a session with a tier list,
run actions and check what uthelper.TestCommonStruct.CheckAll checks: the exact bind map, the
multiset of evictions, the nodes of each listed job's pipelined tasks and PodGroup phases.
This module is the bridge:

- builders (`res`, `node`, `pod`, `podgroup`, `queue`) that give our model objects the same
  meaning the Go helpers give theirs (a pod's `labels` argument is its labels, as in BuildPod;
  the group goes in `Pod.group`; a queue is a Queue object, not a policy queue);
- `P` and `policy_text`: a Volcano tier list as a policy. In Volcano's tests a flag left unset
  is off (framework.isEnabled is `enabled != nil && *enabled`; only the YAML loader defaults
  them to true), so every flag our catalog knows for a plugin is written out, true or false;
- `Case` and `check`: one table entry, its expected outcome, and how it is marked when our
  engine decides otherwise (a documented deliberate difference, or a strict xfail with a class).

A case runs on an open session: its actions in the Go test's order (which may differ from a
policy's canonical order), then `collect`. Each module runs every case on both kernels.
`VCASE_SHOW=1 pytest tests/volcano_cases` drops the xfail marks to show how each divergent
case fails; each xfail reason starts with its divergence class (issue 16's, or a new one).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import pytest

from compiler import catalog as cat
from compiler.pipeline import compile_text
from compiler.plan import Plan
from compiler.quantities import to_base_units
from runtime.engine.actions import registry as action_registry
from runtime.engine.cycle import collect, open_session
from runtime.cluster.decisions import Decisions
from runtime.cluster.model import PREEMPT_LOWER_PRIORITY, ClusterState, Node, Pod, PodGroup, QueueObject, Taint, Toleration
from runtime.engine.session import Options, Session

VOLCANO = "volcano.sh/volcano@v1.14.1"
README = Path(__file__).resolve().parents[2] / "runtime" / "README.md"
ACTION_ORDER = ("enqueue", "allocate", "preempt", "reclaim", "backfill")


# --- objects, as Volcano's test helpers build them ---------------------------------------------

def res(cpu: str = "", memory: str = "", extra: dict[str, str] | None = None) -> dict[str, int]:
    """api.BuildResourceList(cpu, memory, scalars...) in base units: empty strings are left out,
    `extra` holds the ScalarResource entries ({"pods": "10", "nvidia.com/gpu": "1"})."""
    out: dict[str, int] = {}
    if cpu:
        out["cpu"] = to_base_units("cpu", cpu)
    if memory:
        out["memory"] = to_base_units("memory", memory)
    for name, value in (extra or {}).items():
        out[name] = to_base_units(name, value)
    return out


def node(name: str, alloc: dict[str, int], labels: dict[str, str] | None = None,
         taints: tuple[tuple[str, str, str], ...] = ()) -> Node:
    """util.BuildNode: allocatable as given (no pods entry unless the case lists one, as in Go)."""
    return Node(name, dict(alloc), labels=dict(labels or {}), taints=tuple(Taint(*t) for t in taints))


def pod(ns: str, name: str, node_name: str, phase: str, req: dict[str, int], group: str,
        labels: dict[str, str] | None = None, selector: dict[str, str] | None = None, *,
        priority: int | None = None, preemption_policy: str = PREEMPT_LOWER_PRIORITY,
        annotations: dict[str, str] | None = None, tolerations: tuple[Toleration, ...] = (),
        required_terms: tuple = (), preferred_terms: tuple = (), rules=None, creation: float = 0.0) -> Pod:
    """util.BuildPod(ns, name, nodeName, phase, req, groupName, labels, selector): UID
    "<ns>-<name>", no creation time (ties go by UID, as in Go)."""
    return Pod(ns, name, {k: v for k, v in req.items() if v}, uid=f"{ns}-{name}", node_name=node_name or None,
               phase=phase, group=group or None, priority=priority, node_selector=dict(selector or {}),
               labels=dict(labels or {}), annotations=dict(annotations or {}), preemption_policy=preemption_policy,
               tolerations=tolerations, required_terms=required_terms, preferred_terms=preferred_terms, rules=rules,
               creation=creation)


def podgroup(name: str, ns: str, queue_name: str, min_member: int, min_task_member: dict[str, int] | None = None,
             phase: str = "Inqueue", *, priority_class: str | None = None,
             min_resources: dict[str, int] | None = None) -> PodGroup:
    """util.BuildPodGroup / BuildPodGroupWithPrio / BuildPodGroupWithMinResources. Volcano's job
    UID is "<ns>/<name>", which job order falls back to."""
    return PodGroup(ns, name, min_member=min_member, min_resources=min_resources,
                    min_task_member=dict(min_task_member or {}), queue=queue_name, priority_class=priority_class,
                    phase=phase or "Pending", uid=f"{ns}/{name}")


def queue(name: str, weight: int = 1, capability: dict[str, int] | None = None, *,
          deserved: dict[str, int] | None = None, guarantee: dict[str, int] | None = None, priority: int = 0,
          parent: str | None = None, state: str = "open", reclaimable: bool = True) -> QueueObject:
    """util.BuildQueue / BuildQueueWithState / BuildQueueWithResourcesQuantity /
    BuildQueueWithPriorityAndResourcesQuantity / buildQueueWithParents (capacity)."""
    return QueueObject(name, weight=weight, capability=capability or None, guarantee=guarantee or None,
                       deserved=deserved, priority=priority, parent=parent or None, state=state,
                       reclaimable=reclaimable)


# --- tiers, as a policy -------------------------------------------------------------------------

@dataclass(frozen=True)
class P:
    """One conf.PluginOption: the plugin, the flags the Go test sets to true, its arguments (our
    argument names) and score weight."""

    name: str
    on: frozenset[str] = frozenset()
    args: tuple[tuple[str, object], ...] = ()
    weight: float | None = None


def plugin(name: str, *points: str, weight: float | None = None, **args) -> P:
    return P(name, frozenset(points), tuple(sorted(args.items())), weight)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{ " + ", ".join(f'"{k}": {_value(x)}' for k, x in v.items()) + " }"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def _plugin_text(p: P) -> str:
    spec = cat.PLUGINS[p.name]
    flags = sorted(f.name for f in cat.FLAGS if f.name in spec.points)
    unknown = p.on - set(flags)
    # A flag the Go test sets that our plugin has no point for names a Volcano extension point
    # this plugin does not answer in Volcano either (e.g. priority's EnabledJobPipelined):
    # nothing to switch. Anything else would be a translation error.
    assert not unknown - IGNORED_FLAGS.get(p.name, set()), (p.name, unknown)
    lines = [f"enable_{f} = {_value(f in p.on)}" for f in flags]
    lines += [f"{k} = {_value(v)}" for k, v in p.args]
    weight = f" weight {p.weight}" if p.weight is not None else ""
    return f"  plugin {p.name}{weight} {{\n" + "".join(f"    {line}\n" for line in lines) + "  }\n"


# Flags the Go tests set that our catalog has no switch for. priority and drf register nothing
# at these points in Volcano v1.14.1. The other two only gate topology-aware preemption's
# simulation there: proportion's enablePredicate its PrePredicateFn (which seeds the state its
# SimulateAllocatableFn reads), predicates' enablePreemptable its SimulateAddTask/RemoveTaskFn
# (whether victims leave the inter-pod affinity state); ours always simulate both.
IGNORED_FLAGS = {
    "priority": {"job_pipelined", "reclaimable"},
    "drf": {"job_enqueued"},
    "proportion": {"predicate"},
    "predicates": {"preemptable"},
}


def policy_text(tiers: list[list[P]], actions: tuple[str, ...], action_args: dict[str, dict] | None = None) -> str:
    """The policy for a Go test's tiers and actions. Our language requires `allocate`; when the
    Go test does not run it, it is listed but not run (the runner runs only the case's actions;
    `admitted()` reads only whether enqueue is listed, as Volcano reads conf.EnabledActionMap)."""
    listed = [a for a in ACTION_ORDER if a in actions or a == "allocate"]
    out = ['policy "volcano-case" version 1', f"actions [{', '.join(listed)}]"]
    for tier in tiers:
        if tier:
            out.append("tier {\n" + "".join(_plugin_text(p) for p in tier) + "}")
    for action, args in (action_args or {}).items():
        out.append(f"action {action} {{\n" + "".join(f"  {k} = {_value(v)}\n" for k, v in args.items()) + "}")
    return "\n".join(out) + "\n"


@lru_cache(maxsize=None)
def _compile(text: str, lint: bool = True) -> Plan:
    compilation = compile_text(text, "volcano-case.policy", run_lint=lint)
    assert compilation.ok, [str(d) for d in compilation.errors] + [text]
    return compilation.plan


def lint_codes(text: str) -> set[str]:
    """The error codes our compiler reports for a policy (with lint)."""
    return {d.code for d in compile_text(text, "volcano-case.policy").errors}


# --- cases --------------------------------------------------------------------------------------

@dataclass
class Expect:
    """What uthelper's CheckAll checks. `binds` and `evicted` are exact whenever the Go case runs
    CheckAll (an unset ExpectBindMap/ExpectEvicted means none); `pipelined` maps a job
    ("ns/pg") to the nodes its pipelined tasks may be on; `phases` a job to its PodGroup phase."""

    binds: dict[str, str] | None = field(default_factory=dict)
    evicted: list[str] | None = field(default_factory=list)
    pipelined: dict[str, list[str]] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)


@dataclass
class Case:
    source: str                                # "<Go test function> / <case name>"
    tiers: list[list[P]]
    actions: tuple[str, ...]
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    podgroups: list[PodGroup] = field(default_factory=list)
    queues: list[QueueObject] = field(default_factory=list)
    priority_classes: dict[str, int] = field(default_factory=dict)
    expect: Expect = field(default_factory=Expect)
    action_args: dict[str, dict] = field(default_factory=dict)
    # Extra checks a Go test makes itself (not through CheckAll): called with the session after
    # the actions (still open) and the decisions; asserts.
    probe: Callable[[Session, Decisions], None] | None = None
    # Set-up before the actions, on the open session: the Go test's own statements, or a check
    # of what the session counts at open (as Go reads a plugin's metric after OnSessionOpen).
    setup: Callable[[Session], None] | None = None
    # How the case is marked: a deliberate difference (`ours` replaces the expectation, with
    # `ours_probe` for `probe`, and `readme` quotes runtime/README.md's line saying so, checked
    # to be there) or an accidental one (`xfail`: class, reason; `a+b` when two classes meet).
    ours: Expect | None = None
    readme: str | None = None
    ours_probe: Callable[[Session, Decisions], None] | None = None
    xfail: tuple[str, str] | None = None
    # A lint error our compiler raises on the Go test's tier list (which Go builds directly,
    # past Volcano's config loader): the case runs the plan compiled without lint, and the test
    # also asserts the code is still reported (docs/lint-rules.md documents each).
    lint_refuses: str | None = None
    # Actions listed in the policy but not run (the Go test calls a session function of that
    # action directly); listing preempt or reclaim also keeps settled pods as tasks.
    also_listed: tuple[str, ...] = ()

    def state(self) -> ClusterState:
        state = ClusterState()
        state.priority_classes.update(self.priority_classes)
        for n in self.nodes:
            state.add_node(n)
        for q in self.queues:
            state.add_queue(q)
        for g in self.podgroups:
            state.add_podgroup(g)
        for p in self.pods:
            state.add_pod(p)
        return state

    def policy(self) -> str:
        return policy_text(self.tiers, self.actions + self.also_listed, self.action_args)

    def plan(self) -> Plan:
        return _compile(self.policy(), self.lint_refuses is None)


def slug(text: str) -> str:
    for sign, word in (("<=", " le "), (">=", " ge "), ("<", " lt "), (">", " gt "), ("=", " eq ")):
        text = text.replace(sign, word)
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:120]


def params(cases: list[Case]) -> list:
    """pytest params, one per case: an accidental divergence is a strict xfail naming its class."""
    out = []
    ids = set()
    readme = " ".join(README.read_text().split())
    for case in cases:
        assert (case.ours is None) == (case.readme is None), case.source
        assert case.ours is None or case.xfail is None, case.source
        if case.readme is not None:
            assert " ".join(case.readme.split()) in readme, f"{case.source}: not in runtime/README.md"
        marks = []
        # VCASE_SHOW=1 drops the xfail marks, to see how a divergent case fails.
        if case.xfail is not None and not os.environ.get("VCASE_SHOW"):
            klass, reason = case.xfail
            marks.append(pytest.mark.xfail(strict=True, reason=f"{klass}: {reason}"))
        ident = slug(case.source)
        assert ident not in ids, ident
        ids.add(ident)
        out.append(pytest.param(case, id=ident, marks=marks))
    return out


@dataclass
class Outcome:
    binds: dict[str, str]
    evicted: list[str]
    pipelined: dict[str, str]
    phases: dict[str, str]
    decisions: Decisions


def run(case: Case, pure: bool) -> Outcome:
    """Open a session on the case's cluster and policy, run the case's actions in the Go test's
    order, and read back what Volcano's CheckAll reads."""
    state = case.state()
    ssn = open_session(case.plan(), state, Options(pure_python=pure))
    try:
        if case.setup is not None:
            case.setup(ssn)
        actions = action_registry()
        for name in case.actions:
            actions[name](ssn)
        decisions = collect(ssn)
        outcome = Outcome({b.pod: b.node for b in decisions.bindings}, [e.pod for e in decisions.evictions],
                          dict(decisions.pipelined), {g.name: g.phase for g in decisions.podgroups}, decisions)
        probe = case.ours_probe if case.ours is not None and case.ours_probe is not None else case.probe
        if probe is not None:
            probe(ssn, decisions)
    finally:
        ssn.close()
    return outcome


def job_of(case: Case, pod_key: str) -> str:
    p = next(p for p in case.pods if p.key == pod_key)
    return f"{p.namespace}/{p.group}" if p.group else p.key


def check(case: Case, outcome: Outcome) -> None:
    """uthelper.CheckAll: binds exact, evictions as a multiset, each listed job's pipelined tasks
    on its listed nodes (and at least one), each listed job's PodGroup phase."""
    expect = case.ours if case.ours is not None else case.expect
    if expect.binds is not None:
        assert outcome.binds == expect.binds, f"bindings: got {outcome.binds}, want {expect.binds}"
    if expect.evicted is not None:
        assert Counter(outcome.evicted) == Counter(expect.evicted), \
            f"evictions: got {sorted(outcome.evicted)}, want {sorted(expect.evicted)}"
    for job, nodes in expect.pipelined.items():
        mine = {p: n for p, n in outcome.pipelined.items() if job_of(case, p) == job}
        assert mine, f"no task of {job} pipelined (want {nodes}); pipelined: {outcome.pipelined}"
        assert all(n in nodes for n in mine.values()), (job, mine, nodes)
    # A PodGroup the decisions do not list keeps the phase it had (ClusterState.apply writes only
    # the listed ones), as Volcano's JobUpdater leaves an untouched PodGroup's phase.
    given = {g.key: g.phase for g in case.podgroups}
    for job, phase in expect.phases.items():
        got = outcome.phases.get(job, given.get(job))
        assert got == phase, f"phase of {job}: got {got}, want {phase}"


def run_and_check(case: Case, pure: bool) -> None:
    if case.lint_refuses is not None:
        assert case.lint_refuses in lint_codes(case.policy()), case.lint_refuses
    check(case, run(case, pure))


def only(tiers: list[list[P]], *names: str) -> list[list[P]]:
    """The tiers as a case's registered plugins (TestCommonStruct.Plugins) leave them: a plugin
    named in a tier but not registered is skipped by framework.OpenSession."""
    return [[p for p in tier if p.name in names] for tier in tiers]
