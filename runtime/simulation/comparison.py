"""`policydsl diff`: two runs of the same inputs under two policies, compared — the pods
placed differently (first binding of each pod) and every metric with its change."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.simulation.engine import SimulationResult


@dataclass(frozen=True)
class PlacementChange:
    pod: str
    old: str | None                  # node of the pod's first binding, None when never bound
    new: str | None

    def to_dict(self) -> dict:
        return {"pod": self.pod, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class MetricDelta:
    name: str                        # e.g. "queue online wait p99", "utilization cpu"
    old: float | None
    new: float | None
    unit: str = ""                   # "s", "%" or "" (a count or an index)

    @property
    def delta(self) -> float | None:
        if self.old is None or self.new is None:
            return None
        return self.new - self.old

    @property
    def changed(self) -> bool:
        if self.old is None or self.new is None:
            return self.old != self.new
        return abs(self.new - self.old) > 1e-9

    def to_dict(self) -> dict:
        delta = self.delta
        return {"name": self.name, "old": self.old, "new": self.new,
                "delta": None if delta is None else round(delta, 6), "unit": self.unit}


@dataclass(frozen=True)
class Comparison:
    placements: tuple[PlacementChange, ...]
    metrics: tuple[MetricDelta, ...]
    pods: int                        # pods bound in either run

    @property
    def changed(self) -> bool:
        return bool(self.placements) or any(m.changed for m in self.metrics)

    def to_dict(self) -> dict:
        return {"changed": self.changed, "pods": self.pods,
                "placements": [p.to_dict() for p in self.placements],
                "metrics": [m.to_dict() for m in self.metrics]}


def _metric_rows(result: SimulationResult, labels: dict[str, str] | None = None) -> dict[str, tuple[float | None, str]]:
    """The run's metrics by name; `labels` (queue -> the name its rows go by) lets a queue the
    two policies name differently compare with itself."""
    m = result.metrics
    rows: dict[str, tuple[float | None, str]] = {}
    for name, q in m.queues.items():
        name = (labels or {}).get(name, name)
        rows[f"queue {name} wait p50"] = (q.wait_p50, "s")
        rows[f"queue {name} wait p95"] = (q.wait_p95, "s")
        rows[f"queue {name} wait p99"] = (q.wait_p99, "s")
        rows[f"queue {name} jobs started"] = (float(q.started), "")
        rows[f"queue {name} jobs waiting at the end"] = (float(q.waiting), "")
        rows[f"queue {name} share"] = (q.share, "%")
        rows[f"queue {name} evictions"] = (float(q.evictions), "")
    for r, v in m.utilization.items():
        rows[f"utilization {r}"] = (v, "%")
    for r, v in m.fragmentation.items():
        rows[f"fragmentation {r}"] = (v, "%")
    for device, split in m.card_fragmentation.items():
        # Card memory no waiting pod could use, split over cards (runtime.simulation.cardsplit); no row when never.
        rows[f"card memory split {device} mean (GiB)"] = (split.mean / 2**30, "")
    rows["fairness index"] = (m.fairness, "")
    rows["evictions"] = (float(m.evictions), "")
    rows["gang violations"] = (float(len(m.gang_violations)), "")
    rows["simulated time"] = (result.end_time, "s")
    return rows


def compare(old: SimulationResult, new: SimulationResult, renamed: dict[str, str] | None = None) -> Comparison:
    """`renamed`: old queue name -> new, for policies that name the same queue differently."""
    pods = sorted(set(old.placements) | set(new.placements))
    placements = tuple(PlacementChange(p, old.placements.get(p), new.placements.get(p)) for p in pods
                       if old.placements.get(p) != new.placements.get(p))
    label = {new_name: f"{new_name} (was {old_name})" for old_name, new_name in (renamed or {}).items()}
    old_rows = _metric_rows(old, {old_name: label[new_name] for old_name, new_name in (renamed or {}).items()})
    new_rows = _metric_rows(new, label)
    metrics = []
    for name in list(old_rows) + [n for n in new_rows if n not in old_rows]:
        before, unit = old_rows.get(name, (None, ""))
        after, unit_new = new_rows.get(name, (None, unit))
        metrics.append(MetricDelta(name, before, after, unit or unit_new))
    return Comparison(placements, tuple(metrics), len(pods))
