"""Volcano Queue objects (multi-document YAML or a List) read into QueueConfigs.

Quantities are kept as written; the tree is checked (unique names, parents that exist, no
cycles) and returned parents first. A queue that cannot be placed under its parent is put at
the top with a note, so the policy still shows it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from yaml.nodes import MappingNode, Node

from compiler import catalog as cat
from compiler.quantities import to_base_units
from compiler.volcano import codes
from compiler.volcano import policy_text as pt
from compiler.volcano.located_yaml import (
    YamlSyntaxError,
    YamlText,
    is_mapping,
    is_null,
    is_scalar,
    is_sequence,
    kind_of,
    lookup,
)
from compiler.volcano.model import AFFINITY_SETTINGS, QueueConfig
from compiler.volcano.reading import Invalid, NodeReader
from policydsl.diagnostics import did_you_mean

QUEUE_GROUP = "scheduling.volcano.sh/"
_QUEUE_SPEC_FIELDS = ("weight", "capability", "guarantee", "deserved", "reclaimable", "priority", "parent", "state",
                      "dequeueStrategy", "affinity")



class QueueReader(NodeReader):
    """Queue objects (multi-document YAML or a List) into QueueConfigs, in tree order."""

    def read(self, src: YamlText) -> list[QueueConfig]:
        try:
            docs = src.documents()
        except YamlSyntaxError as err:
            self.report(codes.BAD_YAML, str(err), err.span)
            return []
        objects: list[MappingNode] = []
        for doc in docs:
            self.collect(src, doc, objects)
        queues: list[tuple[QueueConfig, dict[str, Node]]] = []
        self.ancestors: dict[str, tuple[QueueConfig, dict[str, Node]]] = {}
        for obj in objects:
            read = self.queue(src, obj)
            if read is not None:
                queues.append(read)
        declared = {queue.name for queue, _ in queues}
        queues = [a for name, a in self.ancestors.items() if name not in declared] + queues
        return self.place(src, queues)

    def collect(self, src: YamlText, doc: Node, out: list[MappingNode]) -> None:
        if not is_mapping(doc):
            self.report(codes.BAD_YAML, f"expected a Queue object, got {kind_of(doc)}", src.span(doc))
            return
        kind_entry = lookup(doc, "kind")
        kind = str(kind_entry.value.value) if kind_entry and is_scalar(kind_entry.value) else ""
        if kind.endswith("List"):
            items = lookup(doc, "items")
            if items is None or is_null(items.value):
                return
            if not is_sequence(items.value):
                self.report(codes.BAD_YAML, f"`items` of a {kind} must be a list", src.span(items.value))
                return
            for item in items.value.value:
                self.collect(src, item, out)
            return
        api = lookup(doc, "apiVersion")
        api_version = str(api.value.value) if api and is_scalar(api.value) else ""
        if kind != "Queue" or not api_version.startswith(QUEUE_GROUP):
            what = f"{api_version} {kind}".strip() or "an object without kind"
            self.report(codes.NOT_IMPORTED, f"{what} is not a Volcano Queue; skipped",
                        src.span(kind_entry.value if kind_entry else doc),
                        "Queues are `apiVersion: scheduling.volcano.sh/v1beta1`, `kind: Queue`")
            return
        out.append(doc)

    def queue(self, src: YamlText, obj: MappingNode) -> tuple[QueueConfig, dict[str, Node]] | None:
        metadata = lookup(obj, "metadata")
        name_entry = lookup(metadata.value, "name") if metadata and is_mapping(metadata.value) else None
        if name_entry is None or not is_scalar(name_entry.value) or is_null(name_entry.value):
            self.report(codes.BAD_QUEUE, "a Queue without `metadata.name`", src.span(obj))
            return None
        name = str(name_entry.value.value)
        nodes: dict[str, Node] = {"name": name_entry.value}
        if not pt.is_name(name):
            self.report(codes.BAD_QUEUE, f"queue name `{name}` cannot be written in a policy", src.span(name_entry.value),
                        "policy queue names are letters, digits, `_` and `-`, starting with a letter")
            return None
        values: dict[str, Any] = {}
        spec = lookup(obj, "spec")
        if spec is not None and is_mapping(spec.value):
            for entry in self.mapping_entries(src, spec.value):
                if entry.key not in _QUEUE_SPEC_FIELDS:
                    self.report(codes.NOT_IMPORTED, f"queue `{name}`: `spec.{entry.key}` is not imported",
                                src.span(entry.key_node), "a policy declares weight, capability, guarantee, deserved, "
                                "reclaimable, priority, parent, state, dequeueStrategy and affinity")
                    continue
                nodes[entry.key] = entry.value
                try:
                    if entry.key == "affinity":
                        values.update(self.affinity(src, name, entry.value))
                    elif entry.key == "dequeueStrategy":
                        values["dequeue"] = self.dequeue_strategy(entry.value)
                    else:
                        values[entry.key] = self.spec_field(src, name, entry.key, entry.value)
                except Invalid as err:
                    self.report(codes.BAD_VALUE, f"queue `{name}`: `spec.{entry.key}`: {err}", src.span(entry.value))
        elif spec is not None and not is_null(spec.value):
            self.report(codes.BAD_VALUE, f"queue `{name}`: `spec` must be a mapping", src.span(spec.value))
        status = lookup(obj, "status")
        state_entry = lookup(status.value, "state") if status and is_mapping(status.value) else None
        if state_entry is not None and is_scalar(state_entry.value) and state_entry.value.value in ("Closed", "Closing"):
            values["state"] = "closed"   # observed status: only a closed queue changes what the policy says
        queue = QueueConfig(name=name, **{k: v for k, v in values.items() if v is not None})
        annotations = lookup(metadata.value, "annotations") if metadata and is_mapping(metadata.value) else None
        if annotations is not None and is_mapping(annotations.value) and queue.parent is None:
            queue = self.hierarchy(src, queue, annotations.value, nodes)
        return queue, nodes

    def hierarchy(self, src: YamlText, queue: QueueConfig, annotations: MappingNode,
                  nodes: dict[str, Node]) -> QueueConfig:
        """Volcano's `volcano.sh/hierarchy` path (root/eng/prod: this queue under `eng` under root)
        and `volcano.sh/hierarchy-weights` (1/2/8: the weights along it) as nesting: the path's
        inner elements become queues (self.ancestors), this queue their last child with the last weight."""
        path_entry = lookup(annotations, HIERARCHY)
        if path_entry is None or not is_scalar(path_entry.value):
            return queue
        parts = [p.strip() for p in str(path_entry.value.value).split("/")]
        if parts and parts[0] == cat.ROOT_QUEUE:
            parts = parts[1:]
        weights_entry = lookup(annotations, HIERARCHY_WEIGHTS)
        weights: list[int | None] = [None] * (len(parts) + 1)
        if weights_entry is not None and is_scalar(weights_entry.value):
            try:
                given = [int(w.strip()) for w in str(weights_entry.value.value).split("/")]
                if len(given) != len(parts) + 1 and len(given) != len(parts):
                    raise ValueError(f"{len(given)} weights for the {len(parts) + 1} levels of `{HIERARCHY}`")
                if any(not 1 <= w <= 65535 for w in given):
                    raise ValueError("weights are 1..65535")
                weights = ([None] if len(given) == len(parts) else []) + given
            except ValueError as err:
                self.report(codes.BAD_VALUE, f"queue `{queue.name}`: `{HIERARCHY_WEIGHTS}`: {err}",
                            src.span(weights_entry.value))
        weights = weights[1:]      # the root's weight means nothing
        if not parts or not all(pt.is_name(p) for p in parts):
            if parts:
                self.report(codes.BAD_VALUE, f"queue `{queue.name}`: `{HIERARCHY}` must be a path of queue names "
                            "such as root/eng/prod", src.span(path_entry.value))
            return queue
        parent = None
        for part, weight in zip(parts[:-1], weights[:-1]):
            self.ancestors.setdefault(part, (QueueConfig(name=part, parent=parent, weight=weight,
                                                         note=f"from `{HIERARCHY}` annotations"), nodes))
            parent = part
        note = queue.note
        weight = queue.weight
        if weights[-1] is not None:
            if weight not in (None, 1, weights[-1]):
                note = f"spec.weight {weight} replaced by its `{HIERARCHY_WEIGHTS}` weight {weights[-1]}"
            weight = weights[-1]
        if parent is not None and "parent" not in nodes:
            nodes["parent"] = path_entry.value
        return replace(queue, parent=parent, weight=weight, note=note)

    def dequeue_strategy(self, node: Node) -> str | None:
        if is_null(node):
            return None
        strategy = self.text(node).strip()
        if strategy not in ("traverse", "fifo", "priorityfifo"):
            raise Invalid(f"`{strategy}` is not traverse, fifo or priorityfifo")
        return strategy

    def affinity(self, src: YamlText, queue: str, node: Node) -> dict[str, list[str]]:
        """spec.affinity as the policy's node group settings; a field Volcano's schema has not is refused."""
        if is_null(node):
            return {}
        if not is_mapping(node):
            raise Invalid(f"expected a mapping, got {kind_of(node)}")
        out: dict[str, list[str]] = {}

        def bad(entry, text: str) -> None:
            self.report(codes.BAD_VALUE, f"queue `{queue}`: `spec.affinity.{text}", src.span(entry.key_node))

        for part in self.mapping_entries(src, node):
            if part.key not in ("nodeGroupAffinity", "nodeGroupAntiAffinity") or not is_mapping(part.value):
                bad(part, f"{part.key}` is not nodeGroupAffinity or nodeGroupAntiAffinity (a mapping)")
                continue
            for term in self.mapping_entries(src, part.value):
                setting = AFFINITY_SETTINGS.get((part.key, term.key))
                if setting is None:
                    bad(term, f"{part.key}.{term.key}` is not a field of {part.key}")
                elif not is_sequence(term.value) or not all(is_scalar(v) for v in term.value.value):
                    bad(term, f"{part.key}.{term.key}` must be a list of node group names")
                else:
                    out[setting] = [str(v.value) for v in term.value.value]
        return out

    def spec_field(self, src: YamlText, queue: str, key: str, node: Node) -> Any:
        if is_null(node):
            return None
        if key == "weight":
            weight = self.number(node, integer=True)
            if not 1 <= weight <= 65535:
                raise Invalid(f"{weight} is outside 1..65535")
            return weight
        if key == "priority":
            return self.number(node, integer=True)
        if key == "reclaimable":
            return self.boolean(node)
        if key == "parent":
            return self.text(node).strip() or None
        if key == "state":
            state = self.text(node).strip()
            if state not in ("Open", "Closed", "Closing"):
                raise Invalid(f"`{state}` is not Open or Closed")
            return "open" if state == "Open" else "closed"
        if key == "guarantee":
            if not is_mapping(node):
                raise Invalid(f"expected a mapping with `resource`, got {kind_of(node)}")
            resource = None
            for entry in self.mapping_entries(src, node):
                if entry.key == "resource":
                    resource = self.resources(src, entry.value)
                else:
                    self.report(codes.NOT_IMPORTED, f"queue `{queue}`: `spec.guarantee.{entry.key}` is not imported",
                                src.span(entry.key_node))
            return resource
        return self.resources(src, node)      # capability, deserved

    def resources(self, src: YamlText, node: Node) -> dict[str, str] | None:
        if is_null(node):
            return None
        if not is_mapping(node):
            raise Invalid(f"expected a resource mapping such as `{{cpu: 4, memory: 8Gi}}`, got {kind_of(node)}")
        out: dict[str, str] = {}
        for entry in self.mapping_entries(src, node):
            if not is_scalar(entry.value) or is_null(entry.value):
                self.report(codes.BAD_VALUE, f"`{entry.key}` must be a quantity, got {kind_of(entry.value)}",
                            src.span(entry.value))
                continue
            text = str(entry.value.value).strip()
            try:
                to_base_units(entry.key, text)
            except ValueError as err:
                self.report(codes.BAD_VALUE, f"`{entry.key}`: {err}", src.span(entry.value))
                continue
            out[entry.key] = text
        return out or None

    def place(self, src: YamlText, queues: list[tuple[QueueConfig, dict[str, Node]]]) -> list[QueueConfig]:
        """Check the tree: unique names, parents that exist, no cycles. Parents come first."""
        by_name: dict[str, tuple[QueueConfig, dict[str, Node]]] = {}
        for queue, nodes in queues:
            if queue.name in by_name:
                self.report(codes.BAD_QUEUE, f"queue `{queue.name}` is defined twice; the second is skipped",
                            src.span(nodes["name"]))
                continue
            by_name[queue.name] = (queue, nodes)
        fixed: dict[str, QueueConfig] = {}
        for name, (queue, nodes) in by_name.items():
            parent = queue.parent
            if name == cat.ROOT_QUEUE:
                if parent not in (None, cat.ROOT_QUEUE):
                    self.report(codes.BAD_QUEUE, "the root queue has no parent", src.span(nodes["parent"]))
                queue = replace(queue, parent=None)
            elif parent in (None, cat.ROOT_QUEUE):
                queue = replace(queue, parent=None)
            elif parent not in by_name:
                self.report(codes.BAD_QUEUE, f"queue `{name}`: parent queue `{parent}` does not exist",
                            src.span(nodes["parent"]),
                            did_you_mean(parent, by_name) or "create the parent Queue too, or leave `parent` out")
                queue = replace(queue, parent=None, note=f"parent `{parent}` was not found; placed at the top")
            fixed[name] = queue
        for name in list(fixed):
            seen = [name]
            current = fixed[name].parent
            while current is not None and current in fixed and current not in seen:
                seen.append(current)
                current = fixed[current].parent
            if current == name:
                self.report(codes.BAD_QUEUE, f"queue `{name}` is its own ancestor: " + " -> ".join([*seen, name]),
                            src.span(by_name[name][1].get("parent", by_name[name][1]["name"])))
                fixed[name] = replace(fixed[name], parent=None, note="parent cycle broken here; placed at the top")
        return _tree_order(list(fixed.values()))


def _tree_order(queues: list[QueueConfig]) -> list[QueueConfig]:
    """Parents before children, siblings in file order."""
    children: dict[str | None, list[QueueConfig]] = {}
    for queue in queues:
        children.setdefault(queue.parent, []).append(queue)
    out: list[QueueConfig] = []

    def visit(parent: str | None) -> None:
        for queue in children.get(parent, []):
            out.append(queue)
            visit(queue.name)

    visit(None)
    return out


HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"


# --- the policy -----------------------------------------------------------------------------
