"""`policydsl fmt`: rewrite policy files in the one canonical layout, keeping every comment."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

HELP = "format policy files in the canonical layout (comments kept)"
DESCRIPTION = (
    "Format policy files: 2-space indent, one setting per line, inline lists and maps, every comment "
    "kept. Folders are searched recursively for *.policy files; `-` reads stdin and writes stdout. "
    "Without a flag the formatted text is printed. The formatter re-parses its output and refuses "
    "to write anything whose meaning or comments would change."
)

STDIN = "-"
EXIT_OK, EXIT_FINDINGS, EXIT_IO = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="policy files or folders, or - for stdin")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; list files that are not formatted and exit 1 if any")
    parser.add_argument("--diff", action="store_true",
                        help="change nothing; print a unified diff of the changes and exit 1 if any")
    parser.add_argument("--write", action="store_true", help="rewrite files in place")


def _targets(paths: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Files to format (folders expanded to their *.policy files, sorted), paths that do not exist,
    and folders with no policy file (a wrong folder, which formatting nothing would hide, as lint says)."""
    found: list[str] = []
    missing: list[str] = []
    empty: list[str] = []
    for raw in paths:
        path = Path(raw)
        if raw == STDIN:
            found.append(STDIN)
        elif path.is_dir():
            inside = [str(p) for p in sorted(path.rglob("*.policy")) if p.is_file()]
            found.extend(inside)
            if not inside:
                empty.append(raw)
        elif path.exists():
            found.append(raw)
        else:
            missing.append(raw)
    return list(dict.fromkeys(found)), missing, empty  # a file named twice is formatted once


def _unified_diff(before: str, after: str, shown: str) -> str:
    lines = []
    for line in difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     fromfile=f"a/{shown}", tofile=f"b/{shown}"):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def write_atomically(path: Path, text: str) -> None:
    """Replace the file in one step, so a crash never leaves half a policy behind."""
    mode = path.stat().st_mode & 0o7777
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from policydsl.diagnostics import IO_ERROR, SourceCache, Span, make, render
    from policydsl.formatter import format_text
    from policydsl.loader import decode_source, read_limited, read_source

    if args.write and (args.check or args.diff):
        print("policydsl fmt: --write cannot be combined with --check or --diff", file=sys.stderr)
        return EXIT_IO
    if args.write and STDIN in args.paths:
        print("policydsl fmt: --write cannot rewrite stdin; drop `-` or --write", file=sys.stderr)
        return EXIT_IO

    targets, missing, empty = _targets(args.paths)
    status = EXIT_OK
    for raw in missing:
        print(render(make(IO_ERROR, f"no such file or folder: {raw}", Span.point(raw, 1, 1))), file=sys.stderr)
        status = EXIT_IO
    for raw in empty:
        print(f"policydsl fmt: {raw}: no .policy files in this folder", file=sys.stderr)
        status = EXIT_IO
    changed: list[str] = []
    for target in targets:
        shown = "<stdin>" if target == STDIN else target
        if target == STDIN:
            text, problem = decode_source(read_limited(sys.stdin.buffer), shown)
        else:
            text, problem = read_source(Path(target))
        if problem is not None:
            print(render(problem), file=sys.stderr)
            status = max(status, EXIT_IO if problem.code == IO_ERROR.code else EXIT_FINDINGS)
            continue
        result = format_text(text, shown)
        if result.diagnostics:
            sources = SourceCache()
            sources.add(shown, text)
            for diag in result.diagnostics:
                print(render(diag, sources), file=sys.stderr)
        if result.text is None:
            status = max(status, EXIT_FINDINGS)
            continue
        if result.changed:
            changed.append(shown)
        if args.diff and result.changed:
            sys.stdout.write(_unified_diff(text, result.text, shown))
        if args.check and not args.diff and result.changed:
            print(f"would reformat {shown}")
        if args.write and result.changed:
            try:
                write_atomically(Path(target), result.text)
            except OSError as err:
                print(f"policydsl fmt: cannot write {shown}: {err.strerror or err}", file=sys.stderr)
                status = EXIT_IO
                continue
            print(f"reformatted {shown}", file=sys.stderr)
        if not (args.check or args.diff or args.write):
            sys.stdout.write(result.text)
    if (args.check or args.diff) and changed:
        status = max(status, EXIT_FINDINGS)
        noun = "file" if len(changed) == 1 else "files"
        print(f"{len(changed)} {noun} would be reformatted", file=sys.stderr)
    return status
