"""python -m bench.soak --minutes N --seed S [--report table.md] [--json out.json] [--workdir DIR]

Exit 0 when the soak found no violation, 1 when it found some (the report lists them)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench.soak import report
from bench.soak.run import Options, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True, help="how long the load and faults last")
    parser.add_argument("--seed", type=int, default=1, help="seeds the jobs, the faults and the kubelet's timings")
    parser.add_argument("--report", type=Path, help="write the markdown tables here")
    parser.add_argument("--json", type=Path, help="write everything measured here")
    parser.add_argument("--workdir", type=Path, help="keep the cluster's and the replicas' logs here")
    parser.add_argument("--fault-interval", type=float, help="seconds between faults (default: from --minutes)")
    parser.add_argument("--multi-card-gpu", action="store_true",
                        help="also make shared-GPU pods on two cards (a known violation, docs/reliability.md)")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    command = "python -m bench.soak " + shlex.join(argv if argv is not None else sys.argv[1:])
    outcome = run(Options(minutes=args.minutes, seed=args.seed, workdir=args.workdir,
                          fault_interval_s=args.fault_interval,
                          multi_card_gpu=args.multi_card_gpu), progress=lambda line: print(line, flush=True))
    if args.json:  # first: everything measured survives a failure of the tables
        args.json.write_text(report.as_json(outcome, command))
    table = report.markdown(outcome, command)
    print(table)
    if args.report:
        args.report.write_text(table)
    return 1 if report.all_violations(outcome) or outcome.checker_errors else 0


if __name__ == "__main__":
    sys.exit(main())
