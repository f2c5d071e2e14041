"""The policy AST: frozen dataclasses, every node with the source span it came from.

Values stay as written (a quantity keeps its text); turning them into numbers in base units
is the compiler's job. `Policy.comments` keeps every comment so the formatter loses none.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Union

from policydsl.diagnostics import Span


@dataclass(frozen=True, slots=True)
class Integer:
    value: int
    span: Span


@dataclass(frozen=True, slots=True)
class Float:
    value: float
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Quantity:
    """A Kubernetes quantity with a suffix, e.g. `500m`, `80Gi`; kept as text."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Percent:
    value: float
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Boolean:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class String:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class ConstRef:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class ListValue:
    items: tuple["Value", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: str
    key_span: Span
    value: "Value"


@dataclass(frozen=True, slots=True)
class MapValue:
    entries: tuple[MapEntry, ...]
    span: Span

    def get(self, key: str) -> "Value | None":
        for entry in self.entries:
            if entry.key == key:
                return entry.value
        return None


Value = Union[Integer, Float, Quantity, Percent, Boolean, String, ConstRef, ListValue, MapValue]


@dataclass(frozen=True, slots=True)
class Name:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Setting:
    key: Name
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class Header:
    name: String
    version: Integer
    span: Span


@dataclass(frozen=True, slots=True)
class Include:
    path: String
    span: Span


@dataclass(frozen=True, slots=True)
class Const:
    name: Name
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class Actions:
    names: tuple[Name, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Plugin:
    name: Name
    weight: Value | None
    settings: tuple[Setting, ...]
    span: Span
    has_block: bool = False


@dataclass(frozen=True, slots=True)
class Tier:
    label: String | None
    plugins: tuple[Plugin, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ActionConfig:
    name: Name
    settings: tuple[Setting, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Queue:
    name: Name
    settings: tuple[Setting, ...]
    children: tuple["Queue", ...]
    span: Span
    # Order of settings and child queues as written, for the formatter: ("s", i) or ("q", i).
    order: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Device:
    resource: String
    settings: tuple[Setting, ...]
    span: Span


Item = Union[Include, Const, Actions, Tier, ActionConfig, Queue, Device]


@dataclass(frozen=True, slots=True)
class Comment:
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Policy:
    path: str
    header: Header
    items: tuple[Item, ...]
    comments: tuple[Comment, ...]

    def of_type(self, kind: type) -> list:
        return [item for item in self.items if isinstance(item, kind)]


def setting_map(settings: tuple[Setting, ...]) -> dict[str, Setting]:
    """Last setting wins, as in the compiler; duplicates are a lint finding."""
    return {s.key.value: s for s in settings}


def walk_queues(queues, parent: Queue | None = None):
    """Yield (queue, parent) for a forest of queues, parents before children."""
    for queue in queues:
        yield queue, parent
        yield from walk_queues(queue.children, queue)


@functools.cache
def _meaning_fields(cls: type) -> tuple[str, ...]:
    """The fields of a node class that carry meaning: not where it is written, nor how."""
    from dataclasses import fields

    return tuple(f.name for f in fields(cls)
                 if not (f.name in ("span", "key_span", "path", "order", "has_block", "text")
                         and not (f.name == "text" and cls is Quantity))
                 and not (cls is Policy and f.name == "comments"))


def strip_spans(node):
    """A span-free, comparable view of a node: the meaning a formatter must keep."""
    from dataclasses import is_dataclass

    if isinstance(node, tuple):
        return tuple(strip_spans(n) for n in node)
    if is_dataclass(node) and not isinstance(node, Span):
        return (type(node).__name__,
                *((name, strip_spans(getattr(node, name))) for name in _meaning_fields(type(node))))
    return node


def same_meaning(a, b) -> bool:
    """strip_spans(a) == strip_spans(b), without building either view: the formatter compares a
    whole policy with its output's, and the two views took more memory than the two trees."""
    from dataclasses import is_dataclass

    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same_meaning(x, y) for x, y in zip(a, b))
    if is_dataclass(a) and not isinstance(a, Span):
        return type(a) is type(b) and all(same_meaning(getattr(a, name), getattr(b, name))
                                          for name in _meaning_fields(type(a)))
    return not (is_dataclass(b) and not isinstance(b, Span)) and not isinstance(b, tuple) and a == b
