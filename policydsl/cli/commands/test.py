"""`policydsl test [PATH...]`: run policy test files (*.policytest.yaml) for CI."""

from __future__ import annotations

import argparse
import json
import sys
import time
import xml.etree.ElementTree as ET

from policydsl.cli.flags import add_output_arguments

HELP = "run policy tests (*.policytest.yaml): placements, reasons, phases, waits, evictions"
DESCRIPTION = (
    "Run every *.policytest.yaml under PATH (default: the current folder). Each test simulates a policy on a "
    "snapshot and workload and checks assertions: where a pod lands, why it waits, a PodGroup's phase, a "
    "queue's wait percentiles, evictions, gang violations, which job starts first. Output like pytest (text), "
    "JSON or JUnit XML. Exit 0 when all pass, 1 when a test fails, 2 on usage or I/O errors and bad test files."
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", default=["."], help="test files or folders (default .)")
    add_output_arguments(parser, ("text", "json", "junit"), aliases=("--format",))
    parser.add_argument("-k", dest="keyword", metavar="TEXT", help="run only tests whose name contains TEXT")


def _text(outcomes, file_errors: list[str], seconds: float) -> str:
    lines = [f"{o.case.id} {o.status.upper()}" for o in outcomes]
    problems = [o for o in outcomes if o.status != "passed"]
    if problems or file_errors:
        lines.append("")
        lines.append("=" * 30 + " failures " + "=" * 30)
    for message in file_errors:
        lines.append(f"ERROR {message}")
    for o in problems:
        lines.append(f"{o.status.upper()} {o.case.id} ({o.case.file}:{o.case.line})")
        for text in o.failures or [o.error or ""]:
            lines.extend("    " + part for part in text.splitlines())
    lines.append(_summary(outcomes, file_errors, seconds))
    return "\n".join(lines) + "\n"


def _summary(outcomes, file_errors: list[str], seconds: float) -> str:
    counts = {status: sum(1 for o in outcomes if o.status == status) for status in ("passed", "failed", "error")}
    errors = counts["error"] + len(file_errors)
    text = f"{counts['passed']} passed, {counts['failed']} failed"
    if errors:
        text += f", {errors} error{'s' if errors != 1 else ''}"
    return f"{text} in {seconds:.2f}s"


def _json(outcomes, file_errors: list[str], seconds: float) -> str:
    document = {
        "tests": [{"file": str(o.case.file), "name": o.case.name, "line": o.case.line, "outcome": o.status,
                   "failures": o.failures, "error": o.error, "seconds": round(o.seconds, 3)} for o in outcomes],
        "errors": file_errors,
        "passed": sum(1 for o in outcomes if o.status == "passed"),
        "failed": sum(1 for o in outcomes if o.status == "failed"),
        "seconds": round(seconds, 3),
    }
    return json.dumps(document, indent=2) + "\n"


def _junit(outcomes, file_errors: list[str], seconds: float) -> str:
    root = ET.Element("testsuites", name="policydsl test", tests=str(len(outcomes) + len(file_errors)),
                      time=f"{seconds:.3f}")
    by_file: dict[str, list] = {}
    for o in outcomes:
        by_file.setdefault(str(o.case.file), []).append(o)
    for file, items in by_file.items():
        suite = ET.SubElement(root, "testsuite", name=file, tests=str(len(items)),
                              failures=str(sum(1 for o in items if o.status == "failed")),
                              errors=str(sum(1 for o in items if o.status == "error")),
                              time=f"{sum(o.seconds for o in items):.3f}")
        for o in items:
            case = ET.SubElement(suite, "testcase", classname=file, name=o.case.name, time=f"{o.seconds:.3f}")
            if o.status == "failed":
                failure = ET.SubElement(case, "failure", message=o.failures[0].splitlines()[0])
                failure.text = "\n".join(o.failures)
            elif o.status == "error":
                error = ET.SubElement(case, "error", message=(o.error or "").splitlines()[0] if o.error else "")
                error.text = o.error
    if file_errors:
        suite = ET.SubElement(root, "testsuite", name="test files", tests=str(len(file_errors)), failures="0",
                              errors=str(len(file_errors)))
        for message in file_errors:
            case = ET.SubElement(suite, "testcase", classname="test files", name=message.split(": ", 1)[0])
            ET.SubElement(case, "error", message=message).text = message
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


FORMATS = {"text": _text, "json": _json, "junit": _junit}


def run(args: argparse.Namespace) -> int:
    # imported when the subcommand runs: `policydsl` starts without loading what other subcommands need
    from runtime.simulation.policytest import TEST_SUFFIX, TestFileError, discover, load_test_file, run_cases

    started = time.perf_counter()
    files, missing = discover(args.paths)
    if missing:
        for path in missing:
            print(f"policydsl test: {path}: no such file or folder", file=sys.stderr)
        return EXIT_USAGE
    if not files:
        print(f"policydsl test: no *{TEST_SUFFIX} files under {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_USAGE
    cases = []
    file_errors: list[str] = []
    for file in files:
        try:
            cases.extend(load_test_file(file))
        except TestFileError as err:
            file_errors.append(str(err))
    if args.keyword:
        cases = [c for c in cases if args.keyword in c.name]
    outcomes = run_cases(cases)
    sys.stdout.write(FORMATS[args.output](outcomes, file_errors, time.perf_counter() - started))
    if file_errors or any(o.status == "error" for o in outcomes):
        return EXIT_USAGE
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) else EXIT_OK
