"""compiler.quantities: base units as waiting reasons show them."""

from __future__ import annotations

import pytest

from compiler.quantities import INT64_MAX, format_base_units, readable_base_units, to_base_units


@pytest.mark.parametrize("resource, units, text", [
    ("cpu", 9000, "9"),                        # whole cores
    ("cpu", 1125, "1125m"),                    # exact where short
    ("cpu", 16000 / 3, "5.3"),                 # a share: one decimal
    ("cpu", 0, "0"),
    ("cpu", 0.4, "0m"),
    ("memory", 8 * 2**30, "8Gi"),
    ("memory", 12.5 * 2**30, "12.5Gi"),
    ("memory", 123456789, "117.7Mi"),
    ("memory", 1000, "1000"),
    ("nvidia.com/gpu", 3, "3"),
    ("cpu", INT64_MAX, "unlimited"),
])
def test_readable_base_units(resource, units, text):
    assert readable_base_units(resource, units) == text


@pytest.mark.parametrize("resource, units, shown", [
    ("cpu", 26999, "27"),                  # a water-filled share a hair off a round figure
    ("cpu", 1125, "1125m"),                # short and exact: kept
    ("cpu", 12345, "12.3"),
    ("volcano.sh/gpu-memory", 10240, "10240"),   # MiB counted, not bytes: no Ki
    ("nvidia.com/gpu", 1024, "1024"),
    ("memory", 8 * 2**30, "8Gi"),
    ("hugepages-2Mi", 2**21, "2Mi"),
])
def test_figures_read_as_a_person_reads_them(resource, units, shown):
    assert readable_base_units(resource, units) == shown


def test_counts_are_never_written_with_binary_suffixes():
    assert format_base_units("nvidia.com/gpu", 2048) == "2048"
    assert to_base_units("nvidia.com/gpu", format_base_units("nvidia.com/gpu", 2048)) == 2048
