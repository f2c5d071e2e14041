"""Policy text from plain declarations, in the layout `policydsl fmt` keeps.

The importer fills these declarations and `render` writes them: two-space indent, one
setting per line, a blank line between top-level items, maps inline. Comments are whole
lines above what they describe, so the formatter keeps them in place.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

INDENT = "  "
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")
_KEYWORDS = frozenset({"true", "false"})
_INTEGER = re.compile(r"-?[0-9]+\Z")
_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+\Z")
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)\Z")


@dataclass(frozen=True)
class Token:
    """Text written as is: a quantity such as `8Gi`, or a symbol such as `binpack`."""

    text: str


def is_name(text: str) -> bool:
    """Whether text can be written bare where the grammar takes a NAME."""
    return bool(_NAME.match(text)) and text not in _KEYWORDS


def quantity(text: str) -> Token | str:
    """A Kubernetes quantity in its written form: a number or suffixed token when the grammar
    has one (`4`, `1.5`, `8Gi`, `500m`), otherwise a string (`"1e3"`) the compiler still parses."""
    text = text.strip()
    if _INTEGER.match(text) or _DECIMAL.match(text) or _QUANTITY.match(text):
        return Token(text)
    return text


def symbol(text: str) -> Token | str:
    """A symbol value: bare when it is a name, quoted otherwise (the compiler takes both)."""
    return Token(text) if is_name(text) else text


def render_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def render_number(value: int | float) -> str:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"{value} cannot be written in a policy")
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value)}.0"
    text = repr(value)
    if "e" in text or "E" in text:  # the grammar has no exponent form
        text = f"{value:.15f}".rstrip("0")
        if text.endswith("."):
            text += "0"
    return text


def render_value(value: Any) -> str:
    if isinstance(value, Token):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return render_number(value)
    if isinstance(value, str):
        return render_string(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        body = ", ".join(f"{render_key(k)}: {render_value(v)}" for k, v in value.items())
        return "{ " + body + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a policy value")


def render_key(key: str) -> str:
    return key if is_name(key) else render_string(key)


@dataclass
class Setting:
    name: str
    value: Any
    comments: list[str] = field(default_factory=list)


@dataclass
class PluginDecl:
    name: str
    weight: int | float | None = None
    settings: list[Setting] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


@dataclass
class TierDecl:
    plugins: list[PluginDecl] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    trailing_comments: list[str] = field(default_factory=list)   # e.g. plugins left out


@dataclass
class ActionDecl:
    name: str
    settings: list[Setting] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


@dataclass
class QueueDecl:
    name: str
    settings: list[Setting] = field(default_factory=list)
    children: list["QueueDecl"] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


@dataclass
class PolicyDoc:
    name: str
    version: int = 1
    comments: list[str] = field(default_factory=list)          # above the header
    actions: list[str] = field(default_factory=list)
    actions_comments: list[str] = field(default_factory=list)
    tiers: list[TierDecl] = field(default_factory=list)
    action_configs: list[ActionDecl] = field(default_factory=list)
    queues: list[QueueDecl] = field(default_factory=list)
    queues_comments: list[str] = field(default_factory=list)   # above the first queue


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def comments(self, depth: int, comments: list[str]) -> None:
        for comment in comments:
            for line in comment.splitlines() or [""]:
                self.add(depth, ("# " + line).rstrip())

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def settings(self, depth: int, settings: list[Setting]) -> None:
        for setting in settings:
            self.comments(depth, setting.comments)
            self.add(depth, f"{setting.name} = {render_value(setting.value)}")


def _plugin(out: _Lines, plugin: PluginDecl, depth: int) -> None:
    out.comments(depth, plugin.comments)
    head = f"plugin {plugin.name}"
    if plugin.weight is not None:
        head += f" weight {render_number(plugin.weight)}"
    if not plugin.settings:
        out.add(depth, head)
        return
    out.add(depth, head + " {")
    out.settings(depth + 1, plugin.settings)
    out.add(depth, "}")


def _queue(out: _Lines, queue: QueueDecl, depth: int) -> None:
    out.comments(depth, queue.comments)
    if not queue.settings and not queue.children:
        out.add(depth, f"queue {queue.name} {{}}")
        return
    out.add(depth, f"queue {queue.name} {{")
    out.settings(depth + 1, queue.settings)
    for index, child in enumerate(queue.children):
        if queue.settings or index:
            out.blank()     # a child queue is a block, set apart from its siblings as fmt does
        _queue(out, child, depth + 1)
    out.add(depth, "}")


def render(doc: PolicyDoc) -> str:
    out = _Lines()
    out.comments(0, doc.comments)
    out.add(0, f"policy {render_string(doc.name)} version {doc.version}")
    out.blank()
    out.comments(0, doc.actions_comments)
    out.add(0, "actions [" + ", ".join(doc.actions) + "]")
    for tier in doc.tiers:
        out.blank()
        out.comments(0, tier.comments)
        out.add(0, "tier {")
        for plugin in tier.plugins:
            _plugin(out, plugin, 1)
        out.comments(1, tier.trailing_comments)
        out.add(0, "}")
    for action in doc.action_configs:
        out.blank()
        out.comments(0, action.comments)
        out.add(0, f"action {action.name} {{")
        out.settings(1, action.settings)
        out.add(0, "}")
    for index, queue in enumerate(doc.queues):
        out.blank()
        if index == 0:
            out.comments(0, doc.queues_comments)
        _queue(out, queue, 0)
    return "\n".join(out.lines).rstrip("\n") + "\n"
