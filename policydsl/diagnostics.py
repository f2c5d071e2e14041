"""Diagnostics: every problem a user sees, with a stable code, a severity and a location.

The code registry is the one list of diagnostic codes. The language registers its own
(syntax, input) here; the compiler registers its lint rules into the same registry, so
`policydsl lint --explain CODE`, the docs and SARIF output all read one table.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field

from policydsl.limits import MAX_NESTING


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}: use info, warning or error") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file. Lines and columns are 1-based; end is exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, path: str, line: int, column: int) -> "Span":
        return cls(path, line, column, line, column + 1)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class CodeInfo:
    """What a code means. `why`, `bad` and `good` document lint rules (docs/lint-rules.md)."""

    code: str
    name: str
    severity: Severity
    summary: str
    why: str = ""
    fix: str = ""
    bad: str = ""
    good: str = ""


CODES: dict[str, CodeInfo] = {}


def register_code(info: CodeInfo) -> CodeInfo:
    if info.code in CODES and CODES[info.code] != info:
        raise ValueError(f"diagnostic code {info.code} registered twice")
    CODES[info.code] = info
    return info


# Codes owned by the language: reading and parsing a file.
IO_ERROR = register_code(CodeInfo("PD001", "io-error", Severity.ERROR, "the file cannot be read"))
BAD_ENCODING = register_code(CodeInfo("PD002", "bad-encoding", Severity.ERROR, "the file is not valid UTF-8"))
EMPTY_FILE = register_code(CodeInfo("PD003", "empty-file", Severity.ERROR, "the file holds no policy"))
TOO_LARGE = register_code(CodeInfo(
    "PD004", "file-too-large", Severity.ERROR, "a policy (its files together) larger than the tool reads",
    why="Every file of a policy is read whole and kept, with its syntax tree, for as long as the policy "
        "runs (the scheduler reloads it on every edit): an unbounded file, or a device such as /dev/zero "
        "given by mistake, would take the process's memory.",
    fix="The limit (the message gives it) holds for a policy's files together, so `include` does not get "
        "around it: keep generated per-team queues out of the policy, or make fewer and larger queues.",
))
TOO_DEEP = register_code(CodeInfo(
    "PD005", "nesting-too-deep", Severity.ERROR, "brackets and braces nested too deep",
    why="Lists, maps and queues nest, and every stage that reads the policy walks the nesting; past the "
        "limit a policy could exhaust the stack of whichever stage reads it first.",
    fix="Flatten the value or the queue tree to at most the nesting the message gives.",
    bad='policy "example" version 1\nactions [allocate]\nconst DEEP = '
        + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "  # expect: PD005\n",
    good='policy "example" version 1\nactions [allocate]\nconst FLAT = [[1, 2], [3, 4]]\n',
))
SYNTAX_ERROR = register_code(CodeInfo("PD010", "syntax-error", Severity.ERROR, "the text does not follow the grammar"))
BAD_LITERAL = register_code(CodeInfo("PD011", "bad-literal", Severity.ERROR, "a number, quantity or string is malformed"))
UNSUPPORTED_VERSION = register_code(
    CodeInfo("PD012", "unsupported-version", Severity.ERROR, "the policy declares a language version this tool does not know")
)
INCLUDE_ERROR = register_code(
    CodeInfo("PD013", "include-error", Severity.ERROR,
             "an included file is missing, unreadable, outside the policy's folder, included in a cycle or too many includes deep")
)
BAD_SUPPRESSION = register_code(
    CodeInfo("PD014", "bad-suppression", Severity.WARNING, "a suppression comment names no known code")
)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span | None
    hint: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        info = CODES.get(self.code)
        return info.name if info else self.code

    def sort_key(self) -> tuple:
        if self.span is None:
            return ("", 0, 0, self.code)
        return (self.span.path, self.span.line, self.span.column, self.code)


def make(info: CodeInfo, message: str, span: Span | None, hint: str | None = None,
         severity: Severity | None = None) -> Diagnostic:
    return Diagnostic(info.code, severity or info.severity, message, span, hint)


class SourceCache:
    """Source text by path, so a diagnostic can show its line. Filled by the loader."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def add(self, path: str, text: str) -> None:
        # Only "\n" ends a line, as in the parser's line count; str.splitlines() would also
        # split on form feeds and U+2028 and quote the wrong line.
        self._lines[path] = [line.rstrip("\r") for line in text.split("\n")]

    def line(self, path: str, number: int) -> str | None:
        lines = self._lines.get(path)
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1]


def render(diag: Diagnostic, sources: SourceCache | None = None) -> str:
    """Human form: `file:line:col: error[PD101] message`, the line, a caret underline, a hint."""
    location = str(diag.span) if diag.span else "<input>"
    out = [f"{location}: {diag.severity}[{diag.code}] {diag.message}"]
    if diag.span and sources is not None:
        text = sources.line(diag.span.path, diag.span.line)
        if text is not None:
            width = diag.span.end_column - diag.span.column if diag.span.end_line == diag.span.line else len(text) - diag.span.column + 1
            width = max(1, width)
            gutter = f"{diag.span.line:>4} | "
            out.append(gutter + text)
            out.append(" " * (len(gutter) - 2) + "| " + " " * (diag.span.column - 1) + "^" * width)
    for note in diag.notes:
        out.append(f"  note: {note}")
    if diag.hint:
        out.append(f"  hint: {diag.hint}")
    return "\n".join(out)


MAX_COMPARED = 64               # candidates one "did you mean" lookup compares at most
SUGGESTION_BUDGET = 2048        # comparisons one Suggester makes over all its lookups (one compile)
MAX_SUGGESTED_LENGTH = 128      # a longer word is no typo: no suggestion (a comparison is O(len²))
SUGGESTION_CUTOFF = 0.6         # difflib.get_close_matches' default


class ComparisonBudget:
    """Comparisons that Suggesters sharing it make together: one compile's "did you mean"s."""

    def __init__(self, comparisons: int = SUGGESTION_BUDGET):
        self.left = comparisons


class Suggester:
    """"Did you mean" over a set of candidates, at a cost bounded whatever the set's size.

    The candidates are indexed once by length and first character. A lookup compares only
    candidates whose length can reach the cutoff (|len difference| small enough for difflib's
    ratio), nearest length first and those sharing the word's first character before the
    others, and at most MAX_COMPARED of them. Over its life it compares at most what `budget`
    allows (its own SUGGESTION_BUDGET, or one shared by a compile's Suggesters); after that it
    suggests nothing new (`exhausted`). It answers a word again from memory. With at most MAX_COMPARED candidates in reach, the answer is difflib's
    get_close_matches(word, candidates, n=1): the best ratio, ties to the greater string."""

    def __init__(self, candidates, *, cutoff: float = SUGGESTION_CUTOFF, budget: ComparisonBudget | None = None):
        self.cutoff = cutoff
        self.budget = budget if budget is not None else ComparisonBudget()
        self.exhausted = False
        self._by_length: dict[int, dict[str, list[str]]] = {}
        self._lowered: dict[str, str] = {}
        self._answers: dict[str, str | None] = {}
        for candidate in candidates:
            self._by_length.setdefault(len(candidate), {}).setdefault(candidate[:1], []).append(candidate)
            self._lowered[candidate.lower()] = candidate
        self._lengths = sorted(self._by_length)

    def closest(self, word: str) -> str | None:
        """The candidate a typo most likely meant, or the one that differs only in case."""
        if word in self._answers:
            return self._answers[word]
        found = self._search(word) if len(word) <= MAX_SUGGESTED_LENGTH else None
        if found is None:
            found = self._lowered.get(word.lower())
        if len(self._answers) < MAX_COMPARED * 16:
            self._answers[word] = found
        return found

    def _reachable(self, word: str):
        """Candidates in the order they are compared: by |length difference|, the word's first
        character first; only lengths whose best ratio, 2·min/sum, reaches the cutoff (the word
        is at most MAX_SUGGESTED_LENGTH long, so these are a few hundred lengths at most)."""
        n, c = len(word), self.cutoff
        lo = bisect.bisect_left(self._lengths, n * c / (2 - c) - 1e-9)
        hi = bisect.bisect_right(self._lengths, n * (2 - c) / c + 1e-9) if c > 0 else len(self._lengths)
        nearest = sorted(self._lengths[lo:hi], key=lambda length: (abs(length - n), length))[:MAX_COMPARED]
        order = [self._by_length[length] for length in nearest]   # each holds one candidate at least
        first = word[:1]
        for buckets in order:
            yield from buckets.get(first, ())
        for buckets in order:
            for start, names in buckets.items():
                if start != first:
                    yield from names

    def _search(self, word: str) -> str | None:
        import difflib      # lazy: only when a name is unknown (start-up time)

        allowed = min(MAX_COMPARED, self.budget.left)
        if allowed <= 0:
            self.exhausted = True
            return None
        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(word)
        best: tuple[float, str] | None = None
        for count, candidate in enumerate(self._reachable(word)):
            if count >= allowed:
                break
            self.budget.left -= 1
            matcher.set_seq1(candidate)
            if (matcher.real_quick_ratio() >= self.cutoff and matcher.quick_ratio() >= self.cutoff
                    and (score := matcher.ratio()) >= self.cutoff and (best is None or (score, candidate) > best)):
                best = (score, candidate)
        return best[1] if best is not None else None


def closest(word: str, candidates: "list[str] | tuple[str, ...] | set[str]") -> str | None:
    """The candidate a typo most likely meant, for "did you mean" hints: at most MAX_COMPARED
    comparisons (Suggester); a caller that looks up many words builds one Suggester instead."""
    return Suggester(candidates).closest(word)


def did_you_mean(word: str, candidates) -> str | None:
    match = (candidates if isinstance(candidates, Suggester) else Suggester(candidates)).closest(word)
    return f"did you mean `{match}`?" if match else None


class PolicyError(Exception):
    """Raised where a caller wants a policy or nothing: carries the diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("; ".join(f"{d.span}: {d.message}" for d in diagnostics[:3]))
