"""Session.combine_into (the stateful filters' codes combined in place) answers as
combine_codes: a node fails if either fails, else passes later if either says later; for every
dtype a rule's codes come in."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS
from runtime.engine.session import combine_codes, combine_into


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.int8, bool])
def test_in_place_equals_combine_codes(dtype):
    rng = np.random.default_rng(3)
    top = 2 if dtype is bool else 4
    for _ in range(50):
        a = rng.integers(0, 4, size=64).astype(np.uint8)
        b = rng.integers(0, top, size=64).astype(dtype)
        codes = a.copy()
        combine_into(codes, b)
        assert codes.dtype == np.uint8 and np.array_equal(codes, combine_codes(a, b))


def test_the_table():
    a = np.array([MASK_FAIL, MASK_PASS, MASK_PASS, MASK_LATER, MASK_LATER, MASK_PASS], dtype=np.uint8)
    b = np.array([MASK_PASS, MASK_FAIL, MASK_PASS, MASK_PASS, MASK_FAIL, MASK_LATER], dtype=np.uint8)
    combine_into(a, b)
    assert a.tolist() == [MASK_FAIL, MASK_FAIL, MASK_PASS, MASK_LATER, MASK_FAIL, MASK_LATER]
