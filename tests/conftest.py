"""Fixtures that tests in several folders use."""

from __future__ import annotations

import difflib

import pytest


@pytest.fixture
def compared(monkeypatch) -> list[str]:
    """Every candidate a fuzzy match compares a word with."""
    seen: list[str] = []
    original = difflib.SequenceMatcher.set_seq1

    def counting(self, a):
        if a:
            seen.append(a)
        return original(self, a)

    monkeypatch.setattr(difflib.SequenceMatcher, "set_seq1", counting)
    return seen
