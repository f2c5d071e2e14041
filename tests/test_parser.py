"""The parser and loader: every grammar construct, located syntax errors, input errors, and
parse -> fmt -> parse keeping the AST."""

from __future__ import annotations

from pathlib import Path

import pytest

from policydsl import nodes as n
from policydsl.diagnostics import CODES, Severity, Span, render
from policydsl.formatter import format_text
from policydsl.loader import load, load_text
from policydsl.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
HEAD = 'policy "t" version 1\n'


def parse_ok(text: str) -> n.Policy:
    result = parse_text(text, "t.policy")
    assert result.diagnostics == (), [d.message for d in result.diagnostics]
    assert result.policy is not None
    return result.policy


def only_item(text: str):
    policy = parse_ok(HEAD + text)
    assert len(policy.items) == 1
    return policy.items[0]


def const_value(value_text: str) -> n.Value:
    item = only_item(f"const X = {value_text}\n")
    assert isinstance(item, n.Const)
    return item.value


# --- constructs -------------------------------------------------------------------------------

def test_header_name_version_and_span():
    policy = parse_ok('# lead comment\npolicy "volcano-default" version 1\n')
    assert policy.header.name.value == "volcano-default"
    assert policy.header.version.value == 1
    assert policy.header.span == Span("t.policy", 2, 1, 2, 35)
    assert policy.items == ()


def test_include():
    item = only_item('include "common/base.policy"\n')
    assert isinstance(item, n.Include)
    assert item.path.value == "common/base.policy"


def test_const_keeps_name_and_value():
    item = only_item("const SLICE = 10Gi\n")
    assert isinstance(item, n.Const)
    assert item.name.value == "SLICE"
    assert item.value == n.Quantity("10Gi", Span("t.policy", 2, 15, 2, 19))


@pytest.mark.parametrize("text, names", [
    ("actions [enqueue, allocate, backfill]", ("enqueue", "allocate", "backfill")),
    ("actions [enqueue, allocate,]", ("enqueue", "allocate")),
    ("actions [\n  allocate ,\n]", ("allocate",)),
    ("actions []", ()),
    # Names are checked by the compiler, not the grammar.
    ("actions [alocate]", ("alocate",)),
])
def test_actions(text, names):
    item = only_item(text + "\n")
    assert isinstance(item, n.Actions)
    assert tuple(name.value for name in item.names) == names


def test_tier_with_and_without_label():
    policy = parse_ok(HEAD + 'tier {\n  plugin gang\n}\ntier "scoring" { plugin binpack }\n')
    first, second = policy.items
    assert isinstance(first, n.Tier) and first.label is None
    assert [p.name.value for p in first.plugins] == ["gang"]
    assert isinstance(second, n.Tier) and second.label is not None and second.label.value == "scoring"
    assert [p.name.value for p in second.plugins] == ["binpack"]


def test_empty_tier():
    item = only_item("tier {}\n")
    assert isinstance(item, n.Tier) and item.plugins == ()


@pytest.mark.parametrize("text, weight, settings, has_block", [
    ("plugin gang", None, {}, False),
    ("plugin binpack weight 10", 10, {}, False),
    ("plugin gang {}", None, {}, True),
    ("plugin gang { enable_preemptable = false }", None, {"enable_preemptable": False}, True),
    ("plugin binpack weight 2.5 { cpu = 2 memory = 1 }", 2.5, {"cpu": 2, "memory": 1}, True),
    ("plugin binpack weight 0 {\n}", 0, {}, True),
])
def test_plugin_forms(text, weight, settings, has_block):
    tier = only_item("tier {\n  " + text + "\n}\n")
    (plugin,) = tier.plugins
    assert (plugin.weight.value if plugin.weight is not None else None) == weight
    assert {s.key.value: s.value.value for s in plugin.settings} == settings
    assert plugin.has_block is has_block


def test_plugins_keep_their_order():
    tier = only_item("tier { plugin a plugin b weight 1 plugin c {} plugin d }\n")
    assert [p.name.value for p in tier.plugins] == ["a", "b", "c", "d"]


def test_action_config():
    item = only_item("action preempt { topology_aware = true min_candidate_nodes_percentage = 20% }\n")
    assert isinstance(item, n.ActionConfig)
    assert item.name.value == "preempt"
    assert [(s.key.value, type(s.value)) for s in item.settings] == [
        ("topology_aware", n.Boolean), ("min_candidate_nodes_percentage", n.Percent)]


def test_action_config_may_be_empty():
    item = only_item("action enqueue {}\n")
    assert isinstance(item, n.ActionConfig) and item.settings == ()


def test_nested_queues_keep_interleaved_order():
    item = only_item(
        "queue eng {\n"
        "  weight = 2\n"
        "  queue train { weight = 3 queue big {} }\n"
        "  priority = 1\n"
        "  queue serve {}\n"
        "}\n"
    )
    assert isinstance(item, n.Queue)
    assert [s.key.value for s in item.settings] == ["weight", "priority"]
    assert [q.name.value for q in item.children] == ["train", "serve"]
    assert item.order == (("s", 0), ("q", 0), ("s", 1), ("q", 1))
    train = item.children[0]
    assert [q.name.value for q in train.children] == ["big"]
    assert [(q.name.value, p.name.value if p else None) for q, p in n.walk_queues([item])] == [
        ("eng", None), ("train", "eng"), ("big", "train"), ("serve", "eng")]


def test_device():
    item = only_item('device "nvidia.com/gpu" { sharing = memory card_memory = 80Gi }\n')
    assert isinstance(item, n.Device)
    assert item.resource.value == "nvidia.com/gpu"
    assert [s.key.value for s in item.settings] == ["sharing", "card_memory"]


def test_keywords_are_names_where_a_name_is_expected():
    item = only_item("queue queue { weight = 1 }\n")
    assert item.name.value == "queue"


@pytest.mark.parametrize("text, expected", [
    ("42", n.Integer),
    ("-7", n.Integer),
    ("1.5", n.Float),
    ("-0.25", n.Float),
    ("500m", n.Quantity),
    ("80Gi", n.Quantity),
    ("1.5k", n.Quantity),
    ("50%", n.Percent),
    ("12.5%", n.Percent),
    ("true", n.Boolean),
    ("false", n.Boolean),
    ('"text"', n.String),
    ("OTHER", n.ConstRef),
    ("[1, 2]", n.ListValue),
    ("{ cpu: 1 }", n.MapValue),
])
def test_value_kinds(text, expected):
    assert type(const_value(text)) is expected


@pytest.mark.parametrize("text, attribute, expected", [
    ("42", "value", 42),
    ("-7", "value", -7),
    ("1.50", "value", 1.5),
    ("1.50", "text", "1.50"),     # a decimal keeps its written form
    ("500m", "text", "500m"),
    ("-5%", "value", -5.0),
    ("12.5%", "text", "12.5%"),
    ("true", "value", True),
    ("false", "value", False),
    ("OTHER", "name", "OTHER"),
])
def test_value_contents(text, attribute, expected):
    assert getattr(const_value(text), attribute) == expected


@pytest.mark.parametrize("text, expected", [
    (r'"plain"', "plain"),
    (r'"say \"hi\""', 'say "hi"'),
    (r'"back\\slash"', "back\\slash"),
    (r'"two\nlines"', "two\nlines"),
    (r'"a\tb"', "a\tb"),
    ('""', ""),
    ('"ünïcødé 🚀"', "ünïcødé 🚀"),
])
def test_string_escapes(text, expected):
    assert const_value(text).value == expected


def test_lists_nest_and_allow_trailing_comma():
    value = const_value('[1, [2, "x"], [], [[3]],]')
    assert isinstance(value, n.ListValue)
    assert n.strip_spans(value) == n.strip_spans(n.ListValue((
        n.Integer(1, None),
        n.ListValue((n.Integer(2, None), n.String("x", None)), None),
        n.ListValue((), None),
        n.ListValue((n.ListValue((n.Integer(3, None),), None),), None),
    ), None))


def test_map_with_name_and_string_keys():
    value = const_value('{ cpu: 4, "nvidia.com/gpu": 2, memory: 8Gi, }')
    assert isinstance(value, n.MapValue)
    assert [e.key for e in value.entries] == ["cpu", "nvidia.com/gpu", "memory"]
    assert value.get("nvidia.com/gpu").value == 2
    assert value.get("memory").text == "8Gi"
    assert value.get("absent") is None
    assert value.entries[1].key_span == Span("t.policy", 2, 21, 2, 37)


def test_empty_map_and_list():
    assert const_value("{}").entries == ()
    assert const_value("[]").items == ()


def test_comments_are_kept_with_spans():
    policy = parse_ok('# one\npolicy "t" version 1 # two\nqueue a { # three\n}\n')
    assert [(c.text, c.span.line, c.span.column) for c in policy.comments] == [
        ("# one", 1, 1), ("# two", 2, 22), ("# three", 3, 11)]


def test_spans_point_at_settings_and_values():
    item = only_item("queue a {\n  weight   = 3\n}\n")
    (setting,) = item.settings
    assert setting.key.span == Span("t.policy", 3, 3, 3, 9)
    assert setting.value.span == Span("t.policy", 3, 14, 3, 15)


def test_crlf_line_endings_parse():
    policy = parse_ok('policy "t" version 1\r\nqueue a {\r\n  weight = 2 # w\r\n}\r\n')
    assert policy.items[0].settings[0].value.value == 2
    assert policy.items[0].settings[0].span.line == 3


# --- syntax errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, column, message, hint", [
    # a value missing after `=`
    (HEAD + "queue a { weight = }\n", 2, 20, "unexpected `}`", "expected a value"),
    # a plugin without a name
    (HEAD + "tier { plugin }\n", 2, 15, "unexpected `}`", "expected a name"),
    # names in a list need commas; the hint lists only what fits here
    (HEAD + "actions [enqueue allocate]\n", 2, 18, "unexpected name `allocate`", "expected one of `,` or `]`"),
    # a map entry needs a colon
    (HEAD + "queue a { capability = { cpu 4 } }\n", 2, 30, "unexpected integer `4`", "expected `:`"),
    # a setting needs `=`
    (HEAD + "queue a {\n  weight 2\n}\n", 3, 10, "unexpected integer `2`", "expected `=`"),
    # the header needs a version
    ('policy "x"\nactions []\n', 2, 1, "unexpected `actions`", "expected `version`"),
    # the header comes first
    ("actions [allocate]\n", 1, 1, "unexpected `actions`", "expected `policy`"),
    # a queue name is a name, not a string
    (HEAD + 'queue "a" {}\n', 2, 7, 'unexpected quoted string `"a"`', "expected a name"),
    # a stray character between items
    (HEAD + "queue a {} @\n", 2, 12, "unexpected character '@'", "expected one of `action`, `actions`"),
    # a stray character where a value goes
    (HEAD + "const A = @\n", 2, 11, "unexpected character '@'", "expected a value"),
    # one closing brace too many
    (HEAD + "queue a { weight = 1 }}\n", 2, 23, "unexpected `}`", "expected one of `action`"),
    # unclosed block at the end of the file
    (HEAD + "queue a {\n  weight = 1\n", 3, 13, "unexpected end of file", "expected one of `queue`, `}` or a name"),
    # an unterminated string
    (HEAD + 'const A = "abc\n', 2, 11, "unterminated string", 'close the string with `"`'),
    # `weight` needs a value
    (HEAD + "tier { plugin binpack weight }\n", 2, 30, "unexpected `}`", "expected a value"),
])
def test_syntax_errors_are_located_with_hints(text, line, column, message, hint):
    result = parse_text(text, "bad.policy")
    assert result.policy is None
    first = result.diagnostics[0]
    assert first.code == "PD010"
    assert first.severity is Severity.ERROR
    assert (first.span.path, first.span.line, first.span.column) == ("bad.policy", line, column)
    assert first.message == message
    assert first.hint is not None and first.hint.startswith(hint), first.hint


def test_several_syntax_errors_in_one_run():
    text = HEAD + (
        "queue a { weight = }\n"        # line 2
        "actions [enqueue]\n"
        "tier { plugin }\n"             # line 4
        "queue b { weight = 1 }\n"
        "device gpu {}\n"               # line 6: resource must be a string
    )
    result = parse_text(text, "many.policy")
    assert result.policy is None
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("PD010", 2), ("PD010", 4), ("PD010", 6)]


def test_errors_found_after_recovery_describe_the_right_text():
    text = HEAD + (
        "queue a { weight = }\n"
        "queue b {}\n"
        "queue c { weight = @ }\n"     # line 4
        'queue d { x = "abc\n'         # line 5
        "}\n"
    )
    later = [(d.span.line, d.span.column, d.message, d.hint) for d in parse_text(text).diagnostics[1:]]
    assert later[0][:3] == (4, 20, "unexpected character '@'")
    assert later[0][3].startswith("expected a value")
    assert later[1][:3] == (5, 15, "unterminated string")


def test_bad_escape_is_pd011_at_the_string():
    result = parse_text(HEAD + 'const A = "a\\qb"\n', "esc.policy")
    assert result.policy is None
    (diag,) = result.diagnostics
    assert diag.code == "PD011"
    assert "\\q" in diag.message
    assert (diag.span.line, diag.span.column) == (2, 11)


def test_unsupported_version_is_pd012_at_the_version():
    result = parse_text('policy "x" version 2\n', "v.policy")
    assert result.policy is None
    (diag,) = result.diagnostics
    assert diag.code == "PD012"
    assert (diag.span.line, diag.span.column) == (1, 20)
    assert "supported versions: 1" in diag.hint


@pytest.mark.parametrize("text", ["", "   \n\n", "# only a comment\n# and another\n"])
def test_empty_file_is_pd003(text):
    result = parse_text(text, "empty.policy")
    assert result.policy is None
    assert [d.code for d in result.diagnostics] == ["PD003"]


def test_every_reported_code_is_registered():
    for text in (HEAD + "queue a {", 'policy "x" version 9\n', HEAD + 'const A = "\\x"', ""):
        for diag in parse_text(text).diagnostics:
            assert diag.code in CODES


# --- loader: files, encodings, includes -------------------------------------------------------

def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_bad_utf8_is_pd002_at_line_and_column(tmp_path):
    path = write(tmp_path, "bad.policy", 'policy "x" version 1\nconst A = "é'.encode() + b'\xff"\n')
    loaded = load(path)
    assert loaded.main is None
    (diag,) = loaded.diagnostics
    assert diag.code == "PD002"
    # columns count characters: `const A = "é` is 12 characters, the bad byte is the 13th
    assert (diag.span.line, diag.span.column) == (2, 13)
    assert "0xff" in diag.message


def test_utf8_byte_order_mark_is_ignored(tmp_path):
    loaded = load(write(tmp_path, "bom.policy", "\ufeff".encode() + HEAD.encode()))
    assert loaded.ok, loaded.diagnostics


def test_empty_file_on_disk_is_pd003(tmp_path):
    loaded = load(write(tmp_path, "empty.policy", ""))
    assert [d.code for d in loaded.diagnostics] == ["PD003"]
    assert not loaded.ok


def test_missing_file_is_pd001(tmp_path):
    loaded = load(tmp_path / "nowhere.policy")
    (diag,) = loaded.diagnostics
    assert diag.code == "PD001"
    assert "nowhere.policy" in diag.message


def test_folder_without_main_policy_is_pd001(tmp_path):
    write(tmp_path, "a.policy", HEAD)
    write(tmp_path, "b.policy", HEAD)
    loaded = load(tmp_path)
    assert [d.code for d in loaded.diagnostics] == ["PD001"]


def test_folder_means_its_main_policy(tmp_path):
    write(tmp_path, "main.policy", 'policy "main" version 1\n')
    write(tmp_path, "other.policy", 'policy "other" version 1\n')
    assert load(tmp_path).main.header.name.value == "main"


def test_includes_load_first_and_once(tmp_path):
    write(tmp_path, "main.policy", HEAD + 'include "a.policy"\ninclude "lib/b.policy"\nconst M = 1\n')
    write(tmp_path, "a.policy", 'policy "a" version 1\ninclude "lib/b.policy"\nconst A = 1\n')
    write(tmp_path, "lib/b.policy", 'policy "b" version 1\nconst B = 1\n')
    loaded = load(tmp_path / "main.policy")
    assert loaded.ok, loaded.diagnostics
    assert [Path(p).name for p in loaded.paths] == ["b.policy", "a.policy", "main.policy"]
    assert [item.name.value for item in loaded.items() if isinstance(item, n.Const)] == ["B", "A", "M"]


def test_include_cycle_is_pd013_at_the_include(tmp_path):
    write(tmp_path, "a.policy", HEAD + 'include "b.policy"\n')
    write(tmp_path, "b.policy", HEAD + '\ninclude "a.policy"\n')
    loaded = load(tmp_path / "a.policy")
    (diag,) = loaded.diagnostics
    assert diag.code == "PD013"
    assert "cycle" in diag.message
    assert (Path(diag.span.path).name, diag.span.line, diag.span.column) == ("b.policy", 3, 9)


def test_self_include_is_a_cycle(tmp_path):
    write(tmp_path, "a.policy", HEAD + 'include "a.policy"\n')
    assert [d.code for d in load(tmp_path / "a.policy").diagnostics] == ["PD013"]


def test_missing_include_is_pd013_at_the_include(tmp_path):
    write(tmp_path, "main.policy", HEAD + 'include "gone.policy"\n')
    (diag,) = load(tmp_path / "main.policy").diagnostics
    assert diag.code == "PD013"
    assert "gone.policy" in diag.message
    assert (diag.span.line, diag.span.column) == (2, 9)


def test_errors_in_an_included_file_point_into_it(tmp_path):
    write(tmp_path, "main.policy", HEAD + 'include "part.policy"\n')
    write(tmp_path, "part.policy", HEAD + "queue a { weight = }\n")
    (diag,) = load(tmp_path / "main.policy").diagnostics
    assert diag.code == "PD010"
    assert (Path(diag.span.path).name, diag.span.line) == ("part.policy", 2)


def test_load_text_resolves_includes_next_to_its_path(tmp_path):
    write(tmp_path, "lib.policy", 'policy "lib" version 1\nconst L = 2\n')
    loaded = load_text(HEAD + 'include "lib.policy"\n', str(tmp_path / "virtual.policy"))
    assert loaded.ok
    assert len(loaded.files) == 2


# --- parse -> fmt -> parse ----------------------------------------------------------------------

def _fixture_texts() -> list[tuple[str, str]]:
    texts = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
             for folder in ("examples", "policies") for p in sorted((ROOT / folder).rglob("*.policy"))]
    texts.append(("constructs", CONSTRUCTS))
    return texts


CONSTRUCTS = '''# every construct in one file
policy "constructs" version 1 # header
include "x.policy"
const Q = 10Gi const N = -3 const F = 0.50 const P = 12.5% const B = true
const S = "a \\"q\\" \\\\ \\n \\t"
const L = [1, [2, [3,],], "s", Q,] const M = { cpu: 500m, "nvidia.com/gpu": 2, nested: { a: [] } }
actions [enqueue, allocate,]
tier { plugin priority plugin gang {} plugin binpack weight 1.5 { cpu = 2 resources = {} } }
tier "t2" {
  # own-line comment
  plugin predicates {
    taint_toleration = false # trailing
  }
}
tier {}
action preempt { topology_aware = true }
queue a { weight = 2 queue b { queue c {} priority = 1 } state = closed }
device "nvidia.com/gpu" { models = ["A100", "H100"] slice = Q }
'''


@pytest.mark.parametrize("name, text", _fixture_texts(), ids=lambda v: v if "\n" not in v else "")
def test_parse_format_parse_keeps_the_ast(name, text):
    original = parse_ok(text)
    formatted = format_text(text, "t.policy")
    assert formatted.text is not None, formatted.diagnostics
    again = parse_ok(formatted.text)
    assert n.strip_spans(again) == n.strip_spans(original)
    assert [c.text.rstrip() for c in again.comments] == [c.text.rstrip() for c in original.comments]


SECRET = "eyJhbGciOiJSUzI1NiJ9.secret-token"


@pytest.mark.parametrize("include", ["../outside/token.policy", "{outside}/token.policy", "lib/escape.policy"])
def test_includes_stay_in_the_policys_folder_and_nothing_outside_is_read(tmp_path, include):
    outside = tmp_path / "outside"
    write(outside, "token.policy", SECRET + "\n")            # one line, as a ServiceAccount token is
    policy_dir = tmp_path / "policy"
    (policy_dir / "lib").mkdir(parents=True)
    (policy_dir / "lib" / "escape.policy").symlink_to(outside / "token.policy")
    write(policy_dir, "main.policy", HEAD + f'include "{include.format(outside=outside)}"\n')
    loaded = load(policy_dir / "main.policy")
    (diag,) = loaded.diagnostics
    assert diag.code == "PD013" and "outside the policy's folder" in diag.message
    assert (diag.span.line, diag.span.column) == (2, 9)
    assert SECRET not in render(diag, loaded.sources)
    assert [Path(p).name for p in loaded.paths] == ["main.policy"]      # nothing else was read


def test_includes_below_the_policys_folder_and_back_within_it_are_read(tmp_path):
    write(tmp_path, "main.policy", HEAD + 'include "teams/a.policy"\n')
    write(tmp_path, "teams/a.policy", 'policy "a" version 1\ninclude "../common.policy"\n')
    write(tmp_path, "common.policy", 'policy "c" version 1\nconst C = 1\n')
    assert load(tmp_path / "main.policy").ok
