"""The eviction audit's invariants under gang_preempt / gang_reclaim: the generated clusters,
workloads and policies of tests/simulation/test_eviction_invariants.py with their evicting actions
replaced by the gang-aware ones (both kernels): every eviction buys its beneficiary (none wasted,
whole gangs included) and no two queues trade room."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from test_eviction_invariants import SETTINGS, _simulate, scenarios


def gang_aware(text: str) -> str:
    def swap(match: re.Match) -> str:
        names = [n.strip() for n in match.group(1).split(",")]
        return "actions [" + ", ".join({"preempt": "gang_preempt", "reclaim": "gang_reclaim"}.get(n, n)
                                       for n in names) + "]"
    return re.sub(r"actions \[([^\]]*)\]", swap, text, count=1)


@SETTINGS
@given(scenarios(), st.booleans(), st.booleans())
def test_gang_actions_buy_every_eviction_and_trade_no_room(case, whole, pure):
    text, snapshot, workload = case
    text = gang_aware(text)
    assert "gang_" in text
    if not whole:
        for action in ("gang_preempt", "gang_reclaim"):
            if action in text.split("\n")[1]:
                text += f"action {action} {{\n  whole_gangs = false\n}}\n"
    result = _simulate(text, snapshot, workload, pure)
    audit = result.metrics.eviction_audit
    assert audit["wasted"] == 0, (audit, result.findings, text)
    assert audit["bought"] + audit["open"] == sum(result.evicted.values()), (audit, result.evicted)
    assert audit["exchanges"] == 0, (audit, text)
