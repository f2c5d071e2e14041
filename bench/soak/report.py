"""The soak's report: markdown tables (for docs/reliability.md) and a JSON document."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from bench.soak.checker import INVARIANTS, Violation
from bench.soak.faults import KINDS
from bench.soak.rss import Instance, Sample
from bench.soak.run import Outcome

RSS_INVARIANT = "rss-flat"
RSS_ROWS = 10  # RSS over time: this many rows, evenly spaced
STALE_S = 12.0  # a replica with no sample this recent is shown as down


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_violations(instances: Sequence[Instance]) -> list[Violation]:
    return [Violation(RSS_INVARIANT, f"{i.identity} pid {i.pid}", i.ended_at,
                      f"RSS grew from {i.warm_mib:.0f} MiB after warm-up to {i.end_mib:.0f} MiB")
            for i in instances if i.grew]


def all_violations(outcome: Outcome) -> list[Violation]:
    return list(outcome.violations) + rss_violations(outcome.rss_instances)


def rss_checks(outcome: Outcome) -> int:
    return sum(1 for i in outcome.rss_instances if i.warm_mib is not None)


def _rss_over_time(samples: Sequence[Sample], seconds: float) -> list[tuple[float, dict[str, float]]]:
    rows = []
    for k in range(RSS_ROWS + 1):
        at = seconds * k / RSS_ROWS
        row: dict[str, float] = {}
        for identity in sorted({s.identity for s in samples}):
            before = [s for s in samples if s.identity == identity and s.at <= at + 1e-6]
            if before and at - before[-1].at <= STALE_S:
                row[identity] = before[-1].rss_mib
        rows.append((at, row))
    return rows


def markdown(outcome: Outcome, command: str) -> str:
    violations = all_violations(outcome)
    by_invariant = Counter(v.invariant for v in violations)
    injected = Counter(i.kind for i in outcome.injected)
    bound = len(outcome.latencies)
    lines = [
        f"Command: `{command}`",
        "",
        "| figure | value |",
        "|---|---|",
        f"| run | {outcome.seconds / 60:.1f} min (seed {outcome.options.seed}), {outcome.steps} check steps "
        f"({outcome.paused_steps} while the API server was away) |",
        f"| jobs created | {sum(outcome.jobs.values())} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(outcome.jobs.items()))}) |",
        f"| pods created / bound | {outcome.pods_created} / {bound} |",
        f"| pods/s (bound over the run) | {bound / outcome.seconds:.2f} |",
        f"| schedule latency, creation to bound: P50 / P99 / max | {percentile(outcome.latencies, 0.5):.2f} s / "
        f"{percentile(outcome.latencies, 0.99):.2f} s / {max(outcome.latencies, default=float('nan')):.2f} s |",
        f"| faults injected | {len(outcome.injected)} (replicas that exited on their own and were restarted: "
        f"{len(outcome.replica_exits)}) |",
        f"| invariant evaluations | {sum(outcome.checks.values()) + rss_checks(outcome)} |",
        f"| violations | **{len(violations)}** |",
        *([f"| checker errors (steps not checked) | **{len(outcome.checker_errors)}** |"]
          if outcome.checker_errors else []),
        "",
        "| fault | injected |",
        "|---|---|",
        *[f"| {kind} | {injected.get(kind, 0)} |" for kind in KINDS],
        "",
        "| invariant | evaluations | violations |",
        "|---|---|---|",
        *[f"| {name} | {outcome.checks.get(name, 0)} | {by_invariant.get(name, 0)} |" for name in INVARIANTS],
        f"| {RSS_INVARIANT} | {rss_checks(outcome)} | {by_invariant.get(RSS_INVARIANT, 0)} |",
        "",
        f"`fit-bound-in-time`: the cluster was uncontended at {outcome.uncontended_steps} of {outcome.steps} steps; "
        f"a pending pod fitted {outcome.fit_evaluations} times (pod x step).",
        "",
        "Slowest binds: " + ", ".join(f"{pod} {latency:.0f} s" for latency, pod in outcome.slowest[:5]) + ".",
        "",
    ]
    if violations:
        lines += ["| violation | subject | detail |", "|---|---|---|"]
        seen: set[str] = set()
        for v in violations:
            if v.invariant in seen:
                continue  # one example each; all are in the JSON
            seen.add(v.invariant)
            lines.append(f"| {v.invariant} | {v.subject} | {v.detail} |")
        lines.append("")
    lines += ["| replica process | lived | RSS start | peak | end | after warm-up | grew |",
              "|---|---|---|---|---|---|---|"]
    for i in outcome.rss_instances:
        warm = f"{i.warm_mib:.0f} MiB" if i.warm_mib is not None else "(too short)"
        lines.append(f"| {i.identity} pid {i.pid} | {i.started_at:.0f}-{i.ended_at:.0f} s | {i.start_mib:.0f} MiB | "
                     f"{i.peak_mib:.0f} MiB | {i.end_mib:.0f} MiB | {warm} | {'**yes**' if i.grew else 'no'} |")
    identities = sorted({s.identity for s in outcome.rss_samples})
    lines += ["", "| at | " + " | ".join(f"{r} RSS" for r in identities) + " |",
              "|---|" + "---|" * len(identities)]
    for at, row in _rss_over_time(outcome.rss_samples, outcome.seconds):
        lines.append(f"| {at / 60:.1f} min | " + " | ".join(f"{row[r]:.0f} MiB" if r in row else "-"
                                                             for r in identities) + " |")
    return "\n".join(lines) + "\n"


def as_json(outcome: Outcome, command: str) -> str:
    doc: dict[str, Any] = {
        "command": command,
        "seed": outcome.options.seed,
        "minutes": outcome.options.minutes,
        "started": outcome.started,
        "seconds": outcome.seconds,
        "steps": outcome.steps,
        "paused_steps": outcome.paused_steps,
        "jobs": outcome.jobs,
        "pods_created": outcome.pods_created,
        "pods_bound": len(outcome.latencies),
        "pods_per_second": len(outcome.latencies) / outcome.seconds,
        "latency_s": {"p50": percentile(outcome.latencies, 0.5), "p99": percentile(outcome.latencies, 0.99),
                      "max": max(outcome.latencies, default=None)},
        "slowest": [{"pod": pod, "latency_s": latency} for latency, pod in outcome.slowest],
        "injected": [asdict(i) for i in outcome.injected],
        "injected_by_kind": dict(Counter(i.kind for i in outcome.injected)),
        "fault_errors": list(outcome.fault_errors),
        "replica_exits": list(outcome.replica_exits),
        "checks": {**outcome.checks, RSS_INVARIANT: rss_checks(outcome)},
        "fit_evaluations": outcome.fit_evaluations,
        "uncontended_steps": outcome.uncontended_steps,
        "violations": [asdict(v) for v in all_violations(outcome)],
        "rss_instances": [asdict(i) for i in outcome.rss_instances],
        "rss_samples": [asdict(s) for s in outcome.rss_samples],
        "checker_errors": list(outcome.checker_errors),
        "kubelet": outcome.kubelet,
        "reloads": outcome.reloads,
    }
    return json.dumps(doc, indent=1, default=str)
