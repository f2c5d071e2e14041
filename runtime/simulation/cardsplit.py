"""Card fragmentation over a run: per device shared by memory, the card memory that waiting pods
could not use because it was split over cards (runtime.engine.cards.split_card_memory), summed over
the nodes at each sample, then its mean over the run (each sample weighted by how long it held,
as runtime.simulation.metrics' other time averages; a sample with none counts 0), its peak with
the nodes that made it, and when it first appeared and last cleared."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler.quantities import readable_base_units
from runtime.engine.cards import SplitNode
from runtime.simulation.workload import format_duration

PEAK_NODES = 20          # nodes of the peak sample kept (the fullest first)


@dataclass(frozen=True)
class CardSplit:
    """One device's split card memory over a run (bytes)."""

    device: str
    mean: float
    peak: int
    peak_at: float
    peak_nodes: tuple[SplitNode, ...]      # the peak's nodes, most memory first (at most PEAK_NODES)
    first_at: float                        # first sample with some
    cleared_at: float | None               # the first sample with none after the last with some; None: still at the end
    series: tuple[tuple[float, int], ...]  # (time, bytes) per sample

    def text(self) -> str:
        example = f" ({self.peak_nodes[0].sentence()})" if self.peak_nodes else ""
        cleared = "still at the end" if self.cleared_at is None else f"cleared at {format_duration(self.cleared_at)}"
        return (f"{self.device}: mean {readable_base_units('memory', self.mean)}, peak "
                f"{readable_base_units('memory', self.peak)} at {format_duration(self.peak_at)} on "
                f"{len(self.peak_nodes)} node{'s' if len(self.peak_nodes) != 1 else ''}{example}, {cleared}")

    def to_dict(self) -> dict:
        return {"mean": round(self.mean), "peak": self.peak, "peak_at": self.peak_at,
                "peak_nodes": [n.to_dict() for n in self.peak_nodes], "first_at": self.first_at,
                "cleared_at": self.cleared_at, "series": [[t, v] for t, v in self.series]}


def card_splits(times: Sequence[float], splits: Sequence[tuple[SplitNode, ...]],
                weights: Sequence[float]) -> dict[str, CardSplit]:
    """Per device, from each sample's time, split nodes and holding time; {} when none ever was."""
    devices = sorted({n.device for sample in splits for n in sample})
    out = {}
    for device in devices:
        series = tuple((t, sum(n.free for n in sample if n.device == device)) for t, sample in zip(times, splits))
        total = sum(weights)
        mean = sum(v * w for (_, v), w in zip(series, weights)) / total if total else 0.0
        peak_i = max(range(len(series)), key=lambda i: (series[i][1], -i))
        nodes = sorted((n for n in splits[peak_i] if n.device == device), key=lambda n: (-n.free, n.node))
        with_some = [i for i, (_, v) in enumerate(series) if v]
        last = with_some[-1]
        cleared = series[last + 1][0] if last + 1 < len(series) else None
        out[device] = CardSplit(device, mean, series[peak_i][1], series[peak_i][0], tuple(nodes[:PEAK_NODES]),
                                series[with_some[0]][0], cleared, series)
    return out
