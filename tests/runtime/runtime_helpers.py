"""Builders for runtime tests: policies from text, nodes, pods and gangs as model objects."""

from __future__ import annotations

from compiler.pipeline import compile_text
from compiler.plan import Plan
from runtime.engine.cycle import run_cycle
from runtime.cluster.model import ClusterState, Node, Pod, PodGroup, Taint

GiB = 2**30

STANDARD_TIERS = """
tier {
  plugin priority
  plugin gang
  plugin conformance
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin binpack
}
"""


def policy(body: str, actions: str = "enqueue, allocate, backfill") -> Plan:
    text = f'policy "t" version 1\nactions [{actions}]\n{body}\n'
    compilation = compile_text(text, "test.policy")
    errors = [str(d) for d in compilation.errors]
    assert compilation.ok, errors
    return compilation.plan


def node(state: ClusterState, name: str, cpu: int = 4000, memory: int = 8 * GiB, labels=None, taints=(),
         **extra: int) -> Node:
    n = Node(name, {"cpu": cpu, "memory": memory, "pods": 110, **extra}, labels=dict(labels or {}),
             taints=tuple(Taint(*t) for t in taints))
    state.add_node(n)
    return n


def pod(state: ClusterState, name: str, cpu: int = 1000, memory: int = GiB, group: str | None = None,
        ns: str = "ns", node_name: str | None = None, priority: int | None = None, creation: float = 0.0,
        **kwargs) -> Pod:
    requests = {"cpu": cpu, "memory": memory, **kwargs.pop("requests", {})}
    requests = {k: v for k, v in requests.items() if v}
    p = Pod(ns, name, requests, uid=f"uid-{ns}-{name}", node_name=node_name, group=group,
            phase="Running" if node_name else "Pending", priority=priority, creation=creation, **kwargs)
    state.add_pod(p)
    return p


def gang(state: ClusterState, name: str, size: int, min_member: int | None = None, queue: str = "default",
         cpu: int = 1000, memory: int = GiB, ns: str = "ns", priority: int | None = None, phase: str = "Inqueue",
         creation: float = 0.0, min_resources: dict | None = None, nodes: list[str] | None = None, **kwargs) -> PodGroup:
    group = PodGroup(ns, name, min_member=size if min_member is None else min_member, queue=queue, phase=phase,
                     uid=f"pg-{ns}-{name}", creation=creation, min_resources=min_resources)
    state.add_podgroup(group)
    for i in range(size):
        pod(state, f"{name}-{i}", cpu=cpu, memory=memory, group=name, ns=ns, priority=priority, creation=creation,
            node_name=nodes[i] if nodes and i < len(nodes) else None, **kwargs)
    return group


def cycle(plan: Plan, state: ClusterState, pure: bool = False):
    from runtime.engine.session import Options
    return run_cycle(plan, state, Options(pure_python=pure))


def placements(decisions) -> dict[str, str]:
    return {b.pod: b.node for b in decisions.bindings}
