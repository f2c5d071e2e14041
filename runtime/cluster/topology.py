"""Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`): read, and resolved against the nodes.

A HyperNode groups nodes that sit close on the network (a leaf switch: tier 1; a spine: tier 2;
...). Its `spec.members` name nodes (type `Node`: `exactMatch` by name, `regexMatch` on the name
with Go's unanchored match, `labelMatch` a metav1 LabelSelector) or child HyperNodes (type
`HyperNode`, by `exactMatch` only: Volcano's scheduler ignores a regex or label selector there,
and so do we, saying so). `resolve` computes, from the HyperNodes and the current nodes' names and
labels, what placement needs: each HyperNode's leaf nodes (through its children), its parent and
children, each node's HyperNodes tier by tier, the tiers present, and the problems (a cycle, a
second parent, a child of no higher tier, a member naming no HyperNode), each naming the
HyperNodes at fault. As in Volcano (`pkg/scheduler/api/hyper_node_info.go`):
- an `exactMatch` node is a member whether or not the node exists yet (a regex or label selector
  selects among the nodes there are);
- an empty `labelMatch` (no labels, no expressions) selects no node;
- a node may sit in two HyperNodes of one tier (Volcano's own tests build such trees).
A cycle or a second parent is what makes Volcano's HyperNode view "not ready" (jobs asking for
topology wait, the others go on): those problems are `blocking`. Resolution is iterative (no
recursion, whatever the depth) and costs O(hypernodes × members + nodes × selectors + the leaf
sets' sizes), so it is cheap to redo when nodes or their labels change.

Imports nothing of the engine; `runtime.cluster.model` keeps the HyperNodes of a ClusterState.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from runtime.cluster import kubefields as kf
from runtime.cluster.kubefields import FieldError
from runtime.cluster.selectors import LabelSelector

TOPOLOGY_GROUP = "topology.volcano.sh"
TOPOLOGY_API = f"{TOPOLOGY_GROUP}/v1alpha1"
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"
SELECTOR_KINDS = ("exactMatch", "regexMatch", "labelMatch")

# Problem kinds. Blocking ones (Volcano's "not ready") hold every job that asks for topology.
CYCLE = "cycle"
SECOND_PARENT = "second-parent"
TIER_ORDER = "tier-order"
UNKNOWN_MEMBER = "unknown-member"
IGNORED_MEMBER = "ignored-member"
_BLOCKING = frozenset({CYCLE, SECOND_PARENT})


@dataclass(frozen=True)
class Member:
    """One `spec.members[]` entry: its type and exactly one selector."""

    type: str                                   # Node | HyperNode
    exact: str | None = None                    # exactMatch.name
    pattern: str | None = None                  # regexMatch.pattern as written (Go syntax)
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    labels: LabelSelector | None = None         # labelMatch

    @property
    def selects_by_name(self) -> bool:
        return self.exact is not None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a node of this name and labels is selected (Volcano's GetMembers)."""
        if self.exact is not None:
            return name == self.exact
        if self.regex is not None:
            return self.regex.search(name) is not None    # Go's MatchString: unanchored
        if self.labels is not None:
            if not self.labels.match_labels and not self.labels.match_expressions:
                return False                                # Volcano: an empty labelMatch selects nothing
            return self.labels.matches(labels)
        return False


@dataclass(frozen=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str = ""
    members: tuple[Member, ...] = ()
    # Labels said with the name where it alone does not tell: a derived HyperNode's source and
    # node label (runtime.cluster.topology_labels), e.g. (("example.com/rack", "r3"),).
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def label_text(self) -> str:
        """`key=value` of the labels other than Volcano's source marker ("" without any)."""
        return ", ".join(f"{k}={v}" for k, v in self.labels if k != "volcano.sh/network-topology-source")


@dataclass(frozen=True)
class TopologyProblem:
    kind: str                        # cycle | second-parent | tier-order | unknown-member | ignored-member
    hypernodes: tuple[str, ...]      # the HyperNodes at fault
    message: str

    @property
    def blocking(self) -> bool:
        return self.kind in _BLOCKING

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Topology:
    """The HyperNodes resolved against the nodes (see the module's docstring)."""

    hypernodes: Mapping[str, HyperNode] = field(default_factory=dict)
    parent: Mapping[str, str | None] = field(default_factory=dict)
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    leaves: Mapping[str, frozenset[str]] = field(default_factory=dict)     # HyperNode → node names
    # node → the HyperNodes holding it, by tier then name (lowest tier first)
    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    by_tier: Mapping[int, tuple[str, ...]] = field(default_factory=dict)   # tier → HyperNode names
    problems: tuple[TopologyProblem, ...] = ()
    # Where the HyperNodes came from: "" (HyperNode objects) or a description of the node labels
    # they were derived from (runtime.cluster.topology_labels).
    derived_from: str = ""
    # What the engine derives from this resolution and a snapshot's node list (HyperNode → node
    # rows, runtime.engine.rules.hypernodes): kept with the resolution, which a cluster keeps
    # while its nodes and HyperNodes stay the same, so cycles do not derive it again.
    row_memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def tiers(self) -> tuple[int, ...]:
        return tuple(sorted(self.by_tier))

    @property
    def blocking(self) -> tuple[TopologyProblem, ...]:
        """The problems that hold every job asking for topology (a cycle, a second parent)."""
        return tuple(p for p in self.problems if p.blocking)

    def ancestors(self, name: str) -> tuple[str, ...]:
        """`name` and its parents up to the root (Volcano's GetAncestors)."""
        out = [name]
        current = self.parent.get(name)
        while current is not None and current not in out:
            out.append(current)
            current = self.parent.get(current)
        return tuple(out)


# --- resolution ---------------------------------------------------------------------------

def resolve(hypernodes: Mapping[str, HyperNode] | Iterable[HyperNode], nodes: Mapping[str, Any]) -> Topology:
    """The HyperNodes' tree over the nodes. `nodes`: name → labels (a mapping), or name → an object
    with `.labels` (a model Node). Problems are reported, never raised: the rest still resolves."""
    hns: dict[str, HyperNode] = dict(hypernodes) if isinstance(hypernodes, Mapping) else {h.name: h for h in hypernodes}
    order = sorted(hns)
    problems: list[TopologyProblem] = []
    direct: dict[str, set[str]] = {name: set() for name in order}
    claims: dict[str, list[str]] = {}          # child HyperNode → the HyperNodes listing it
    selecting: list[tuple[str, Member]] = []   # node members chosen by regex or labels

    for name in order:
        for member in hns[name].members:
            if member.type == MEMBER_NODE:
                if member.exact is not None:
                    direct[name].add(member.exact)
                else:
                    selecting.append((name, member))
            elif member.exact is not None:
                claimers = claims.setdefault(member.exact, [])
                if name not in claimers:
                    claimers.append(name)
            else:
                how = "regexMatch" if member.pattern is not None else "labelMatch"
                problems.append(TopologyProblem(
                    IGNORED_MEMBER, (name,),
                    f"HyperNode {name}: a member of type HyperNode selected by {how} is ignored "
                    "(only exactMatch names a child HyperNode, as in Volcano)"))

    if selecting:
        labelled = [(n, v if isinstance(v, Mapping) else getattr(v, "labels", {}) or {}) for n, v in nodes.items()]
        # A selector with matchLabels looks only at the nodes carrying its first pair (built once).
        by_pair: dict[tuple[str, str], list[tuple[str, Mapping[str, str]]]] | None = None
        for name, member in selecting:
            candidates: Iterable[tuple[str, Mapping[str, str]]] = labelled
            if member.labels is not None and member.labels.match_labels:
                if by_pair is None:
                    by_pair = {}
                    for n, labels in labelled:
                        for pair in labels.items():
                            by_pair.setdefault(pair, []).append((n, labels))
                candidates = by_pair.get(member.labels.match_labels[0], ())
            direct[name].update(n for n, labels in candidates if member.matches(n, labels))

    # Parents: one per HyperNode; a second one is a problem and keeps the first by tier, then name.
    parent: dict[str, str | None] = {name: None for name in order}
    for child in sorted(claims):
        claimers = claims[child]
        if child not in hns:
            for claimer in claimers:
                problems.append(TopologyProblem(
                    UNKNOWN_MEMBER, (claimer,),
                    f"HyperNode {claimer} lists HyperNode {child}, which does not exist"))
            continue
        ranked = sorted(claimers, key=lambda c: (hns[c].tier, c))
        if len(ranked) > 1:
            problems.append(TopologyProblem(
                SECOND_PARENT, (child, *ranked),
                f"HyperNode {child} has more than one parent: {', '.join(ranked)} (one parent each)"))
        parent[child] = ranked[0]

    # Cycles: the parent map is a function, so each walk ends at a root or closes one cycle.
    state: dict[str, int] = {}                  # 1: on the current walk, 2: done
    for start in order:
        path: list[str] = []
        current: str | None = start
        while current is not None and current not in state:
            state[current] = 1
            path.append(current)
            current = parent[current]
        if current is not None and state[current] == 1:
            cycle = path[path.index(current):]
            first = cycle.index(min(cycle))
            cycle = cycle[first:] + cycle[:first]
            problems.append(TopologyProblem(
                CYCLE, tuple(cycle),
                f"HyperNodes form a cycle: {' -> '.join(cycle + [cycle[0]])} (each listed as a member of the next)"))
            for name in cycle:
                parent[name] = None
        for name in path:
            state[name] = 2

    # A parent sits on a higher tier than its children (tier 1 is closest to the nodes).
    for child in order:
        up = parent[child]
        if up is not None and hns[up].tier <= hns[child].tier:
            problems.append(TopologyProblem(
                TIER_ORDER, (up, child),
                f"HyperNode {up} (tier {hns[up].tier}) lists HyperNode {child} (tier {hns[child].tier}): "
                "a parent's tier must be above its children's; the link is ignored"))
            parent[child] = None

    children: dict[str, list[str]] = {name: [] for name in order}
    for child in order:
        if parent[child] is not None:
            children[parent[child]].append(child)           # type: ignore[index]

    # Leaf sets bottom-up (the links left form a forest): a HyperNode once all its children are done.
    pending = {name: len(children[name]) for name in order}
    ready = [name for name in order if not pending[name]]
    leaves: dict[str, frozenset[str]] = {}
    while ready:
        name = ready.pop()
        found = direct[name]
        for child in children[name]:
            found |= leaves[child]
        leaves[name] = frozenset(found)
        up = parent[name]
        if up is not None:
            pending[up] -= 1
            if not pending[up]:
                ready.append(up)

    chain_lists: dict[str, list[str]] = {}
    for name in order:
        for node in leaves[name]:
            chain_lists.setdefault(node, []).append(name)
    chains = {node: tuple(sorted(held, key=lambda h: (hns[h].tier, h))) for node, held in chain_lists.items()}
    by_tier: dict[int, list[str]] = {}
    for name in order:
        by_tier.setdefault(hns[name].tier, []).append(name)

    return Topology(
        hypernodes=hns, parent=parent, children={k: tuple(v) for k, v in children.items()}, leaves=leaves,
        chains=chains, by_tier={t: tuple(v) for t, v in sorted(by_tier.items())}, problems=tuple(problems))


# --- reading ------------------------------------------------------------------------------

def read_hypernode(obj: dict) -> HyperNode:
    """A `HyperNode` object dict → HyperNode; FieldError names the field at fault."""
    api = str(obj.get("apiVersion", ""))
    if not api.startswith(TOPOLOGY_GROUP + "/"):
        raise FieldError(f"apiVersion must be {TOPOLOGY_API}, found `{api}`")
    _, name = kf.name_of(obj)
    spec = kf.mapping(obj, "spec", required=True)
    if spec.get("tier") is None:
        raise FieldError("missing `spec.tier`")
    tier = kf.integer(spec.get("tier"), "spec.tier", 0)
    if tier < 0:       # the CRD's minimum is 0; tier 1 is the tier closest to the nodes
        raise FieldError(f"`spec.tier` must not be negative, found {tier}")
    tier_name = spec.get("tierName") or ""
    if not isinstance(tier_name, str) or len(tier_name) > 253:
        raise FieldError("`spec.tierName` must be a string of at most 253 characters")
    raw_members = kf.listing(spec, "members")
    if not raw_members:
        raise FieldError("`spec.members` must list at least one member")
    members = tuple(_read_member(m, f"spec.members[{i}]") for i, m in enumerate(raw_members))
    return HyperNode(name=name, tier=tier, tier_name=tier_name, members=members)


def _read_member(raw: Any, where: str) -> Member:
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping, found {type(raw).__name__}")
    kind = raw.get("type")
    if kind not in (MEMBER_NODE, MEMBER_HYPERNODE):
        raise FieldError(f"`{where}.type` must be Node or HyperNode, found `{kind}`")
    selector = kf.mapping(raw, "selector")
    given = [k for k in SELECTOR_KINDS if selector.get(k) is not None]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        raise FieldError(f"`{where}.selector` must have exactly one of exactMatch, regexMatch, labelMatch (found {found})")
    at = f"{where}.selector.{given[0]}"
    if given[0] == "exactMatch":
        value = kf.mapping(selector, "exactMatch").get("name")
        if not value or not isinstance(value, str):
            raise FieldError(f"`{at}.name` must be a non-empty string")
        return Member(kind, exact=value)
    if given[0] == "regexMatch":
        pattern = kf.mapping(selector, "regexMatch").get("pattern")
        if not pattern or not isinstance(pattern, str):
            raise FieldError(f"`{at}.pattern` must be a non-empty string")
        try:
            compiled = go_regex(pattern)
        except ValueError as err:
            raise FieldError(f"`{at}.pattern`: {err}") from None
        return Member(kind, pattern=pattern, regex=compiled)
    labels = kf.label_selector(selector.get("labelMatch"), at)
    return Member(kind, labels=labels)


# Go's RE2 and Python's re agree on the syntax a node-name pattern uses. Where they differ, the
# pattern is translated (`\z`, `(?<name>`) or refused with the reason: constructs RE2 refuses
# (back-references, lookaround) and RE2 constructs Python does not have or reads otherwise
# (`\Q..\E`, `\p{..}`, `[[:alpha:]]`, the `U` flag).
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def go_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Go regexp pattern for Python's `re` (matched with `search`, unanchored as Go's
    MatchString); ValueError says what is wrong and where."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "z":
                out.append(r"\Z")
            elif nxt in "QEpP":
                raise ValueError(f"`\\{nxt}` at offset {i} is Go syntax this scheduler does not read; "
                                 "write the characters or class out")
            elif nxt.isdigit() and nxt != "0":
                raise ValueError(f"back-reference `\\{nxt}` at offset {i}: Go's regexp has none")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "(" and pattern.startswith("(?", i):
            if pattern.startswith(_LOOKAROUND, i):
                raise ValueError(f"lookaround at offset {i}: Go's regexp has none")
            if pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
                continue
            flags = re.match(r"\(\?([a-zA-Z-]*)[:)]", pattern[i:])
            if flags and "U" in flags.group(1):
                raise ValueError(f"the `U` flag at offset {i} (ungreedy in Go) is not read here")
        if c == "[" and pattern.startswith("[[:", i):
            raise ValueError(f"a POSIX class `[[:...:]]` at offset {i} is not read here; write the range out")
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out))
    except re.error as err:
        where = f" at offset {err.pos}" if err.pos is not None else ""
        raise ValueError(f"invalid pattern{where}: {err.msg}") from None


# --- what placement made of it: spans and free room -----------------------------------------

@dataclass(frozen=True)
class Span:
    """Where a gang's pods run: the lowest-tier HyperNode holding every one of their nodes (ties
    in a tier, possible when a node sits in two HyperNodes of one tier: the first by name), or,
    when none holds them all, tier and hypernode None (the gang spans the cluster: Volcano's
    virtual top HyperNode)."""

    tier: int | None
    hypernode: str | None
    nodes: int                       # distinct nodes the pods run on

    def text(self, topology: "Topology | None" = None) -> str:
        if self.hypernode is None:
            return f"no one HyperNode (spans the cluster, {self.nodes} nodes)"
        labels = ""
        if topology is not None and self.hypernode in topology.hypernodes:
            shown = topology.hypernodes[self.hypernode].label_text
            labels = f" ({shown})" if shown else ""
        return f"tier {self.tier} {self.hypernode}{labels}, {self.nodes} node{'s' if self.nodes != 1 else ''}"


def span_of(topology: Topology, nodes: Iterable[str]) -> Span:
    """The Span of pods running on `nodes` (an empty set spans nothing: tier None, 0 nodes)."""
    where = set(nodes)
    if not where:
        return Span(None, None, 0)
    first = min(where)
    for name in topology.chains.get(first, ()):        # lowest tier first, then by name
        if where <= topology.leaves.get(name, frozenset()):
            return Span(topology.hypernodes[name].tier, name, len(where))
    return Span(None, None, len(where))


def room_by_hypernode(topology: Topology, free: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Free room per HyperNode: the sum over its leaf nodes of `free` (node → resource → amount;
    nodes absent from `free`, such as cordoned ones, add nothing)."""
    out: dict[str, dict[str, int]] = {}
    for name in topology.hypernodes:
        total: dict[str, int] = {}
        for node in topology.leaves.get(name, ()):
            for resource, amount in (free.get(node) or {}).items():
                total[resource] = total.get(resource, 0) + amount
        out[name] = total
    return out
