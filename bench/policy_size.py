"""Policy size benchmark (not a test: it prints figures): the memory a policy takes, per size.

For each shape and size a generated policy file is compiled (`policydsl compile`'s path:
read, parse, lower, lint, validate, build the Plan) and formatted (`policydsl fmt`'s path), each
in a fresh Python process, and the process's peak RSS (VmHWM in /proc/self/status) is read
before and after. "base" is the process after its imports and one tiny policy (the parser's
tables are built once per process), "peak" the most it held while reading this one; growth per
byte = (peak - base) / file size, which should stay flat as the size grows.

Shapes: `queues`, a tree of teams (a parent queue with two children, each with capability,
deserved and guarantee maps), the shape of a generated multi-tenant policy; `devices`, many
device-sharing rules with lists of models, the most settings per byte; `consts`, long lists of
numbers (a node and a span for every few bytes: the worst case per byte).

    python bench/policy_size.py                       # 100 kB and 1 MB of each shape
    python bench/policy_size.py --sizes 100k,1M,4M --shapes queues --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HEAD = """policy "generated" version 1
actions [enqueue, allocate, backfill]
tier {
  plugin priority
  plugin gang
}
tier {
  plugin drf
  plugin predicates
  plugin proportion
  plugin nodeorder
  plugin deviceshare
  plugin binpack { resources = { cpu: 1, memory: 1, "nvidia.com/gpu": 5 } }
}
"""


def queues(size: int) -> str:
    parts, i = [HEAD], 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"queue team-{i:06d} {{\n  weight = {1 + i % 7}\n"
            f"  capability = {{ cpu: 64, memory: 256Gi, \"nvidia.com/gpu\": 8 }}\n"
            f"  queue team-{i:06d}-serve {{ weight = 2 deserved = {{ cpu: 16, memory: 64Gi }} "
            f"guarantee = {{ cpu: 1, memory: 1Gi }} }}\n"
            f"  queue team-{i:06d}-train {{ weight = 1 deserved = {{ cpu: 16, memory: 64Gi }} }}\n}}\n")
        i += 1
    return "".join(parts)


def devices(size: int) -> str:
    parts, i = [HEAD], 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"device \"example.com/gpu-{i:06d}\" {{\n  sharing = memory\n  card_memory = 80Gi\n  slice = 10Gi\n"
            f"  compute_percent = 12.5%\n  max_tasks_per_card = 4\n"
            f"  memory_resource = \"example.com/gpu-{i:06d}-memory\"\n  topology = nvlink\n"
            f"  models = [\"MODEL-{i:06d}-A\", \"MODEL-{i:06d}-B\"]\n  policy = spread\n}}\n")
        i += 1
    return "".join(parts)


def consts(size: int) -> str:
    parts, i = [HEAD], 0
    while sum(map(len, parts)) < size:
        parts.append(f"const L{i:06d} = [" + ", ".join(str(k % 1000) for k in range(200)) + "]\n")
        i += 1
    return "".join(parts)


SHAPES: dict[str, Callable[[int], str]] = {"queues": queues, "devices": devices, "consts": consts}
STAGES = ("compile", "fmt")

# What one child process does with the file: what `policydsl compile` and `policydsl fmt` do.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from compiler.pipeline import compile_file, compile_text
from policydsl.formatter import format_text
from policydsl.loader import read_source

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0

compile_text('policy "warm" version 1\nactions [allocate]\nqueue a { weight = 1 }\n', "warm.policy")
format_text('policy "warm" version 1\n', "warm.policy")
base = status("VmHWM")
start = time.perf_counter()
if sys.argv[3] == "compile":
    result = compile_file(sys.argv[2])
    ok, codes = result.ok, sorted({d.code for d in result.errors})
else:
    text, problem = read_source(sys.argv[2])
    result = format_text(text, sys.argv[2]) if text is not None else None
    ok, codes = result is not None and result.text is not None, [problem.code] if problem else []
seconds = time.perf_counter() - start
print(json.dumps({"base": base, "peak": status("VmHWM"), "seconds": seconds, "ok": ok, "errors": codes}))
"""


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKM]?)", text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not a size like 100k or 1M")
    return int(float(match.group(1)) * {"": 1, "k": 1000, "K": 1000, "M": 1_000_000}[match.group(2)])


def size_list(text: str) -> list[int]:
    return [parse_size(part) for part in text.split(",")]


def shape_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    unknown = [name for name in names if name not in SHAPES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown shape `{','.join(unknown)}`: pick from {', '.join(SHAPES)}")
    return names


def stage_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not names or any(name not in STAGES for name in names):
        raise argparse.ArgumentTypeError(f"`{text}`: pick stages from {', '.join(STAGES)}")
    return names


def measure(path: Path, stage: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO), str(path), stage], capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"policy_size: the {stage} of {path.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=size_list, default=size_list("100k,1M"),
                        help="policy file sizes, comma-separated (default 100k,1M)")
    parser.add_argument("--shapes", type=shape_list, default=list(SHAPES),
                        help=f"which generated policies, comma-separated (default {','.join(SHAPES)})")
    parser.add_argument("--stages", type=stage_list, default=list(STAGES),
                        help="what to measure, comma-separated (default compile,fmt)")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON line at the end")
    args = parser.parse_args(argv)

    rows = []
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}")
    print(f"{'shape':8} {'stage':8} {'size':>9} {'base MiB':>9} {'peak MiB':>9} {'growth/byte':>11} {'s':>6}  ok")
    with tempfile.TemporaryDirectory(prefix="policy-size-") as folder:
        for shape in args.shapes:
            for size in args.sizes:
                path = Path(folder) / f"{shape}-{size}.policy"
                path.write_text(SHAPES[shape](size))
                actual = path.stat().st_size
                for stage in args.stages:
                    m = measure(path, stage)
                    row = {"shape": shape, "stage": stage, "bytes": actual, "base_bytes": m["base"],
                           "peak_bytes": m["peak"], "growth_per_byte": (m["peak"] - m["base"]) / actual,
                           "seconds": m["seconds"], "ok": m["ok"], "errors": m["errors"]}
                    rows.append(row)
                    print(f"{shape:8} {stage:8} {actual:>9,} {m['base'] / 2**20:>9.1f} {m['peak'] / 2**20:>9.1f} "
                          f"{row['growth_per_byte']:>11.1f} {m['seconds']:>6.2f}  "
                          f"{'yes' if m['ok'] else 'no ' + ','.join(m['errors'])}")
                path.unlink()
    if args.json:
        print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
