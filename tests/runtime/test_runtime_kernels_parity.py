"""The compiled kernels equal the same sources run interpreted, on random inputs (where C
semantics could make them disagree: integer overflow, C division, typed truncation, bounds)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime.engine.kernels import BUILD_HINT, KernelsNotBuilt, codes, interpreted, load
from runtime.engine.snapshot import UNLIMITED

REF = load(pure=True)


@pytest.fixture(scope="module")
def compiled():
    try:
        return load(pure=False)
    except KernelsNotBuilt as err:   # a clear failure, not a skip: the kernels are the product
        pytest.fail(f"{err}")


def random_nodes(rng, n, r):
    alloc = rng.integers(0, 64, size=(n, r)).astype(np.int64) * 1000
    alloc[rng.random((n, r)) < 0.1] = 0
    used = (alloc * rng.random((n, r))).astype(np.int64)
    releasing = (used * rng.random((n, r)) * (rng.random((n, r)) < 0.3)).astype(np.int64)
    pipelined = (releasing * rng.random((n, r)) * 0.5).astype(np.int64)
    return alloc, used, releasing, pipelined


def random_params(rng, r):
    p = np.zeros(4 + 2 * r)
    p[:4] = rng.choice([0.0, 1.0, 2.5, 10.0], size=4)
    p[4:4 + r] = rng.choice([0.0, 1.0, 3.0], size=r)
    p[4 + r:] = rng.choice([0.0, 1.0], size=r)
    return p


@pytest.mark.parametrize("seed", range(25))
def test_fit_score_and_place_match(compiled, seed):
    rng = np.random.default_rng(seed)
    n, r = int(rng.integers(1, 60)), int(rng.integers(1, 6))
    alloc, used, releasing, pipelined = random_nodes(rng, n, r)
    req = (rng.integers(0, 8, size=r) * 1000 * (rng.random(r) < 0.7)).astype(np.int64)
    mask = (rng.random(n) < 0.85).astype(np.uint8)
    static = rng.random(n) * 10
    params = random_params(rng, r)

    fits = [np.zeros(n, dtype=np.int8) for _ in range(2)]
    REF.fit_states(alloc, used, releasing, pipelined, req, mask, fits[0])
    compiled.fit_states(alloc, used, releasing, pipelined, req, mask, fits[1])
    assert np.array_equal(fits[0], fits[1])

    scores = [np.zeros(n) for _ in range(2)]
    REF.score_nodes(alloc, used, req, params, static, scores[0])
    compiled.score_nodes(alloc, used, req, params, static, scores[1])
    assert np.allclose(scores[0], scores[1], rtol=1e-12, atol=1e-9)

    k = int(rng.integers(1, 40))
    results = []
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        nodes, kinds = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int8)
        placed = kernels.place_batch(alloc, u, releasing, p, req, mask, static, params, k, nodes, kinds)
        results.append((placed, nodes[:placed].tolist(), kinds[:placed].tolist(), u, p))
    assert results[0][:3] == results[1][:3]
    assert np.array_equal(results[0][3], results[1][3]) and np.array_equal(results[0][4], results[1][4])


@pytest.mark.parametrize("seed", range(15))
def test_shares_match(compiled, seed):
    rng = np.random.default_rng(100 + seed)
    j, r = int(rng.integers(1, 30)), int(rng.integers(1, 5))
    allocated = rng.integers(0, 100, size=(j, r)).astype(np.int64)
    total = rng.choice([0.0, 50.0, 400.0], size=r)
    out = [np.zeros(j) for _ in range(2)]
    REF.dominant_shares(allocated, total, out[0])
    compiled.dominant_shares(allocated, total, out[1])
    assert np.allclose(out[0], out[1])

    q = int(rng.integers(1, 8))
    total = rng.integers(0, 1000, size=r).astype(np.float64)
    weights = rng.integers(1, 5, size=q).astype(np.float64)
    request = rng.integers(0, 600, size=(q, r)).astype(np.float64)
    cap = np.where(rng.random((q, r)) < 0.3, rng.integers(0, 500, size=(q, r)), 1e18).astype(np.float64)
    guarantee = np.where(rng.random((q, r)) < 0.2, rng.integers(0, 100, size=(q, r)), 0).astype(np.float64)
    fills = [np.zeros((q, r)) for _ in range(2)]
    rounds = [k.water_fill(total, weights, request, cap, guarantee, f) for k, f in zip((REF, compiled), fills)]
    assert rounds[0] == rounds[1]
    assert np.allclose(fills[0], fills[1])


def test_water_fill_shares_by_weight():
    out = np.zeros((2, 1))
    REF.water_fill(np.array([100.0]), np.array([3.0, 1.0]), np.array([[1000.0], [1000.0]]),
                   np.full((2, 1), 1e18), np.zeros((2, 1)), out)
    assert out[:, 0].tolist() == [75.0, 25.0]
    # A queue that asks less is met and its leftover goes to the other.
    REF.water_fill(np.array([100.0]), np.array([3.0, 1.0]), np.array([[10.0], [1000.0]]),
                   np.full((2, 1), 1e18), np.zeros((2, 1)), out)
    assert out[:, 0].tolist() == [10.0, 90.0]


def test_missing_build_names_the_fix(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def refuse(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "runtime.engine.kernels" and fromlist and "place" in fromlist:
            raise ImportError("no compiled module")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", refuse)
    with pytest.raises(KernelsNotBuilt, match="pip install -e ."):
        load(pure=False)
    assert "pip install -e ." in BUILD_HINT


@pytest.mark.parametrize("seed", range(10))
def test_placement_tree_matches_reference_after_refresh(compiled, seed):
    rng = np.random.default_rng(500 + seed)
    n, r = int(rng.integers(1, 50)), 3
    alloc, used, releasing, pipelined = random_nodes(rng, n, r)
    req = np.array([1000, 2000, 1], dtype=np.int64)
    mask = (rng.random(n) < 0.9).astype(np.uint8)
    static = rng.random(n)
    params = random_params(rng, r)
    changed = np.unique(rng.integers(0, n, size=3)).astype(np.int64)
    outcomes = []
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        tree = kernels.PlacementTree(alloc, u, releasing, p, req, mask, static, params)
        tree.build()
        first = tree.place(4)
        placed_first = (tree.out_nodes[:first].tolist(), tree.out_kinds[:first].tolist())
        # Another class frees room on some nodes; only those are re-keyed.
        u[changed] = 0
        tree.refresh(changed)
        second = tree.place(40)     # more than its output buffers held: they grow
        outcomes.append((first, placed_first, second, tree.out_nodes[:second].tolist(),
                         tree.out_kinds[:second].tolist(), u.tolist(), p.tolist()))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("seed", range(10))
def test_refresh_by_log_position_is_refresh_of_those_nodes(compiled, seed):
    """refresh_log(log, start, end) re-keys log[start:end] as refresh(log[start:end]) does, for
    a tree and for the NodeFits it reads (the log array read again after it was replaced)."""
    rng = np.random.default_rng(900 + seed)
    n, r = int(rng.integers(2, 40)), 3
    alloc, used, releasing, pipelined = random_nodes(rng, n, r)
    req = np.array([1000, 2000, 1], dtype=np.int64)
    mask = (rng.random(n) < 0.9).astype(np.uint8)
    static, params = rng.random(n), random_params(rng, r)
    logs = [rng.integers(0, n, size=int(rng.integers(4, 12))).astype(np.int64) for _ in range(2)]
    spans = [sorted(rng.integers(0, len(log), size=2).tolist()) for log in logs]
    for kernels in (REF, compiled):
        answers = []
        for by_log in (False, True):
            u, p = used.copy(), pipelined.copy()
            fits = kernels.NodeFits(alloc, u, releasing, p, req, params)
            tree = kernels.PlacementTree(alloc, u, releasing, p, req, mask, static, params, fits)
            tree.build()
            placed = [tree.place(2)]
            for log, (start, end) in zip(logs, spans):
                u[log[start:end]] = 0       # another class's placements, undone
                if by_log:
                    fits.refresh_log(log, start, end)
                    tree.refresh_log(log, start, end)
                else:
                    fits.refresh(log[start:end].copy())
                    tree.refresh(log[start:end].copy())
                placed.append(tree.place(3))
                placed.append(tree.out_nodes[:placed[-1]].tolist())
            answers.append((placed, u.tolist(), p.tolist()))
        assert answers[0] == answers[1]


@pytest.mark.parametrize("seed", range(5))
def test_same_objects_matches(compiled, seed):
    rng = np.random.default_rng(950 + seed)
    pods = [object() for _ in range(int(rng.integers(0, 30)))]
    other = [p if rng.random() < 0.7 else object() for p in pods] + [object()]
    want = [a is b for a, b in zip(pods, other)]
    for kernels in (REF, compiled):
        same = kernels.same_objects(pods, other)
        assert same.dtype == bool and same.tolist() == want
    with pytest.raises(ValueError):
        compiled.same_objects(other, pods)


def brute_force_placements(k, alloc, used, releasing, pipelined, req, mask, static, params):
    """An oracle for the placement tree: before each task every node's fit and score afresh (the
    fit and score kernels), its key score + 2e12 on an idle fit, + 1e12 on a future one (or
    where bit 1 of its mask says its room is held by leaving pods), none where it fails the mask;
    the first node of the highest key takes the task."""
    n = alloc.shape[0]
    out = []
    for _ in range(k):
        fits, scores = np.zeros(n, dtype=np.int8), np.zeros(n)
        REF.fit_states(alloc, used, releasing, pipelined, req, (mask & 1).astype(np.uint8), fits)
        REF.score_nodes(alloc, used, req, params, static, scores)
        idle = (fits == 2) & ((mask & 2) == 0)
        keys = np.where(idle, scores + 2e12, np.where(fits > 0, scores + 1e12, -np.inf))
        best = int(np.argmax(keys))
        if keys[best] == -np.inf:
            break
        (used if idle[best] else pipelined)[best] += req
        out.append((best, 2 if idle[best] else 1))
    return out

def random_tree_case(rng):
    """A placement tree's inputs: (n, alloc, used, releasing, pipelined, req, mask, static,
    params), the nodes drawn from a few kinds so that many keys tie (the lowest index must win)."""
    n, r = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    kinds = rng.integers(0, max(1, n // 4), size=n)
    alloc, used, releasing, pipelined = (a[kinds].copy() for a in random_nodes(rng, n, r))
    req = (rng.integers(0, 6, size=r) * 1000 * (rng.random(r) < 0.8)).astype(np.int64)
    mask = rng.choice([0, 1, 1, 1, 3], size=n).astype(np.uint8)
    static = rng.choice([0.0, 2.5], size=n)
    return n, alloc, used, releasing, pipelined, req, mask, static, random_params(rng, r)


@pytest.mark.parametrize("seed", range(15))
def test_placement_tree_matches_brute_force(compiled, seed):
    rng = np.random.default_rng(600 + seed)
    n, alloc, used, releasing, pipelined, req, mask, static, params = random_tree_case(rng)
    changed = np.unique(rng.integers(0, n, size=3)).astype(np.int64)
    expected_u, expected_p = used.copy(), pipelined.copy()
    expected = brute_force_placements(5, alloc, expected_u, releasing, expected_p, req, mask, static, params)
    expected_u[changed] = 0
    expected += brute_force_placements(30, alloc, expected_u, releasing, expected_p, req, mask, static, params)
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        tree = kernels.PlacementTree(alloc, u, releasing, p, req, mask, static, params)
        tree.build()
        first = tree.place(5)
        got = list(zip(tree.out_nodes[:first].tolist(), tree.out_kinds[:first].tolist()))
        u[changed] = 0
        tree.refresh(changed)
        second = tree.place(30)
        got += list(zip(tree.out_nodes[:second].tolist(), tree.out_kinds[:second].tolist()))
        assert got == expected, kernels.name
        assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p)


@pytest.mark.parametrize("room_limit", [None, 1])
@pytest.mark.parametrize("seed", range(15))
def test_trees_sharing_node_fits_match_brute_force(compiled, seed, room_limit):
    """Two classes of one request (different masks and static scores) reading their keys from
    one NodeFits, as the session shares them: single placements on a stale tree (a scan, no
    build), a second one (the tree built), runs, room freed elsewhere (the fits and both trees
    refreshed, each tree told of the other's placements) — every placement the oracle's. With a
    TreeRoom of one, each tree that builds takes the other's key arrays (the other goes stale)."""
    rng = np.random.default_rng(700 + seed)
    n, r = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    kinds = rng.integers(0, max(1, n // 4), size=n)
    alloc, used, releasing, pipelined = (a[kinds].copy() for a in random_nodes(rng, n, r))
    req = (rng.integers(0, 6, size=r) * 1000 * (rng.random(r) < 0.8)).astype(np.int64)
    masks = [rng.choice([0, 1, 1, 1, 3], size=n).astype(np.uint8) for _ in range(2)]
    statics = [rng.choice([0.0, 2.5], size=n) for _ in range(2)]
    params = random_params(rng, r)
    changed = np.unique(rng.integers(0, n, size=3)).astype(np.int64)
    steps = [(0, 1), (1, 1), (0, 1), (1, 3), (0, 2), (None, 0), (0, 30), (1, 30)]
    expected_u, expected_p = used.copy(), pipelined.copy()
    expected = []
    for c, k in steps:
        if c is None:
            expected_u[changed] = 0
        else:
            expected.append(brute_force_placements(k, alloc, expected_u, releasing, expected_p, req, masks[c],
                                                   statics[c], params))
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        fits = kernels.NodeFits(alloc, u, releasing, p, req, params)
        room = None if room_limit is None else kernels.TreeRoom(room_limit)
        trees = [kernels.PlacementTree(alloc, u, releasing, p, req, masks[c], statics[c], params, fits, room)
                 for c in range(2)]
        got = []
        for c, k in steps:
            if c is None:
                u[changed] = 0
                fits.refresh(changed)
                for tree in trees:
                    tree.refresh(changed)
                continue
            placed = trees[c].place(k)
            got.append(list(zip(trees[c].out_nodes[:placed].tolist(), trees[c].out_kinds[:placed].tolist())))
            trees[1 - c].refresh(trees[c].out_nodes[:placed].copy())   # the ledger's log, as the session passes it
        assert got == expected, kernels.name
        assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p)


@pytest.mark.parametrize("seed", range(20))
def test_place_masked_matches_brute_force(compiled, seed):
    """Classes placing by a shared tree of the static mask (PlacementTree.place_masked), their
    own codes differing from it on some nodes (failing, or held by leaving pods), each placement
    then excluding its node for its class (as hostname anti-affinity does): every placement the
    oracle's under the class's codes; past the budget nothing is placed (-1) and the shared tree
    is left as it was. Asked without placing (charge=False, Session.place_lazy's question), it
    lists the nodes it would place on and changes nothing."""
    rng = np.random.default_rng(900 + seed)
    n, alloc, used, releasing, pipelined, req, base, static, params = random_tree_case(rng)
    budget = int(rng.integers(0, 6))
    masks = []
    for _ in range(2):
        m = base.copy()
        differ = rng.random(n) < 0.3
        # Failing there, or passing only once leaving pods are gone (a key never above the base's).
        m[differ] = np.where(rng.random(n) < 0.5, 0, base | 2).astype(np.uint8)[differ]
        masks.append(m)
    steps = [0, 1, 0, 0, 1, 1, 0]
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        mine = [m.copy() for m in masks]
        expected_u, expected_p = used.copy(), pipelined.copy()
        fits = kernels.NodeFits(alloc, u, releasing, p, req, params)
        tree = kernels.PlacementTree(alloc, u, releasing, p, req, base, static, params, fits)
        views = [kernels.MaskView(m) for m in mine]
        for c in steps:
            want = brute_force_placements(1, alloc, expected_u.copy(), releasing, expected_p.copy(), req, mine[c],
                                          static, params)
            # Asked without placing (charge=False), it names the node it then places on.
            peeked = tree.place_masked(views[c], budget, 1, False)
            assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
            named = int(tree.out_nodes[0]) if peeked == 1 else None
            got = tree.place_masked(views[c], budget)
            assert got == peeked, kernels.name
            if got == 1:
                assert int(tree.out_nodes[0]) == named, kernels.name
            if got < 0:
                # Nothing placed, the tree as it was: a plain placement is the oracle's by the base mask.
                assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
                assert tree.place(0) == 0
                continue
            assert got == len(want), kernels.name
            if not want:
                continue
            node, kind = want[0]
            assert (int(tree.out_nodes[0]), int(tree.out_kinds[0])) == (node, kind), kernels.name
            (expected_u if kind == 2 else expected_p)[node] += req
            assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
            mine[c][node] = 0         # the class's own pod there now excludes the node for it
        # A run of three in one call, each placement's node then excluded for the class (a local
        # volume's only PV taken): the oracle's placements one by one, the node failed after each.
        want, oracle_mask = [], mine[0].copy()
        oracle_u, oracle_p = expected_u.copy(), expected_p.copy()
        for _ in range(3):
            one = brute_force_placements(1, alloc, oracle_u, releasing, oracle_p, req, oracle_mask, static, params)
            if not one:
                break
            want.append(one[0])
            oracle_mask[one[0][0]] = 0
        peeked = tree.place_masked(views[0], budget, 3, False)
        listed = peeked if peeked >= 0 else -1 - peeked
        assert tree.out_nodes[:listed].tolist() == [node for node, _ in want[:listed]], kernels.name
        assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name   # none placed
        got = tree.place_masked(views[0], budget, 3)
        assert got == peeked, kernels.name
        placed = got if got >= 0 else -1 - got
        assert list(zip(tree.out_nodes[:placed].tolist(), tree.out_kinds[:placed].tolist())) == want[:placed], \
            kernels.name
        assert got < 0 or placed == len(want), kernels.name
        for node, kind in want[:placed]:
            (expected_u if kind == 2 else expected_p)[node] += req
        assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
        # The shared tree still answers for the static mask: its next placement is the oracle's.
        assert [(int(a), int(b)) for a, b in zip(tree.out_nodes[:tree.place(1)], tree.out_kinds[:1])] == \
            brute_force_placements(1, alloc, expected_u, releasing, expected_p, req, base, static, params), kernels.name


def test_reference_uses_the_snapshot_unlimited():
    assert interpreted("share").UNLIMITED == UNLIMITED


@pytest.mark.parametrize("seed", range(15))
def test_row_helpers_match(compiled, seed):
    rng = np.random.default_rng(700 + seed)
    q, r = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    allocated = rng.integers(0, 50, size=(q, r)).astype(np.int64)
    limit = np.where(rng.random((q, r)) < 0.2, UNLIMITED, rng.integers(0, 60, size=(q, r))).astype(np.int64)
    total = rng.choice([0.0, 30.0, 400.0], size=r)
    columns = np.flatnonzero(rng.random(r) < 0.7).astype(np.int64)
    request = (rng.integers(0, 9, size=r) * (rng.random(r) < 0.7)).astype(np.int64)
    count = int(rng.integers(0, 12))
    # Queue q's chain: itself and, for odd q, queue 0 (as a parent).
    chains = [[row] + ([0] if row % 2 else []) for row in range(q)]
    chain_ptr = np.concatenate([[0], np.cumsum([len(c) for c in chains])]).astype(np.int64)
    flat = np.array([c for chain in chains for c in chain], dtype=np.int64)
    # Each queue names some columns for NamedShare (none for some), amounts 0 at some of them.
    named = [np.flatnonzero(rng.random(r) < 0.6).tolist() for _ in range(q)]
    col_ptr = np.concatenate([[0], np.cumsum([len(c) for c in named])]).astype(np.int64)
    cols = np.array([c for row in named for c in row], dtype=np.int64)
    amount = (rng.integers(0, 40, size=(q, r)) * (rng.random((q, r)) < 0.8)).astype(np.int64)
    helpers = [(k.RowShare(allocated, total), k.QueueShare(allocated, limit, columns),
                k.AtLimit(allocated, limit, columns, chain_ptr, flat),
                k.CountWithin(limit, allocated, columns, chain_ptr, flat), k.NamedShare(allocated, amount, col_ptr, cols))
               for k in (REF, compiled)]
    for row in range(q):
        answers = [(rs.of(row), qs.of(row), al.row(row), al.chain(row), cw.chain(row, request, count), ns.of(row))
                   for rs, qs, al, cw, ns in helpers]
        assert answers[0] == answers[1], row
        # Given the tasks' requests, a task (an int) is counted as its row is.
        tasks = np.stack([np.zeros(len(request), dtype=np.int64), request, request * 2])
        for k in (REF, compiled):
            by_task = k.CountWithin(limit, allocated, columns, chain_ptr, flat, tasks)
            assert by_task.chain(row, 1, count) == answers[0][4]
            assert by_task.chain(row, 2, count) == by_task.chain(row, request * 2, count)
        assert answers[0][3] == any(answers[0][2] if c == row else REF.AtLimit(allocated, limit, columns, chain_ptr,
                                                                                flat).row(c) for c in chains[row])
        # The chain: each queue's count bounds the next one's, the last to lower it answers.
        allowed, where, column, asked = count, -1, -1, 0
        for c in chains[row]:
            n, binding = allowed, -1
            for r in columns.tolist():
                if request[r] == 0 or limit[c, r] >= UNLIMITED:
                    continue
                room = int(limit[c, r] - allocated[c, r])
                fit = max(room // int(request[r]), 0) if room >= 0 else 0
                if fit < n:
                    n, binding = fit, r
            if n < allowed:
                allowed, where, column, asked = n, c, binding, allowed
        assert answers[0][4] == (allowed, where, column, asked), row
        # NamedShare: the most used named column (used with nothing named counts 1), 1.0 naming none.
        parts = [allocated[row, c] / amount[row, c] if amount[row, c] > 0 else float(allocated[row, c] > 0)
                 for c in named[row]]
        assert answers[0][5] == (max(parts) if parts else 1.0), row


def ledger_state(rng, t_n=24, j_n=5, n=6, r=3):
    """Arrays of a small session: jobs of consecutive tasks, queues 1..3 under root, queue 3
    a child of queue 1 (chains 1:[1], 2:[2], 3:[3, 1])."""
    sizes = rng.multinomial(t_n - j_n, [1 / j_n] * j_n) + 1
    job_first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    task_job = np.repeat(np.arange(j_n), sizes).astype(np.int64)
    status = rng.choice([0, 0, 0, 3, 5], size=t_n).astype(np.int8)
    task_node = np.where(status == 3, rng.integers(0, n, size=t_n), -1).astype(np.int64)
    return dict(
        request=rng.integers(0, 5, size=(t_n, r)).astype(np.int64) * 100,
        task_job=task_job, task_class=rng.integers(0, 3, size=t_n).astype(np.int64),
        zero=(rng.random(t_n) < 0.2).astype(np.uint8), status=status, task_node=task_node,
        used=rng.integers(0, 900, size=(n, r)).astype(np.int64), pipelined=np.zeros((n, r), dtype=np.int64),
        releasing=np.zeros((n, r), dtype=np.int64), job_first=job_first,
        job_allocated=np.zeros((j_n, r), dtype=np.int64), job_ready=np.zeros(j_n, dtype=np.int64),
        job_pipelined=np.zeros(j_n, dtype=np.int64),
        job_pending=np.bincount(task_job[status == 0], minlength=j_n).astype(np.int64),
        job_queue=rng.choice([-1, 1, 2, 3], size=j_n).astype(np.int64),
        queue_allocated=np.zeros((4, r), dtype=np.int64),
        chain_ptr=np.array([0, 0, 1, 2, 4], dtype=np.int64), chains=np.array([1, 2, 3, 1], dtype=np.int64))


@pytest.mark.parametrize("seed", range(20))
def test_ledger_matches_reference(compiled, seed):
    rng = np.random.default_rng(900 + seed)
    base = ledger_state(rng)
    held = (rng.random(3) < 0.8).astype(np.uint8)
    script = []       # the same random operations for both ledgers
    for _ in range(30):
        script.append((int(rng.integers(0, 7)), int(rng.integers(0, 1 << 30))))
    results = []
    for kernels in (REF, compiled):
        arrays = {k: v.copy() for k, v in base.items()}
        ledger = kernels.Ledger(*arrays.values())
        ledger.set_held(held)
        placed: list[list[int]] = []
        evicted: list[tuple[int, int]] = []
        runs_seen = []
        for op, salt in script:
            pick = np.random.default_rng(salt)
            status = arrays["status"]
            if op in (0, 1):
                pending = np.flatnonzero(status == 0)
                if not len(pending):
                    continue
                tasks = pick.choice(pending, size=min(3, len(pending)), replace=False).tolist()
                nodes = pick.integers(0, 6, size=len(tasks)).astype(np.int64)
                if op == 0:
                    kinds = pick.choice([1, 2], size=len(tasks)).astype(np.int8)
                    ledger.placed(tasks, nodes, kinds, len(tasks))
                else:
                    tasks = tasks[:1]
                    ledger.occupy(tasks[0], int(nodes[0]), int(pick.choice([1, 2])))
                placed.append(tasks)
            elif op == 2 and placed:
                ledger.unplace(placed.pop())
            elif op == 3 and placed:
                ledger.pipeline(placed[-1])
            elif op == 4:
                running = np.flatnonzero(status == 3)
                if len(running):
                    t = int(pick.choice(running))
                    evicted.append((t, ledger.evict(t)))
            elif op == 5 and evicted:
                ledger.unevict(*evicted.pop())
            elif op == 6:
                pending = np.flatnonzero(status == 0)
                if len(pending):
                    t = int(pick.choice(pending))
                    ledger.placed_one(t, int(pick.integers(0, 6)), int(pick.choice([1, 2])))
                    placed.append([t])
            runs_seen.append([ledger.pending_runs(j, bool(salt & 1)) for j in range(len(base["job_first"]) - 1)])
            # one_pending: the one task of pending_runs' [[t]] (requests only), else -1.
            for j in range(len(base["job_first"]) - 1):
                runs = ledger.pending_runs(j, True)
                assert ledger.one_pending(j) == (runs[0][0] if len(runs) == 1 and len(runs[0]) == 1 else -1)
        results.append(({k: v.tolist() for k, v in arrays.items()}, list(ledger.log_since(0)), ledger.log_n,
                        runs_seen))
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", range(10))
def test_placed_one_is_placed_of_one(compiled, seed):
    """Ledger.placed_one(t, node, kind) leaves the ledger as placed([t], [node], [kind], 1) does."""
    rng = np.random.default_rng(950 + seed)
    base = ledger_state(rng)
    pending = np.flatnonzero(base["status"] == 0)
    if not len(pending):
        pytest.skip("no pending task drawn")
    t, node, kind = int(rng.choice(pending)), int(rng.integers(0, 6)), int(rng.choice([1, 2]))
    for kernels in (REF, compiled):
        after = []
        for one in (True, False):
            arrays = {k: v.copy() for k, v in base.items()}
            ledger = kernels.Ledger(*arrays.values())
            if one:
                ledger.placed_one(t, node, kind)
            else:
                ledger.placed([t], np.array([node], dtype=np.int64), np.array([kind], dtype=np.int8), 1)
            after.append(({k: v.tolist() for k, v in arrays.items()}, list(ledger.log_since(0))))
        assert after[0] == after[1]
        # An idle fit is allocated, a future fit pipelined.
        assert after[0][0]["status"][t] == (codes.ALLOCATED if kind == codes.IDLE else codes.PIPELINED)


# --- the snapshot's passes over the pods, the cycle's decisions --------------------------------

def random_pods(rng, n_pods=60):
    """Pods of two schedulers in every phase, on known and unknown nodes, in gangs and alone,
    with ties in priority and creation (uids decide), some with node constraints."""
    from runtime.cluster.dra import PodResourceClaim
    from runtime.cluster.model import Pod, Toleration
    from runtime.cluster.numa import NUMA_POLICY_ANNOTATION
    from runtime.cluster.selectors import MatchExpression
    pods = {}
    for i in range(n_pods):
        group = f"g{rng.integers(0, 6)}" if rng.random() < 0.7 else None
        on = rng.random()
        node = None if on < 0.5 else ("n1", "n2", "gone")[int(rng.integers(0, 3))]
        requests = [{"cpu": 1000, "memory": 2**30}, {"memory": 2**30, "cpu": 1000}, {"cpu": 500}, {},
                    {"cpu": 1000, "example.com/gpu": 1}][int(rng.integers(0, 5))]
        pod = Pod(f"ns{rng.integers(0, 2)}", f"p{i}", dict(requests), uid=f"u{rng.integers(0, 40):02d}",
                  node_name=node, phase=("Pending", "Running", "Succeeded", "Failed")[int(rng.integers(0, 4))]
                  if node else ("Pending", "Succeeded", "Failed")[int(rng.choice(3, p=[0.8, 0.1, 0.1]))],
                  scheduler_name="volcano" if rng.random() < 0.85 else "other", group=group,
                  priority=None if rng.random() < 0.4 else int(rng.integers(0, 3)),
                  priority_class="high" if rng.random() < 0.2 else None, creation=float(rng.integers(0, 4)),
                  releasing=bool(node and rng.random() < 0.2),
                  node_selector={"zone": "a"} if rng.random() < 0.15 else {},
                  required_terms=((MatchExpression("disk", "Exists"),),) if rng.random() < 0.1 else (),
                  tolerations=(Toleration("gpu", "Exists"),) if rng.random() < 0.1 else ())
        if rng.random() < 0.1:       # what the snapshot's DRA and NUMA passes read (PodScan.asking_tasks)
            pod.annotations[NUMA_POLICY_ANNOTATION] = "single-numa-node"
        elif rng.random() < 0.1:
            pod.resource_claims = (PodResourceClaim("gpu", claim=f"c{i}"),)
        pods[pod.key] = pod
    order = rng.permutation(len(pods))
    keys = list(pods)
    return {keys[i]: pods[keys[i]] for i in order}


def record_fields(record) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in vars(record).items()}


@pytest.mark.parametrize("seed", range(25))
def test_snapshot_passes_match(compiled, seed):
    rng = np.random.default_rng(1300 + seed)
    pods = random_pods(rng)
    node_pos = {"n1": 0, "n2": 1}
    outcomes = []
    for kernels in (REF, compiled):
        scan = kernels.scan_pods(pods, "volcano", {"high": 1000}, 5, node_pos)
        tasks = kernels.group_tasks(scan)
        status, plain = scan.status[tasks.order], scan.plain[tasks.order]
        shapes = np.arange(len(scan.shapes) * 3, dtype=np.int64).reshape(-1, 3)
        row_of_shape = np.array([min(s, 2) for s in range(len(scan.shapes))], dtype=np.int64)
        columns = kernels.task_columns(tasks.pods, status, plain, scan.shape[tasks.order], row_of_shape)
        used, releasing = np.zeros((2, 3), dtype=np.int64), np.zeros((2, 3), dtype=np.int64)
        foreign = kernels.node_usage(scan.placed_node, scan.placed_shape, scan.placed_gone, scan.placed_mine,
                                     shapes, used, releasing)
        outcomes.append((record_fields(scan), record_fields(tasks), record_fields(columns), foreign,
                         used.tolist(), releasing.tolist()))
    assert outcomes[0] == outcomes[1]
    scan, tasks = outcomes[0][0], outcomes[0][1]
    # What the passes promise, beyond agreeing: each job's tasks contiguous, in task order.
    by_key = {p.key: p for p in pods.values()}
    for j, name in enumerate(tasks["job_names"]):
        members = [by_key[k] for k in tasks["keys"][tasks["job_first"][j]:tasks["job_first"][j + 1]]]
        assert {f"{p.namespace}/{p.group or p.name}" for p in members} == {name}
        prio = [p.priority if p.priority is not None else (1000 if p.priority_class else 5) for p in members]
        sort_keys = [(-pr, p.creation, p.uid) for pr, p in zip(prio, members)]
        assert sort_keys == sorted(sort_keys)
    assert tasks["job_names"] == sorted(tasks["job_names"])
    # Each pod's shape is its request map, items in order (none for a pod still bound to a node
    # that is gone: it holds room nowhere and counts in no queue); shapes are distinct.
    assert len({tuple(m.items()) for m in scan["shapes"]}) == len(scan["shapes"])
    for pod, sid in zip(scan["ours"], scan["shape"]):
        orphan = pod.node_name and pod.node_name not in node_pos and not pod.terminal
        assert tuple(scan["shapes"][sid].items()) == (() if orphan else tuple(pod.requests.items()))


def job_fields(job) -> dict:
    from dataclasses import fields
    out = {f.name: getattr(job, f.name) for f in fields(job)}
    out["tasks"] = out["tasks"].tolist()
    out["min_resources"] = None if out["min_resources"] is None else out["min_resources"].tolist()
    return out


def job_head_queue(pods, job) -> str:
    """The queue a lone pod's annotation names ("" for a job of a missing PodGroup: its key is the group's)."""
    from runtime.cluster.model import QUEUE_ANNOTATION
    pod = pods.get(job["key"])
    return pod.annotations.get(QUEUE_ANNOTATION, "") if pod is not None else ""


@pytest.mark.parametrize("seed", range(25))
def test_build_jobs_matches(compiled, seed):
    """Jobs from grouped tasks: PodGroups (some missing, some in a parent or unknown queue, with
    and without a priority class and minResources) and implicit groups of lone pods."""
    from runtime.cluster.model import QUEUE_ANNOTATION, PodGroup
    rng = np.random.default_rng(1400 + seed)
    pods = random_pods(rng)
    for key, pod in pods.items():  # lone pods naming their queue, as Volcano's PodGroup controller reads it
        if pod.group is None and rng.random() < 0.5:
            queue = ("team", "parent", "nowhere", "")[int(rng.integers(0, 4))]
            pods[key] = dataclasses.replace(pod, annotations={QUEUE_ANNOTATION: queue})
    podgroups = {}
    for g in range(6):
        if rng.random() < 0.2:
            continue                                  # "PodGroup ... does not exist"
        for ns in ("ns0", "ns1"):
            group = PodGroup(ns, f"g{g}", min_member=int(rng.integers(1, 4)),
                             min_resources={"cpu": 2000, "unknown.io/x": 1} if rng.random() < 0.4 else None,
                             min_task_member={"worker": 2} if rng.random() < 0.3 else {},
                             queue=("default", "team", "parent", "nowhere")[int(rng.integers(0, 4))],
                             priority_class=("high", "absent", None)[int(rng.integers(0, 3))],
                             phase=("Pending", "Inqueue", "Running")[int(rng.integers(0, 3))],
                             uid=f"pg-{ns}-{g}", creation=float(rng.integers(0, 4)))
            podgroups[group.key] = group
    queue_index = {"root": 0, "default": 1, "parent": 2, "team": 3}
    leaf = [False, True, False, True]
    index = {"cpu": 0, "memory": 1, "pods": 2}
    outcomes = []
    for kernels in (REF, compiled):
        scan = kernels.scan_pods(pods, "volcano", {"high": 1000}, 5, {"n1": 0, "n2": 1})
        tasks = kernels.group_tasks(scan)
        jobs = kernels.build_jobs(podgroups, {"high": 1000}, 5, tasks.job_names, tasks.pods, tasks.job_first,
                                  scan.priority[tasks.order], queue_index, leaf, index, 3, "default")
        outcomes.append([job_fields(job) for job in jobs])
        # The jobs' columns (job_columns) are their fields, read one by one here.
        cols = kernels.job_columns(jobs)
        assert cols.queue.tolist() == [job.queue for job in jobs]
        assert cols.min_member.tolist() == [job.min_member for job in jobs]
        assert cols.priority.tolist() == [job.priority for job in jobs]
        assert cols.creation.tolist() == [float(job.creation) for job in jobs]
        assert cols.problem.tolist() == [bool(job.problem) for job in jobs]
        assert cols.grouped.tolist() == [job.podgroup is not None for job in jobs]
        assert cols.sized.tolist() == [job.min_resources is not None for job in jobs]
        assert cols.roles.tolist() == [bool(job.min_task_member) for job in jobs]
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0]) == len(tasks.job_names)
    problems = {job["problem"] for job in outcomes[0]}
    for job in outcomes[0]:
        if job["podgroup"] is not None and job["podgroup"].priority_class == "absent":
            assert job["priority"] == 5               # an unknown class: the default priority
        if job["implicit"]:
            named = job_head_queue(pods, job)
            assert job["queue_name"] == (named or "default") and job["min_member"] == 1
    assert all(p is None or "does not exist" in p or "not a leaf" in p for p in problems)


@pytest.mark.parametrize("seed", range(15))
def test_decision_passes_match(compiled, seed):
    from runtime.engine.snapshot import JobInfo
    rng = np.random.default_rng(1500 + seed)
    t_n, j_n = 40, 8
    before = rng.choice([0, 0, 0, 3, 5], size=t_n).astype(np.int8)
    status = np.where(before == 0, rng.choice([0, 1, 2], size=t_n), before).astype(np.int8)
    task_node = rng.integers(0, 3, size=t_n).astype(np.int64)
    keys = [f"ns/p{t}" for t in range(t_n)]
    devices = {int(t): {"nvidia.com/gpu": (int(t) % 2,)} for t in rng.choice(t_n, size=4)}
    task_job = np.sort(rng.integers(0, j_n, size=t_n)).astype(np.int64)
    jobs = [JobInfo(j, f"ns/g{j}", None, bool(rng.random() < 0.2), 0, "q", int(rng.integers(1, 4)), {}, None, 0,
                    0.0, "", "", np.flatnonzero(task_job == j)) for j in range(j_n)]
    phases = [("Pending", "Inqueue", "Running")[int(rng.integers(0, 3))] for _ in range(j_n)]
    ready = np.array([int(((status == 1) | (status == 3))[task_job == j].sum()) for j in range(j_n)], dtype=np.int64)
    outcomes = []
    for kernels in (REF, compiled):
        bindings, pipelined = kernels.placements(before, status, task_node, keys, ["a", "b", "c"], devices)
        statuses = kernels.podgroup_statuses(jobs, phases, ready, status, task_job,
                                             lambda j, pending, size: (f"{j}: {pending}/{size}",))
        outcomes.append(([(b.pod, b.node, b.devices) for b in bindings], pipelined,
                         [(s.name, s.phase, s.conditions) for s in statuses]))
    assert outcomes[0] == outcomes[1]
    bound = {b[0] for b in outcomes[0][0]}
    assert bound == {keys[t] for t in range(t_n) if before[t] == 0 and status[t] == 1}
    assert set(outcomes[0][1]) == {keys[t] for t in range(t_n) if before[t] == 0 and status[t] == 2}


@pytest.mark.parametrize("seed", range(20))
def test_place_among_matches_brute_force(compiled, seed):
    """A class whose codes fail every node but a few (PlacementTree.place_among, a scan of those
    by the shared tree or the class's own): each placement the oracle's under the class's codes
    (failing elsewhere), its node charged; the tree, re-keyed there, still places as the oracle
    by its own mask; no passing node left, nothing placed."""
    rng = np.random.default_rng(1100 + seed)
    n, alloc, used, releasing, pipelined, req, base, static, params = random_tree_case(rng)
    nodes = rng.permutation(np.flatnonzero(rng.random(n) < 0.4)).astype(np.int64)     # in any order
    own = np.zeros(n, dtype=np.uint8)        # the class's codes: failing outside `nodes`
    own[nodes] = np.where(rng.random(len(nodes)) < 0.3, 0, base[nodes] | (rng.random(len(nodes)) < 0.3) * 2)
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        expected_u, expected_p = used.copy(), pipelined.copy()
        fits = kernels.NodeFits(alloc, u, releasing, p, req, params)
        tree = kernels.PlacementTree(alloc, u, releasing, p, req, base, static, params, fits)
        for step in range(4):
            if step == 2:       # built (asked without placing): the placements after re-key it
                tree.place_masked(kernels.MaskView(base), 0, 1, False)
            want = brute_force_placements(1, alloc, expected_u.copy(), releasing, expected_p.copy(), req, own,
                                          static, params)
            got = tree.place_among(nodes, own[nodes])
            assert got == len(want), kernels.name
            if want:
                node, kind = want[0]
                assert (int(tree.out_nodes[0]), int(tree.out_kinds[0])) == (node, kind), kernels.name
                (expected_u if kind == 2 else expected_p)[node] += req
            assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
        want = brute_force_placements(1, alloc, expected_u.copy(), releasing, expected_p.copy(), req, base,
                                      static, params)
        assert tree.place(1) == len(want), kernels.name
        if want:
            assert (int(tree.out_nodes[0]), int(tree.out_kinds[0])) == want[0], kernels.name
        assert tree.place_among(nodes[:0], own[:0]) == 0, kernels.name


# Seeds from 225 on: cases where a node under its domain's top by the static key is the class's
# best (its sums round apart): they fail with no slack (KEY_SLACK 0).
@pytest.mark.parametrize("seed", [*range(20), 225, 492, 531, 862, 1585])
def test_domain_tree_matches_brute_force(compiled, seed):
    """Classes of one request, mask and static scores whose stateful score is one per topology
    domain (DomainTree.place_scored, by each domain's top nodes): each placement the oracle's
    under the static scores plus the node's domain score (summed as the session sums them; the
    last entry for nodes lacking the key), in turn with room freed elsewhere (the fits and the
    tree refreshed), a shared tree's placements (told as the ledger's log) and a rebuild. Scores
    with fractions, so that sums round apart where the static keys tie, and verdicts (0 or -inf
    per domain, read off each domain's top)."""
    rng = np.random.default_rng(1300 + seed)
    n, alloc, used, releasing, pipelined, req, mask, _, params = random_tree_case(rng)
    static = rng.choice([0.0, 2.5, 0.1, 1 / 3, 71.3], size=n)
    domains = int(rng.integers(1, 5))
    domain_of = rng.integers(-1, domains, size=n).astype(np.int64)
    scores = [rng.choice([0.0, 50.0, 100 / 3, 99.99, 12.345, 1e-13, -np.inf], size=domains + 1) for _ in range(2)]
    # A hard spread's verdicts: 0 where a domain passes (each domain's top is its best), -inf where it fails.
    scores.append(rng.choice([0.0, 0.0, -np.inf], size=domains + 1))
    changed = np.unique(rng.integers(0, n, size=3)).astype(np.int64)
    steps = [0, 2, 1, 0, "free", 2, 1, "shared", 2, 0, "build", 1, 2, 0, 0, 1, 2]
    for kernels in (REF, compiled):
        u, p = used.copy(), pipelined.copy()
        expected_u, expected_p = used.copy(), pipelined.copy()
        fits = kernels.NodeFits(alloc, u, releasing, p, req, params)
        tree = kernels.DomainTree(u, p, mask, static, fits, domain_of, domains)
        shared = kernels.PlacementTree(alloc, u, releasing, p, req, mask, static, params, fits)
        for step in steps:
            if step == "free":
                u[changed] = expected_u[changed] = 0
                fits.refresh(changed)
                tree.refresh(changed)
                continue
            if step == "build":
                tree.build()
                continue
            own = static if step == "shared" else static + scores[step][domain_of]
            want = brute_force_placements(1, alloc, expected_u, releasing, expected_p, req, mask, own, params)
            if step == "shared":
                shared.build()
                got = shared.place(1)
                tree.refresh(shared.out_nodes[:got].copy())
                assert got == len(want), kernels.name
                continue
            got = tree.place_scored(scores[step])
            assert got == len(want), kernels.name
            if want:
                assert (int(tree.out_nodes[0]), int(tree.out_kinds[0])) == want[0], kernels.name
            assert np.array_equal(u, expected_u) and np.array_equal(p, expected_p), kernels.name
