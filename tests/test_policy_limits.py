"""What the tool takes of a policy: nesting depth (PD005), file size (PD004), and memory that
grows with the text and no faster.

Each stage that reads a policy walks its nesting recursively, so a deep enough list once raised
a RecursionError out of whichever stage came first; a long string took 400 bytes of memory per
byte of text in the lexer's regex, and the parse tree four times the AST's size.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from policydsl import loader
from policydsl.formatter import format_text
from policydsl.limits import MAX_INCLUDE_DEPTH, MAX_NESTING, MAX_POLICY_BYTES
from policydsl.loader import load
from policydsl.parser import parse_text

REPO = Path(__file__).resolve().parents[1]
HEAD = 'policy "t" version 1\nactions [enqueue, allocate]\ntier {\n  plugin proportion\n}\n'
HEAD_LINES = HEAD.count("\n")


# Each builds a policy whose deepest point has `depth` brackets and braces open at once.
def nested_list(depth: int) -> str:
    return HEAD + "const X = " + "[" * depth + "]" * depth + "\n"


def nested_map(depth: int) -> str:
    return HEAD + "const X = " + "{a: " * depth + "1" + "}" * depth + "\n"


def nested_queues(depth: int) -> str:
    return HEAD + "".join(f"queue q{i} {{ weight = 1 " for i in range(depth)) + "}" * depth + "\n"


def queues_holding_a_map(depth: int) -> str:
    return HEAD + "".join(f"queue q{i} {{ " for i in range(depth - 1)) + "capability = { cpu: 1 } " \
        + "}" * (depth - 1) + "\n"


def plugin_argument(depth: int) -> str:
    # tier { plugin { ... } } holds two levels before the argument's own.
    return HEAD + "tier {\n  plugin binpack { resources = " + "[" * (depth - 2) + "]" * (depth - 2) + " }\n}\n"


SHAPES = [nested_list, nested_map, nested_queues, queues_holding_a_map, plugin_argument]


def deepest_opening(text: str, depth: int) -> tuple[int, int]:
    """Line and column of the bracket or brace that opens level `depth` (no strings in these texts)."""
    level = 0
    for number, line in enumerate(text.split("\n"), start=1):
        for column, char in enumerate(line, start=1):
            level += (char in "[{") - (char in "]}")
            if char in "[{" and level == depth:
                return number, column
    raise AssertionError(f"no level {depth} in the text")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_the_deepest_nesting_allowed_goes_through_every_stage(shape: Callable[[int], str]) -> None:
    text = shape(MAX_NESTING)
    assert deepest_opening(text, MAX_NESTING)
    compiled = compile_text(text, "deep.policy")
    assert "PD005" not in {d.code for d in compiled.diagnostics}
    assert compiled.loaded is not None and compiled.loaded.main is not None
    formatted = format_text(text, "deep.policy")
    assert formatted.text is not None, formatted.diagnostics


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_one_level_more_is_pd005_at_the_bracket_that_opens_it(shape: Callable[[int], str]) -> None:
    text = shape(MAX_NESTING + 1)
    line, column = deepest_opening(text, MAX_NESTING + 1)
    result = parse_text(text, "deep.policy")
    assert result.policy is None
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("PD005", line, column)]
    assert str(MAX_NESTING) in result.diagnostics[0].message


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5_000, 200_000])
def test_any_depth_is_a_diagnostic_never_a_recursion_error(depth: int) -> None:
    for run in (lambda text: compile_text(text, "deep.policy"), lambda text: format_text(text, "deep.policy")):
        result = run(nested_list(depth))
        assert [d.code for d in result.diagnostics] == ["PD005"]


def test_a_deep_item_after_a_syntax_error_is_reported_too() -> None:
    text = HEAD + "queue a { weight = }\n" + "const X = " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "\n"
    codes = [(d.code, d.span.line) for d in parse_text(text, "t.policy").diagnostics]
    assert codes == [("PD010", HEAD_LINES + 1), ("PD005", HEAD_LINES + 2)]


@pytest.mark.parametrize("command", [["lint"], ["fmt"], ["compile"], ["simulate", "--cycles", "1"]])
def test_the_commands_print_the_located_diagnostic_and_no_traceback(tmp_path: Path, command: list[str]) -> None:
    policy = tmp_path / "deep.policy"
    policy.write_text(nested_list(10_000))
    done = subprocess.run([sys.executable, "-m", "policydsl", *command, str(policy)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    said = done.stdout + done.stderr  # lint reports on stdout, the others on stderr
    assert done.returncode in (1, 2), said
    line, column = HEAD_LINES + 1, len("const X = ") + MAX_NESTING + 1
    assert f"deep.policy:{line}:{column}: error[PD005]" in said
    assert "Traceback" not in said and "internal error" not in said


def test_a_reload_to_a_too_deep_policy_is_refused_with_the_diagnostic(tmp_path: Path) -> None:
    # What the running scheduler's reloader compiles on every edit: it must get diagnostics back.
    from runtime.service.reload import attempt_compile

    policy = tmp_path / "main.policy"
    policy.write_text(nested_map(MAX_NESTING + 1))
    attempt = attempt_compile(policy)
    assert not attempt.ok and attempt.plan is None
    assert [d.code for d in attempt.errors] == ["PD005"]


# --- size -------------------------------------------------------------------------------------

def test_a_file_over_the_limit_is_pd004_at_its_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_POLICY_BYTES", 1000)
    policy = tmp_path / "big.policy"
    text = HEAD + "".join(f"queue q{i} {{ weight = 1 }}\n" for i in range(60))
    assert len(text.encode()) > 1000
    policy.write_text(text)
    diagnostics = load(policy).diagnostics
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics] == [("PD004", 1, 1)]
    policy.write_text(text[:1000])
    assert "PD004" not in {d.code for d in load(policy).diagnostics}


def test_an_endless_file_is_cut_at_the_limit_not_read_to_its_end() -> None:
    # /dev/zero as a policy path: read to MAX_POLICY_BYTES + 1, then refused.
    for command in (["lint", "/dev/zero"], ["fmt", "/dev/zero"]):
        done = subprocess.run([sys.executable, "-m", "policydsl", *command], cwd=REPO, capture_output=True,
                              text=True, timeout=60)
        said = done.stdout + done.stderr
        assert done.returncode == 1, (command, said)
        assert "/dev/zero:1:1: error[PD004]" in said
        assert f"{MAX_POLICY_BYTES // 2**20} MiB" in said


def test_the_scheduler_refuses_an_endless_policy_instead_of_hanging() -> None:
    # `run` fingerprints the policy's files for hot reload before compiling them.
    done = subprocess.run([sys.executable, "-m", "policydsl", "run", "--policy", "/dev/zero", "--cluster",
                           f"embedded:{REPO / 'examples'}", "--cycles", "1"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "/dev/zero:1:1: error[PD004]" in done.stderr and "not starting" in done.stderr


def test_a_volcano_config_is_held_to_the_same_size() -> None:
    done = subprocess.run([sys.executable, "-m", "policydsl", "import-volcano", "/dev/zero"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"/dev/zero:1:1: error[PD601] cannot read /dev/zero: it is larger than {MAX_POLICY_BYTES // 2**20} MiB" \
        in done.stderr


def test_stdin_over_the_limit_is_pd004() -> None:
    done = subprocess.run([sys.executable, "-m", "policydsl", "lint", "-"], cwd=REPO, capture_output=True,
                          timeout=60, input=b"#" * (MAX_POLICY_BYTES + 10))
    assert done.returncode == 1 and b"<stdin>:1:1: error[PD004]" in done.stdout


def test_the_limit_holds_for_the_files_together_at_the_include_past_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Splitting a policy into includes used to multiply the limit by the number of files.
    monkeypatch.setattr(loader, "MAX_POLICY_BYTES", 1000)
    part = 'policy "part" version 1\n' + "".join(f"queue p{i} {{ weight = 1 }}\n" for i in range(17))
    assert 420 < len(part) < 480  # the main file and a.policy fit in 1,000 bytes; with b.policy they do not
    (tmp_path / "a.policy").write_text(part.replace("queue p", "queue a"))
    (tmp_path / "b.policy").write_text(part.replace("queue p", "queue b"))
    (tmp_path / "c.policy").write_text(part.replace("queue p", "queue c"))
    main = tmp_path / "main.policy"
    main.write_text(HEAD + 'include "a.policy"\ninclude "b.policy"\ninclude "c.policy"\n')
    diagnostics = load(main).diagnostics
    # b.policy, and c.policy too: the main file and a.policy leave room for neither.
    assert [(d.code, d.span.path, d.span.line, d.span.column) for d in diagnostics] == [
        ("PD004", str(main), HEAD_LINES + 2, 9), ("PD004", str(main), HEAD_LINES + 3, 9)]
    assert "b.policy the policy is larger than 1,000 bytes" in diagnostics[0].message
    main.write_text(HEAD + 'include "a.policy"\n')
    assert load(main).ok


def test_an_include_over_the_limit_is_pd004_at_the_include(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_POLICY_BYTES", 1000)
    (tmp_path / "big.policy").write_text('policy "big" version 1\n' + "#" * 2000 + "\n")
    main = tmp_path / "main.policy"
    main.write_text(HEAD + 'include "big.policy"\n')
    assert [(d.code, d.span.line) for d in load(main).diagnostics] == [("PD004", HEAD_LINES + 1)]


def include_chain(folder: Path, files: int) -> Path:
    """f0.policy includes f1.policy, which includes f2.policy, ... `files` files in all."""
    for i in range(files):
        header = HEAD if i == 0 else f'policy "f{i}" version 1\nqueue q{i} {{ weight = 1 }}\n'
        (folder / f"f{i}.policy").write_text(header + (f'include "f{i + 1}.policy"\n' if i + 1 < files else ""))
    return folder / "f0.policy"


def test_includes_nest_to_the_limit(tmp_path: Path) -> None:
    compiled = compile_text((include_chain(tmp_path, MAX_INCLUDE_DEPTH)).read_text(), str(tmp_path / "f0.policy"))
    assert compiled.ok, compiled.diagnostics
    assert len(compiled.loaded.files) == MAX_INCLUDE_DEPTH


@pytest.mark.parametrize("files", [MAX_INCLUDE_DEPTH + 1, 1_500])
def test_an_include_one_file_deeper_is_pd013_not_a_recursion_error(tmp_path: Path, files: int) -> None:
    # A chain of 1,200 files was `internal error: RecursionError` from lint and compile.
    main = include_chain(tmp_path, files)
    diagnostics = load(main).diagnostics
    deepest = tmp_path / f"f{MAX_INCLUDE_DEPTH - 1}.policy"
    assert [(d.code, d.span.path, d.span.line) for d in diagnostics] == [("PD013", str(deepest), 3)]
    assert f"more than {MAX_INCLUDE_DEPTH} files deep" in diagnostics[0].message
    done = subprocess.run([sys.executable, "-m", "policydsl", "compile", str(main)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and f"{deepest}:3:9: error[PD013]" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


# --- memory -----------------------------------------------------------------------------------

def many_queues(size: int) -> str:
    lines, i = [HEAD], 0
    while sum(map(len, lines)) < size:
        lines.append(f"queue team-{i:06d} {{ weight = {1 + i % 7} capability = {{ cpu: 64, memory: 256Gi }} }}\n")
        i += 1
    return "".join(lines)


def long_string(size: int) -> str:
    return HEAD + 'const S = "' + "y" * size + '"\n'


def long_list(size: int) -> str:
    return HEAD + "const L = [" + ", ".join(str(i % 1000) for i in range(size // 5)) + "]\n"


def many_comments(size: int) -> str:
    return HEAD + ("# " + "x" * 76 + "\n") * (size // 79)


# Peak bytes of memory per byte of policy text, compiling (parse, lower, lint, validate, plan).
# Measured: about 80 for queues and 100 for a list of small numbers (a node and a span for
# every 5 bytes of text), under 10 for strings and comments. Before the parse tree was dropped:
# 210 and 220; a long string, 410 at 100 kB and 490 at 400 kB.
BYTES_PER_BYTE = {many_queues: 110, long_string: 20, long_list: 130, many_comments: 20}


def compile_peak(text: str) -> int:
    tracemalloc.start()
    try:
        compile_text(text, "big.policy")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", list(BYTES_PER_BYTE), ids=lambda shape: shape.__name__)
def test_memory_grows_in_proportion_to_the_policy(shape: Callable[[int], str]) -> None:
    compile_text(shape(1000), "warm.policy")  # the parser's tables are built once per process
    small, large = shape(50_000), shape(200_000)
    small_peak, large_peak = compile_peak(small), compile_peak(large)
    assert large_peak / len(large) <= BYTES_PER_BYTE[shape], f"{large_peak / len(large):.0f} bytes per byte"
    # Four times the text, at most about four times the memory: nothing grows faster than the text.
    assert large_peak / small_peak <= 1.15 * len(large) / len(small), (small_peak, large_peak)


def test_a_large_parse_gives_the_collector_back_as_it_found_it() -> None:
    # The collector is paused for a parse of more than GC_PAUSE_CHARS (it walked the growing tree).
    import gc

    from policydsl import parser

    large = many_queues(parser.GC_PAUSE_CHARS + 1000)
    assert gc.isenabled()
    assert parse_text(large, "big.policy").policy is not None and gc.isenabled()
    assert parse_text(large + "queue x {\n", "bad.policy").policy is None and gc.isenabled()
    assert parse_text(nested_list(5_000) + large, "deep.policy").policy is None and gc.isenabled()
    gc.disable()
    try:
        parse_text(large, "big.policy")
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()
