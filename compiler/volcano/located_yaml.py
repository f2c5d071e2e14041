"""YAML with positions, for diagnostics that point into a Volcano config or a Queue file.

PyYAML's node graph (`yaml.compose`) keeps the line and column of every key and value; the
importer walks nodes instead of plain values so each finding can say `file:line:col`. Text
that sits inside another file (the `volcano-scheduler.conf` block of a ConfigMap) carries an
offset, so positions point into the file the user actually has open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from policydsl.diagnostics import Span

STR_TAG = "tag:yaml.org,2002:str"
BOOL_TAG = "tag:yaml.org,2002:bool"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
NULL_TAG = "tag:yaml.org,2002:null"


class YamlSyntaxError(Exception):
    """Malformed YAML, with where the parser gave up."""

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.span = span


@dataclass(frozen=True)
class YamlText:
    """YAML source text and where it sits in its file (offsets are 0 for a whole file)."""

    path: str
    text: str
    line_offset: int = 0
    column_offset: int = 0

    def span(self, node: Node) -> Span:
        start, end = node.start_mark, node.end_mark
        return Span(self.path,
                    start.line + 1 + self.line_offset, start.column + 1 + self.column_offset,
                    end.line + 1 + self.line_offset, end.column + 1 + self.column_offset)

    def point(self, line: int, column: int) -> Span:
        """A 0-based position of this text as a span in the file."""
        return Span.point(self.path, line + 1 + self.line_offset, column + 1 + self.column_offset)

    def documents(self) -> list[Node]:
        """Every non-empty document, as nodes. Raises YamlSyntaxError."""
        try:
            return [doc for doc in yaml.compose_all(self.text, Loader=yaml.SafeLoader) if doc is not None]
        except yaml.MarkedYAMLError as err:
            mark = err.problem_mark or err.context_mark
            message = " ".join(part for part in (err.context, err.problem) if part) or "malformed YAML"
            span = self.point(mark.line, mark.column) if mark else self.point(0, 0)
            raise YamlSyntaxError(f"malformed YAML: {message}", span) from None
        except yaml.YAMLError as err:
            raise YamlSyntaxError(f"malformed YAML: {err}", self.point(0, 0)) from None

    def embedded(self, node: ScalarNode) -> "YamlText":
        """The text of a string value as YAML of its own, positioned inside this file.

        Exact for a literal block (`key: |`), the form ConfigMaps use: its lines follow the
        indicator line, all indented alike. Any other scalar style folds or unescapes its
        lines, so positions fall back to the start of the value.
        """
        if node.style == "|":
            first_line = node.start_mark.line + 1
            lines = self.text.splitlines()
            indent = next((len(line) - len(line.lstrip(" ")) for line in lines[first_line:] if line.strip()), 0)
            return YamlText(self.path, node.value, self.line_offset + first_line, self.column_offset + indent)
        return YamlText(self.path, node.value, self.line_offset + node.start_mark.line,
                        self.column_offset + node.start_mark.column)


class _Constructor(yaml.constructor.SafeConstructor):
    pass


def plain(node: Node) -> Any:
    """A node as ordinary Python data (what yaml.safe_load would have given)."""
    return _Constructor().construct_object(node, deep=True)


def is_mapping(node: Node | None) -> bool:
    return isinstance(node, MappingNode)


def is_sequence(node: Node | None) -> bool:
    return isinstance(node, SequenceNode)


def is_scalar(node: Node | None) -> bool:
    return isinstance(node, ScalarNode)


def is_null(node: Node | None) -> bool:
    return node is None or (isinstance(node, ScalarNode) and node.tag == NULL_TAG)


@dataclass(frozen=True)
class Entry:
    """One `key: value` of a mapping; `key` is the key's text."""

    key: str
    key_node: Node
    value: Node


def entries(node: MappingNode) -> Iterator[Entry]:
    """The entries of a mapping in written order. Non-scalar keys are given as their YAML text."""
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, ScalarNode) else yaml.serialize(key_node).strip()
        yield Entry(str(key), key_node, value_node)


def duplicate_keys(node: MappingNode) -> list[Entry]:
    """Entries whose key was already used above; YAML loaders keep only the last."""
    seen: set[str] = set()
    repeated = []
    for entry in entries(node):
        if entry.key in seen:
            repeated.append(entry)
        seen.add(entry.key)
    return repeated


def lookup(node: MappingNode, key: str) -> Entry | None:
    """The last entry with this key (the one a YAML loader keeps)."""
    found = None
    for entry in entries(node):
        if entry.key == key:
            found = entry
    return found


def kind_of(node: Node) -> str:
    """A user-facing word for what a node holds, for "expected X, got Y" messages."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        BOOL_TAG: "a boolean", INT_TAG: "an integer", FLOAT_TAG: "a number", NULL_TAG: "nothing",
    }.get(node.tag, "a string")
