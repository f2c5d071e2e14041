"""Two checkouts' cycle times, alternated process by process (bench/core.py sections 6, 7, 12).

On a shared VM the same cycle runs a third faster or slower from one minute to the next, so one
run of bench/core.py before a change and one after tell little. This script times the section's
cycle in a process of the base checkout, then in one of this checkout, and again, `--rounds`
times: each pair runs minutes apart at most, and the rounds show how much of a difference the
machine itself makes. Each process builds the section's cluster with its own checkout's
bench/core.py, runs one cycle to warm the caches, then times `--cycles` cycles (processor time,
as the section's `cycle_cpu_s`). Both checkouts must decide alike (a digest of the decisions of
the last cycle each): the script exits 1 otherwise.

    git worktree add /tmp/base <commit> && (cd /tmp/base && python setup.py build_ext --inplace)
    python bench/alternate.py --base /tmp/base [--section 12] [--rounds 4] [--cycles 8] [--quick] [--json]

With --json the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# Run in a child process with the checkout first on sys.path: its own engine and its own
# bench/core.py build and time the section (so a base commit is measured as it was).
CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
section, cycles, quick = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
import bench.core as bc
from runtime.engine.snapshot import SnapshotCache
cache = SnapshotCache()
if section == "12":
    nodes = 1000 if quick else 10000
    plan = bc.compile_text(bc.scale_policy(nodes), "scale.policy").plan
    state = bc.make_scale_cluster(nodes)
    run = lambda: (lambda r: (r[1]["cycle_cpu_s"], r[2]))(bc.scale_cycle(plan, state, cache))
else:
    plan = bc.compile_text(bc.POLICY, "bench.policy").plan
    if section == "6":
        state = bc.make_rules_cluster(500 if quick else 5000, 2000 if quick else 20000, 10 if quick else 50, True)
    else:
        state = bc.make_storage_cluster(500 if quick else 5000, 2000 if quick else 20000, 200 if quick else 2000, True)
    run = lambda: (lambda r: (r[2]["cycle_cpu_s"], r[3]))(bc.one_cycle(plan, state, False, cache))
bc.freeze_state()
run()
seconds, decisions = [], None
for _ in range(cycles):
    cpu, decisions = run()
    seconds.append(cpu)
digest = hashlib.sha256(json.dumps(decisions.to_json(), sort_keys=True, default=str).encode()).hexdigest()[:16]
print(json.dumps({"cpu_ms": [round(s * 1000, 1) for s in seconds], "digest": digest}))
"""


def one_process(tree: Path, section: str, cycles: int, quick: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), section, str(cycles), "1" if quick else "0"],
                          capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"bench/alternate.py: the cycle failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the checkout to compare with (kernels built)")
    parser.add_argument("--section", choices=("6", "7", "12"), default="12")
    parser.add_argument("--rounds", type=int, default=4, help="pairs of processes (base, then this checkout)")
    parser.add_argument("--cycles", type=int, default=8, help="timed cycles per process, after one to warm up")
    parser.add_argument("--quick", action="store_true", help="a tenth of the section's size")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    base = args.base.resolve()
    if not (base / "bench" / "core.py").is_file():
        print(f"bench/alternate.py: {base} is not a checkout of this repository (no bench/core.py)", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.cycles < 1:
        print("bench/alternate.py: --rounds and --cycles must be at least 1", file=sys.stderr)
        return 2
    rows = []
    for r in range(args.rounds):
        for name, tree in (("base", base), ("this", HERE)):
            got = one_process(tree, args.section, args.cycles, args.quick)
            cpu = got["cpu_ms"]
            rows.append({"round": r + 1, "tree": name, "min_ms": min(cpu), "median_ms": statistics.median(cpu),
                         "cpu_ms": cpu, "digest": got["digest"]})
            if not args.json:
                print(f"round {r + 1} {name:4s}  min {min(cpu):7.1f} ms  median {statistics.median(cpu):7.1f} ms  "
                      f"{cpu}", flush=True)
    summary = {}
    for name in ("base", "this"):
        mine = [row for row in rows if row["tree"] == name]
        summary[name] = {"min_ms": min(row["min_ms"] for row in mine),
                         "median_of_medians_ms": statistics.median(row["median_ms"] for row in mine)}
    alike = len({row["digest"] for row in rows}) == 1
    result = {"section": args.section, "quick": args.quick, "base": str(base), "rounds": rows, "summary": summary,
              "ratio_of_medians": round(summary["this"]["median_of_medians_ms"]
                                        / summary["base"]["median_of_medians_ms"], 3),
              "identical_decisions": alike}
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("base", "this"):
            print(f"{name}: best {summary[name]['min_ms']:.1f} ms, median of the rounds' medians "
                  f"{summary[name]['median_of_medians_ms']:.1f} ms")
        print(f"this / base (medians): {result['ratio_of_medians']}; decisions identical: {alike}")
    return 0 if alike else 1


if __name__ == "__main__":
    sys.exit(main())
