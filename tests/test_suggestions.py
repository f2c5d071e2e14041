""""Did you mean" costs a bounded number of comparisons (policydsl/diagnostics.py Suggester):
per lookup, whatever the number of candidates, and per compile, whatever the number of
undefined names (compiler/lower.py), while small sets still get difflib's answer."""

from __future__ import annotations

import difflib
import random

from compiler.pipeline import compile_text
from policydsl.diagnostics import MAX_COMPARED, SUGGESTION_BUDGET, Suggester, closest

HEAD = 'policy "t" version 1\nactions [enqueue, allocate]\n'


def test_a_compile_with_thousands_of_undefined_constants_compares_a_bounded_number(compared):
    text = HEAD + "".join(f"const LIMIT_{i} = {i + 1}\n" for i in range(1000)) + "".join(
        f"queue q{i} {{ weight = LIMT_{i} }}\n" for i in range(3000))
    result = compile_text(text, "t.policy")
    assert len(compared) <= SUGGESTION_BUDGET       # 3,000 x 1,000 before
    assert len(result.errors) == 3000 and all(d.code == "PD107" for d in result.errors)
    assert [d.hint for d in result.errors[:10]] == [f"did you mean `LIMIT_{i}`?" for i in range(10)]
    assert result.errors[-1].hint == "define it with `const`, or quote it to make a string"


def test_one_lookup_compares_a_bounded_number_of_candidates(compared):
    names = [f"pod-{i}" for i in range(50_000)]
    assert closest("pod-4x", names) is not None and len(compared) <= MAX_COMPARED
    compared.clear()
    assert closest("x" * 100_000, names) is None and not compared     # no typo that long
    suggester = Suggester(names)
    suggester.closest("pod-7x")
    compared.clear()
    suggester.closest("pod-7x")
    assert not compared                                                 # asked again: from memory


def test_small_sets_get_difflibs_answer():
    rng = random.Random(7)
    for _ in range(2000):
        candidates = {"".join(rng.choice("abcde") for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(0, 40))}
        word = "".join(rng.choice("abcdeAB") for _ in range(rng.randint(0, 8)))
        expected = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
        assert closest(word, list(candidates)) == (expected[0] if expected else
                                                   {c.lower(): c for c in candidates}.get(word.lower()))
