"""Rendering of diagnostics: location, quoted line, caret under the span, hint."""

from policydsl.diagnostics import (
    CODES,
    Diagnostic,
    Severity,
    SourceCache,
    Span,
    did_you_mean,
    render,
)
from policydsl.loader import load_text


def test_render_quotes_the_line_and_underlines_the_span():
    sources = SourceCache()
    sources.add("p.policy", 'policy "x" version 1\nactions [alocate]\n')
    diag = Diagnostic("PD101", Severity.ERROR, "unknown action `alocate`", Span("p.policy", 2, 10, 2, 17),
                      hint="did you mean `allocate`?")
    lines = render(diag, sources).splitlines()
    assert lines[0] == "p.policy:2:10: error[PD101] unknown action `alocate`"
    assert lines[1].endswith("actions [alocate]")
    caret_line = lines[2]
    assert caret_line.index("^") == lines[1].index("alocate")
    assert caret_line.count("^") == len("alocate")
    assert lines[3] == "  hint: did you mean `allocate`?"


def test_line_count_matches_the_parser_with_form_feeds():
    # A form feed is whitespace to the parser, not a line break: the quoted line must be line 3.
    text = 'policy "x" version 1\n# a\x0cb\nactions [alocate]\n'
    loaded = load_text(text, "ff.policy")
    from compiler.pipeline import compile_loaded

    result = compile_loaded(loaded)
    [diag] = [d for d in result.diagnostics if d.code == "PD101"]
    assert diag.span.line == 3
    assert "actions [alocate]" in render(diag, result.sources)


def test_every_registered_code_is_unique_and_well_formed():
    for code, info in CODES.items():
        assert code == info.code
        assert code.startswith("PD") and code[2:].isdigit()
        assert info.summary


def test_did_you_mean_offers_the_nearest_name_only_when_close():
    assert did_you_mean("binpak", ["binpack", "gang"]) == "did you mean `binpack`?"
    assert did_you_mean("zzzz", ["binpack", "gang"]) is None
