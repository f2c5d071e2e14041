"""runtime.kube.cluster.bind_batches: a cycle's binds in as few pipelined batches as the depth
allows, evenly, in order, none lost or repeated."""

from __future__ import annotations

from hypothesis import given, strategies as st

from runtime.kube.cluster import bind_batches


def test_a_gang_goes_in_one_batch_and_a_larger_cycle_in_even_ones() -> None:
    assert [len(b) for b in bind_batches(list(range(8)), 20)] == [8]
    assert [len(b) for b in bind_batches(list(range(41)), 20)] == [14, 14, 13]
    assert bind_batches([], 20) == []


@given(st.integers(0, 500), st.integers(1, 40))
def test_batches_are_the_items_in_order_in_the_fewest_even_batches(n: int, depth: int) -> None:
    items = list(range(n))
    batches = bind_batches(items, depth)
    assert [x for b in batches for x in b] == items
    assert len(batches) == -(-n // depth)
    assert all(len(b) <= depth for b in batches)
    if batches:
        assert max(map(len, batches)) - min(map(len, batches)) <= 1
