"""HyperNodes derived from node labels, as Volcano's label discovery makes them.

For clusters without Volcano's HyperNode controller: nodes already carry labels saying which
switch, block or zone they sit under (Kueue-style topology labels, or a provider's), and Volcano's
controller can turn them into HyperNodes (`networkTopologyDiscovery` with `source: label`,
`pkg/controllers/hypernode/discovery/label`). This module does the same, so the scheduler and the
simulator place gangs as they would under the HyperNodes Volcano's controller would create.

The configuration, as Volcano's: `networkTopologyTypes`, a map from a topology type's name to its
node labels listed top to bottom; the last one stands for the node itself (Volcano drops it: it is
`kubernetes.io/hostname` in every example) and the one above it is tier 1. For each node and each
type, tiers are walked from 1 upwards and stop at the first label the node lacks: a node without
the tier-1 label is in no HyperNode of that type, one without the tier-2 label is in a tier-1
HyperNode with no parent through it. A tier-1 HyperNode has the nodes as members, a higher one the
HyperNodes of the tier below. One label value is one HyperNode (Volcano keys them by label key and
value, whatever the type): nodes whose tier-1 value is the same but whose tier-2 values differ put
that tier-1 HyperNode under two parents, which `resolve` reports (a blocking problem, as in
Volcano). A HyperNode's `tierName` is its label key (Volcano >= 1.14), so `highestTierName` can
name the label.

Names: Volcano names a derived HyperNode `hypernode-<type>-tier<N>-<5 random characters>` (the
type lowercased, characters other than letters, digits, `.` and `-` turned into `-`) and reuses a
name once its object exists. Here the 5 characters come from a hash of the label key and value,
from the alphabet Volcano's random suffix uses, so a name stays the same from cycle to cycle and
run to run; two values whose hashes meet are told apart deterministically (the smaller value keeps
the first suffix).

Differences from Volcano, on purpose: a configuration Volcano logs and skips (a type name over 20
characters, a label listed twice, a malformed entry) is refused here with the place at fault, and
a list of fewer than two labels (nothing above the node) too; the last label must be
`kubernetes.io/hostname` (Volcano drops whatever is last, so any other label there would be
silently unused).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from runtime.cluster.topology import MEMBER_HYPERNODE, MEMBER_NODE, HyperNode, Member

HOSTNAME_LABEL = "kubernetes.io/hostname"
SOURCE_LABEL = "volcano.sh/network-topology-source"     # what Volcano labels derived HyperNodes with
CONFIG_KEY = "volcano-controller.conf"                  # the ConfigMap key Volcano's controller reads
MAX_TYPE_NAME = 20                                      # Volcano's networkTopologyTypeLength
# k8s.io/apimachinery/pkg/util/rand's alphabet (no vowels, no look-alikes): Volcano's suffixes use it.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LENGTH = 5
_LIST_TYPE = "labels"          # the type name given to a topology passed as a plain label list
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class LabelTopologyError(ValueError):
    """A label-discovery configuration that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class TopologyType:
    """One entry of `networkTopologyTypes`: its name and node labels, top to bottom as written."""

    name: str
    labels: tuple[str, ...]

    @property
    def tier_labels(self) -> tuple[str, ...]:
        """The labels by tier, tier 1 first (the node's own label, last as written, left out)."""
        return tuple(reversed(self.labels[:-1]))


@dataclass(frozen=True)
class LabelTopology:
    """What to derive HyperNodes from; `source` says where it was read (for messages)."""

    types: tuple[TopologyType, ...]
    source: str = ""

    @property
    def label_keys(self) -> frozenset[str]:
        return frozenset(key for t in self.types for key in t.tier_labels)

    def describe(self) -> str:
        return "; ".join(f"{t.name}: {' > '.join(t.labels)}" for t in self.types)


# --- derivation ---------------------------------------------------------------------------

def derive_hypernodes(config: LabelTopology, nodes: Mapping[str, Any]) -> dict[str, HyperNode]:
    """The HyperNodes Volcano's label discovery would make from these nodes. `nodes`: name →
    labels (a mapping) or name → an object with `.labels` (a model Node). O(nodes × labels), plus
    a hash per HyperNode the first time its label value is seen (names are kept, _suffix)."""
    # (label key, value) → [type, tier, member nodes, member pairs]; one HyperNode per pair, whatever the type.
    found: dict[tuple[str, str], tuple[str, int, set[str], set[tuple[str, str]]]] = {}
    walks = [(kind.name, tuple(enumerate(kind.tier_labels, start=1))) for kind in config.types]
    # Types by name and nodes by name: the first type to meet a pair decides its tier, deterministically
    # (Volcano walks a Go map, in no set order).
    for node_name in sorted(nodes):
        value = nodes[node_name]
        labels = getattr(value, "labels", value) or {}
        for kind_name, tiers in walks:
            below: tuple[str, str] | None = None
            for tier, key in tiers:
                label_value = labels.get(key)
                if label_value is None:
                    break                       # Volcano: a missing label ends the walk upwards
                pair = (key, label_value)
                entry = found.get(pair)
                if entry is None:
                    entry = found[pair] = (kind_name, tier, set(), set())
                if below is None:
                    entry[2].add(node_name)
                else:
                    entry[3].add(below)
                below = pair
    # Names once every pair is known: the hash suffix, collisions settled by value order.
    named: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for pair in sorted(found):
        kind_name, tier, _, _ = found[pair]
        named[pair] = _unique_name(kind_name, tier, pair, taken)
    out: dict[str, HyperNode] = {}
    for pair, (kind_name, tier, node_members, pair_members) in found.items():
        # Nodes first, then child HyperNodes. A label used at tier 1 by one type and higher by
        # another keeps the tier of the type that met it first, with both kinds of members.
        listed = tuple(Member(MEMBER_NODE, exact=n) for n in sorted(node_members)) + tuple(
            Member(MEMBER_HYPERNODE, exact=child) for child in sorted(named[c] for c in pair_members))
        name = named[pair]
        out[name] = HyperNode(name=name, tier=tier, tier_name=pair[0], members=listed,
                              labels=((SOURCE_LABEL, "label"), pair))
    return out


@lru_cache(maxsize=1 << 10)
def clean_type_name(name: str) -> str:
    """Volcano's cleanString: letters lowercased, digits, `.` and `-` kept, anything else `-`."""
    return "".join(c.lower() if c.isalpha() else c if (c.isdigit() or c in ".-") else "-" for c in name)


@lru_cache(maxsize=1 << 16)       # the connector derives every cycle: a value's hash once
def _suffix(key: str, value: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{key}={value}#{attempt}".encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:_SUFFIX_LENGTH])


def _unique_name(kind: str, tier: int, pair: tuple[str, str], taken: set[str]) -> str:
    prefix = f"hypernode-{clean_type_name(kind)}-tier{tier}-"
    attempt = 0
    while True:
        name = prefix + _suffix(pair[0], pair[1], attempt)
        if name not in taken:
            taken.add(name)
            return name
        attempt += 1


# --- reading the configuration ------------------------------------------------------------

def parse_label_list(text: str) -> LabelTopology:
    """`LABEL,LABEL,...,kubernetes.io/hostname`, top to bottom (one topology type)."""
    labels = [part.strip() for part in text.split(",")]
    if any(not label for label in labels):
        raise LabelTopologyError(f"`{text}` has an empty label; list node labels top to bottom, "
                                 f"separated by commas, ending with {HOSTNAME_LABEL}")
    kind = _check_type(_LIST_TYPE, labels, "", what="the label list")
    return LabelTopology(types=(kind,), source="label list")


def _check_type(name: Any, labels: Iterable[Any], where: str, what: str = "") -> TopologyType:
    """A TopologyType, or LabelTopologyError prefixed with `where` (file:line:col) when given."""
    at = f"{where}: " if where else ""
    what = what or f"type `{name}`"
    if not isinstance(name, str) or not name:
        raise LabelTopologyError(f"{at}a topology type's name must be a non-empty string")
    if len(name) > MAX_TYPE_NAME:
        raise LabelTopologyError(f"{at}the type name `{name}` is longer than {MAX_TYPE_NAME} characters "
                                 "(Volcano skips such a type)")
    labels = list(labels)
    for label in labels:
        if not isinstance(label, str) or not _is_label_key(label):
            raise LabelTopologyError(f"{at}`{label}` is not a valid label key")
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise LabelTopologyError(f"{at}the label `{label}` is listed twice (Volcano skips such a type)")
        seen.add(label)
    if len(labels) < 2:
        raise LabelTopologyError(f"{at}{what} needs at least one label above the node's own: list "
                                 f"labels top to bottom, ending with {HOSTNAME_LABEL} "
                                 f"(e.g. topology.kubernetes.io/zone,example.com/rack,{HOSTNAME_LABEL})")
    if labels[-1] != HOSTNAME_LABEL:
        raise LabelTopologyError(f"{at}{what} ends with `{labels[-1]}`; the last label stands for the "
                                 f"node itself and is not a tier (Volcano drops it): end the list with "
                                 f"{HOSTNAME_LABEL}")
    if HOSTNAME_LABEL in labels[:-1]:
        raise LabelTopologyError(f"{at}{what} has {HOSTNAME_LABEL} above the last place; "
                                 "it names one node and cannot be a tier")
    return TopologyType(name=name, labels=tuple(labels))


def _is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def load_discovery_config(path: str | Path) -> LabelTopology:
    """Volcano's controller configuration, as a file: the ConfigMap object (its
    `volcano-controller.conf`), or that key's YAML itself (`networkTopologyDiscovery: [...]`). The
    first enabled `source: label` entry is read, as Volcano's controller does; errors say file:line:col."""
    # imported here: only this reader needs YAML's node positions
    import yaml

    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LabelTopologyError(f"{file}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    root = _compose(text, file, yaml)
    at = _Locator(file, 0, 0)
    if isinstance(root, yaml.MappingNode) and _get(root, "kind") is not None \
            and _scalar(_get(root, "kind")) == "ConfigMap":
        data = _get(root, "data")
        conf = _get(data, CONFIG_KEY) if isinstance(data, yaml.MappingNode) else None
        if not isinstance(conf, yaml.ScalarNode):
            raise LabelTopologyError(f"{at.of(root)}: the ConfigMap has no `data.{CONFIG_KEY}` "
                                     "(Volcano's controller reads its configuration there)")
        # A literal block's text starts on the line after its `|`, indented: positions inside it map back.
        literal = conf.style in ("|", ">")
        at = _Locator(file, conf.start_mark.line + (1 if literal else 0),
                      _indent(text, conf.start_mark.line + 1) if literal else conf.start_mark.column)
        root = _compose(conf.value, str(at), yaml, at)
    return _read_config(root, at, yaml)


@dataclass(frozen=True)
class _Locator:
    file: str
    line: int        # 0-based line the text starts on in the file
    column: int      # its indentation (a literal block's)

    def of(self, node: Any) -> str:
        if node is None:
            return f"{self.file}:{self.line + 1}:{self.column + 1}"
        return f"{self.file}:{self.line + node.start_mark.line + 1}:{self.column + node.start_mark.column + 1}"

    def __str__(self) -> str:
        return self.file


def _indent(text: str, line: int) -> int:
    lines = text.splitlines()
    if line >= len(lines):
        return 0
    return len(lines[line]) - len(lines[line].lstrip(" "))


def _compose(text: str, where: str, yaml: Any, at: _Locator | None = None) -> Any:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        if mark is not None:
            line, column = mark.line + 1, mark.column + 1
            if at is not None:
                line, column = at.line + line, at.column + column
            raise LabelTopologyError(f"{where if at is None else at.file}:{line}:{column}: invalid YAML: {problem}") from None
        raise LabelTopologyError(f"{where}: invalid YAML: {problem}") from None
    except ValueError as err:       # several documents
        raise LabelTopologyError(f"{where}: {err}") from None
    if node is None:
        raise LabelTopologyError(f"{where}: the file is empty")
    return node


def _get(node: Any, key: str) -> Any:
    """The value node under `key` of a mapping node (None when absent or not a mapping)."""
    pairs = getattr(node, "value", None)
    if not isinstance(pairs, list):
        return None
    for k, v in pairs:
        if isinstance(k, tuple) or getattr(k, "value", None) != key:
            continue
        return v
    return None


def _scalar(node: Any) -> str | None:
    """A scalar node's text (None for a missing node, a null, a list or a mapping)."""
    if node is None or isinstance(node.value, list) or node.tag == "tag:yaml.org,2002:null":
        return None
    return str(node.value)


def _read_config(root: Any, at: _Locator, yaml: Any) -> LabelTopology:
    if not isinstance(root, yaml.MappingNode):
        raise LabelTopologyError(f"{at.of(root)}: expected Volcano's controller configuration "
                                 "(a mapping with networkTopologyDiscovery)")
    entries = _get(root, "networkTopologyDiscovery")
    if entries is None:
        raise LabelTopologyError(f"{at.of(root)}: no `networkTopologyDiscovery` list "
                                 "(Volcano's controller configuration; see docs/simulator.md)")
    if not isinstance(entries, yaml.SequenceNode):
        raise LabelTopologyError(f"{at.of(entries)}: `networkTopologyDiscovery` must be a list")
    for entry in entries.value:
        if not isinstance(entry, yaml.MappingNode):
            raise LabelTopologyError(f"{at.of(entry)}: a `networkTopologyDiscovery` entry must be a mapping")
        if _scalar(_get(entry, "source")) != "label":
            continue
        enabled = _get(entry, "enabled")
        if not (isinstance(enabled, yaml.ScalarNode) and enabled.tag == "tag:yaml.org,2002:bool"
                and yaml.safe_load(enabled.value) is True):
            continue        # Volcano: `enabled` defaults to false, and a disabled source does not run
        config = _get(entry, "config")
        types = _get(config, "networkTopologyTypes") if isinstance(config, yaml.MappingNode) else None
        if not isinstance(types, yaml.MappingNode) or not types.value:
            raise LabelTopologyError(f"{at.of(config if config is not None else entry)}: the label source needs "
                                     "`config.networkTopologyTypes`: type name -> list of {nodeLabel: ...}")
        out: list[TopologyType] = []
        for key_node, labels_node in sorted(types.value, key=lambda kv: str(kv[0].value)):
            where = at.of(key_node)
            if not isinstance(labels_node, yaml.SequenceNode):
                raise LabelTopologyError(f"{at.of(labels_node)}: type `{key_node.value}` must list "
                                         "{nodeLabel: ...} entries, top to bottom")
            labels: list[Any] = []
            for item in labels_node.value:
                label = _get(item, "nodeLabel") if isinstance(item, yaml.MappingNode) else None
                if label is None or not isinstance(label, yaml.ScalarNode):
                    raise LabelTopologyError(f"{at.of(item)}: expected `nodeLabel: <label key>`")
                extra = [k.value for k, _ in item.value if k.value != "nodeLabel"]
                if extra:
                    raise LabelTopologyError(f"{at.of(item)}: unknown field `{extra[0]}` (only nodeLabel)")
                if not _is_label_key(label.value):
                    raise LabelTopologyError(f"{at.of(label)}: `{label.value}` is not a valid label key")
                if label.value in labels:
                    raise LabelTopologyError(f"{at.of(label)}: the label `{label.value}` is listed twice "
                                             "(Volcano skips such a type)")
                labels.append(label.value)
            out.append(_check_type(str(key_node.value), labels, where))
        return LabelTopology(types=tuple(out), source=at.file)
    sources = [str(_scalar(_get(e, "source"))) for e in entries.value if isinstance(e, yaml.MappingNode)]
    raise LabelTopologyError(f"{at.of(entries)}: no enabled `source: label` entry (found: "
                             f"{', '.join(sources) or 'none'}); other sources (ufm, roce) need Volcano's "
                             "controller, whose HyperNode objects the scheduler reads as they are")


def read_topology_labels(value: str) -> LabelTopology:
    """The CLI's `--topology-labels`: a file holding Volcano's controller configuration, or a
    comma-separated label list top to bottom ending with kubernetes.io/hostname."""
    path = Path(value).expanduser()
    try:
        is_file, is_dir = path.is_file(), path.is_dir()
    except (OSError, ValueError):       # a name too long, or with a NUL, for a path: not a file
        is_file = is_dir = False
    if is_file:
        return load_discovery_config(path)
    if is_dir:
        raise LabelTopologyError(f"`{value}` is a folder; give Volcano's controller configuration file or a label list")
    try:
        return parse_label_list(value)
    except LabelTopologyError as err:
        if "," not in value:
            raise LabelTopologyError(f"{err} (`{value}` is no file either)") from None
        raise
