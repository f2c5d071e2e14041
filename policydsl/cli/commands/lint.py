"""`policydsl lint PATH...`: every diagnostic of every policy, in the format CI wants."""

from __future__ import annotations

import argparse
import sys

from policydsl.cli.flags import add_output_arguments, existing_path, nonempty

HELP = "check policies for errors and likely mistakes (text, JSON, SARIF, GitHub, JUnit output)"
DESCRIPTION = (
    "Lint policy files and folders (searched recursively for *.policy). Reports syntax and compile "
    "errors and the semantic lint rules (PD2xx-PD5xx), configured by the nearest .policydsl.yaml "
    "and by `# policydsl: disable=CODE` comments. Exit 0 when clean, 1 when a finding is at or above "
    "the fail level, 2 on a usage or I/O error."
)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
FORMAT_NAMES = ("text", "json", "sarif", "github", "junit")
LEVELS = ("info", "warning", "error")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="policy files or folders, or - for stdin")
    parser.add_argument("--stdin-filename", type=nonempty("the file name"), metavar="PATH",
                        help="the file that `-` stands for: names it in findings, and its folder is where includes "
                             "and the configuration are looked up (default: <stdin> in the working folder)")
    add_output_arguments(parser, FORMAT_NAMES, aliases=("--format",))
    parser.add_argument("--fail-level", choices=LEVELS, default=None,
                        help="exit 1 on findings at or above this severity (default: the config's, else error)")
    parser.add_argument("--select", action="append", default=[], metavar="CODES",
                        help="run only these rules (comma-separated codes or names; replaces the config's)")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODES",
                        help="do not report these codes (comma-separated; added to the config's)")
    parser.add_argument("--config", type=existing_path("the configuration path", "file"), metavar="FILE",
                        help="use this configuration instead of the nearest .policydsl.yaml")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="text format: print only findings at or above the fail level, no summary")
    parser.add_argument("--fix", action="store_true",
                        help="apply the fixes lint is certain of (a misspelled name with one suggestion, unit "
                             "suffixes such as 512MiB -> 512Mi), then format the file as `fmt --write` does; "
                             "report what is left")
    parser.add_argument("--explain", metavar="CODE", help="print what a code means, why, and how to fix it")
    parser.add_argument("--list-rules", action="store_true", help="list every code and exit")
    parser.add_argument("--rules-markdown", action="store_true",
                        help="print the rule reference as Markdown (docs/lint-rules.md) and exit")


def _error(message: str) -> int:
    print(f"policydsl lint: {message}", file=sys.stderr)
    return EXIT_USAGE


def _codes(values: list[str]) -> frozenset[str]:
    """Comma-separated codes or names -> codes; raises ValueError naming a bad one."""
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from compiler.lint.config import check_code

    codes = set()
    for value in values:
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts:
            # `--select ""` (a variable that expanded to nothing) selected no rule: a lint that passes everything.
            raise ValueError(f"`{value}` names no code (give CODES as PD101,PD206 or rule names)")
        for text in parts:
            code, problem = check_code(text)
            if problem:
                raise ValueError(problem)
            codes.add(code)
    return frozenset(codes)


def _list_rules() -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from compiler.lint.docs import all_codes
    from compiler.lint.registry import is_configurable

    table = Table(box=box.SIMPLE, show_edge=False)
    for column in ("code", "name", "severity", "configurable", "summary"):
        table.add_column(column)
    for info in all_codes().values():
        table.add_row(info.code, info.name, str(info.severity), "yes" if is_configurable(info.code) else "no",
                      info.summary)
    Console(width=200 if not sys.stdout.isatty() else None, highlight=False).print(table)


FIX_PASSES = 5     # a fix may uncover another (a name fixed, then its value checked): a few passes, bounded


def fix_files(result) -> int:
    """Applies the certain fixes to every linted file, then formats it; returns how many files
    changed. Each file is rewritten in one step (fmt's), and only when its text changed."""
    from pathlib import Path

    # imported when --fix runs: `policydsl` starts without loading what other subcommands need
    from compiler.pipeline import compile_text  # lazy: as above
    from policydsl.cli.commands.fmt import write_atomically  # lazy: as above
    from policydsl.fixes import apply, edit_for  # lazy: as above
    from policydsl.formatter import format_text  # lazy: as above

    changed = fixed = 0
    for path, diagnostics in result.by_file().items():
        file = Path(path)
        if not file.is_file():
            continue
        original = text = file.read_text(encoding="utf-8")
        titles: list[str] = []
        for _ in range(FIX_PASSES):
            lines = text.split("\n")
            edits = [e for e in (edit_for(d, lines) for d in diagnostics) if e is not None]
            text, applied = apply(text, edits)
            titles += [f"{path}:{e.line}:{e.column}: fixed {e.title}" for e in applied]
            if not applied:
                break
            diagnostics = list(compile_text(text, path).diagnostics)
        formatted = format_text(text, path)
        if formatted.text is not None:
            text = formatted.text
        if text != original:
            write_atomically(file, text)
            changed += 1
            fixed += len(titles)
            for title in titles:
                print(title, file=sys.stderr)
    if changed:
        print(f"fixed {fixed} finding(s) and formatted {changed} file(s)", file=sys.stderr)
    return changed


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from compiler.lint import docs
    from compiler.lint.config import ConfigError
    from compiler.lint.registry import resolve_code
    from compiler.lint.runner import STDIN, UsageError, lint_paths
    from policydsl import __version__
    from policydsl.diagnostics import CODES, Severity, SourceCache, closest, render
    from policydsl.cli.formats import FORMATS, Findings, MergedSources
    from policydsl.loader import read_limited

    if args.explain:
        codes = docs.all_codes()
        code = resolve_code(args.explain)
        if code is None:
            guess = closest(args.explain.upper(), list(codes))
            return _error(f"unknown code `{args.explain}`" + (f"; did you mean {guess}?" if guess else ""))
        sys.stdout.write(docs.explain(code))
        return EXIT_OK
    if args.list_rules:
        _list_rules()
        return EXIT_OK
    if args.rules_markdown:
        sys.stdout.write(docs.rules_markdown())
        return EXIT_OK
    if not args.paths:
        return _error("give at least one file or folder to lint")
    try:
        select = _codes(args.select) if args.select else None
        ignore = _codes(args.ignore)
    except ValueError as err:
        return _error(str(err))
    fail_level = Severity.parse(args.fail_level) if args.fail_level else None
    if args.fix and STDIN in args.paths:
        return _error("--fix rewrites files; it cannot fix - (stdin)")

    def lint_all():
        return lint_paths(args.paths, config_file=args.config, select=select, ignore=ignore, fail_level=fail_level,
                          stdin=read_limited(sys.stdin.buffer) if STDIN in args.paths else b"",
                          stdin_filename=args.stdin_filename)

    try:
        result = lint_all()
        if args.fix and fix_files(result):
            result = lint_all()
    except UsageError as err:
        return _error(str(err))
    except ConfigError as err:
        sources = SourceCache()
        span = err.diagnostic.span
        if span is not None:
            try:
                with open(span.path, encoding="utf-8") as config_text:
                    sources.add(span.path, config_text.read())
            except (OSError, UnicodeDecodeError):
                pass
        print(render(err.diagnostic, sources), file=sys.stderr)
        return EXIT_USAGE

    findings = Findings(
        by_file=result.by_file(),
        failing=frozenset(result.failing),
        sources=MergedSources(result.sources),
        tool_version=__version__,
        quiet=args.quiet,
        rules=docs.all_codes() if args.output == "sarif" else CODES,
    )
    sys.stdout.write(FORMATS[args.output](findings))
    if result.io_error:
        return EXIT_USAGE
    return EXIT_FINDINGS if result.failing else EXIT_OK
