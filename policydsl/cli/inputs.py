"""The commands' common front door: a policy file to a Plan, input files to a Scenario, and
every failure as one `InputError` carrying the text to print and the exit code (1 for a
policy with errors, as `policydsl compile`; 2 for usage, I/O and bad objects)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compiler.pipeline import compile_file
from compiler.plan import Plan
from runtime.cluster.objects import ObjectError, problems_text
from runtime.simulation.engine import Limits
from runtime.simulation.scenarios import load_scenario
from runtime.simulation.workload import Scenario, parse_duration

EXIT_FINDINGS, EXIT_USAGE = 1, 2


@dataclass
class InputError(Exception):
    text: str
    exit_code: int = EXIT_USAGE

    def __str__(self) -> str:
        return self.text


def compile_policy(path: str | Path) -> Plan:
    """The Plan of a policy file; InputError with the rendered diagnostics when it has errors."""
    result = compile_file(path)
    if result.plan is not None:
        return result.plan
    return _raise(result.error_text(path), EXIT_USAGE if result.unreadable else EXIT_FINDINGS)


def load_inputs(plan: Plan, snapshot: str | Path | None, workload: str | Path | None,
                rename: dict[str, str] | None = None) -> Scenario:
    try:
        return load_scenario(plan, snapshot, workload, rename)
    except ObjectError as err:
        return _raise(problems_text(err), EXIT_USAGE)


# Shorter periods only multiply cycles: no scheduler runs more than a thousand a second.
MIN_PERIOD_S = 0.001


def run_limits(cycles: int | None, until: str | None, period: str) -> Limits:
    """`--cycles`, `--until` and `--period` as the simulator's Limits, or an InputError."""
    if cycles is not None and cycles < 1:
        raise InputError("--cycles: give a positive number of cycles")
    until_s = parse_time(until, "--until") if until is not None else None
    period_s = parse_time(period, "--period")
    if period_s < MIN_PERIOD_S:
        raise InputError(f"--period: must be at least {MIN_PERIOD_S * 1000:g}ms")
    return Limits(cycles=cycles, until=until_s, period=period_s)


def parse_time(text: str, what: str) -> float:
    """A command-line duration (`2h`, `90s`); InputError naming the option when malformed."""
    try:
        value = parse_duration(text)
    except ValueError as err:
        return _raise(f"{what}: {err}", EXIT_USAGE)
    return value


def _raise(text: str, code: int):
    raise InputError(text, code)
