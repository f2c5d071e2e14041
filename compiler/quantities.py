"""Kubernetes quantities to int64 base units: CPU in millicores, everything else in units
(bytes for memory). Parsing is the kubernetes client's; we only pick the unit and round up,
as the API server does for requests."""

from __future__ import annotations

import math
from decimal import Decimal

import importlib.util
import sys
from functools import lru_cache
from typing import Callable

MILLI_RESOURCES = frozenset({"cpu"})
# Resources counted in bytes: the only ones whose figures read with binary suffixes (8Gi). Others
# (nvidia.com/gpu, volcano.sh/gpu-memory in MiB, pods) are counts: 10240 stays 10240, not 10Ki.
BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def in_bytes(resource: str) -> bool:
    return resource in BYTE_RESOURCES or resource.startswith("hugepages-")


@lru_cache(maxsize=1)
def _parse_quantity() -> Callable:
    """The kubernetes client's `parse_quantity`, loaded from its own module file.

    `import kubernetes.utils` runs the package's __init__, which imports the whole API client
    (about half a second); lint and fmt need only this one dependency-free module.
    """
    loaded = sys.modules.get("kubernetes.utils.quantity")
    if loaded is None:
        package = importlib.util.find_spec("kubernetes")
        if package is None or not package.submodule_search_locations:
            raise ImportError("the kubernetes client is not installed: pip install kubernetes")
        location = f"{package.submodule_search_locations[0]}/utils/quantity.py"
        spec = importlib.util.spec_from_file_location("policydsl_k8s_quantity", location)
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    return loaded.parse_quantity
INT64_MAX = 2**63 - 1


def to_base_units(resource: str, quantity: str | int | float) -> int:
    """`to_base_units("cpu", "500m") == 500`; `to_base_units("memory", "1Ki") == 1024`.

    Raises ValueError with a readable message for a malformed or out-of-range quantity.
    """
    # The same few quantities come in every pod the watch brings (two of them per container):
    # parsed once each (the key's type too: True and 1 are equal keys).
    return _base_units(resource, quantity, type(quantity))


@lru_cache(maxsize=4096)
def _base_units(resource: str, quantity: str | int | float, _kind: type) -> int:
    try:
        value = _parse_quantity()(quantity)
    except (ValueError, TypeError, ArithmeticError):
        raise ValueError(f"`{quantity}` is not a quantity (examples: 500m, 2, 8Gi)") from None
    if value < 0:
        raise ValueError(f"`{quantity}` is negative")
    if resource in MILLI_RESOURCES:
        value = value * 1000
    units = math.ceil(Decimal(value))
    if units > INT64_MAX:
        raise ValueError(f"`{quantity}` is too large")
    return int(units)


def format_base_units(resource: str, units: int) -> str:
    """The shortest exact quantity text for base units (inverse of to_base_units)."""
    if resource in MILLI_RESOURCES:
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if not in_bytes(resource):
        return str(units)
    for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if units >= size and units % size == 0:
            return f"{units // size}{suffix}"
    return str(units)


def readable_base_units(resource: str, units: float) -> str:
    """Base units as a person reads a figure: exact where short (`1125m`, `8Gi`), else to one
    decimal (`5.3`, `12.5Gi`); `unlimited` from INT64_MAX on."""
    if units >= INT64_MAX:
        return "unlimited"
    if float(units).is_integer():
        exact = format_base_units(resource, int(units))
        # Exact where short, unless it is a hair off a round figure (26999m of a share computed
        # by water-filling reads as 27, not 26999m).
        if len(exact) <= 6 and not (resource in MILLI_RESOURCES and units >= 10_000 and units % 100):
            return exact
    if resource in MILLI_RESOURCES:
        return _one_decimal(units / 1000) if units >= 1000 or units == 0 else f"{units:.0f}m"
    if not in_bytes(resource):
        return _one_decimal(units)
    for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if units >= size:
            return _one_decimal(units / size) + suffix
    return _one_decimal(units)


def _one_decimal(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text
