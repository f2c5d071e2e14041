"""Card fragmentation over a simulated run (runtime.engine.cards.split_card_memory, sampled by
runtime.simulation.metrics, summed by runtime.simulation.cardsplit): free card memory no waiting
pod can use because it is split over cards appears, is counted per node with its figures, and
disappears when a card frees up; in the metrics, -o json, the text summary and the HTML report.
The expected figures are worked out by hand in each test's docstring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.scenarios import scenario_from_documents
from sim_helpers import ARRIVAL, DURATION, node, pod, run_cli, write_objects, write_policy

GiB = 1024 ** 3
NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
POLICY = ('policy "cards" version 1\nactions [enqueue, allocate, backfill]\n'
          'tier {\n  plugin priority\n  plugin gang\n}\n'
          'tier {\n  plugin predicates\n  plugin nodeorder\n  plugin deviceshare {\n    gpu_sharing = true\n  }\n}\n')


def holder(name: str, card: int, gib: int, seconds: int | None = None, node_name: str = "g3") -> dict:
    doc = pod(name, node_name=node_name, cpu="1", **{MEMORY: str(gib * 1024)})
    doc["metadata"]["annotations"]["volcano.sh/gpu-index"] = str(card)
    if seconds is not None:
        doc["metadata"]["annotations"][DURATION] = f"{seconds}s"
    return doc


def objects() -> list[dict]:
    """g3: four 16Gi cards holding 8, 10, 12 and 16Gi: free 8, 6, 4 and 0 (18Gi). `late` asks 10Gi
    on one card: 18Gi would hold it, no card does, so all 18Gi are split until `short` (10Gi on
    card 1) ends at 60s; card 1 then has 16Gi free and `late` runs there: nothing split after.
    Over 120s: mean 18Gi·60/120 = 9Gi, peak 18Gi at 0s. g9's cards are all busy (0 free): no
    free memory, nothing split there. `wide` asks 20Gi of one card, more than any card has: it is
    no ask for split memory (no card of g3 would hold it empty)."""
    return [
        node("g3", cpu="32", memory="64Gi", **{NUMBER: "4", MEMORY: str(4 * 16 * 1024)}),
        node("g9", cpu="32", memory="64Gi", **{NUMBER: "1", MEMORY: str(16 * 1024)}),
        holder("a", 0, 8), holder("short", 1, 10, seconds=60), holder("b", 2, 12), holder("c", 3, 16),
        holder("full", 0, 16, node_name="g9"),
        {**pod("late", cpu="1", **{MEMORY: str(10 * 1024)})},
        {**pod("wide", cpu="1", **{MEMORY: str(20 * 1024)})},
    ]


def run(until: float = 120.0):
    compilation = compile_text(POLICY, "cards.policy")
    assert compilation.ok, [str(d) for d in compilation.errors]
    scenario = scenario_from_documents(compilation.plan, [("snapshot", d) for d in objects()], None)
    return simulate(compilation.plan, scenario, Limits(until=until))


def test_split_card_memory_appears_and_disappears_with_its_figures() -> None:
    result = run()
    assert result.placements["ns/late"] == "g3"
    split = result.metrics.card_fragmentation
    assert set(split) == {NUMBER}
    usage = split[NUMBER]
    assert usage.peak == 18 * GiB and usage.peak_at == 0.0 and usage.first_at == 0.0
    assert usage.cleared_at == 60.0
    assert usage.mean == pytest.approx(9 * GiB)
    (g3,) = usage.peak_nodes
    assert (g3.node, g3.free, g3.ask) == ("g3", 18 * GiB, 10 * GiB)
    assert sorted(g3.cards_free, reverse=True) == [8 * GiB, 6 * GiB, 4 * GiB, 0]
    assert g3.sentence() == "pod needs 10Gi of card memory; node g3's cards have 8Gi, 6Gi, 4Gi and 0 free"
    # Every sample before 60s has the 18Gi, every one from 60s on none.
    assert all(v == (18 * GiB if t < 60 else 0) for t, v in usage.series)
    assert any(t >= 60 for t, _ in usage.series)


def test_no_card_fragmentation_when_the_waiting_pod_fits_on_one_card() -> None:
    """Same cards, but `late` asks 8Gi: card 0 holds it at once, nothing waits for card memory
    (`wide` still waits, no card is big enough for it: not split memory either)."""
    docs = [d for d in objects() if d["metadata"]["name"] != "late"]
    docs.append(pod("late", cpu="1", **{MEMORY: str(8 * 1024)}))
    compilation = compile_text(POLICY, "cards.policy")
    scenario = scenario_from_documents(compilation.plan, [("snapshot", d) for d in docs], None)
    result = simulate(compilation.plan, scenario, Limits(until=120.0))
    assert result.placements["ns/late"] == "g3"
    assert result.metrics.card_fragmentation == {}
    assert "card_fragmentation" not in result.metrics.to_dict()


def test_a_later_arrival_makes_card_memory_split_for_a_while(tmp_path: Path, capsys) -> None:
    """Nothing waits until `late` arrives at 30s (18Gi split from then), `short` ends at 60s:
    split from 30s to 60s. Through the CLI: the text summary, -o json and the HTML report say it."""
    docs = objects()
    for d in docs:
        if d["metadata"]["name"] == "late":
            d["metadata"]["annotations"][ARRIVAL] = "30s"
        if d["metadata"]["name"] == "wide":
            docs.remove(d)
    policy = write_policy(tmp_path / "cards.policy", POLICY)
    snapshot = write_objects(tmp_path / "snap.yaml", docs)
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--until", "120s", "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    usage = document["card_fragmentation"][NUMBER]
    assert (usage["peak"], usage["first_at"], usage["cleared_at"]) == (18 * GiB, 30.0, 60.0)
    assert usage["mean"] == round(18 * GiB * 30 / 120)
    assert usage["peak_nodes"][0]["text"] == \
        "pod needs 10Gi of card memory; node g3's cards have 8Gi, 6Gi, 4Gi and 0 free"
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--until", "120s",
                             "--report", tmp_path / "report")
    assert code == 0, err
    text = " ".join(out.split())
    assert "card memory split" in text
    assert "peak 18Gi at 30s" in text and "cleared at 1m" in text
    page = (tmp_path / "report" / "index.html").read_text()
    assert 'id="card-fragmentation"' in page
    assert "node g3&#x27;s cards have 8Gi, 6Gi, 4Gi and 0 free" in page


def test_policydsl_diff_compares_the_split_card_memory() -> None:
    """The same run against itself shows the 9Gi mean unchanged; against a run where `late` asks
    8Gi (it fits card 0 at once) the row is missing on that side: nothing was ever split."""
    from runtime.simulation.comparison import compare

    split = run()
    docs = [d for d in objects() if d["metadata"]["name"] != "late"] + [pod("late", cpu="1", **{MEMORY: "8192"})]
    compilation = compile_text(POLICY, "cards.policy")
    fits = simulate(compilation.plan, scenario_from_documents(compilation.plan, [("snapshot", d) for d in docs], None),
                    Limits(until=120.0))
    name = f"card memory split {NUMBER} mean (GiB)"
    (same,) = [m for m in compare(split, split).metrics if m.name == name]
    assert (same.old, same.new) == (pytest.approx(9.0), pytest.approx(9.0))
    (gone,) = [m for m in compare(split, fits).metrics if m.name == name]
    assert gone.old == pytest.approx(9.0) and gone.new is None
