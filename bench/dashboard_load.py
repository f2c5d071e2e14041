"""Keep the scheduler's dashboard open and refreshing while a benchmark runs: fetch /ui (and
the queue API, as the page's links would) at a steady rate, and say how it went.

    python -m bench.dashboard_load http://127.0.0.1:8080 --rate 2 --seconds 600

`python -m bench.e2e --dashboard-load 2` runs one against policydsl's scheduler during each of
its runs (its fetches and their latency go to the run's folder, dashboard_load.json), so pods/s
with the dashboard refreshing can be compared with a run without. Loopback only, bounded in time
(it stops after `--seconds` whatever happens) and in rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

MAX_SECONDS = 3600.0
MAX_RATE = 50.0
PATHS = ("/ui", "/api/v1/queues")


@dataclass
class LoadReport:
    fetches: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        ordered = sorted(self.latencies_ms)

        def pick(p: float) -> float | None:
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2) if ordered else None

        return {"fetches": self.fetches, "errors": self.errors, "p50_ms": pick(0.5), "p99_ms": pick(0.99),
                "max_ms": round(ordered[-1], 2) if ordered else None}


class DashboardLoad:
    """Fetches `PATHS` in turn from `base` at `rate` per second on a thread, until stop() or
    `seconds` passed."""

    def __init__(self, base: str, rate: float, seconds: float = MAX_SECONDS) -> None:
        host = urllib.parse.urlparse(base).hostname or ""
        if not (host == "localhost" or host.startswith("127.") or host == "::1"):
            raise ValueError(f"{base}: the dashboard load only targets loopback addresses")
        if not 0 < rate <= MAX_RATE:
            raise ValueError(f"rate {rate} is not in (0, {MAX_RATE}]")
        self.base = base.rstrip("/")
        self.interval = 1.0 / rate
        self.seconds = min(seconds, MAX_SECONDS)
        self.report = LoadReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dashboard-load", daemon=True)

    def start(self) -> DashboardLoad:
        self._thread.start()
        return self

    def stop(self) -> LoadReport:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.report

    def _loop(self) -> None:
        deadline = time.monotonic() + self.seconds
        turn = 0
        next_at = time.monotonic()
        while not self._stop.is_set() and time.monotonic() < deadline:
            path = PATHS[turn % len(PATHS)]
            turn += 1
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.base + path, timeout=10) as answer:
                    answer.read()
                self.report.latencies_ms.append((time.perf_counter() - started) * 1000)
            except (urllib.error.URLError, OSError):
                self.report.errors += 1   # before the first cycle (503) or while it starts
            self.report.fetches += 1
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the scheduler's metrics address, e.g. http://127.0.0.1:8080")
    parser.add_argument("--rate", type=float, default=2.0, help="fetches per second (default 2)")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long (default 600, at most 3600)")
    args = parser.parse_args(argv)
    try:
        load = DashboardLoad(args.url, args.rate, args.seconds).start()
    except ValueError as err:
        print(f"bench.dashboard_load: {err}", file=sys.stderr)
        return 2
    try:
        while load._thread.is_alive():
            load._thread.join(timeout=1)
    except KeyboardInterrupt:
        pass
    print(json.dumps(load.stop().to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
