"""Text to AST. The Lark LALR parser is built once per process and reused.

`parse_text` never raises for bad input: it returns the AST (or None) and diagnostics.
Syntax errors are recovered from where Lark can resume, so one run reports several.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from policydsl import nodes as n
from policydsl.diagnostics import (
    BAD_LITERAL,
    EMPTY_FILE,
    SYNTAX_ERROR,
    UNSUPPORTED_VERSION,
    Diagnostic,
    Span,
    make,
)

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


class _CommentSink:
    """Lark calls the lexer callback on a shared parser, so comments land here per parse."""

    def __init__(self) -> None:
        self.tokens: list[Token] = []

    def __call__(self, token: Token) -> Token:
        self.tokens.append(token)
        return token


@dataclass
class _Parser:
    lark: Lark
    comments: _CommentSink
    lock: threading.Lock
    words: dict[str, str]


@functools.lru_cache(maxsize=1)
def _parser() -> _Parser:
    sink = _CommentSink()
    lark = Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"COMMENT": sink},
        start=["start", "items"],
    )
    words = dict(TERMINAL_WORDS)
    for term in lark.terminals:
        if isinstance(term.pattern, PatternStr):
            words.setdefault(term.name, f"`{term.pattern.value}`")
    return _Parser(lark, sink, threading.Lock(), words)


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


def _span(path: str, meta) -> Span:
    return Span(path, meta.line, meta.column, meta.end_line, meta.end_column)


def _token_span(path: str, token: Token) -> Span:
    return Span(path, token.line, token.column, token.end_line or token.line,
                token.end_column or token.column + len(token))


class _LiteralError(Exception):
    def __init__(self, message: str, span: Span):
        self.message = message
        self.span = span
        super().__init__(message)


def _unescape(raw: str, span: Span) -> str:
    body = raw[1:-1]
    out: list[str] = []
    i = 0
    escapes = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1] if i + 1 < len(body) else ""
            if nxt not in escapes:
                raise _LiteralError(f"unknown escape `\\{nxt}` in string", span)
            out.append(escapes[nxt])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    # --- literals -------------------------------------------------------------------------
    def integer(self, meta, children):
        return n.Integer(int(children[0]), _span(self.path, meta))

    def float(self, meta, children):
        text = str(children[0])
        return n.Float(float(text), text, _span(self.path, meta))

    def quantity(self, meta, children):
        return n.Quantity(str(children[0]), _span(self.path, meta))

    def percent(self, meta, children):
        text = str(children[0])
        return n.Percent(float(text[:-1]), text, _span(self.path, meta))

    def boolean(self, meta, children):
        return n.Boolean(str(children[0]) == "true", _span(self.path, meta))

    def string(self, meta, children):
        span = _span(self.path, meta)
        return n.String(_unescape(str(children[0]), span), span)

    def const_ref(self, meta, children):
        return n.ConstRef(str(children[0]), _span(self.path, meta))

    def name(self, meta, children):
        return n.Name(str(children[0]), _span(self.path, meta))

    def list(self, meta, children):
        return n.ListValue(tuple(c for c in children if c is not None), _span(self.path, meta))

    def map_entry(self, meta, children):
        key, value = children
        return n.MapEntry(key.value, key.span, value)

    def map(self, meta, children):
        return n.MapValue(tuple(c for c in children if c is not None), _span(self.path, meta))

    # --- structure ------------------------------------------------------------------------
    def setting(self, meta, children):
        key, value = children
        return n.Setting(key, value, _span(self.path, meta))

    def settings_block(self, meta, children):
        return tuple(children)

    def header(self, meta, children):
        name, version = children
        return n.Header(name, version, _span(self.path, meta))

    def include(self, meta, children):
        return n.Include(children[0], _span(self.path, meta))

    def const_decl(self, meta, children):
        name, value = children
        return n.Const(name, value, _span(self.path, meta))

    def actions(self, meta, children):
        return n.Actions(tuple(c for c in children if c is not None), _span(self.path, meta))

    def plugin_weight(self, meta, children):
        return children[0]

    def plugin(self, meta, children):
        name, weight, block = children
        return n.Plugin(name, weight, tuple(block or ()), _span(self.path, meta), has_block=block is not None)

    def tier(self, meta, children):
        label, *plugins = children
        return n.Tier(label, tuple(plugins), _span(self.path, meta))

    def action_config(self, meta, children):
        name, block = children
        return n.ActionConfig(name, tuple(block), _span(self.path, meta))

    def queue(self, meta, children):
        name, *members = children
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
        return n.Queue(name, tuple(settings), tuple(queues), _span(self.path, meta), tuple(order))

    def device(self, meta, children):
        resource, block = children
        return n.Device(resource, tuple(block), _span(self.path, meta))

    def start(self, meta, children):
        header, *items = children
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
    if isinstance(err, UnexpectedCharacters) and message == "unterminated string":
        hint = 'close the string with `"` on the same line (write a newline inside a string as \\n)'
    else:
        hint = f"expected {describe_expected(set(expected))}" if expected else None
    return make(SYNTAX_ERROR, message, span, hint)


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
    try:
        interactive = _parser().lark.parse_interactive(text[:position], start=start)
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


def parse_text(text: str, path: str = "<string>") -> ParseResult:
    """Parse one file's text. Never raises for bad input."""
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        return ParseResult(None, (make(EMPTY_FILE, "the file holds no policy", Span.point(path, 1, 1),
                                       'start with a header: policy "name" version 1'),))
    parser = _parser()
    with parser.lock:
        parser.comments.tokens = []
        tree = None
        try:
            tree = parser.lark.parse(text, start="start")
        except UnexpectedInput as err:
            errors = [_syntax_diagnostic(path, err, text)]
            errors.extend(_recover(parser, path, text, err))
            return ParseResult(None, tuple(_dedupe(errors)))
        comment_tokens = list(parser.comments.tokens)
    try:
        header, items = _ToAst(path).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, _LiteralError):
            return ParseResult(None, (make(BAD_LITERAL, err.orig_exc.message, err.orig_exc.span),))
        raise
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
        try:
            parser.lark.parse(rest, start="items")
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
