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
    python bench/alternate.py --base /tmp/base --instructions [--section 12] [--quick]

--instructions counts instead of timing: one warm cycle of each checkout under Valgrind's callgrind
(the instructions the cycle executes, the same from run to run within a few in ten thousand,
whatever else the machine runs), for changes of a few percent that timings on a shared VM cannot
show. Each process then runs some fifty times slower (about half a minute at section 12's size).

With --json the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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
if cycles == 0:     # --instructions: callgrind collects within operator.call only, once its instrumentation is on
    import operator, os, subprocess
    run()
    control = subprocess.Popen(["callgrind_control", "-i", "on", str(os.getpid())],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while control.poll() is None:     # busy: Valgrind reads the request between blocks
        sum(range(1000))
    cpu, decisions = operator.call(run)
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


def counted(tree: Path, section: str, quick: bool) -> dict:
    """One warm cycle of `tree`'s section under callgrind: its instructions and decisions' digest."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                               "--toggle-collect=_operator_call", f"--callgrind-out-file={tmp}/callgrind.out",
                               sys.executable, "-c", CHILD, str(tree), section, "0", "1" if quick else "0"],
                              capture_output=True, text=True, cwd=tree,
                              # One string hash for both sides: sets and dicts keyed by strings
                              # then iterate alike, and a checkout counted twice agrees closely.
                              env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"bench/alternate.py: the counted cycle failed in {tree}:\n{done.stderr[-3000:]}")
    if int(found.group(1)) == 0:     # the toggle names a symbol of CPython's own library
        raise SystemExit(f"bench/alternate.py: callgrind counted nothing: {sys.executable} has no symbol _operator_call")
    return {"instructions": int(found.group(1)), "digest": json.loads(done.stdout.strip().splitlines()[-1])["digest"]}


def count_both(base: Path, section: str, quick: bool, as_json: bool) -> int:
    rows = {name: counted(tree, section, quick) for name, tree in (("base", base), ("this", HERE))}
    alike = rows["base"]["digest"] == rows["this"]["digest"]
    ratio = round(rows["this"]["instructions"] / rows["base"]["instructions"], 4)
    result = {"section": section, "quick": quick, "base": str(base), "instructions": rows, "ratio": ratio,
              "identical_decisions": alike}
    if as_json:
        print(json.dumps(result))
    else:
        for name, row in rows.items():
            print(f"{name}: {row['instructions']:,} instructions in one warm cycle")
        print(f"this / base: {ratio}; decisions identical: {alike}")
    return 0 if alike else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the checkout to compare with (kernels built)")
    parser.add_argument("--section", choices=("6", "7", "12"), default="12")
    parser.add_argument("--rounds", type=int, default=4, help="pairs of processes (base, then this checkout)")
    parser.add_argument("--cycles", type=int, default=8, help="timed cycles per process, after one to warm up")
    parser.add_argument("--quick", action="store_true", help="a tenth of the section's size")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--instructions", action="store_true",
                        help="count one warm cycle's instructions under callgrind instead of timing")
    args = parser.parse_args(argv)
    base = args.base.resolve()
    if not (base / "bench" / "core.py").is_file():
        print(f"bench/alternate.py: {base} is not a checkout of this repository (no bench/core.py)", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.cycles < 1:
        print("bench/alternate.py: --rounds and --cycles must be at least 1", file=sys.stderr)
        return 2
    if args.instructions:
        if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
            print("bench/alternate.py: --instructions needs Valgrind (apt install valgrind)", file=sys.stderr)
            return 2
        return count_both(base, args.section, args.quick, args.json)
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
