"""compiler.quantities: base units as waiting reasons show them."""

from __future__ import annotations

import pytest

from compiler.quantities import INT64_MAX, readable_base_units


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
