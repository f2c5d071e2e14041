"""Property tests: whatever the input, loading, compiling and formatting end in diagnostics,
never in an exception; and any policy that parses survives `fmt` with the same meaning and
every comment, in a layout that `fmt` leaves alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.pipeline import compile_text
from policydsl import nodes as n
from policydsl.diagnostics import CODES, Diagnostic
from policydsl.formatter import format_text
from policydsl.loader import load_text
from policydsl.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [p.read_text(encoding="utf-8") for folder in ("examples", "policies")
            for p in sorted((ROOT / folder).rglob("*.policy"))]

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> str:
    """A path in an empty folder, so `include` in generated text finds nothing of ours."""
    return str(tmp_path_factory.mktemp("props") / "generated.policy")


def assert_only_diagnostics(text: str, path: str) -> None:
    """Load, compile and format `text`: each may report problems, none may raise."""
    loaded = load_text(text, path)
    compiled = compile_text(text, path)
    for diag in [*loaded.diagnostics, *compiled.diagnostics]:
        assert isinstance(diag, Diagnostic)
        assert diag.code in CODES
        if diag.span is not None:
            assert diag.span.line >= 1 and diag.span.column >= 1
    assert (compiled.plan is None) == (not compiled.ok)
    assert_formats_faithfully(text)


def assert_formats_faithfully(text: str) -> None:
    """If `text` parses, fmt must format it (no refusal), keep its meaning and comments, and be
    idempotent."""
    parsed = parse_text(text, "p.policy")
    result = format_text(text, "p.policy")
    if parsed.policy is None:
        assert result.text is None
        return
    assert result.text is not None, [d.message for d in result.diagnostics]
    again = parse_text(result.text, "p.policy").policy
    assert again is not None
    assert n.strip_spans(again) == n.strip_spans(parsed.policy)
    assert [c.text.rstrip() for c in again.comments] == [c.text.rstrip() for c in parsed.policy.comments]
    assert format_text(result.text, "p.policy").text == result.text


# --- random text ------------------------------------------------------------------------------

GRAMMAR_CHARS = 'policyversionqueuetierplugin{}[]=:,"#\\-.%0123456789GiMm \n\t'


@PROPERTY_SETTINGS
@given(st.text(max_size=300) | st.text(alphabet=GRAMMAR_CHARS, max_size=300))
def test_random_text_gives_only_diagnostics(sandbox, text):
    assert_only_diagnostics(text, sandbox)


@PROPERTY_SETTINGS
@given(st.text(max_size=200))
def test_random_text_after_a_header_gives_only_diagnostics(sandbox, text):
    assert_only_diagnostics('policy "p" version 1\n' + text, sandbox)


# --- token soup -------------------------------------------------------------------------------

KEYWORDS = ["policy", "version", "include", "const", "actions", "tier", "plugin", "weight", "action",
            "queue", "device", "true", "false"]
PUNCTUATION = ["{", "}", "[", "]", "=", ":", ","]
CATALOG_NAMES = ["enqueue", "allocate", "preempt", "reclaim", "backfill", "gang", "priority", "binpack",
                 "proportion", "drf", "capacity", "deviceshare", "predicates", "nodeorder", "overcommit",
                 "weight", "capability", "guarantee", "deserved", "cpu", "memory", "sharing", "slice",
                 "topology", "nvlink", "models", "factor", "enable_preemptable", "root", "default", "X"]
LITERALS = ["0", "1", "-3", "65536", "1.5", "-0.5", "500m", "8Gi", "1.5k", "50%", "120%", '"a"',
            '"nvidia.com/gpu"', '"x\\n"', '"\\q"', '"open', "# comment\n"]
TOKENS = KEYWORDS + PUNCTUATION + CATALOG_NAMES + LITERALS
SEPARATORS = [" ", "\n", "", "  ", "\t"]


@st.composite
def token_soup(draw) -> str:
    tokens = draw(st.lists(st.sampled_from(TOKENS), max_size=60))
    parts = []
    for token in tokens:
        parts.append(token)
        parts.append(draw(st.sampled_from(SEPARATORS)))
    prefix = draw(st.sampled_from(['policy "p" version 1\n', ""]))
    return prefix + "".join(parts)


@PROPERTY_SETTINGS
@given(token_soup())
def test_token_soup_gives_only_diagnostics(sandbox, text):
    assert_only_diagnostics(text, sandbox)


# --- mutations of real policies ---------------------------------------------------------------

@st.composite
def mutated_example(draw) -> str:
    text = draw(st.sampled_from(EXAMPLES))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "duplicate_line", "swap_lines", "swap_chars",
                                     "delete_line"]))
        lines = text.split("\n")
        if kind == "delete" and text:
            start = draw(st.integers(0, len(text) - 1))
            end = draw(st.integers(start, min(len(text), start + 12)))
            text = text[:start] + text[end:]
        elif kind == "insert":
            at = draw(st.integers(0, len(text)))
            piece = draw(st.sampled_from(TOKENS) | st.text(max_size=4))
            text = text[:at] + piece + text[at:]
        elif kind == "duplicate_line":
            i = draw(st.integers(0, len(lines) - 1))
            text = "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:])
        elif kind == "delete_line":
            i = draw(st.integers(0, len(lines) - 1))
            text = "\n".join(lines[:i] + lines[i + 1:])
        elif kind == "swap_lines":
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == "swap_chars" and len(text) > 1:
            i = draw(st.integers(0, len(text) - 2))
            text = text[:i] + text[i + 1] + text[i] + text[i + 2:]
    return text


@PROPERTY_SETTINGS
@given(mutated_example())
def test_mutated_policies_give_only_diagnostics(sandbox, text):
    assert_only_diagnostics(text, sandbox)


# --- valid policies in random layouts ---------------------------------------------------------
# A generator of policies that parse, written with random spacing and comments between every
# pair of tokens: the formatter must place each comment somewhere and keep the meaning.

NAMES = st.from_regex(re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,6}"), fullmatch=True)
COMMENT_TEXT = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12)


def _string_literal(value: str) -> str:
    # Written independently of formatter.quote, so a bug there cannot hide here.
    out = []
    for ch in value:
        out.append({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}.get(ch, ch))
    return '"' + "".join(out) + '"'


STRINGS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8).map(_string_literal)
SCALARS = st.one_of(
    st.integers(-10**6, 10**9).map(str),
    st.tuples(st.integers(-99, 999), st.integers(0, 999)).map(lambda p: f"{p[0]}.{p[1]:02d}"),
    st.tuples(st.integers(0, 4096), st.sampled_from(["m", "k", "Ki", "Mi", "Gi", "Ti", "M", "G"]))
      .map(lambda p: f"{p[0]}{p[1]}"),
    st.tuples(st.integers(-5, 200), st.sampled_from(["", ".5", ".25"])).map(lambda p: f"{p[0]}{p[1]}%"),
    st.sampled_from(["true", "false"]),
    STRINGS,
    NAMES,
)


def _list(items: list[list[str]], trailing: bool) -> list[str]:
    out = ["["]
    for i, item in enumerate(items):
        out += item
        if i < len(items) - 1 or (trailing and items):
            out.append(",")
    return out + ["]"]


def _map(entries: list[tuple[str, list[str]]], trailing: bool) -> list[str]:
    out = ["{"]
    for i, (key, value) in enumerate(entries):
        out += [key, ":", *value]
        if i < len(entries) - 1 or (trailing and entries):
            out.append(",")
    return out + ["}"]


VALUES = st.recursive(
    SCALARS.map(lambda s: [s]),
    lambda inner: st.one_of(
        st.builds(_list, st.lists(inner, max_size=3), st.booleans()),
        st.builds(_map, st.lists(st.tuples(NAMES | STRINGS, inner), max_size=3), st.booleans()),
    ),
    max_leaves=6,
)
SETTINGS = st.lists(st.builds(lambda k, v: [k, "=", *v], NAMES, VALUES), max_size=3)


def _block(settings: list[list[str]]) -> list[str]:
    return ["{", *[t for s in settings for t in s], "}"]


@st.composite
def plugin(draw) -> list[str]:
    out = ["plugin", draw(NAMES)]
    if draw(st.booleans()):
        out += ["weight", *draw(VALUES)]
    if draw(st.booleans()):
        out += _block(draw(SETTINGS))
    return out


def queue(depth: int):
    @st.composite
    def build(draw) -> list[str]:
        members = draw(st.lists(
            st.one_of(st.builds(lambda k, v: [k, "=", *v], NAMES, VALUES),
                      queue(depth - 1) if depth > 0 else st.nothing()),
            max_size=3))
        return ["queue", draw(NAMES), "{", *[t for m in members for t in m], "}"]
    return build()


ITEMS = st.one_of(
    st.builds(lambda s: ["include", s], STRINGS),
    st.builds(lambda name, value: ["const", name, "=", *value], NAMES, VALUES),
    st.builds(lambda names, trailing: ["actions", *_list([[x] for x in names], trailing)],
              st.lists(NAMES, max_size=4), st.booleans()),
    st.builds(lambda label, plugins: ["tier", *label, "{", *[t for p in plugins for t in p], "}"],
              st.one_of(st.just([]), STRINGS.map(lambda s: [s])), st.lists(plugin(), max_size=3)),
    st.builds(lambda name, settings: ["action", name, *_block(settings)], NAMES, SETTINGS),
    queue(2),
    st.builds(lambda resource, settings: ["device", resource, *_block(settings)], STRINGS, SETTINGS),
)


SPACES = [" ", "\n", "  ", "\n\n", "\t", " \r\n"]
COMMENT_FORMS = [" #{}\n",          # trailing comment
                 "\n  #{}\n",       # own-line comment
                 "\n\n#{}\n\n"]     # own-line comment between blank lines


@st.composite
def laid_out_policy(draw) -> str:
    tokens = ["policy", draw(STRINGS), "version", "1"]
    for item in draw(st.lists(ITEMS, max_size=6)):
        tokens += item
    # One separator per token; drawn from a seeded Random because a hypothesis draw per token
    # would make generation, not the formatter, the slow part of this test.
    layout = draw(st.randoms(use_true_random=False))
    comments = draw(st.lists(COMMENT_TEXT, min_size=1, max_size=4))
    comment_share = draw(st.sampled_from([0.0, 0.2, 0.6]))

    def separator() -> str:
        if layout.random() < comment_share:
            return layout.choice(COMMENT_FORMS).format(layout.choice(comments))
        return layout.choice(SPACES)

    lead = draw(st.sampled_from(["", "# lead\n", "# lead\n\n"]))
    return lead + "".join(token + separator() for token in tokens)


@PROPERTY_SETTINGS
@given(laid_out_policy())
def test_fmt_round_trips_any_layout_and_comments(text):
    parsed = parse_text(text, "p.policy")
    assert parsed.policy is not None, [(str(d.span), d.message) for d in parsed.diagnostics]
    assert_formats_faithfully(text)
