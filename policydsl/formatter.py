"""The canonical layout of a policy file, keeping every comment.

Layout: 2-space indent, one setting, plugin or queue per line, a blank line between top-level
items (consecutive `include`s and consecutive `const`s stay together), lists and maps inline
(`{ cpu: 4, memory: 8Gi }`), strings re-escaped, numbers and quantities as written.

Comments are not AST nodes, so they are put back by position. The printer emits lines in
source order, each remembering where in the source its node starts (its anchor). A comment
that stands on its own line goes before the first output line anchored after it; a comment
that follows code goes at the end of the last output line anchored before it. A list, map or
`actions` list with a comment inside is laid out one entry per line so the comment stays with
its entry.

`format_text` re-parses its own output and refuses (returns diagnostics, no text) when the
meaning or the comments would change, so a formatter bug can never rewrite a policy wrongly.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from policydsl import nodes as n
from policydsl.diagnostics import CodeInfo, Diagnostic, Severity, Span, make, register_code
from policydsl.parser import parse_text

INDENT = "  "
# A map key written bare must read back as a name; anything else is quoted.
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
# Single-line items of these kinds are kept together without blank lines between them.
_GROUPED_KINDS = (n.Include, n.Const)

FORMAT_UNSAFE = register_code(CodeInfo(
    "PD015", "format-unsafe", Severity.ERROR,
    "the formatter's output would change the policy's meaning or drop a comment",
    why="The formatter checks its own output; a mismatch is a formatter bug, so the file is left as it is.",
    fix="Keep the file as written and report the bug with the file attached.",
))

Position = tuple[int, int]  # (line, column), 1-based, as in Span


def _start(span: Span) -> Position:
    return (span.line, span.column)


def _last_char(span: Span) -> Position:
    """Where a bracketed node's closing bracket is (spans end one past it)."""
    return (span.end_line, span.end_column - 1)


@dataclass
class _Line:
    indent: int
    text: str
    anchor: Position
    closer: bool = False          # a line that closes a block: its comments indent one deeper
    blank_before: bool = False


def quote(value: str) -> str:
    """A string literal that parses back to `value`."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _map_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else quote(key)


def inline_value(value: n.Value) -> str:
    """A value on one line, in its written form."""
    if isinstance(value, n.Integer):
        return str(value.value)
    if isinstance(value, (n.Float, n.Percent)):
        return value.text
    if isinstance(value, n.Quantity):
        return value.text
    if isinstance(value, n.Boolean):
        return "true" if value.value else "false"
    if isinstance(value, n.String):
        return quote(value.value)
    if isinstance(value, n.ConstRef):
        return value.name
    if isinstance(value, n.ListValue):
        return "[" + ", ".join(inline_value(item) for item in value.items) + "]"
    if isinstance(value, n.MapValue):
        if not value.entries:
            return "{}"
        entries = ", ".join(f"{_map_key(e.key)}: {inline_value(e.value)}" for e in value.entries)
        return "{ " + entries + " }"
    raise TypeError(f"not a policy value: {value!r}")


class _Printer:
    def __init__(self, policy: n.Policy):
        self.lines: list[_Line] = []
        self.comment_positions = sorted(_start(c.span) for c in policy.comments)

    # --- helpers ----------------------------------------------------------------------------
    def emit(self, indent: int, text: str, anchor: Position, closer: bool = False,
             blank_before: bool = False) -> None:
        self.lines.append(_Line(indent, text, anchor, closer, blank_before))

    def has_comment_inside(self, span: Span) -> bool:
        first = bisect.bisect_right(self.comment_positions, _start(span))
        return first < len(self.comment_positions) and self.comment_positions[first] < _last_char(span)

    def value(self, indent: int, prefix: str, value: n.Value, anchor: Position, suffix: str = "") -> None:
        """`prefix value suffix`, on one line unless a comment sits inside a list or map."""
        if isinstance(value, (n.ListValue, n.MapValue)) and self.has_comment_inside(value.span):
            opener, closer = ("[", "]") if isinstance(value, n.ListValue) else ("{", "}")
            self.emit(indent, prefix + opener, anchor)
            if isinstance(value, n.ListValue):
                for item in value.items:
                    self.value(indent + 1, "", item, _start(item.span), ",")
            else:
                for entry in value.entries:
                    self.value(indent + 1, f"{_map_key(entry.key)}: ", entry.value, _start(entry.key_span), ",")
            self.emit(indent, closer + suffix, _last_char(value.span), closer=True)
            return
        self.emit(indent, prefix + inline_value(value) + suffix, anchor)

    def setting(self, indent: int, setting: n.Setting) -> None:
        self.value(indent, f"{setting.key.value} = ", setting.value, _start(setting.span))

    def block(self, indent: int, head: str, node_span: Span, members, print_member) -> None:
        """`head {` members `}`, or `head {}` when empty and no comment is inside."""
        if not members and not self.has_comment_inside(node_span):
            self.emit(indent, head + " {}", _start(node_span))
            return
        self.emit(indent, head + " {", _start(node_span))
        for member in members:
            print_member(indent + 1, member)
        self.emit(indent, "}", _last_char(node_span), closer=True)

    # --- nodes ------------------------------------------------------------------------------
    def policy(self, policy: n.Policy) -> None:
        header = policy.header
        self.emit(0, f"policy {quote(header.name.value)} version {header.version.value}", _start(header.span))
        previous: n.Item | n.Header = header
        for item in policy.items:
            grouped = isinstance(item, _GROUPED_KINDS) and type(item) is type(previous)
            self.item(item, blank_before=not grouped)
            previous = item

    def item(self, item: n.Item, blank_before: bool) -> None:
        start = len(self.lines)
        if isinstance(item, n.Include):
            self.emit(0, f"include {quote(item.path.value)}", _start(item.span))
        elif isinstance(item, n.Const):
            self.value(0, f"const {item.name.value} = ", item.value, _start(item.span))
        elif isinstance(item, n.Actions):
            self.actions(item)
        elif isinstance(item, n.Tier):
            head = "tier" + (f" {quote(item.label.value)}" if item.label is not None else "")
            self.block(0, head, item.span, item.plugins, self.plugin)
        elif isinstance(item, n.ActionConfig):
            self.block(0, f"action {item.name.value}", item.span, item.settings, self.setting)
        elif isinstance(item, n.Queue):
            self.queue(0, item)
        elif isinstance(item, n.Device):
            self.block(0, f"device {quote(item.resource.value)}", item.span, item.settings, self.setting)
        else:
            raise TypeError(f"not a policy item: {item!r}")
        self.lines[start].blank_before = blank_before

    def actions(self, item: n.Actions) -> None:
        if not self.has_comment_inside(item.span):
            self.emit(0, "actions [" + ", ".join(name.value for name in item.names) + "]", _start(item.span))
            return
        self.emit(0, "actions [", _start(item.span))
        for name in item.names:
            self.emit(1, name.value + ",", _start(name.span))
        self.emit(0, "]", _last_char(item.span), closer=True)

    def plugin(self, indent: int, plugin: n.Plugin) -> None:
        head = f"plugin {plugin.name.value}"
        if plugin.weight is not None:
            if not (plugin.has_block or plugin.settings):
                self.value(indent, head + " weight ", plugin.weight, _start(plugin.span))
                return
            # The weight is printed inline in the head; a commented list weight is nonsense anyway.
            head += f" weight {inline_value(plugin.weight)}"
        if not (plugin.has_block or plugin.settings):
            self.emit(indent, head, _start(plugin.span))
            return
        self.block(indent, head, plugin.span, plugin.settings, self.setting)

    def queue(self, indent: int, queue: n.Queue) -> None:
        members: list[n.Setting | n.Queue]
        if len(queue.order) == len(queue.settings) + len(queue.children):
            members = [queue.settings[i] if kind == "s" else queue.children[i] for kind, i in queue.order]
        else:  # built by hand, not parsed: settings first
            members = [*queue.settings, *queue.children]

        # A child queue is a block: blank lines set it apart from its siblings.
        set_apart = {id(node) for previous, node in zip(members, members[1:])
                     if isinstance(node, n.Queue) or isinstance(previous, n.Queue)}

        def member(inner: int, node: n.Setting | n.Queue) -> None:
            first = len(self.lines)
            if isinstance(node, n.Queue):
                self.queue(inner, node)
            else:
                self.setting(inner, node)
            self.lines[first].blank_before = id(node) in set_apart

        self.block(indent, f"queue {queue.name.value}", queue.span, members, member)


def _blank_between(source_lines: list[str], first_line: int, last_line: int) -> bool:
    """Whether a blank source line lies strictly between two 1-based line numbers."""
    return any(not source_lines[i].strip() for i in range(first_line, min(last_line - 1, len(source_lines))))


def _is_own_line(comment: n.Comment, source_lines: list[str]) -> bool:
    line = source_lines[comment.span.line - 1] if comment.span.line <= len(source_lines) else ""
    return not line[: comment.span.column - 1].strip()


def _place_comments(lines: list[_Line], comments: tuple[n.Comment, ...], source: str) -> str:
    source_lines = source.split("\n")
    anchors = [line.anchor for line in lines]
    before: dict[int, list[n.Comment]] = {}
    trailing: dict[int, list[n.Comment]] = {}
    for comment in sorted(comments, key=lambda c: _start(c.span)):
        index = bisect.bisect_right(anchors, _start(comment.span))
        if _is_own_line(comment, source_lines) or index == 0:
            before.setdefault(index, []).append(comment)
        else:
            trailing.setdefault(index - 1, []).append(comment)

    # An output line can hold code from several source lines, so comments of its source range
    # may be own-line comments as well as trailing ones. Only the first in source order can end
    # the line; the rest follow it on their own lines, so the order never changes.
    for index, attached in trailing.items():
        merged = sorted(attached + before.get(index + 1, []), key=lambda c: _start(c.span))
        keep = merged[:1] if merged[0] is attached[0] else []
        trailing[index] = keep
        if len(merged) > len(keep):
            before[index + 1] = merged[len(keep):]

    out: list[str] = []
    after_opener = False  # the last line printed opens a block: no blank line right after it

    def blank() -> None:
        if out and out[-1] != "":
            out.append("")

    for index in range(len(lines) + 1):
        line = lines[index] if index < len(lines) else None
        group = before.get(index, [])
        if line is not None and line.blank_before:
            blank()
        if group:
            indent = 0 if line is None else line.indent + (1 if line.closer else 0)
            previous_line: int | None = None
            for comment in group:
                if previous_line is None:
                    line_above = comment.span.line - 2
                    if 0 <= line_above < len(source_lines) and not source_lines[line_above].strip() \
                            and not after_opener:
                        blank()
                elif _blank_between(source_lines, previous_line, comment.span.line):
                    blank()
                out.append(INDENT * indent + comment.text.rstrip())
                after_opener = False
                previous_line = comment.span.line
            if line is not None and not line.closer and _blank_between(source_lines, previous_line, line.anchor[0]):
                blank()
        if line is None:
            break
        text = INDENT * line.indent + line.text
        for comment in trailing.get(index, []):
            text += " " + comment.text.rstrip()
        out.append(text)
        after_opener = line.text.endswith(("{", "["))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def format_policy(policy: n.Policy, source: str) -> str:
    """The canonical text of a parsed policy; `source` is the text it was parsed from."""
    printer = _Printer(policy)
    printer.policy(policy)
    return _place_comments(printer.lines, policy.comments, source)


@dataclass(frozen=True)
class Formatted:
    """The result of formatting one file: `text` is None when it cannot be formatted."""

    source: str
    text: str | None
    diagnostics: tuple[Diagnostic, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        return self.text is not None and self.text != self.source


def _comment_texts(policy: n.Policy) -> list[str]:
    return [c.text.rstrip() for c in policy.comments]


def format_text(text: str, path: str = "<string>") -> Formatted:
    """Parse, format and verify. Never raises for bad input; syntax errors come back as diagnostics."""
    parsed = parse_text(text, path)
    if parsed.policy is None:
        return Formatted(text, None, parsed.diagnostics)
    output = format_policy(parsed.policy, text)
    check = parse_text(output, path)
    where = Span.point(path, 1, 1)
    if check.policy is None or not n.same_meaning(check.policy, parsed.policy):
        return Formatted(text, None, (*parsed.diagnostics, make(
            FORMAT_UNSAFE, "formatting would change the meaning of this policy; the file is left unchanged", where,
            "this is a formatter bug: please report it with the file")),)
    if _comment_texts(check.policy) != _comment_texts(parsed.policy):
        return Formatted(text, None, (*parsed.diagnostics, make(
            FORMAT_UNSAFE, "formatting would lose or reorder comments; the file is left unchanged", where,
            "this is a formatter bug: please report it with the file")),)
    return Formatted(text, output, parsed.diagnostics)
