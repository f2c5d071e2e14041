"""The simulator's device usage (Dynamic Resource Allocation): per DeviceClass the devices the
ResourceSlices publish that its selectors match and how many claims hold, per node at the end and
as a mean over the run, in the metrics, `-o json` and the text summary. Counted by hand below."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from runtime.simulation.engine import Limits, simulate
from runtime.simulation.devices import ALL_NODES
from runtime.simulation.scenarios import scenario_from_documents
from sim_helpers import DURATION, run_cli, write_objects, write_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from dra_docs import (  # noqa: E402 - the DRA builders live beside the DRA tests
    DRIVER, claim_doc, device_class, gpu, node_doc, pod_doc, request, slice_doc, template_doc,
)

POLICY = ('policy "dra" version 1\nactions [enqueue, allocate, backfill]\n'
          'tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin nodeorder\n}\n')
H100 = f'device.attributes["{DRIVER}"].model == "H100"'


def _timed(doc: dict, seconds: int) -> dict:
    doc["metadata"].setdefault("annotations", {})[DURATION] = f"{seconds}s"
    return doc


def snapshot() -> list[dict]:
    """Class gpu matches all 7 devices, class a100 the 4 A100s. `pair` holds two A100s for 100s,
    `short` an H100 for 20s, `long` an H100 for 100s: at 40s, gpu 3 of 7 allocated (4 until 20s:
    mean (4/7·20 + 3/7·20) / 40 = 1/2), a100 2 of 4 throughout."""
    return [
        node_doc("n0"), node_doc("n1"),
        device_class("gpu"), device_class("a100", f'device.attributes["{DRIVER}"].model == "A100"'),
        slice_doc("n0-gpus", [gpu("gpu-0", model="A100"), gpu("gpu-1", model="A100"),
                              gpu("gpu-2", model="H100"), gpu("gpu-3", model="H100")], node="n0"),
        slice_doc("n1-gpus", [gpu("gpu-0", model="A100"), gpu("gpu-1", model="A100")], node="n1"),
        slice_doc("fabric", [gpu("b-0", model="B200")], pool="fabric", all_nodes=True),
        claim_doc("pair", request(cls="a100", count=2)),
        template_doc("one-h100", request(selectors=(H100,))),
        _timed(pod_doc("pair", claims={"gpu": "pair"}), 100),
        _timed(pod_doc("short", templates={"gpu": "one-h100"}), 20),
        _timed(pod_doc("long", templates={"gpu": "one-h100"}), 100),
    ]


def test_device_usage_per_class_and_node_at_the_end_and_over_the_run():
    compilation = compile_text(POLICY, "dra.policy")
    assert compilation.ok, [str(d) for d in compilation.errors]
    scenario = scenario_from_documents(compilation.plan, [("snapshot", d) for d in snapshot()], None)
    result = simulate(compilation.plan, scenario, Limits(until=40.0))
    assert set(result.placements) == {"ns/pair", "ns/short", "ns/long"}
    devices = result.metrics.devices
    assert set(devices) == {"gpu", "a100"}
    gpu_use, a100 = devices["gpu"], devices["a100"]
    assert (gpu_use.published, gpu_use.allocated) == (7, 3)
    assert (a100.published, a100.allocated) == (4, 2)
    assert gpu_use.utilization == pytest.approx(0.5)
    assert a100.utilization == pytest.approx(0.5)
    pair_node = result.placements["ns/pair"]
    assert gpu_use.nodes[ALL_NODES] == (1, 0)
    assert gpu_use.nodes["n0"] == (4, 1 + 2 * (pair_node == "n0"))    # long's H100 on n0 (the only H100s)
    assert gpu_use.nodes["n1"] == (2, 2 * (pair_node == "n1"))
    assert a100.nodes[pair_node] == (2, 2) and ALL_NODES not in a100.nodes
    document = result.metrics.to_dict()["devices"]
    assert document["gpu"]["published"] == 7 and document["gpu"]["nodes"][ALL_NODES] == {"published": 1,
                                                                                          "allocated": 0}


def test_no_dra_no_device_section():
    compilation = compile_text(POLICY, "dra.policy")
    scenario = scenario_from_documents(compilation.plan, [("snapshot", node_doc("n0"))], None)
    result = simulate(compilation.plan, scenario, Limits(until=10.0))
    assert result.metrics.devices == {} and "devices" not in result.metrics.to_dict()


def test_simulate_prints_device_usage_as_json_and_text(capsys, tmp_path: Path):
    policy = write_policy(tmp_path / "dra.policy", POLICY)
    objects = write_objects(tmp_path / "snapshot.yaml", snapshot())
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", objects, "--until", "40s", "--output", "json")
    assert code == 0, err
    devices = json.loads(out)["devices"]
    assert {cls: (d["allocated"], d["published"], d["utilization"]) for cls, d in devices.items()} == {
        "a100": (2, 4, 0.5), "gpu": (3, 7, 0.5)}
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", objects, "--until", "40s")
    assert code == 0, err
    assert "devices (DRA)" in out and "devices per node at the end" in out and ALL_NODES in out


def test_the_report_shows_device_usage(capsys, tmp_path: Path):
    policy = write_policy(tmp_path / "dra.policy", POLICY)
    objects = write_objects(tmp_path / "snapshot.yaml", snapshot())
    code, _, err = run_cli(capsys, "simulate", policy, "--snapshot", objects, "--until", "40s",
                           "--report", tmp_path / "report")
    assert code == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    assert '<tr class="device-class" data-class="gpu"><td>gpu</td><td>3</td><td>7</td><td>50.0%</td></tr>' in page
    assert f'data-class="gpu" data-node="{ALL_NODES}"' in page
