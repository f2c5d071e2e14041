"""The schedulers' resident memory over the soak: VmRSS from /proc/PID/status of every replica
process, sampled on a timer, and the judgement whether it stayed flat."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# A process is judged after its warm-up (caches filling, the first cycles' allocations): from then
# to its end its RSS may grow by at most this much (and by this fraction of its warmed-up size).
GROWTH_LIMIT_MIB = 64.0
GROWTH_LIMIT_FRACTION = 0.5


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the soak started
    identity: str
    pid: int
    rss_mib: float


def read_rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None  # gone between the check and the read
    return None


@dataclass(frozen=True)
class Instance:
    """One process's RSS: start, peak, end, and the growth after its warm-up."""

    identity: str
    pid: int
    started_at: float
    ended_at: float
    start_mib: float
    peak_mib: float
    end_mib: float
    warm_mib: float | None  # at the end of warm-up, None when it did not live that long
    grew: bool

    @property
    def lived_s(self) -> float:
        return self.ended_at - self.started_at


def instances(samples: Sequence[Sample], warmup_s: float) -> list[Instance]:
    by_pid: dict[int, list[Sample]] = {}
    for sample in samples:
        by_pid.setdefault(sample.pid, []).append(sample)
    out = []
    for pid, series in sorted(by_pid.items(), key=lambda item: item[1][0].at):
        first = series[0]
        warm = [s for s in series if s.at - first.at >= warmup_s]
        end = series[-1]
        warm_mib = warm[0].rss_mib if warm and end.at - warm[0].at >= warmup_s else None
        grew = warm_mib is not None and end.rss_mib - warm_mib > max(GROWTH_LIMIT_MIB,
                                                                     GROWTH_LIMIT_FRACTION * warm_mib)
        out.append(Instance(first.identity, pid, first.at, end.at, first.rss_mib, max(s.rss_mib for s in series),
                            end.rss_mib, warm_mib, grew))
    return out
