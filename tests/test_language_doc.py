"""docs/language.md stays true: its catalog tables match compiler.catalog, its examples parse
(complete ones compile clean), its excerpts are still in the policies they quote, and it
documents every command, construct and catalog entry."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from compiler import catalog as cat
from compiler.pipeline import compile_text
from policydsl.cli import COMMANDS
from policydsl.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "language.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
FENCE = re.compile(r"(?:<!-- (?P<marker>[^>]*) -->\n)?```policy\n(?P<body>.*?)```", re.S)


def _gen_catalog():
    spec = importlib.util.spec_from_file_location("gen_catalog", ROOT / "docs" / "gen_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(kind: str) -> list[tuple[str, str]]:
    out = []
    for match in FENCE.finditer(DOC):
        marker = match.group("marker") or ""
        if marker.split(":")[0].strip() == kind or (kind == "plain" and not marker):
            out.append((marker, match.group("body")))
    return out


def test_catalog_tables_are_current():
    gen = _gen_catalog()
    assert gen.updated(DOC) == DOC, "docs/language.md is out of date: run python docs/gen_catalog.py"


def test_catalog_generator_replaces_only_the_marked_section():
    gen = _gen_catalog()
    stale = f"intro\n{gen.BEGIN}\nold table\n{gen.END}\noutro\n"
    fresh = gen.updated(stale)
    assert fresh.startswith(f"intro\n{gen.BEGIN}\n") and fresh.endswith(f"{gen.END}\noutro\n")
    assert "old table" not in fresh and "| `binpack` | `cpu` |" in fresh
    with pytest.raises(ValueError):
        gen.updated("no markers here")


def test_catalog_check_mode_reports_a_stale_doc(tmp_path, monkeypatch, capsys):
    gen = _gen_catalog()
    stale = tmp_path / "language.md"
    stale.write_text(f"{gen.BEGIN}\n{gen.END}\n")
    monkeypatch.setattr(gen, "LANGUAGE_DOC", stale)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0


@pytest.mark.parametrize("name", [*cat.ACTIONS, *cat.PLUGINS])
def test_every_action_and_plugin_has_a_row(name):
    assert f"| `{name}` |" in DOC


@pytest.mark.parametrize("setting", [a.name for a in (*cat.QUEUE_SETTINGS, *cat.DEVICE_SETTINGS)]
                         + [cat.FLAG_PREFIX + f.name for f in cat.FLAGS])
def test_every_setting_and_flag_has_a_row(setting):
    assert f"| `{setting}` |" in DOC


@pytest.mark.parametrize("marker, body", _blocks("example") + _blocks("plain"))
def test_examples_parse(marker, body):
    # A fragment (no header of its own) is parsed as the body of a policy.
    text = body if re.search(r'^policy "', body, re.M) else 'policy "doc" version 1\n' + body
    result = parse_text(text, "doc.policy")
    assert result.policy is not None, [(str(d.span), d.message) for d in result.diagnostics]


@pytest.mark.parametrize("marker, body", [b for b in _blocks("example") if "complete" in b[0]])
def test_complete_examples_compile_clean(marker, body):
    result = compile_text(body, "doc.policy")
    assert result.plan is not None
    assert [(str(d.span), d.code, d.message) for d in result.diagnostics] == []


@pytest.mark.parametrize("marker, body", _blocks("excerpt"))
def test_excerpts_are_still_in_their_policies(marker, body):
    path = ROOT / marker.split(":", 1)[1].strip()
    assert path.exists(), path
    assert body in path.read_text(encoding="utf-8"), f"the excerpt of {path.name} no longer matches it"


def test_every_command_is_documented():
    built = [name for name, module in COMMANDS.items() if (ROOT / "policydsl" / "cli" / "commands" / f"{module}.py").exists()]
    assert built
    for name in built:
        assert f"| `{name}" in DOC, f"`policydsl {name}` is missing from the command table"


@pytest.mark.parametrize("keyword", ["policy", "include", "const", "actions", "tier", "plugin", "weight",
                                     "action", "queue", "device"])
def test_every_keyword_of_the_grammar_is_documented(keyword):
    grammar = (ROOT / "policydsl" / "grammar.lark").read_text(encoding="utf-8")
    assert f'"{keyword}"' in grammar
    bodies = [match.group("body") for match in FENCE.finditer(DOC)]
    assert any(re.search(rf"^\s*{keyword}\b|\b{keyword} ", body, re.M) for body in bodies), keyword


def test_examples_readme_and_policies_are_linked():
    for target in ("../examples/README.md", "../policies/", "lint-rules.md", "../policydsl/grammar.lark"):
        assert f"({target})" in DOC
