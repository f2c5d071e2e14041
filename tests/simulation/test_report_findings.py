"""The HTML report leads with the findings and the longest waits, draws censored waits as
censored, and says "no evictions" in words (issue 32, point 7)."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.simulation import report
from tests.simulation.sim_helpers import POLICIES, node, run_cli, write_objects
from tests.simulation.test_findings import _job, blocked_cluster

POLICY = POLICIES / "volcano-default.policy"


def _page(capsys, tmp_path: Path, objects: list[dict], until: str = "30m") -> str:
    snapshot = write_objects(tmp_path / "cluster.yaml", objects)
    folder = tmp_path / "report"
    code, _, err = run_cli(capsys, "simulate", POLICY, "--snapshot", snapshot, "--until", until, "--report", folder)
    assert code == 0, err
    return (folder / "index.html").read_text()


def _polyline(page: str, label: str) -> list[tuple[float, float]]:
    match = re.search(r'<polyline[^>]*points="([^"]*)"><title>' + re.escape(label) + "</title>", page)
    assert match, label
    return [tuple(map(float, p.split(","))) for p in match.group(1).split()]


def test_findings_and_longest_waits_come_first_with_next_commands(capsys, tmp_path: Path) -> None:
    page = _page(capsys, tmp_path, blocked_cluster())
    findings = page.index('<section id="findings">')
    assert findings < page.index("<h2>Queues</h2>") < page.index('class="plots"')
    section = page[findings:page.index("</section>", findings)]
    assert 'data-kind="head-of-line blocking"' in section and 'data-kind="starved queue"' in section
    assert "next: <code>policydsl simulate" in section and "--explain ns/big --at" in section
    assert "--report" not in section                 # the next commands do not write the report again
    rows = re.findall(r'<tr class="wait"><td>([^<]*)</td>', section)
    assert rows[0] == "ns/big" and "ns/small-0" in rows
    assert "never started" in section and "job needs cpu 5 (minResources)" in section
    # warnings no longer hide as rows of the cluster table
    assert "<th>warning</th>" not in page


def test_censored_waits_keep_the_cdf_below_100_percent(capsys, tmp_path: Path) -> None:
    """Queue a: ns/ok starts; ns/big never does. Its CDF stops at 1/2, dashed on to the edge."""
    objects = [node("n1", cpu="10", memory="64Gi")]
    objects += _job("ok", "default", "1", "1s", duration="5m")
    objects += _job("big", "default", "1", "2s", node_selector={"disk": "ssd"})
    page = _page(capsys, tmp_path, objects)
    top = report.MARGIN_TOP
    bottom = report.HEIGHT - report.MARGIN_BOTTOM
    half = top + (bottom - top) / 2
    cdf = _polyline(page, "default (2 jobs, 1 never started: censored)")
    assert max(y for _, y in cdf) == bottom and min(y for _, y in cdf) == half     # 0% .. 50%, never 100%
    censored = _polyline(page, "default: 1 still waiting after 29m58s+")
    assert {y for _, y in censored} == {half}
    assert 'stroke-dasharray="5,4" points=' in page


def test_every_job_started_draws_the_whole_cdf_and_evictions_in_words(capsys, tmp_path: Path) -> None:
    objects = [node("n1", cpu="10", memory="64Gi")]
    objects += _job("one", "default", "1", "1s", duration="5m")
    page = _page(capsys, tmp_path, objects)
    cdf = _polyline(page, "default (1 jobs)")
    assert min(y for _, y in cdf) == report.MARGIN_TOP                          # reaches 100%
    assert "censored" not in page.split("Wait distribution", 1)[1].split("</svg>")[0].replace(
        "censored dashed", "")
    assert "no evictions" in page and "Evictions so far" not in page
    assert "No findings" in page
