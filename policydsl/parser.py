"""Text to AST. The Lark LALR parser is built once per process and reused.

`parse_text` never raises for bad input: it returns the AST (or None) and diagnostics.
Syntax errors are recovered from where Lark can resume, so one run reports several.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from policydsl import nodes as n
from policydsl.diagnostics import (
    BAD_LITERAL,
    EMPTY_FILE,
    SYNTAX_ERROR,
    TOO_DEEP,
    UNSUPPORTED_VERSION,
    Diagnostic,
    Span,
    make,
)
from policydsl.limits import MAX_NESTING

LANGUAGE_VERSIONS = (1,)
GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")
MAX_SYNTAX_ERRORS = 20

# How regex terminals read in "expected one of" messages.
TERMINAL_WORDS = {
    "NAME": "a name",
    "STRING": 'a quoted string such as "nvidia.com/gpu"',
    "INTEGER": "an integer",
    "DECIMAL": "a decimal number",
    "QUANTITY": "a quantity such as 500m or 80Gi",
    "PERCENT": "a percentage such as 50%",
    "TRUE": "`true`",
    "FALSE": "`false`",
    "$END": "the end of the file",
}


class _LiteralError(Exception):
    def __init__(self, message: str, span: Span):
        self.message = message
        self.span = span
        super().__init__(message)


class _TooDeep(Exception):
    """Raised from the lexer at the bracket that opens one level too many: the parse stops there."""

    def __init__(self, token: Token):
        self.token = token
        super().__init__(str(token))


class _ParseState:
    """What one parse gathers besides the AST. The Lark parser is built once and shared, and its
    lexer callbacks and tree builder are bound to this object then, so it is reset before every
    parse (under _Parser.lock)."""

    def __init__(self) -> None:
        self.begin("<string>")

    def begin(self, path: str) -> None:
        self.path = path
        self.comments: list[Token] = []
        self.literal_errors: list[_LiteralError] = []
        self.depth = 0

    def restart(self) -> None:
        """Another parse of (part of) the same text, from the top level: after a syntax error."""
        self.depth = 0

    def comment(self, token: Token) -> Token:
        self.comments.append(token)
        return token

    def open(self, token: Token) -> Token:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _TooDeep(token)
        return token

    def close(self, token: Token) -> Token:
        self.depth -= 1
        return token


@dataclass
class _Parser:
    lark: Lark
    state: _ParseState
    lock: threading.Lock
    words: dict[str, str]


@functools.lru_cache(maxsize=1)
def _parser() -> _Parser:
    state = _ParseState()
    # The AST is built as the LALR parser reduces each rule (Lark's tree-less mode): a parse tree
    # of the whole file first, with a position record per node, took four times the AST's memory.
    # Every token is kept so that a node's span covers its keywords and brackets.
    lark = Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        maybe_placeholders=True,
        keep_all_tokens=True,
        transformer=_Builder(state),
        lexer_callbacks={"COMMENT": state.comment, "LSQB": state.open, "LBRACE": state.open,
                         "RSQB": state.close, "RBRACE": state.close},
        start=["start", "items"],
    )
    words = dict(TERMINAL_WORDS)
    for term in lark.terminals:
        if isinstance(term.pattern, PatternStr):
            words.setdefault(term.name, f"`{term.pattern.value}`")
    return _Parser(lark, state, threading.Lock(), words)


def describe_expected(expected: set[str] | frozenset[str]) -> str:
    words = _parser().words
    expected = set(expected)
    value_starts = {"INTEGER", "DECIMAL", "QUANTITY", "STRING", "PERCENT"}
    prefix: list[str] = []
    if value_starts <= expected:
        expected -= value_starts | {"TRUE", "FALSE", "LSQB", "LBRACE"}
        expected.discard("NAME")
        prefix = ["a value (number, quantity, string, name, list or map)"]
    readable = prefix + sorted({words.get(name, name.lower()) for name in expected})
    if not readable:
        return "nothing more"
    if len(readable) == 1:
        return readable[0]
    return "one of " + ", ".join(readable[:-1]) + " or " + readable[-1]


def _token_span(path: str, token: Token) -> Span:
    return Span(path, *_edges(token))


_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _unescape(raw: str, span: Span) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped not in _ESCAPES:
            raise _LiteralError(f"unknown escape `\\{escaped}` in string", span)
        return _ESCAPES[escaped]

    return _ESCAPE.sub(replace, raw[1:-1])


@dataclass(frozen=True, slots=True)
class _Block:
    """A `{ setting* }` block on its way into its plugin, action or device: its span reaches the
    closing brace, which the parent's span must too."""

    settings: tuple[n.Setting, ...]
    span: Span


def _edges(child: Any) -> tuple[int, int, int, int]:
    if isinstance(child, Token):
        return (child.line, child.column, child.end_line or child.line,
                child.end_column or child.column + len(child))
    if isinstance(child, n.MapEntry):
        first, last = child.key_span, _edges(child.value)
        return first.line, first.column, last[2], last[3]
    span = child.span
    return span.line, span.column, span.end_line, span.end_column


def _parts(children: list[Any]) -> list[Any]:
    """The children a node is made of: keywords and punctuation dropped, absent optionals (None) kept."""
    return [c for c in children if not isinstance(c, Token)]


class _Builder:
    """Lark's callbacks, one per grammar rule, called as the parser reduces it: children are the
    rule's tokens, the nodes already built for its sub-rules, and None for an absent `[optional]`."""

    def __init__(self, state: _ParseState):
        self.state = state

    def _span(self, children: list[Any]) -> Span:
        present = [c for c in children if c is not None]
        first, last = _edges(present[0]), _edges(present[-1])
        return Span(self.state.path, first[0], first[1], last[2], last[3])

    # --- literals -------------------------------------------------------------------------
    def integer(self, children: list[Any]) -> n.Integer:
        return n.Integer(int(children[0]), self._span(children))

    def float(self, children: list[Any]) -> n.Float:
        text = str(children[0])
        return n.Float(float(text), text, self._span(children))

    def quantity(self, children: list[Any]) -> n.Quantity:
        return n.Quantity(str(children[0]), self._span(children))

    def percent(self, children: list[Any]) -> n.Percent:
        text = str(children[0])
        return n.Percent(float(text[:-1]), text, self._span(children))

    def boolean(self, children: list[Any]) -> n.Boolean:
        return n.Boolean(str(children[0]) == "true", self._span(children))

    def string(self, children: list[Any]) -> n.String:
        span = self._span(children)
        raw = str(children[0])
        try:
            return n.String(_unescape(raw, span), span)
        except _LiteralError as err:
            # Reported once the whole file has parsed: a syntax error anywhere comes first.
            self.state.literal_errors.append(err)
            return n.String(raw[1:-1], span)

    def const_ref(self, children: list[Any]) -> n.ConstRef:
        return n.ConstRef(str(children[0]), self._span(children))

    def name(self, children: list[Any]) -> n.Name:
        return n.Name(str(children[0]), self._span(children))

    def list(self, children: list[Any]) -> n.ListValue:
        return n.ListValue(tuple(c for c in _parts(children) if c is not None), self._span(children))

    def map_entry(self, children: list[Any]) -> n.MapEntry:
        key, value = _parts(children)
        return n.MapEntry(key.value, key.span, value)

    def map(self, children: list[Any]) -> n.MapValue:
        return n.MapValue(tuple(c for c in _parts(children) if c is not None), self._span(children))

    # --- structure ------------------------------------------------------------------------
    def setting(self, children: list[Any]) -> n.Setting:
        key, value = _parts(children)
        return n.Setting(key, value, self._span(children))

    def settings_block(self, children: list[Any]) -> _Block:
        return _Block(tuple(_parts(children)), self._span(children))

    def header(self, children: list[Any]) -> n.Header:
        name, version = _parts(children)
        return n.Header(name, version, self._span(children))

    def include(self, children: list[Any]) -> n.Include:
        return n.Include(_parts(children)[0], self._span(children))

    def const_decl(self, children: list[Any]) -> n.Const:
        name, value = _parts(children)
        return n.Const(name, value, self._span(children))

    def actions(self, children: list[Any]) -> n.Actions:
        return n.Actions(tuple(c for c in _parts(children) if c is not None), self._span(children))

    def plugin_weight(self, children: list[Any]) -> n.Value:
        return _parts(children)[0]

    def plugin(self, children: list[Any]) -> n.Plugin:
        name, weight, block = _parts(children)
        settings = block.settings if block is not None else ()
        return n.Plugin(name, weight, settings, self._span(children), has_block=block is not None)

    def tier(self, children: list[Any]) -> n.Tier:
        label, *plugins = _parts(children)
        return n.Tier(label, tuple(plugins), self._span(children))

    def action_config(self, children: list[Any]) -> n.ActionConfig:
        name, block = _parts(children)
        return n.ActionConfig(name, block.settings, self._span(children))

    def queue(self, children: list[Any]) -> n.Queue:
        name, *members = _parts(children)
        settings: list[n.Setting] = []
        queues: list[n.Queue] = []
        order: list[tuple[str, int]] = []
        for member in members:
            if isinstance(member, n.Queue):
                order.append(("q", len(queues)))
                queues.append(member)
            else:
                order.append(("s", len(settings)))
                settings.append(member)
        return n.Queue(name, tuple(settings), tuple(queues), self._span(children), tuple(order))

    def device(self, children: list[Any]) -> n.Device:
        resource, block = _parts(children)
        return n.Device(resource, block.settings, self._span(children))

    def start(self, children: list[Any]) -> tuple[n.Header, tuple[n.Item, ...]]:
        header, *items = _parts(children)
        return header, tuple(items)


@dataclass(frozen=True)
class ParseResult:
    policy: n.Policy | None
    diagnostics: tuple[Diagnostic, ...]


def _syntax_diagnostic(path: str, err: UnexpectedInput, text: str, start: str = "start") -> Diagnostic:
    """`text` is what the parser was given (with `start` as its start symbol): positions in `err`
    are offsets into it."""
    line = getattr(err, "line", None) or 1
    column = getattr(err, "column", None) or 1
    if isinstance(err, UnexpectedCharacters):
        char = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        message = f"unexpected character {char!r}"
        expected = _acceptable_before(text, err.pos_in_stream, start) or err.allowed or set()
        span = Span(path, line, column, line, column + 1)
        if char == '"':
            message = "unterminated string"
            expected = set()
            span = Span(path, line, column, line, column + len(text[err.pos_in_stream:].split("\n", 1)[0]))
    elif isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        message = "unexpected end of file"
        expected = err.expected
        span = Span(path, line, column, line, column + 1)
    else:
        token = err.token
        message = f"unexpected {_describe_token(token)}"
        expected = _accepts(err)
        span = _token_span(path, token)
        if token.type == "$END":
            message = "unexpected end of file"
    unit = _unit_hint(text, err.token) if isinstance(err, UnexpectedToken) else None
    if isinstance(err, UnexpectedCharacters) and message == "unterminated string":
        hint = 'close the string with `"` on the same line (write a newline inside a string as \\n)'
    elif unit is not None:
        message, hint = unit
    else:
        hint = f"expected {describe_expected(set(expected))}" if expected else None
    return make(SYNTAX_ERROR, message, span, hint)


# Units people write after a number that are not Kubernetes' (its suffixes: m, k, M, G, T, P, E
# for powers of 10; Ki, Mi, Gi, Ti, Pi, Ei for powers of 2). Lower-cased word -> what to write.
_UNIT_HINTS = {
    **{f"{p}b": f"write {p.upper() if p != 'k' else 'k'} (10^{3 * (i + 1)} bytes) or {p.upper()}i "
                f"(2^{10 * (i + 1)} bytes)" for i, p in enumerate("kmgtpe")},
    **{f"{p}ib": f"write {p.upper()}i, without the B" for p in "kmgtpe"},
    **{p: f"write {p.upper() if p != 'k' else 'k'} (10^{3 * (i + 1)}) or {p.upper()}i (2^{10 * (i + 1)}); "
          "suffixes are case-sensitive" for i, p in enumerate("kmgtpe")},
    **{f"{p}i": f"write {p.upper()}i; suffixes are case-sensitive" for p in "kmgtpe"},
    "b": "write the number of bytes alone (1024), or a suffix: Ki, Mi, Gi, ...",
    "bytes": "write the number of bytes alone (1024), or a suffix: Ki, Mi, Gi, ...",
    **{w: "CPUs are a plain number (10) or millicores (500m)" for w in ("core", "cores", "cpu", "cpus", "vcpu",
                                                                       "vcpus")},
}


def _unit_hint(text: str, token: Token) -> tuple[str, str] | None:
    """A name right after a number that reads as a unit (`64GB`, `10 cores`): a message and hint
    in Kubernetes' quantity words instead of the grammar's."""
    if token.type != "NAME" or token.start_pos is None:
        return None
    word = str(token.value)
    hint = _UNIT_HINTS.get(word.lower())
    before = text[:token.start_pos].rstrip(" \t")
    number = re.search(r"[0-9]+(\.[0-9]+)?$", before)
    if hint is None or number is None:
        return None
    return f"`{number.group(0)}{'' if before == text[:token.start_pos] else ' '}{word}` is not a quantity", hint


def _accepts(err: UnexpectedInput) -> set[str]:
    """Terminals the parser can really take here. LALR's `expected` merges the look-aheads of
    every context a rule appears in (after a name it lists `=`, `:`, `weight`, ...); `accepts`
    tries each one."""
    try:
        return set(err.accepts)  # type: ignore[attr-defined]
    except Exception:  # the interactive parser is a best effort; the raw set still helps
        return set(getattr(err, "expected", ()) or ())


def _acceptable_before(text: str, position: int, start: str) -> set[str]:
    """For a character no token starts with: the terminals the parser could take at that point,
    found by feeding it the text before the character."""
    parser = _parser()
    parser.state.restart()
    try:
        interactive = parser.lark.parse_interactive(text[:position], start=start)
        interactive.exhaust_lexer()
        return set(interactive.accepts())
    except Exception:  # the text before may itself be broken; the lexer's guess is used then
        return set()


def _describe_token(token: Token) -> str:
    words = _parser().words
    if token.type in ("NAME",):
        return f"name `{token}`"
    kind = words.get(token.type, token.type.lower())
    if kind.startswith("`"):
        return kind
    # "an integer" -> "integer `4`", so the message reads "unexpected integer `4`".
    kind = re.sub(r"^(an?|the) ", "", kind.split(" such as")[0])
    return f"{kind} `{token}`"


_CONTENT = re.compile(r"^[^\S\n]*[^\s#]", re.MULTILINE)  # a line that is neither blank nor a comment


# Above this much text the garbage collector waits for the parse to end. A parse makes a node and
# a span every few bytes and keeps them all, so the collector's passes walk an ever larger tree:
# parsing 2 MB took 11.6 s with them and 4.3 s without. Cycles made meanwhile are collected after.
GC_PAUSE_CHARS = 64 * 1024


@contextlib.contextmanager
def _collector_paused(pause: bool):
    # Only when it is on: a caller that turned it off keeps it off.
    paused = pause and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def parse_text(text: str, path: str = "<string>") -> ParseResult:
    """Parse one file's text. Never raises for bad input."""
    if not _CONTENT.search(text):
        return ParseResult(None, (make(EMPTY_FILE, "the file holds no policy", Span.point(path, 1, 1),
                                       'start with a header: policy "name" version 1'),))
    parser = _parser()
    state = parser.state
    with parser.lock, _collector_paused(len(text) > GC_PAUSE_CHARS):
        state.begin(path)
        try:
            header, items = parser.lark.parse(text, start="start")
        except _TooDeep as err:
            return ParseResult(None, (_too_deep(path, err.token),))
        except UnexpectedInput as err:
            errors = [_syntax_diagnostic(path, err, text)]
            errors.extend(_recover(parser, path, text, err))
            return ParseResult(None, tuple(_dedupe(errors)))
        comment_tokens, literal_errors = state.comments, state.literal_errors
        state.begin("<string>")  # the shared state holds no file between parses
    if literal_errors:
        first = literal_errors[0]
        return ParseResult(None, (make(BAD_LITERAL, first.message, first.span),))
    comments = tuple(n.Comment(str(t), _token_span(path, t)) for t in comment_tokens)
    policy = n.Policy(path, header, items, comments)
    diagnostics: list[Diagnostic] = []
    if header.version.value not in LANGUAGE_VERSIONS:
        diagnostics.append(make(
            UNSUPPORTED_VERSION,
            f"language version {header.version.value} is not supported",
            header.version.span,
            "supported versions: " + ", ".join(map(str, LANGUAGE_VERSIONS)),
        ))
        return ParseResult(None, tuple(diagnostics))
    return ParseResult(policy, tuple(diagnostics))


def _too_deep(path: str, token: Token) -> Diagnostic:
    return make(TOO_DEEP, f"brackets and braces nested more than {MAX_NESTING} levels deep",
                _token_span(path, token), f"flatten the value or the queue tree: at most {MAX_NESTING} "
                "levels of `[ ]` and `{ }` may be open at once")


_TOP_LEVEL = re.compile(r"^(include|const|actions|tier|action|queue|device)\b")


def _recover(parser: _Parser, path: str, text: str, err: UnexpectedInput) -> list[Diagnostic]:
    """Find more errors: resume at each later unindented top-level item after an error.

    Dropping tokens one at a time (Lark's on_error) cascades into a report per token; restarting
    at the next item that starts a line reports each broken item once.
    """
    found: list[Diagnostic] = []
    lines = text.splitlines(keepends=True)
    error_line = getattr(err, "line", None) or len(lines)
    while len(found) < MAX_SYNTAX_ERRORS:
        resume = next((i for i in range(error_line, len(lines)) if _TOP_LEVEL.match(lines[i])), None)
        if resume is None:
            return found
        rest = "\n" * resume + "".join(lines[resume:])
        parser.state.restart()
        try:
            parser.lark.parse(rest, start="items")
            return found
        except _TooDeep as deep:
            found.append(_too_deep(path, deep.token))
            return found
        except UnexpectedInput as again:
            found.append(_syntax_diagnostic(path, again, rest, start="items"))
            next_line = getattr(again, "line", None) or len(lines)
            error_line = max(next_line, resume + 1)
    return found


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple] = set()
    out = []
    for d in diags:
        key = (d.span.line if d.span else 0, d.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(d)
    return out
