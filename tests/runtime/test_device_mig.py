"""MIG slice choice (runtime/engine/devices_mig.py, not wired into placement yet), translated from
Volcano's pkg/scheduler/api/devices/nvidia/vgpu/mig_test.go and config/config_test.go (named per case)."""

from __future__ import annotations

import pytest

from runtime.engine import devices_mig as mig
from runtime.engine.devices_mig import Geometry, KindInUse, MigInstance, MigUsage


def geometry(group: str, *instances: tuple[str, int, int]) -> Geometry:
    return Geometry(group, tuple(MigInstance(*i) for i in instances))


@pytest.mark.parametrize("memory, usage, geometries, want", [
    # TestFindMatch "Match 1g.10gb and available"
    (10, MigUsage(0, [KindInUse("1g.10gb", 10240, [])]), (geometry("default", ("1g.10gb", 10240, 2)),),
     ("gpu-1234[default-0]", 10240)),
    # "No match due to memory too high"
    (20000, MigUsage(0, [KindInUse("1g.10gb", 10, [])]), (geometry("default", ("1g.10gb", 10, 1)),), None),
    # "Empty geometry list"
    (10, MigUsage(0, []), (geometry(""),), None),
    # "No matching MIG template in geometry": the group in use offers only kinds in use
    (20, MigUsage(0, [KindInUse("1g.10gb", 10, [])]), (geometry("default", ("2g.20gb", 20, 1)),), None),
    # "MIG instance already in use"
    (10, MigUsage(0, [KindInUse("1g.10gb", 10, [0])]), (geometry("default", ("1g.10gb", 10, 1)),), None),
    # "Multiple templates, pick first matching and available"
    (20, MigUsage(-1, []), (geometry("group1", ("1g.10gb", 10, 1)), geometry("group2", ("2g.20gb", 24, 1))),
     ("gpu-1234[group2-0]", 24)),
    # "Request memory smaller than template, still match"
    (5, MigUsage(0, [KindInUse("1g.10gb", 10, [])]), (geometry("default", ("1g.10gb", 10, 1)),),
     ("gpu-1234[default-0]", 10)),
])
def test_find_match_as_volcanos(memory, usage, geometries, want) -> None:
    assert mig.find_match("gpu-1234", memory, usage, geometries) == want


def test_the_smallest_instance_holding_the_ask_is_taken_at_its_lowest_free_index() -> None:
    # The position counts the earlier kinds' instances (mig.go's comment on group2 of an A100 80GB).
    group2 = geometry("group2", ("2g.20gb", 20480, 3), ("1g.10gb", 10240, 1))
    assert mig.find_match("GPU-a", 8000, MigUsage(), (group2,)) == ("GPU-a[group2-3]", 10240)
    usage = MigUsage(0, [KindInUse("2g.20gb", 20480, [0, 1])])
    assert mig.find_match("GPU-a", 8000, usage, (group2,)) == ("GPU-a[group2-2]", 20480)


def test_add_then_sub_mig_used() -> None:
    # TestAddAndSubMigUsed "Add then Sub with valid position"
    geometries = (geometry("group-a", ("1g.10gb", 10240, 2)),)
    usage = MigUsage()
    assert mig.add_used(usage, geometries, "group-a", 1) == 10240
    assert usage.group == 0 and usage.kinds == [KindInUse("1g.10gb", 10240, [1])]
    assert mig.find_match("gpu-1", 1, usage, geometries) == ("gpu-1[group-a-0]", 10240)
    assert mig.sub_used(usage, geometries, "group-a", 1) == 10240
    assert usage.kinds == []
    assert mig.add_used(usage, geometries, "no-such-group", 0) == 0


@pytest.mark.parametrize("device_id, want", [
    ("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448[group2-3]", ("group2", 3)),
    ("GPU-a[group2]", None), ("GPU-a", None), ("GPU-a[g-x]", None),
])
def test_mig_ids_decode_as_volcanos(device_id, want) -> None:
    assert mig.decode_mig_id(device_id) == want


CONFIG = """nvidia:
  resourceCountName: volcano.sh/vgpu-number
  deviceSplitCount: 10
  knownMigGeometries:
  - models: [ "A30" ]
    allowedGeometries:
      - group: group1
        geometries:
        - name: 1g.6gb
          memory: 6144
          count: 4
  - models: [ "A100-SXM4-40GB", "A100-40GB-PCIe" ]
    allowedGeometries:
      - group: "group2"
        geometries:
        - name: 2g.10gb
          memory: 10240
          count: 3
        - name: 1g.5gb
          memory: 5120
          count: 1
"""


def test_the_device_config_gives_each_card_type_its_geometries() -> None:
    # config_test.go "construct config from file string" (knownMigGeometries part)
    known = mig.parse_device_config(CONFIG)
    assert mig.geometries_for_type(known, "NVIDIA-A30") == (geometry("group1", ("1g.6gb", 6144, 4)),)
    assert mig.geometries_for_type(known, "NVIDIA-A100-SXM4-40GB")[0].instances[1] == MigInstance("1g.5gb", 5120, 1)
    assert mig.geometries_for_type(known, "NVIDIA-H100") is None     # Volcano: that card falls back to hami-core


@pytest.mark.parametrize("text, where", [
    ("nvidia: [1]", "nvidia"),
    ("nvidia:\n  knownMigGeometries:\n  - models: A30\n", "knownMigGeometries[0].models"),
    ("nvidia:\n  knownMigGeometries:\n  - models: [A30]\n    allowedGeometries:\n    - group: g\n      geometries:\n"
     "      - {name: x, memory: big, count: 1}\n", "allowedGeometries[0].geometries[0]"),
])
def test_a_bad_device_config_is_refused_naming_where(text, where) -> None:
    with pytest.raises(mig.MigConfigError) as err:
        mig.parse_device_config(text)
    assert where in str(err.value)
