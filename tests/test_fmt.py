"""`policydsl fmt` and policydsl.formatter: the canonical layout, comments, safety, the CLI."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from policydsl import formatter
from policydsl import nodes as n
from policydsl.cli import main
from policydsl.formatter import format_text, quote
from policydsl.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
HEAD = 'policy "t" version 1\n'


def fmt(text: str) -> str:
    result = format_text(text, "t.policy")
    assert result.text is not None, [d.message for d in result.diagnostics]
    return result.text


def body(text: str) -> str:
    """The formatted text without the header and its blank line."""
    return fmt(HEAD + text).split("\n", 2)[2]


# --- layout -----------------------------------------------------------------------------------

MESSY = '''policy   "layout"    version 1
include "a.policy" include "b.policy"
const A=1 const B   =   [ 1,2 , ]
actions[enqueue,allocate,backfill,]
tier{plugin priority plugin gang{enable_preemptable=false}}
tier "scoring"{plugin binpack weight 10{cpu=2 resources={"nvidia.com/gpu":5,}} plugin proportion{}}
action enqueue{overcommit_factor=1.5}
queue online{weight=3 capability={cpu:100,memory:400Gi} queue serving{weight=2 guarantee={cpu:500m}} priority=1}
device "nvidia.com/gpu"{sharing=memory models=["A100","H100"]}
'''

CANONICAL = '''policy "layout" version 1

include "a.policy"
include "b.policy"

const A = 1
const B = [1, 2]

actions [enqueue, allocate, backfill]

tier {
  plugin priority
  plugin gang {
    enable_preemptable = false
  }
}

tier "scoring" {
  plugin binpack weight 10 {
    cpu = 2
    resources = { "nvidia.com/gpu": 5 }
  }
  plugin proportion {}
}

action enqueue {
  overcommit_factor = 1.5
}

queue online {
  weight = 3
  capability = { cpu: 100, memory: 400Gi }

  queue serving {
    weight = 2
    guarantee = { cpu: 500m }
  }

  priority = 1
}

device "nvidia.com/gpu" {
  sharing = memory
  models = ["A100", "H100"]
}
'''


def test_canonical_layout():
    assert fmt(MESSY) == CANONICAL


def test_canonical_text_is_a_fixed_point():
    assert fmt(CANONICAL) == CANONICAL
    assert not format_text(CANONICAL).changed
    assert format_text(MESSY).changed


@pytest.mark.parametrize("written, expected", [
    # values keep their written form
    ("const A = 1.50", "const A = 1.50"),
    ("const A = 0.5Gi", "const A = 0.5Gi"),
    ("const A = 1500m", "const A = 1500m"),
    ("const A = 12.50%", "const A = 12.50%"),
    ("const A = -4", "const A = -4"),
    ("const A = 007", "const A = 7"),
    ("const A = OTHER", "const A = OTHER"),
    ("const A = true", "const A = true"),
    # strings are re-escaped
    (r'const A = "say \"hi\" \\ now"', r'const A = "say \"hi\" \\ now"'),
    ('const A = "tab\there"', r'const A = "tab\there"'),
    (r'const A = "two\nlines"', r'const A = "two\nlines"'),
    # lists and maps inline
    ("const A = [ ]", "const A = []"),
    ("const A = {  }", "const A = {}"),
    ("const A = [[1,2],[],[ [3] ]]", "const A = [[1, 2], [], [[3]]]"),
    ("const A = {a:{b:[1]}}", "const A = { a: { b: [1] } }"),
    # map keys: bare when they read back as a name, quoted otherwise
    ('const A = {"cpu": 1, "nvidia.com/gpu": 2, "a b": 3, "x-y_z": 4}',
     'const A = { cpu: 1, "nvidia.com/gpu": 2, "a b": 3, x-y_z: 4 }'),
    ("actions [ ]", "actions []"),
])
def test_values_and_lists(written, expected):
    assert body(written + "\n") == expected + "\n"


@pytest.mark.parametrize("written, expected", [
    ("tier{}", "tier {}\n"),
    ('tier  "x"  {\n\n}', 'tier "x" {}\n'),
    ("tier{plugin a weight 1}", "tier {\n  plugin a weight 1\n}\n"),
    ("tier{plugin a weight 1 {}}", "tier {\n  plugin a weight 1 {}\n}\n"),
    ("tier{plugin a weight [1] { x = 1 }}", "tier {\n  plugin a weight [1] {\n    x = 1\n  }\n}\n"),
    ("action allocate{}", "action allocate {}\n"),
    ('device "d" {}', 'device "d" {}\n'),
    ("queue a{}", "queue a {}\n"),
    ("queue a{queue b{} queue c{}}", "queue a {\n  queue b {}\n\n  queue c {}\n}\n"),
    ("queue a{x = 1 y = 2}", "queue a {\n  x = 1\n  y = 2\n}\n"),
])
def test_blocks(written, expected):
    assert body(written + "\n") == expected


def test_blank_lines_between_top_level_items_but_not_within_const_and_include_runs():
    text = HEAD + "const A = 1\nconst B = 2\nactions [allocate]\nconst C = 3\ninclude \"x\"\ninclude \"y\"\n"
    assert fmt(text) == HEAD + '\nconst A = 1\nconst B = 2\n\nactions [allocate]\n\nconst C = 3\n\n' \
        'include "x"\ninclude "y"\n'


def test_extra_blank_lines_collapse():
    assert fmt("\n\n" + HEAD + "\n\n\n\nactions [allocate]\n\n\n") == HEAD + "\nactions [allocate]\n"


@pytest.mark.parametrize("value", ["a", 'q"uote', "back\\slash", "new\nline", "tab\t", "ünï 🚀", "", "#not a comment"])
def test_quote_reads_back(value):
    policy = parse_text(HEAD + f"const A = {quote(value)}\n").policy
    assert policy is not None and policy.items[0].value.value == value


# --- comments ---------------------------------------------------------------------------------

def test_comments_keep_their_places():
    text = dedent('''\
        # licence
        # second line

        policy "c" # header trailing
          version 1
        const A = 1 # a
        # about actions
        actions [ # list opener
          enqueue, # first
          # own line in a list
          allocate
        ]
        tier { plugin gang { # block opener
          enable_preemptable = false # flag
          # last in block
        } # after block
          # end of tier
        }
        queue q {
          capability = { cpu: 4, # cpu
            memory: 8Gi }
        }
        # end of file
        ''')
    assert fmt(text) == dedent('''\
        # licence
        # second line

        policy "c" version 1 # header trailing

        const A = 1 # a

        # about actions
        actions [ # list opener
          enqueue, # first
          # own line in a list
          allocate,
        ]

        tier {
          plugin gang { # block opener
            enable_preemptable = false # flag
            # last in block
          } # after block
          # end of tier
        }

        queue q {
          capability = {
            cpu: 4, # cpu
            memory: 8Gi,
          }
        }
        # end of file
        ''')


def test_two_comments_that_land_on_one_line_stay_separate():
    text = HEAD + "tier {\n  plugin binpack # one\n    weight 3 # two\n    { cpu = 1 }\n}\n"
    out = fmt(text)
    assert "  plugin binpack weight 3 { # one\n    # two\n    cpu = 1\n" in out
    assert fmt(out) == out


def test_blank_line_before_a_comment_is_kept_inside_a_block():
    text = HEAD + "queue a {\n  weight = 1\n\n  # later\n  priority = 2\n}\n"
    assert fmt(text) == HEAD + "\nqueue a {\n  weight = 1\n\n  # later\n  priority = 2\n}\n"


def test_comment_in_an_empty_block_keeps_the_block_open():
    assert body("tier {\n  # nothing yet\n}\n") == "tier {\n  # nothing yet\n}\n"
    assert body("queue a { # soon\n}\n") == "queue a { # soon\n}\n"


def test_comment_in_a_nested_list_opens_only_what_holds_it():
    out = body("const A = { a: [1, 2], b: [3, # three\n 4] }\n")
    assert out == "const A = {\n  a: [1, 2],\n  b: [\n    3, # three\n    4,\n  ],\n}\n"


def test_crlf_comments_lose_their_carriage_return():
    out = fmt('policy "t" version 1\r\n# own\r\nactions [allocate] # trail\r\n')
    assert out == HEAD + "\n# own\nactions [allocate] # trail\n"


# --- safety -----------------------------------------------------------------------------------

def test_refuses_when_the_meaning_would_change(monkeypatch):
    monkeypatch.setattr(formatter, "format_policy", lambda policy, source: HEAD + "actions [backfill]\n")
    result = format_text(HEAD + "actions [allocate]\n", "m.policy")
    assert result.text is None
    (diag,) = result.diagnostics
    assert diag.code == "PD015"
    assert "meaning" in diag.message


def test_refuses_when_output_does_not_parse(monkeypatch):
    monkeypatch.setattr(formatter, "format_policy", lambda policy, source: HEAD + "actions [\n")
    result = format_text(HEAD + "actions [allocate]\n")
    assert result.text is None and [d.code for d in result.diagnostics] == ["PD015"]


def test_refuses_when_a_comment_would_be_lost(monkeypatch):
    monkeypatch.setattr(formatter, "format_policy", lambda policy, source: HEAD + "actions [allocate]\n")
    result = format_text(HEAD + "actions [allocate] # keep me\n")
    assert result.text is None
    (diag,) = result.diagnostics
    assert diag.code == "PD015" and "comments" in diag.message


def test_syntax_errors_come_back_as_diagnostics():
    result = format_text(HEAD + "queue a {\n", "broken.policy")
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["PD010"]
    assert not result.changed


def test_hand_built_queue_without_order_prints_settings_then_children():
    policy = parse_text(HEAD + "queue a { queue b {} weight = 1 }\n").policy
    queue = policy.items[0]
    bare = n.Queue(queue.name, queue.settings, queue.children, queue.span)
    out = formatter.format_policy(n.Policy("t", policy.header, (bare,), ()), HEAD)
    assert out == HEAD + "\nqueue a {\n  weight = 1\n\n  queue b {}\n}\n"


@pytest.mark.parametrize("path", sorted(p for folder in ("examples", "policies")
                                        for p in (ROOT / folder).rglob("*.policy")), ids=str)
def test_shipped_policies_are_formatted(path):
    text = path.read_text(encoding="utf-8")
    assert fmt(text) == text, f"run: python -m policydsl fmt --write {path}"


# --- CLI --------------------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    (tmp_path / "sub").mkdir()
    clean = tmp_path / "clean.policy"
    clean.write_text(CANONICAL, encoding="utf-8")
    messy = tmp_path / "sub" / "messy.policy"
    messy.write_text(MESSY, encoding="utf-8")
    (tmp_path / "sub" / "notes.txt").write_text("not a policy {", encoding="utf-8")
    return tmp_path, clean, messy


def test_cli_prints_formatted_text(files, capsys):
    _, _, messy = files
    assert main(["fmt", str(messy)]) == 0
    assert capsys.readouterr().out == CANONICAL
    assert messy.read_text() == MESSY


def test_cli_check_lists_files_that_would_change(files, capsys):
    folder, clean, messy = files
    assert main(["fmt", "--check", str(folder)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"would reformat {messy}\n"
    assert "1 file would be reformatted" in captured.err
    assert messy.read_text() == MESSY
    assert main(["fmt", "--check", str(clean)]) == 0


def test_cli_file_named_twice_is_formatted_once(files, capsys):
    folder, _, messy = files
    assert main(["fmt", "--check", str(folder), str(messy)]) == 1
    assert capsys.readouterr().out == f"would reformat {messy}\n"


def test_cli_diff(files, capsys):
    _, clean, messy = files
    assert main(["fmt", "--diff", str(messy), str(clean)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"--- a/{messy}\n+++ b/{messy}\n")
    assert "+  plugin proportion {}\n" in out
    assert str(clean) not in out
    assert main(["fmt", "--diff", str(clean)]) == 0
    assert capsys.readouterr().out == ""


def test_cli_diff_marks_a_missing_final_newline(tmp_path, capsys):
    path = tmp_path / "n.policy"
    path.write_text(HEAD + "actions [allocate]")
    assert main(["fmt", "--diff", str(path)]) == 1
    assert "\\ No newline at end of file\n" in capsys.readouterr().out


def test_cli_write_rewrites_in_place(files, capsys):
    folder, clean, messy = files
    clean_mtime = clean.stat().st_mtime_ns
    messy.chmod(0o640)
    assert main(["fmt", "--write", str(folder)]) == 0
    assert messy.read_text() == CANONICAL
    assert messy.stat().st_mode & 0o777 == 0o640
    assert clean.stat().st_mtime_ns == clean_mtime  # unchanged files are not touched
    assert f"reformatted {messy}" in capsys.readouterr().err
    assert main(["fmt", "--check", str(folder)]) == 0
    assert sorted(p.name for p in folder.rglob("*")) == ["clean.policy", "messy.policy", "notes.txt", "sub"]


def test_cli_stdin_to_stdout(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MESSY.encode())))
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == CANONICAL


def test_cli_stdin_check(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MESSY.encode())))
    assert main(["fmt", "--check", "-"]) == 1
    assert capsys.readouterr().out == "would reformat <stdin>\n"


def test_cli_syntax_error_is_located_and_other_files_still_formatted(files, capsys):
    folder, _, messy = files
    broken = folder / "broken.policy"
    broken.write_text(HEAD + "queue a { weight = }\n")
    assert main(["fmt", "--write", str(folder)]) == 1
    err = capsys.readouterr().err
    assert f"{broken}:2:20: error[PD010] unexpected `}}`" in err
    assert "hint: expected a value" in err
    assert "^" in err
    assert messy.read_text() == CANONICAL
    assert broken.read_text() == HEAD + "queue a { weight = }\n"


def test_cli_refusal_leaves_the_file_alone(files, monkeypatch, capsys):
    _, _, messy = files
    monkeypatch.setattr(formatter, "format_policy", lambda policy, source: HEAD + "actions []\n")
    assert main(["fmt", "--write", str(messy)]) == 1
    assert messy.read_text() == MESSY
    assert "error[PD015]" in capsys.readouterr().err


def test_cli_bad_utf8_is_located(tmp_path, capsys):
    path = tmp_path / "latin.policy"
    path.write_bytes(b'policy "x" version 1\n# caf\xe9\n')
    assert main(["fmt", str(path)]) == 1
    assert f"{path}:2:6: error[PD002]" in capsys.readouterr().err


def test_cli_missing_path_is_an_io_error(tmp_path, capsys):
    assert main(["fmt", str(tmp_path / "nope.policy")]) == 2
    assert "error[PD001]" in capsys.readouterr().err


def test_cli_empty_file(tmp_path, capsys):
    path = tmp_path / "empty.policy"
    path.write_text("")
    assert main(["fmt", "--check", str(path)]) == 1
    assert "error[PD003]" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--write", "--check"], ["--write", "--diff"], ["--write", "-"]])
def test_cli_rejects_conflicting_flags(files, argv, capsys):
    _, clean, _ = files
    assert main(["fmt", *argv, str(clean)]) == 2
    assert "--write" in capsys.readouterr().err


@pytest.mark.parametrize("edit", [lambda t: "\n\n" + t.replace("  ", "    "), lambda t: t.replace("true", "false", 1),
                                  lambda t: t.replace("weight", "weight  ", 1), lambda t: t.replace("cpu", "gpu", 1)])
@pytest.mark.parametrize("name", ["multi-tenant.policy", "colocation.policy", "gpu-sharing.policy"])
def test_same_meaning_answers_as_comparing_the_span_free_views(name: str, edit) -> None:
    # The formatter's check walks both trees instead of building both views (it took more memory than the trees).
    from policydsl import nodes as n
    from policydsl.parser import parse_text

    text = (Path(__file__).resolve().parents[1] / "policies" / name).read_text()
    before, after = parse_text(text, name).policy, parse_text(edit(text), name).policy
    assert n.same_meaning(before, after) == (n.strip_spans(before) == n.strip_spans(after))
    assert n.same_meaning(before, before)
